'use strict'

// Flame graph rendering, kflame's C renderer against Brendan Gregg's
// flamegraph.pl and the npm `flamegraph` package (thlorenz's JS port), on the
// same synthetic profiles of 10,000 and 100,000 folded lines. Whole process
// against whole process: each render is a fresh child that reads the input
// file and writes the SVG to a file, so start-up, parsing and writing all
// count, as they do for someone running the tool. Reports median wall time,
// the child's peak RSS, SVG size, frames drawn and whether the SVG parses as
// XML. Tools alternate within a round (A B C, A B C, ...) so drift on the
// machine hits them alike.
//
//   node bench/render.js [--quick] [--json bench/results/render.json]
//     [--flamegraph-pl PATH]   flamegraph.pl (or FLAMEGRAPH_PL); skipped if absent
//     [--flamegraph-js DIR]    a directory where `npm install flamegraph` was run
//                              (or FLAMEGRAPH_JS); skipped if absent
//     [--timeout S]            per render, default 120
//     [--sizes 10000,100000] [--keep] (keep the temp dir with inputs and SVGs)
//
// Neither peer is vendored or downloaded by this script; point it at copies.
// The npm `flamegraph` reads only `perf script`/DTrace text or a .cpuprofile,
// not folded stacks, so it gets the same stacks as an old-style (`head` tree)
// .cpuprofile, converted here before timing.

const { spawn, spawnSync } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
// Seeded (mulberry32), so every run (and every tool) sees the same bytes.
const { median, mulberry32, option, hasGnuTime, TIME, machineNotes, machineLine, writeResults } = require('./common')

const ROOT = path.join(__dirname, '..')

// --- synthetic profiles ----------------------------------------------------

function mix (h) {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) >>> 0
}

// Name pools built from the PRNG: C++ with templates (so escaping of < > &
// is exercised), JS frames of the app, of node_modules and of node:internal.
function namePools (rand) {
  const pick = (xs) => xs[Math.floor(rand() * xs.length)]
  const uniq = (n, make) => { const s = new Set(); while (s.size < n) s.add(make()); return [...s] }
  const cpp = uniq(500, () => {
    const ns = pick(['v8::internal', 'v8::internal', 'v8::internal::compiler', 'node', 'node::fs', 'node::crypto',
      'node::http_parser', 'node::worker', 'node::stream_base', 'v8', 'std'])
    const cls = pick(['Heap', 'Isolate', 'Factory', 'JSObject', 'Map', 'LookupIterator', 'StoreIC', 'LoadIC',
      'MarkCompactCollector', 'Scavenger', 'Compiler', 'Parser', 'Runtime', 'Builtins', 'Environment',
      'AsyncWrap', 'HandleWrap', 'StreamBase', 'FSReqCallback', 'Hash', 'CipherBase', 'Parser<llhttp_t>',
      'BaseObject', 'Realm', 'MessagePort', 'Object'])
    const fn = pick(['Scavenge', 'CollectGarbage', 'New', 'Call', 'Invoke', 'Update', 'Store', 'Load',
      'SetProperty', 'GetProperty', 'Allocate', 'Compile', 'Parse', 'Run', 'OnRead', 'Write', 'DoWrite',
      'MakeCallback', 'HashUpdate', 'Execute', 'Lookup', 'Visit', 'Evacuate', 'MarkLiveObjects'])
    const args = pick(['()', '() const', '(int, char**)', '(v8::FunctionCallbackInfo<v8::Value> const&)',
      '(v8::internal::Isolate*, v8::internal::Handle<v8::internal::Object>)',
      '(v8::Local<v8::Context>, v8::Local<v8::Value>, int, v8::Local<v8::Value>*)',
      '(std::function<void (node::Environment*)>&&)', '(unsigned long, v8::internal::AllocationType)',
      '(uv_stream_s*, long, uv_buf_t const*)', '(char const*, unsigned long)'])
    return `${ns}::${cls}::${fn}${args}`
  }).concat(['Builtins_InterpreterEntryTrampoline', 'Builtins_JSEntry', 'Builtins_CallFunction_ReceiverIsAny',
    'Builtins_ArrayMap', 'Builtins_PromiseConstructor', '__libc_malloc', '__memmove_avx_unaligned_erms',
    'libc.so.6+0x891f5', '[unknown]', 'cfree', 'operator new(unsigned long)'])
  const verbs = ['handle', 'parse', 'render', 'load', 'save', 'fetch', 'build', 'resolve', 'validate', 'encode',
    'decode', 'transform', 'merge', 'compute', 'emit', 'flush', 'read', 'write', 'query', 'serialize']
  const nouns = ['Request', 'Response', 'Body', 'Header', 'Route', 'User', 'Session', 'Token', 'Row', 'Chunk',
    'Buffer', 'Config', 'Template', 'Cache', 'Event', 'Record', 'Batch', 'Index', 'Page', 'Metric']
  const fnName = () => rand() < 0.08 ? '(anonymous)' : pick(verbs) + pick(nouns)
  const loc = () => `${1 + Math.floor(rand() * 900)}:${1 + Math.floor(rand() * 60)}_[j]`
  const app = uniq(700, () => `${fnName()} /app/src/${pick(['api', 'db', 'lib', 'services', 'util', 'views'])}/` +
    `${pick(nouns).toLowerCase()}${pick(['', 's', 'Handler', 'Store'])}.js:${loc()}`)
  const mods = uniq(300, () => `${fnName()} node_modules/${pick(['express', 'fastify', 'lodash', 'pino', 'undici',
    'ws', 'pg', 'ioredis', 'ajv', 'handlebars', 'zod', 'mongodb'])}/${pick(['index', 'lib/core', 'lib/util',
    'dist/main', 'lib/parser'])}.js:${loc()}`)
  const internal = uniq(150, () => `${pick(['processTicksAndRejections', 'listOnTimeout', 'processTimers',
    'emit', 'Readable.push', 'addChunk', 'onStreamRead', 'afterWrite', 'writeOrBuffer', 'readFileHandle',
    'parserOnIncoming', 'runMicrotasks', 'Module._compile', 'Module._load', 'require'])} node:internal/` +
    `${pick(['timers', 'process/task_queues', 'streams/readable', 'streams/writable', 'fs/promises',
      'http_server', 'stream_base_commons', 'modules/cjs/loader', 'event_target'])}:${loc()}`)
  const uv = ['uv__fs_work', 'uv__work_done', 'worker', 'uv__io_poll', 'uv__read', 'uv__write', 'uv__stream_io',
    'node::ThreadPoolWork::ScheduleWork()::{lambda(uv_work_s*)#1}::_FUN(uv_work_s*)',
    'node::crypto::DeriveBitsJob<node::crypto::PBKDF2Traits>::DoThreadPoolWork()', 'PKCS5_PBKDF2_HMAC',
    'HMAC_Final', 'EVP_DigestUpdate', 'sha512_block_data_order_avx2', 'uv_fs_write', 'pwrite', 'read',
    'node::fs::FSReqAfterScope::~FSReqAfterScope()', 'inflate', 'deflate_slow', 'ZSTD_compressStream2']
  const gc = ['v8::platform::DefaultWorkerThreadsTaskRunner::WorkerThread::Run()',
    'v8::internal::ScavengerCollector::JobTask::Run(v8::JobDelegate*)',
    'v8::internal::ConcurrentMarking::RunMajor(v8::JobDelegate*, v8::base::EnumSet<v8::internal::CodeFlushMode, int>, unsigned int, bool)',
    'v8::internal::Scavenger::Process(v8::JobDelegate*)', 'v8::internal::MarkingVisitorBase<v8::internal::ConcurrentMarkingVisitor>::VisitPointers',
    'v8::internal::OptimizingCompileDispatcher::CompileTask::RunInternal()', 'v8::internal::compiler::PipelineImpl::Run<v8::internal::compiler::SimplifiedLoweringPhase>()',
    'v8::internal::Heap::Scavenge()', 'v8::internal::SweeperJob::Run(v8::JobDelegate*)', 'v8::internal::Sweeper::RawSweep(v8::internal::Page*)']
  return { cpp, app, mods, internal, uv, gc }
}

// Kernel tails as perf and kflame print them; a stack ends in a prefix of one.
const KERNEL = [
  ['entry_SYSCALL_64_after_hwframe', 'do_syscall_64', '__x64_sys_write', 'ksys_write', 'vfs_write', 'ext4_buffered_write_iter', 'generic_perform_write', 'copy_page_from_iter_atomic'],
  ['entry_SYSCALL_64_after_hwframe', 'do_syscall_64', '__x64_sys_epoll_wait', 'do_epoll_wait', 'ep_poll', 'schedule_hrtimeout_range', 'schedule', '__schedule'],
  ['entry_SYSCALL_64_after_hwframe', 'do_syscall_64', '__x64_sys_futex', 'do_futex', 'futex_wait', 'futex_wait_queue', 'schedule', '__schedule'],
  ['entry_SYSCALL_64_after_hwframe', 'do_syscall_64', '__x64_sys_read', 'ksys_read', 'vfs_read', 'sock_read_iter', 'tcp_recvmsg', 'tcp_recvmsg_locked'],
  ['asm_exc_page_fault', 'exc_page_fault', 'do_user_addr_fault', 'handle_mm_fault', '__handle_mm_fault', 'do_anonymous_page', 'alloc_pages_mpol', 'clear_page_erms'],
  ['entry_SYSCALL_64_after_hwframe', 'do_syscall_64', '__x64_sys_mmap', 'ksys_mmap_pgoff', 'vm_mmap_pgoff', 'do_mmap', 'mmap_region']
].map((chain) => chain.map((f) => f + '_[k]'))

const TRUNK = {
  main: [['_start'], ['__libc_start_main'], ['node::Start(int, char**)'], ['node::NodeMainInstance::Run()'],
    ['node::SpinEventLoop(node::Environment*)', 'node::LoadEnvironment(node::Environment*, std::function<v8::MaybeLocal<v8::Value> (node::StartExecutionCallbackInfo const&)>, std::function<void (node::Environment*, v8::Local<v8::Value>, v8::Local<v8::Value>)>)'],
    ['uv_run'], ['uv__io_poll', 'uv__run_timers', 'uv__run_check', 'uv__async_io'],
    ['node::InternalCallbackScope::Close()', 'node::AsyncWrap::MakeCallback(v8::Local<v8::Function>, int, v8::Local<v8::Value>*)', 'node::(anonymous namespace)::PerformCheck(uv_check_s*)'],
    ['v8::internal::Execution::Call(v8::internal::Isolate*, v8::internal::Handle<v8::internal::Object>, v8::internal::Handle<v8::internal::Object>, int, v8::internal::Handle<v8::internal::Object>*)'],
    ['Builtins_JSEntry'], ['Builtins_JSEntryTrampoline']],
  libuv: [['start_thread'], ['worker'], ['uv__fs_work', 'node::ThreadPoolWork::ScheduleWork()::{lambda(uv_work_s*)#1}::_FUN(uv_work_s*)', 'uv__work_done']],
  v8: [['start_thread'], ['v8::base::ThreadEntry(void*)'], ['v8::platform::DefaultWorkerThreadsTaskRunner::WorkerThread::Run()'],
    ['v8::internal::ScavengerCollector::JobTask::Run(v8::JobDelegate*)', 'v8::internal::ConcurrentMarking::RunMajor(v8::JobDelegate*, v8::base::EnumSet<v8::internal::CodeFlushMode, int>, unsigned int, bool)', 'v8::internal::OptimizingCompileDispatcher::CompileTask::RunInternal()']]
}

// A call tree that is never stored: a node is a 32-bit id, a child's id is
// mixed from its parent's id and its name, so the same (parent, name) is the
// same node wherever a stack passes through it and stacks share prefixes
// (flame graph merging) without keeping millions of nodes in memory. Near
// the root a node has few children, deeper ones many (fan-out grows with
// depth), and low child indices are hotter, as in real profiles.
function generate (file, lines, seed) {
  const rand = mulberry32(seed)
  const pools = namePools(mulberry32(seed ^ 0x5bd1e995))
  const pid = 4242
  const fd = fs.openSync(file, 'w')
  const seen = new Set()
  let out = []
  let bytes = 0
  let samples = 0
  let frames = 0
  let attempts = 0
  const nameOf = (kind, parent, j) => {
    const h = mix(parent ^ Math.imul(j + 1, 0x9e3779b1))
    let pool
    if (kind === 'main') {
      const r = (h & 0xff) / 256
      pool = r < 0.42 ? pools.app : r < 0.62 ? pools.mods : r < 0.77 ? pools.internal : pools.cpp
    } else pool = kind === 'libuv' ? pools.uv.concat(pools.cpp.slice(0, 60)) : pools.gc.concat(pools.cpp.slice(60, 120))
    return pool[(h >>> 8) % pool.length]
  }
  while (seen.size < lines) {
    if (++attempts > lines * 20) throw new Error('generator: too many duplicate stacks')
    const r = rand()
    const kind = r < 0.7 ? 'main' : r < 0.88 ? 'libuv' : 'v8'
    const root = kind === 'main' ? 'main' : `${kind === 'libuv' ? 'libuv-worker' : 'v8-worker'}-${pid + 1 + Math.floor(rand() * 4)}`
    const depth = kind === 'main' ? 10 + Math.floor(rand() * 51) : 10 + Math.floor(rand() ** 2 * 51)
    const tailP = kind === 'main' ? 0.25 : kind === 'libuv' ? 0.6 : 0.15
    const tail = rand() < tailP ? 2 + Math.floor(rand() * 7) : 0
    const stack = [root]
    let id = mix(root.length * 7919 + root.charCodeAt(root.length - 1))
    for (let d = 1; d < depth - tail; d++) {
      const level = TRUNK[kind][d - 1]
      let name
      if (level) name = level[Math.floor(rand() ** 3 * level.length)]
      else name = nameOf(kind, id, Math.floor(rand() ** 4 * (2 + (d - TRUNK[kind].length) / 3)))
      stack.push(name)
      id = mix(id ^ mix(hashString(name)))
    }
    if (tail) {
      const chain = KERNEL[id % KERNEL.length]
      for (let k = 0; k < Math.min(tail, chain.length); k++) stack.push(chain[k])
    }
    const key = `${id}:${stack.length}:${tail}:${stack[stack.length - 1]}`
    if (seen.has(key)) continue
    seen.add(key)
    const count = 1 + Math.floor(rand() ** 4 * 50)
    const line = `${stack.join(';')} ${count}\n`
    samples += count
    frames += stack.length
    bytes += Buffer.byteLength(line)
    out.push(line)
    if (out.length === 2000) { fs.writeSync(fd, out.join('')); out = [] }
  }
  fs.writeSync(fd, out.join(''))
  fs.closeSync(fd)
  return { file, lines, bytes, samples, frames, seed }
}

function hashString (s) {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193)
  return h >>> 0
}

// The npm `flamegraph` takes a .cpuprofile in the old `head` tree form
// (functionName, url, hitCount, children); the whole folded frame goes into
// functionName with no url, so its frames read exactly as the folded ones.
// The head's empty name makes its renderer call the root "all", as the others.
function foldedToCpuprofile (foldedFile, outFile) {
  const head = { functionName: '', url: '', hitCount: 0, children: [], kids: new Map() }
  for (const line of fs.readFileSync(foldedFile, 'utf8').split('\n')) {
    const sp = line.lastIndexOf(' ')
    if (sp < 0) continue
    let node = head
    for (const f of line.slice(0, sp).split(';')) {
      let child = node.kids.get(f)
      if (!child) {
        child = { functionName: f, url: '', hitCount: 0, children: [], kids: new Map() }
        node.kids.set(f, child)
        node.children.push(child)
      }
      node = child
    }
    node.hitCount += Number(line.slice(sp + 1))
  }
  fs.writeFileSync(outFile, JSON.stringify({ head }, (k, v) => k === 'kids' ? undefined : v))
}

// --- running one render ------------------------------------------------------

// File to file in C (renderSvgFile), as the CLI renders: the folded text
// never becomes a JS string.
const KFLAME_CHILD = `
const kflame = require(${JSON.stringify(ROOT)})
const stats = kflame.renderSvgFile(process.argv[1], process.argv[2], {})
process.stderr.write('KFLAME_STATS ' + JSON.stringify(stats) + '\\n')
`

function tools (opts) {
  const list = [{
    name: 'kflame',
    input: 'folded',
    argv: (input, output) => [process.execPath, '-e', KFLAME_CHILD, input, output]
  }]
  if (opts.pl) {
    list.push({
      name: 'flamegraph.pl',
      input: 'folded',
      stdoutIsSvg: true,
      argv: (input) => ['perl', opts.pl, input]
    })
  }
  if (opts.js) {
    list.push({
      name: 'npm flamegraph',
      input: 'cpuprofile',
      argv: (input, output) => [process.execPath, opts.js, '-f', input, '-o', output]
    })
  }
  return list
}

// Runs argv to completion or timeout. Peak RSS from GNU time's %M when it is
// there (the kernel's own rusage figure); otherwise by polling VmHWM, which
// is a high-water mark and so misses at most the growth after the last poll.
function runOnce (argv, { svgFile, stdoutIsSvg, timeoutS, gnuTime }) {
  return new Promise((resolve) => {
    const timeFile = svgFile + '.time'
    const cmd = gnuTime ? [TIME, '-o', timeFile, '-f', '%M %U %S', ...argv] : argv
    const outFd = stdoutIsSvg ? fs.openSync(svgFile, 'w') : 'ignore'
    const t0 = process.hrtime.bigint()
    // Own process group, so a timeout kills the renderer and not just time(1).
    const child = spawn(cmd[0], cmd.slice(1), { stdio: ['ignore', outFd, 'pipe'], detached: true })
    if (typeof outFd === 'number') fs.closeSync(outFd)
    let stderr = ''
    child.stderr.on('data', (d) => { if (stderr.length < 1 << 16) stderr += d })
    let hwmKiB = 0
    const poll = gnuTime
      ? null
      : setInterval(() => {
        try {
          const m = /VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'))
          if (m) hwmKiB = Math.max(hwmKiB, Number(m[1]))
        } catch {}
      }, 5)
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      try { process.kill(-child.pid, 'SIGKILL') } catch {}
    }, timeoutS * 1000)
    child.on('close', (code, signal) => {
      const ms = Number(process.hrtime.bigint() - t0) / 1e6
      clearTimeout(timer)
      if (poll) clearInterval(poll)
      let maxRssKiB = hwmKiB
      let cpuMs = null
      if (gnuTime) {
        // time(1) appends "Command exited with non-zero status N" first on failure.
        const last = (fs.existsSync(timeFile) ? fs.readFileSync(timeFile, 'utf8') : '').trim().split('\n').pop() || ''
        const [kib, user, sys] = last.split(' ').map(Number)
        maxRssKiB = kib || null
        cpuMs = user >= 0 && sys >= 0 ? (user + sys) * 1000 : null
        fs.rmSync(timeFile, { force: true })
      }
      const m = /KFLAME_STATS (.*)/.exec(stderr)
      const failed = timedOut || code !== 0 || signal
      resolve({
        ms,
        cpuMs,
        maxRssKiB,
        status: timedOut ? `timeout after ${timeoutS} s` : failed ? `exit ${code ?? signal}` : 'ok',
        error: failed ? stderr.replace(/KFLAME_STATS .*\n/, '').trim().split('\n').slice(-3).join(' | ').slice(0, 300) : undefined,
        kflameStats: m ? JSON.parse(m[1]) : undefined
      })
    })
  })
}

// Validity and a like-for-like measure of output: every frame each tool
// draws carries one <title>.
function checkSvg (file) {
  const { XMLValidator } = require(path.join(ROOT, 'node_modules', 'fast-xml-parser'))
  const bytes = fs.existsSync(file) ? fs.statSync(file).size : 0
  if (!bytes) return { bytes, valid: false, why: 'empty or missing', frames: 0 }
  let text
  try { text = fs.readFileSync(file, 'utf8') } catch (err) { return { bytes, valid: false, why: err.message, frames: 0 } }
  const v = XMLValidator.validate(text)
  const frames = (text.match(/<title>/g) || []).length
  return v === true ? { bytes, valid: true, frames } : { bytes, valid: false, why: `${v.err.code} line ${v.err.line}: ${v.err.msg}`.slice(0, 200), frames }
}

// --- main ----------------------------------------------------------------------

function resolvePeers (args) {
  const notes = []
  let pl = option(args, '--flamegraph-pl', 'FLAMEGRAPH_PL')
  if (!pl) notes.push('flamegraph.pl: skipped, give --flamegraph-pl PATH or FLAMEGRAPH_PL')
  else if (!fs.existsSync(pl)) { notes.push(`flamegraph.pl: skipped, ${pl} does not exist`); pl = null } else pl = path.resolve(pl)
  if (pl && spawnSync('perl', ['-v']).status !== 0) { notes.push('flamegraph.pl: skipped, no perl'); pl = null }
  const dir = option(args, '--flamegraph-js', 'FLAMEGRAPH_JS')
  let js = null
  let jsVersion = null
  if (!dir) notes.push('npm flamegraph: skipped, give --flamegraph-js DIR (where `npm install flamegraph` ran) or FLAMEGRAPH_JS')
  else {
    // Accept the install dir, its node_modules, or the package dir itself.
    const pkg = [path.join(dir, 'node_modules', 'flamegraph'), path.join(dir, 'flamegraph'), dir]
      .find((p) => fs.existsSync(path.join(p, 'bin', 'flamegraph.js')))
    if (!pkg) notes.push(`npm flamegraph: skipped, no flamegraph/bin/flamegraph.js under ${dir}`)
    else {
      js = path.resolve(pkg, 'bin', 'flamegraph.js')
      jsVersion = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')).version
    }
  }
  return { pl, js, jsVersion, notes }
}

async function main () {
  const args = process.argv.slice(2)
  const machine = machineNotes()
  const quick = args.includes('--quick')
  const keep = args.includes('--keep')
  const jsonOut = option(args, '--json')
  const timeoutS = Number(option(args, '--timeout')) || 120
  const sizes = (option(args, '--sizes') || '10000,100000').split(',').map(Number)
  const peers = resolvePeers(args)
  const gnuTime = hasGnuTime()
  const list = tools(peers)
  for (const n of peers.notes) console.error(n)
  if (!gnuTime) console.error(`no GNU time at ${TIME} (Debian package "time"): max RSS by polling VmHWM every 5 ms`)

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-render-'))
  const inputs = []
  const runs = []
  const floors = []
  try {
    // What starting the runtime alone costs, to read the small input against.
    const floorArgv = [['node -e 0', [process.execPath, '-e', '0']]]
    if (peers.pl) floorArgv.push(['perl -e 0', ['perl', '-e', '0']])
    for (const [name, argv] of floorArgv) {
      const rs = []
      for (let i = 0; i < 3; i++) rs.push(await runOnce(argv, { svgFile: path.join(dir, 'floor'), timeoutS, gnuTime }))
      floors.push({ name, ms: median(rs.map((r) => r.ms)), maxRssKiB: median(rs.map((r) => r.maxRssKiB || 0)) })
    }
    for (const lines of sizes) {
      const folded = path.join(dir, `stacks-${lines}.folded`)
      const t = Date.now()
      const input = generate(folded, lines, 0xf1a3e + lines)
      if (peers.js) {
        input.cpuprofile = path.join(dir, `stacks-${lines}.cpuprofile`)
        foldedToCpuprofile(folded, input.cpuprofile)
        input.cpuprofileBytes = fs.statSync(input.cpuprofile).size
      }
      console.error(`input ${lines} lines: ${(input.bytes / 2 ** 20).toFixed(1)} MiB, ${input.samples} samples, ` +
        `${(input.frames / lines).toFixed(1)} frames/line (generated in ${Date.now() - t} ms)`)
      inputs.push(input)
      const rounds = quick ? 1 : lines >= 100000 ? 3 : 5
      const given = new Set() // tools that timed out or crashed: not retried
      for (let round = 0; round < rounds; round++) {
        for (const tool of list) {
          if (given.has(tool.name)) continue
          const svgFile = path.join(dir, `${tool.name.replace(/\W+/g, '-')}-${lines}-${round}.svg`)
          const inFile = tool.input === 'cpuprofile' ? input.cpuprofile : folded
          const r = await runOnce(tool.argv(inFile, svgFile), { svgFile, stdoutIsSvg: tool.stdoutIsSvg, timeoutS, gnuTime })
          const svg = r.status === 'ok' ? checkSvg(svgFile) : { bytes: 0, valid: false, frames: 0 }
          // Only the last round's SVG is kept, for --keep; they are the same each time.
          if (round < rounds - 1 || !keep) fs.rmSync(svgFile, { force: true })
          const run = { lines, tool: tool.name, round, ...r, svgBytes: svg.bytes, valid: svg.valid, invalidWhy: svg.why, framesDrawn: svg.frames }
          runs.push(run)
          console.error(`  ${lines} ${tool.name} round ${round + 1}/${rounds}: ${r.status}, ${r.ms.toFixed(0)} ms, ` +
            `${r.maxRssKiB ? (r.maxRssKiB / 1024).toFixed(1) : '?'} MiB${r.status === 'ok' ? `, ${svg.valid ? 'valid' : 'INVALID'} SVG` : ' ' + (r.error || '')}`)
          if (r.status !== 'ok') given.add(tool.name)
        }
      }
    }
  } finally {
    if (!keep) fs.rmSync(dir, { recursive: true, force: true })
    else console.error(`inputs and SVGs kept in ${dir}`)
  }

  const rows = []
  for (const input of inputs) {
    const base = runs.filter((x) => x.lines === input.lines && x.tool === 'kflame' && x.status === 'ok')
    const baseMs = base.length ? median(base.map((x) => x.ms)) : null
    for (const tool of list) {
      const mine = runs.filter((x) => x.lines === input.lines && x.tool === tool.name)
      const ok = mine.filter((x) => x.status === 'ok')
      const failed = mine.find((x) => x.status !== 'ok')
      const ms = ok.length ? median(ok.map((x) => x.ms)) : null
      rows.push({
        lines: input.lines,
        tool: tool.name,
        runs: ok.length,
        status: failed ? failed.status : 'ok',
        error: failed ? failed.error : undefined,
        // A failed run still has a wall time and a peak RSS: report those.
        ms: ms ?? (failed ? failed.ms : null),
        cpuMs: ok.length && ok[0].cpuMs != null ? median(ok.map((x) => x.cpuMs)) : null,
        maxRssKiB: ok.length ? Math.max(...ok.map((x) => x.maxRssKiB || 0)) : failed ? failed.maxRssKiB : null,
        svgBytes: ok.length ? ok[0].svgBytes : null,
        framesDrawn: ok.length ? ok[0].framesDrawn : null,
        valid: ok.length ? ok.every((x) => x.valid) : null,
        invalidWhy: ok.find((x) => !x.valid)?.invalidWhy,
        vsKflame: ms != null && baseMs ? ms / baseMs : null
      })
    }
  }

  const mib = (k) => k ? (k / 1024).toFixed(1) : '?'
  console.log(`render: ${quick ? 'quick, 1 run each' : 'median of 5 runs (10k) / 3 runs (100k)'}; ${machineLine(machine)}; ` +
    `timeout ${timeoutS} s, max RSS from ${gnuTime ? 'GNU time %M' : 'VmHWM polling'}`)
  console.log('')
  console.log('| input lines | tool | median ms | CPU ms | max RSS MiB | SVG KiB | frames drawn | valid XML | time ÷ kflame |')
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
  for (const r of rows) {
    const ms = r.status === 'ok' ? r.ms.toFixed(0) : `${r.status} (${r.ms.toFixed(0)} ms)`
    console.log(`| ${r.lines.toLocaleString('en-US')} | ${r.tool} | ${ms} | ${r.cpuMs != null ? r.cpuMs.toFixed(0) : '-'} | ` +
      `${mib(r.maxRssKiB)} | ${r.svgBytes != null ? (r.svgBytes / 1024).toFixed(0) : '-'} | ${r.framesDrawn ?? '-'} | ` +
      `${r.valid == null ? '-' : r.valid ? 'yes' : `NO: ${r.invalidWhy}`} | ${r.vsKflame != null ? r.vsKflame.toFixed(1) + '×' : '-'} |`)
  }
  for (const r of rows) if (r.error) console.log(`\n${r.tool} at ${r.lines} lines: ${r.status}: ${r.error}`)
  for (const input of inputs) {
    console.log(`\n${input.lines} lines: ${(input.bytes / 2 ** 20).toFixed(1)} MiB folded, ${input.samples} samples, ` +
      `${(input.frames / input.lines).toFixed(1)} frames/line` +
      (input.cpuprofileBytes ? `; ${(input.cpuprofileBytes / 2 ** 20).toFixed(1)} MiB as .cpuprofile for npm flamegraph` : ''))
  }
  console.log(`\nprocess floor: ${floors.map((f) => `${f.name} ${f.ms.toFixed(0)} ms, ${mib(f.maxRssKiB)} MiB`).join('; ')}`)
  for (const n of peers.notes) console.log(`\n${n}`)

  if (jsonOut) {
    const perl = peers.pl ? spawnSync('perl', ['-e', 'print $^V'], { encoding: 'utf8' }).stdout : null
    writeResults(jsonOut, machine, {
      totalMemMiB: Math.round(os.totalmem() / 2 ** 20),
      quick,
      timeoutS,
      rssSource: gnuTime ? 'GNU time %M' : 'VmHWM polling',
      peers: {
        flamegraphPl: peers.pl ? { sha256: crypto.createHash('sha256').update(fs.readFileSync(peers.pl)).digest('hex'), perl } : null,
        flamegraphJs: peers.js ? { version: peers.jsVersion, input: '.cpuprofile (head tree), converted from the folded file before timing' } : null,
        notes: peers.notes
      },
      floors,
      inputs: inputs.map(({ file, cpuprofile, ...rest }) => rest),
      rows,
      runs
    })
  }
}

// The table of docs/benchmarks.md from a results file (bench/table.js).
function readmeTables (result) {
  const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`
  const n = (x) => Math.round(x).toLocaleString('en-US')
  const out = []
  out.push('| input | tool | median | peak RSS | SVG | frames drawn | valid XML | time / kflame |')
  out.push('| --- | --- | --- | --- | --- | --- | --- | --- |')
  let last = null
  for (const r of result.rows) {
    const input = result.inputs.find((i) => i.lines === r.lines)
    const first = r.lines !== last
    last = r.lines
    const bold = (x) => r.tool === 'kflame' ? `**${x}**` : x
    const time = r.status === 'ok' ? `${n(r.ms)} ms` : `${r.status} (${n(r.ms)} ms)`
    out.push(`| ${first ? `${n(r.lines)} lines${input ? ` (${mib(input.bytes)})` : ''}` : ''} | ${bold(r.tool)} | ${bold(time)} | ` +
      `${r.maxRssKiB ? `${n(r.maxRssKiB / 1024)} MiB` : '-'} | ${r.svgBytes != null ? mib(r.svgBytes) : '-'} | ` +
      `${r.framesDrawn != null ? n(r.framesDrawn) : '-'} | ${r.valid == null ? '-' : r.valid ? 'yes' : 'NO'} | ` +
      `${r.vsKflame != null ? `${r.vsKflame.toFixed(1)}x` : '-'} |`)
  }
  return out
}

module.exports = { readmeTables }

if (require.main === module) main().catch((err) => { console.error(err); process.exitCode = 1 })

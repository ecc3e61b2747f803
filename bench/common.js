'use strict'

// What the benchmarks share.

const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

// A small seeded PRNG (mulberry32): the same sequence on every run.
function mulberry32 (seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }

// V8's CPU profiler in-process, at its default 1 ms interval: the peer the
// benchmarks hold kflame against. Returns the connected session.
function startInspectorProfiler () {
  const session = new (require('node:inspector').Session)()
  session.connect()
  session.post('Profiler.enable')
  session.post('Profiler.start')
  return session
}

// --- results files ---------------------------------------------------------

// What a reader needs to judge a number: where and when it was measured.
// perf_event_paranoid and root decide what perf and kflame may see (kernel
// frames, other processes); the load average says whether the machine was
// busy when the run began.
function machineNotes () {
  const cpus = os.cpus()
  let paranoid = null
  try { paranoid = Number(fs.readFileSync('/proc/sys/kernel/perf_event_paranoid', 'utf8').trim()) } catch {}
  return {
    date: new Date().toISOString(),
    cpuModel: cpus[0] ? cpus[0].model.trim() : null,
    cores: cpus.length,
    kernel: os.release(),
    node: process.version,
    perfEventParanoid: paranoid,
    root: typeof process.getuid === 'function' && process.getuid() === 0,
    loadAvg: os.loadavg().map((x) => Math.round(x * 100) / 100)
  }
}

// One line for the console and docs/benchmarks.md: "2 × AMD EPYC, Linux 6.18.44,
// Node v20.20.2, perf_event_paranoid 2, as root". Takes the old top-level
// fields of results written before machineNotes() existed.
function machineLine (m) {
  const cores = m.cores ?? m.cpus
  const parts = [
    `${cores ?? '?'} × ${m.cpuModel || 'unknown CPU'}`,
    `Linux ${m.kernel || '?'}`,
    `Node ${m.node || '?'}`
  ]
  if (m.perfEventParanoid !== undefined) parts.push(`perf_event_paranoid ${m.perfEventParanoid ?? '?'}`)
  if (m.root !== undefined) parts.push(m.root ? 'as root' : 'not root')
  if (m.loadAvg) parts.push(`load ${m.loadAvg[0]} at start`)
  return parts.join(', ')
}

function writeResults (file, machine, result) {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true })
  fs.writeFileSync(file, JSON.stringify({ machine, ...result }, null, 2) + '\n')
}

// --- command line ------------------------------------------------------------

// The value after a flag, else the environment variable, else undefined.
function option (args, flag, env) {
  const i = args.indexOf(flag)
  return i >= 0 ? args[i + 1] : env ? process.env[env] : undefined
}

// --- CPU and memory of another process, from /proc -----------------------------

// CPU time of every live thread of `pid`, in ms, from schedstat (ns on CPU):
// utime/stime in /proc/PID/stat tick at 10 ms, too coarse for a 0.3 s window.
function procCpuMs (pid) {
  let ns = 0
  let tids = []
  try { tids = fs.readdirSync(`/proc/${pid}/task`) } catch { return null }
  for (const tid of tids) {
    try { ns += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) } catch {}
  }
  return ns / 1e6
}

// Peak RSS of `pid` so far, in KiB (VmHWM).
function procHwmKiB (pid) {
  try {
    const m = /VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m ? Number(m[1]) : null
  } catch { return null }
}

// --- GNU time ------------------------------------------------------------------

const TIME = '/usr/bin/time'
let gnuTime
const hasGnuTime = () => {
  if (gnuTime === undefined) gnuTime = fs.existsSync(TIME) && spawnSync(TIME, ['-f', '%M', 'true'], { encoding: 'utf8' }).status === 0
  return gnuTime
}

// argv wrapped in GNU time writing "%e %U %S %M" to timeFile, when there is
// one. The rusage time(1) gets from wait4 covers the whole tree it waited
// for: perf and the node it ran, 0x and every process it spawned.
const timed = (argv, timeFile) => hasGnuTime() ? [TIME, '-o', timeFile, '-f', '%e %U %S %M', ...argv] : argv

// { wallMs, cpuMs, maxRssKiB } from that file, or null.
function readTimeFile (timeFile) {
  let text = ''
  try { text = fs.readFileSync(timeFile, 'utf8') } catch { return null }
  fs.rmSync(timeFile, { force: true })
  // time(1) puts "Command exited with non-zero status N" first on failure.
  const [e, u, s, m] = (text.trim().split('\n').pop() || '').split(' ').map(Number)
  return Number.isFinite(u) ? { wallMs: e * 1000, cpuMs: (u + s) * 1000, maxRssKiB: m } : null
}

// --- perf ------------------------------------------------------------------------

const PERF = 'perf'
let perfState

// Whether `perf record -g` works here: perf may be missing, or refused by
// perf_event_paranoid for a user who is not root. { ok, version } or
// { ok: false, why }; checked once per process.
function perfCheck () {
  if (perfState) return perfState
  const data = path.join(os.tmpdir(), `kflame-perfcheck-${process.pid}.data`)
  const v = spawnSync(PERF, ['--version'], { encoding: 'utf8' })
  if (v.error) {
    perfState = { ok: false, why: v.error.code === 'ENOENT' ? 'perf is not installed (no `perf` on PATH)' : `perf: ${v.error.message}` }
    return perfState
  }
  const r = spawnSync(PERF, ['record', '-q', '-F', '99', '-g', '-k', 'mono', '-o', data, '--', 'true'], { encoding: 'utf8' })
  fs.rmSync(data, { force: true })
  // perf puts a bare "Error:" line before the reason.
  const firstLine = (s) => (s || '').split('\n').map((l) => l.trim()).find((l) => l && !/^error:?$/i.test(l)) || ''
  perfState = r.status === 0
    ? { ok: true, version: v.stdout.trim() }
    : { ok: false, why: `perf record refused: ${firstLine(r.stderr) || `exit ${r.status}`}` }
  return perfState
}

// `perf record` of node with V8's perf map (--perf-basic-prof writes
// /tmp/perf-PID.map) and interpreted frames of their own, as kflame has them:
// the best symbolisation perf gets from node. -k mono stamps samples with
// CLOCK_MONOTONIC, the clock of process.hrtime, so a child's time window
// selects its samples. callGraph: perf's --call-graph value ('dwarf,16384':
// registers and a stack copy per sample, unwound by `perf script`), else -g
// (frame pointers).
function perfRecordArgv (hz, data, nodeArgv, { callGraph } = {}) {
  return [PERF, 'record', '-q', '-F', String(hz), ...(callGraph ? ['--call-graph', callGraph] : ['-g']), '-k', 'mono', '-o', data, '--',
    process.execPath, '--perf-basic-prof', '--interpreted-frames-native-stack', ...nodeArgv]
}

// Runs `perf script` on a recording: { text, ms } (the wall time is perf's
// post-processing cost) or { error }. Removes the data file and the perf map
// of `pid` (V8 leaves it in /tmp). args: more options for `perf script`.
function perfScript (data, pid, { args = [] } = {}) {
  const t = process.hrtime.bigint()
  const r = spawnSync(PERF, ['script', '-i', data, '-F', 'comm,pid,tid,time,ip,sym,dso', '--ns', ...args],
    { encoding: 'utf8', maxBuffer: 1 << 30 })
  const ms = Number(process.hrtime.bigint() - t) / 1e6
  fs.rmSync(data, { force: true })
  if (pid) fs.rmSync(`/tmp/perf-${pid}.map`, { force: true })
  if (r.status !== 0 || r.error) return { error: `perf script failed: ${(r.stderr || String(r.error)).trim().split('\n')[0]}` }
  return { text: r.stdout, ms }
}

// A perf frame in kflame's words, so the two fold alike: JIT code from the
// perf map ("JS:*fib /app/x.js:3:12") becomes "fib /app/x.js:3:12_[j]",
// unnamed code in the map "[jit]_[j]", node's embedded builtins
// "Builtin:Name_[j]" (the interpreter's trampoline "(interpreted)_[j]"),
// kernel frames "name_[k]", an object's code without a symbol "[libfoo.so]".
function perfFrame (sym, dso, ip) {
  if (dso === '[kernel.kallsyms]' || dso.startsWith('[kernel')) return `${sym}_[k]`
  if (/^\/tmp\/perf-\d+\.map$/.test(dso)) {
    if (sym === '[unknown]') return '[jit]_[j]'
    const js = /^(?:JS|Eval|LazyCompile|Function|Script):([~^+*]?)(.*)$/.exec(sym)
    if (js) {
      let name = js[2]
      // "JS:~ /app/x.js:1:1": V8 leaves the name empty for anonymous code.
      if (name.startsWith(' ')) name = '(anonymous)' + name
      return `${name.replace(/;/g, ':')}_[j]`
    }
    if (sym.startsWith('RegExp:')) return `RegExp:/${sym.slice(7)}/_[j]`
    return `${sym.replace(/;/g, ':')}_[j]`
  }
  if (sym.startsWith('Builtins_')) {
    return sym === 'Builtins_InterpreterEntryTrampoline' ? '(interpreted)_[j]' : `Builtin:${sym.slice(9)}_[j]`
  }
  // Code of an object no symbol covers: one frame per object, as kflame folds it.
  if (sym === '[unknown]') return dso === '[unknown]' ? '[unknown]' : `[${path.basename(dso)}]`
  return sym.replace(/;/g, ':')
}

// Folds `perf script -F comm,pid,tid,time,ip,sym,dso --ns` text into
// Map(stack -> samples), roots named as kflame names them ("main" for the
// main thread, else "comm-tid"). Only samples of `pid` (if given) whose
// time is within [fromNs, toNs] (if given) count.
function foldPerfScript (text, { pid, fromNs, toNs } = {}) {
  const stacks = new Map()
  let samples = 0
  for (const block of text.split('\n\n')) {
    const lines = block.split('\n').filter((l) => l.trim())
    if (!lines.length) continue
    // "node 15219/15219 10077.649839132: " (comm may hold spaces)
    const h = /^(.*?)\s+(\d+)\/(\d+)\s+(\d+)\.(\d+):/.exec(lines[0])
    if (!h) continue
    if (pid && Number(h[2]) !== pid) continue
    const ns = Number(h[4]) * 1e9 + Number(h[5].padEnd(9, '0'))
    if ((fromNs && ns < fromNs) || (toNs && ns > toNs)) continue
    const frames = []
    for (let i = lines.length - 1; i >= 1; i--) {
      // "    7f44140034dc JS:~ node:internal/main/run_main_module:1:1 (/tmp/perf-15219.map)"
      const f = /^\s*([0-9a-f]+)\s+(.*)\s+\(([^()]*)\)\s*$/.exec(lines[i])
      if (f) frames.push(perfFrame(f[2], f[3], f[1]))
    }
    const root = h[2] === h[3] ? 'main' : `${h[1].trim()}-${h[3]}`
    const key = [root, ...frames].join(';')
    stacks.set(key, (stacks.get(key) || 0) + 1)
    samples++
  }
  return { stacks, samples }
}

// kflame's folded text as the same Map(stack -> samples).
function foldedToMap (folded) {
  const stacks = new Map()
  let samples = 0
  for (const line of folded.split('\n')) {
    const sp = line.lastIndexOf(' ')
    if (sp <= 0) continue
    const n = Number(line.slice(sp + 1))
    stacks.set(line.slice(0, sp), (stacks.get(line.slice(0, sp)) || 0) + n)
    samples += n
  }
  return { stacks, samples }
}

// --- 0x --------------------------------------------------------------------------

// 0x is not a dependency of kflame: it is installed on demand into a cache
// outside the repository (KFLAME_BENCH_CACHE, else ~/.cache/kflame-bench).
const ZEROX_SPEC = '0x@6'
const benchCache = () => process.env.KFLAME_BENCH_CACHE || path.join(os.homedir(), '.cache', 'kflame-bench')

// { ok, cli, version } or { ok: false, why }.
function ensure0x ({ install = true } = {}) {
  const dir = benchCache()
  const pkg = path.join(dir, 'node_modules', '0x')
  const cli = path.join(pkg, 'cmd.js')
  if (!fs.existsSync(cli)) {
    if (!install) return { ok: false, why: `0x is not installed in ${dir}` }
    fs.mkdirSync(dir, { recursive: true })
    console.error(`installing ${ZEROX_SPEC} into ${dir} (not a dependency of kflame) ...`)
    const r = spawnSync('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', '--loglevel=error', ZEROX_SPEC],
      { encoding: 'utf8', timeout: 300000 })
    if (r.status !== 0 || !fs.existsSync(cli)) {
      // npm's first error line says why; its last only where the log is.
      const lines = (r.stderr || String(r.error || '')).trim().split('\n')
      const why = lines.find((l) => /^npm (error|ERR!)/.test(l)) || lines[0]
      return { ok: false, why: `npm install ${ZEROX_SPEC} into ${dir} failed: ${why}` }
    }
  }
  const version = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')).version
  const v = spawnSync(process.execPath, [cli, '--version'], { encoding: 'utf8', timeout: 60000 })
  if (v.status !== 0) return { ok: false, why: `0x ${version} does not run: ${(v.stderr || '').trim().split('\n')[0]}` }
  return { ok: true, cli, version }
}

// `perf record -e cpu-clock -F hz -g -p pid`, started with its events
// disabled (-D -1) and switched on and off through its control fifo, the
// ack waited for: its start-up never falls inside a measured window.
// Disabled, its events stay on the threads (their context-switch hook
// included). null when perf cannot record here (perfCheck()).
// `callGraph`: perf's --call-graph value ('fp', the default: what -g asks
// for; 'dwarf,16384': registers and a copy of the top of the user stack
// per sample, as kflame's stackBytes).
function startPerf ({ pid, hz, callGraph = 'fp' }) {
  if (!perfCheck().ok) return null
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-perf-'))
  const ctl = path.join(dir, 'ctl')
  const ack = path.join(dir, 'ack')
  spawnSync('mkfifo', [ctl, ack])
  // callGraph null: no callchain, the sample's ip, thread and time alone.
  const graph = callGraph ? ['--call-graph', callGraph] : []
  const perf = spawn(PERF, ['record', '-q', '-e', 'cpu-clock', '-F', String(hz), ...graph, '-D', '-1',
    '--control', `fifo:${ctl},${ack}`, '-o', path.join(dir, 'perf.data'), '-p', String(pid)], { stdio: 'ignore' })
  // Opening blocks until perf opens its ends: perf is up.
  const ctlFd = fs.openSync(ctl, 'w')
  const ackFd = fs.openSync(ack, 'r')
  const command = (cmd) => {
    fs.writeSync(ctlFd, `${cmd}\n`)
    fs.readSync(ackFd, Buffer.alloc(16), 0, 16, null) // "ack\n" once done
  }
  return {
    pid: perf.pid,
    enable: () => command('enable'),
    disable: () => command('disable'),
    close: () => new Promise((resolve) => {
      perf.on('exit', () => { fs.rmSync(dir, { recursive: true, force: true }); resolve() })
      fs.closeSync(ctlFd)
      fs.closeSync(ackFd)
      perf.kill('SIGINT')
    })
  }
}

module.exports = {
  startPerf,
  median,
  mulberry32,
  startInspectorProfiler,
  machineNotes,
  machineLine,
  writeResults,
  option,
  procCpuMs,
  procHwmKiB,
  TIME,
  hasGnuTime,
  timed,
  readTimeFile,
  perfCheck,
  perfRecordArgv,
  perfScript,
  foldPerfScript,
  foldedToMap,
  benchCache,
  ensure0x
}

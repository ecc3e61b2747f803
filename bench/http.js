'use strict'

// Cost of profiling a Node HTTP server under load, kflame against V8's CPU
// profiler (in-process through `inspector`, and the --cpu-prof flag) and
// `perf record -g` with --perf-basic-prof (when perf is there and allowed),
// in one run. Each trial is a fresh server process; a separate load-generator
// process (autocannon, or wrk) drives it over 127.0.0.1, first to warm it up,
// then for a measured window. Modes alternate (A B C D E, A B C D E, ...) so
// drift on the machine hits them alike. Reports medians and the median of
// per-round ratios against the unprofiled run.
//
//   npm install --prefix /tmp/kfhttp autocannon     # not a dependency of kflame
//   node bench/http.js --autocannon /tmp/kfhttp [--quick] [--rounds N] [--json bench/results/http.json]
//   AUTOCANNON_DIR=/tmp/kfhttp node bench/http.js   # same; without either, wrk on PATH is used
//   node bench/http.js --loader wrk                 # force wrk
//   node bench/http.js --warm-kflame                # see below
//   node bench/http.js --no-perf                    # leave perf out
//   node bench/http.js --offcpu                     # off-CPU sampling's cost (see OFFCPU_MODES)
//
// perf runs the server for its whole life (perf record -- node ...): the
// server then does not load kflame, and reads the CPU perf itself used in the
// window from /proc (perf is its parent), for the "with profiler" column.
// perf's wrap-up at exit and its `perf script` are timed apart. 0x is not
// here: it runs node with stdio of its own, which takes the IPC channel the
// trials are driven through (bench/overhead.js has it).
//
// kflame's first session in a process also loads the ELF symbol tables and
// kallsyms, on a thread of its own while it samples (a one-time ~0.2 s of
// CPU, and RSS it keeps for later sessions). By default the window holds
// that first session, as a user's first profile would. --warm-kflame runs a
// throwaway kflame session during the warm-up, so the window shows a later,
// steady-state session instead.
//
// Loader and server compete for the machine's CPUs (2 of them where this was
// written): the loader takes a good share of one, so absolute requests/s say
// as much about the loader as about the server. The result is the ratios
// against `none` in the same round, not the absolute numbers.

const { fork, spawn, execFile, execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const {
  median, startInspectorProfiler, machineNotes, machineLine, writeResults, procCpuMs, procHwmKiB,
  perfCheck, perfRecordArgv, perfScript, foldPerfScript
} = require('./common')

const MODES = ['none', 'kflame-99', 'kflame-999', 'v8-inspector', 'cpu-prof']
// --offcpu: kflame's off-CPU sampling (what: 'both' at 99 Hz) beside CPU
// alone: every context switch sampled with its stack (maxSwitchRate 0),
// and bounded by perf's frequency mode to 1000 and 200 stacks per thread
// and second.
const OFFCPU_MODES = ['none', 'kflame-99', 'kflame-both-99', 'kflame-both-99-r1000', 'kflame-both-99-r200']

// start() options of a kflame mode: kflame-HZ, kflame-both-HZ[-rRATE].
function kflameOptions (mode) {
  const m = /^kflame-(both-)?(\d+)(?:-r(\d+))?$/.exec(mode)
  if (!m[1]) return { hz: Number(m[2]) }
  return { hz: Number(m[2]), what: 'both', maxSwitchRate: m[3] === undefined ? 0 : Number(m[3]) }
}
const PERF_MODES = ['perf-99', 'perf-999']
const isPerf = (mode) => mode.startsWith('perf-')
const CONNECTIONS = 10
// A query the handler has to take apart; the response is ~2 KB of JSON.
const REQUEST_PATH = '/api/items?user=4217&q=red+shoes+size-42&n=16&sort=price'

const nowUs = () => Number(process.hrtime.bigint() / 1000n)

// --- the server (child) --------------------------------------------------------

function handler (req, res) {
  const crypto = require('node:crypto')
  const url = new URL(req.url, 'http://localhost')
  const user = Number(url.searchParams.get('user')) || 0
  const q = url.searchParams.get('q') || ''
  const n = Math.min(Number(url.searchParams.get('n')) || 10, 100)
  const words = q.match(/[a-z]+(?:-\d+)?/g) || []
  const size = /size-(\d+)/.exec(q)
  const items = []
  for (let i = 0; i < n; i++) {
    items.push({
      id: user * 1000 + i,
      name: `${words[i % words.length] || 'item'} #${i}`,
      price: Math.round((19.99 + i * 3.5) * 100) / 100,
      size: size ? Number(size[1]) : null,
      tags: words.slice(0, 1 + (i % 3)),
      stock: { warehouse: `wh-${i % 4}`, count: (i * 7) % 23 }
    })
  }
  if (url.searchParams.get('sort') === 'price') items.sort((a, b) => b.price - a.price)
  const body = JSON.stringify({ user, query: q, words, count: items.length, items })
  const etag = crypto.createHash('sha256').update(body).digest('base64url').slice(0, 22)
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), etag: `"${etag}"` })
  res.end(body)
}

function child (mode) {
  // kflame is loaded in every mode but perf's (as in bench/overhead.js):
  // loading arms V8's code-event hook, and `none` should include that, so
  // the other modes differ from it only by profiling.
  const kflame = isPerf(mode) ? null : require('..')
  const profilerPid = isPerf(mode) ? process.ppid : null
  const http = require('node:http')
  let served = 0
  const server = http.createServer((req, res) => { handler(req, res); served++ })
  let session
  let win
  let prewarmMs = 0
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port, bodyBytes: probeBody() }))

  process.on('message', (msg) => {
    if (msg.cmd === 'prewarm') {
      kflame.start(kflameOptions(mode))
    } else if (msg.cmd === 'begin') {
      let t = process.hrtime.bigint()
      if (kflame && kflame.isRunning()) {
        kflame.stop() // the --warm-kflame session; waits for the symbol preload
        prewarmMs = Number(process.hrtime.bigint() - t) / 1e6
        t = process.hrtime.bigint()
      }
      if (mode.startsWith('kflame-')) kflame.start(kflameOptions(mode))
      if (mode === 'v8-inspector') {
        session = startInspectorProfiler()
      }
      const startMs = Number(process.hrtime.bigint() - t) / 1e6
      win = {
        startMs,
        t0Us: nowUs(),
        cpu0: process.cpuUsage(),
        prof0: profilerPid ? procCpuMs(profilerPid) : 0,
        rss0: process.memoryUsage.rss(),
        served0: served
      }
      process.send({ begun: true })
    } else if (msg.cmd === 'end') {
      // Read everything before stopping, so the window does not include stop().
      const cpu = process.cpuUsage(win.cpu0)
      const profilerCpuMs = profilerPid ? procCpuMs(profilerPid) - win.prof0 : 0
      const t1Us = nowUs()
      const rss1 = process.memoryUsage.rss()
      const requests = served - win.served0
      const t = process.hrtime.bigint()
      let samples = 0
      let lost = 0
      if (mode.startsWith('kflame-')) {
        const p = kflame.stop()
        samples = p.stats.samples
        lost = p.stats.lost
      }
      if (mode === 'v8-inspector') {
        // An in-process session answers synchronously.
        session.post('Profiler.stop', (err, r) => { if (!err) samples = r.profile.samples.length })
        session.disconnect()
      }
      const stopMs = Number(process.hrtime.bigint() - t) / 1e6
      process.send({
        result: {
          startMs: win.startMs,
          stopMs,
          cpuMs: (cpu.user + cpu.system) / 1000,
          profilerCpuMs,
          profilerMaxRssKiB: profilerPid ? procHwmKiB(profilerPid) : null,
          pid: process.pid,
          requests,
          rssGrowthMB: (rss1 - win.rss0) / 2 ** 20,
          windowMs: (t1Us - win.t0Us) / 1000,
          t0Us: win.t0Us,
          t1Us,
          samples,
          lost,
          prewarmStopMs: prewarmMs
        }
      })
    } else if (msg.cmd === 'quit') {
      // --cpu-prof writes its profile during exit; the parent times that.
      server.close()
      process.exit(0)
    }
  })
}

// Size of one response, for the header line.
function probeBody () {
  let len = 0
  handler({ url: REQUEST_PATH }, { writeHead () {}, end (b) { len = Buffer.byteLength(b) } })
  return len
}

// --- the load generator (its own process) --------------------------------------

function findLoader (args) {
  const want = args.includes('--loader') ? args[args.indexOf('--loader') + 1] : null
  const dir = args.includes('--autocannon') ? args[args.indexOf('--autocannon') + 1] : process.env.AUTOCANNON_DIR
  if (want !== 'wrk' && dir) {
    // DIR may be an npm prefix (DIR/node_modules/autocannon) or the package itself.
    for (const cli of [path.join(dir, 'node_modules', 'autocannon', 'autocannon.js'), path.join(dir, 'autocannon.js')]) {
      if (fs.existsSync(cli)) {
        const version = JSON.parse(fs.readFileSync(path.join(path.dirname(cli), 'package.json'), 'utf8')).version
        return { name: 'autocannon', version, cli }
      }
    }
    if (want === 'autocannon') return { missing: `no autocannon under ${dir} (npm install --prefix ${dir} autocannon)` }
  }
  if (want !== 'autocannon') {
    try {
      const bin = execFileSync('sh', ['-c', 'command -v wrk'], { encoding: 'utf8' }).trim()
      if (bin) {
        const banner = execFileSync(bin, ['-v'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).split('\n')[0] || ''
        return { name: 'wrk', version: banner.trim(), bin }
      }
    } catch (err) {
      // `wrk -v` exits 1 after printing its banner; `command -v` exits 1 when absent.
      if (err.stdout && err.stdout.startsWith('wrk')) return { name: 'wrk', version: err.stdout.split('\n')[0].trim(), bin: 'wrk' }
    }
  }
  return { missing: 'no load generator: pass --autocannon DIR (or set AUTOCANNON_DIR) after `npm install --prefix DIR autocannon`, or put wrk on PATH' }
}

const run = (file, argv, timeout) => new Promise((resolve, reject) => {
  execFile(file, argv, { encoding: 'utf8', timeout, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
    if (err) reject(new Error(`${path.basename(file)} failed: ${err.message}\n${stderr}`))
    else resolve(stdout)
  })
})

// Returns { rps, p99Ms, requests, bad } for `seconds` of load.
async function load (loader, url, seconds) {
  const timeout = (seconds + 30) * 1000
  if (loader.name === 'autocannon') {
    // Latencies from autocannon are whole milliseconds: p99 moves in 1 ms steps.
    const out = await run(process.execPath, [loader.cli, '-c', String(CONNECTIONS), '-d', String(seconds), '-j', url], timeout)
    const r = JSON.parse(out.trim().split('\n').pop())
    return {
      rps: r.requests.total / r.duration,
      p99Ms: r.latency.p99,
      requests: r.requests.total,
      bad: r.errors + r.timeouts + r.non2xx
    }
  }
  // wrk: one thread is plenty for 10 connections on loopback, and leaves the
  // server more of the second CPU.
  const out = await run(loader.bin, ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', url], timeout)
  const unit = { us: 1e-3, ms: 1, s: 1e3, m: 6e4 }
  const p99 = /^\s*99%\s+([\d.]+)(us|ms|s|m)\s*$/m.exec(out)
  const done = /(\d+) requests in ([\d.]+)(us|ms|s|m),/.exec(out)
  const errs = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out)
  return {
    rps: Number(done[1]) / (Number(done[2]) * unit[done[3]] / 1000),
    p99Ms: Number(p99[1]) * unit[p99[2]],
    requests: Number(done[1]),
    bad: (errs ? errs.slice(1).reduce((a, x) => a + Number(x), 0) : 0) + (non2xx ? Number(non2xx[1]) : 0)
  }
}

// --- one trial -----------------------------------------------------------------

async function trial (mode, loader, { warmS, windowS }, warmKflame) {
  const profDir = mode === 'cpu-prof' ? fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-cpuprof-')) : null
  // perf's data, and the isolate-*.log --perf-basic-prof leaves in the cwd.
  const perfDir = isPerf(mode) ? fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-http-perf-')) : null
  const perfData = perfDir && path.join(perfDir, 'perf.data')
  // perf passes the IPC channel (its fd and NODE_CHANNEL_FD) on to node.
  const argv = perfDir ? perfRecordArgv(Number(mode.slice(5)), perfData, [__filename, '--child', mode]) : null
  const server = perfDir
    ? spawn(argv[0], argv.slice(1), { cwd: perfDir, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    : fork(__filename, ['--child', mode], {
      execArgv: profDir ? ['--cpu-prof', '--cpu-prof-dir', profDir] : [],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc']
    })
  const inbox = []
  let waiter = null
  server.on('message', (m) => { inbox.push(m); if (waiter) { waiter(); waiter = null } })
  const exited = new Promise((resolve) => server.on('exit', (code) => resolve({ code, at: process.hrtime.bigint() })))
  const next = async () => {
    while (!inbox.length) {
      await Promise.race([new Promise((resolve) => { waiter = resolve }), exited.then(() => { throw new Error(`${mode} server exited early`) })])
    }
    return inbox.shift()
  }
  try {
    const { port, bodyBytes } = await next()
    const url = `http://127.0.0.1:${port}${REQUEST_PATH}`
    if (warmKflame && mode.startsWith('kflame-')) server.send({ cmd: 'prewarm' })
    await load(loader, url, warmS) // JIT warm-up, and the server's buffers at steady size
    server.send({ cmd: 'begin' })
    await next()
    const client = await load(loader, url, windowS)
    server.send({ cmd: 'end' })
    const { result } = await next()
    const quitAt = process.hrtime.bigint()
    server.send({ cmd: 'quit' })
    const { code, at } = await exited
    if (code !== 0) throw new Error(`${mode} server exited with ${code}`)
    const out = { mode, ...result, ...client, exitMs: Number(at - quitAt) / 1e6, bodyBytes }
    if (profDir) {
      // --cpu-prof ran from process start; count only the window's samples.
      // V8's timestamps and process.hrtime are both CLOCK_MONOTONIC.
      const file = fs.readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'))
      const prof = JSON.parse(fs.readFileSync(path.join(profDir, file), 'utf8'))
      let ts = prof.startTime
      let inWindow = 0
      for (const d of prof.timeDeltas) { ts += d; if (ts >= result.t0Us && ts <= result.t1Us) inWindow++ }
      out.samples = inWindow
      out.samplesTotal = prof.samples.length
      out.profileBytes = fs.statSync(path.join(profDir, file)).size
      fs.rmSync(profDir, { recursive: true, force: true })
    }
    if (perfDir) {
      // perf records from process start; count only the window's samples
      // (-k mono: the clock of process.hrtime).
      const script = perfScript(perfData, result.pid)
      if (script.error) throw new Error(script.error)
      const folded = foldPerfScript(script.text, { pid: result.pid, fromNs: result.t0Us * 1000, toNs: result.t1Us * 1000 })
      out.samples = folded.samples
      out.samplesTotal = foldPerfScript(script.text, { pid: result.pid }).samples
      out.postMs = script.ms
      fs.rmSync(perfDir, { recursive: true, force: true })
    }
    return out
  } catch (err) {
    server.kill()
    if (perfDir) fs.rmSync(perfDir, { recursive: true, force: true })
    throw err
  }
}

// --- main ----------------------------------------------------------------------

async function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') { child(args[1]); return }
  const machine = machineNotes()
  const quick = args.includes('--quick')
  const rounds = Number(args[args.indexOf('--rounds') + 1]) || (quick ? 2 : 5)
  const timing = quick ? { warmS: 1, windowS: 3 } : { warmS: 2, windowS: 5 }
  const jsonOut = args.includes('--json') ? args[args.indexOf('--json') + 1] : null
  const warmKflame = args.includes('--warm-kflame')
  const loader = findLoader(args)
  if (loader.missing) { console.log(`http: skipped, ${loader.missing}`); return }
  const notes = []
  const perf = args.includes('--no-perf') ? { ok: false, why: '--no-perf' } : perfCheck()
  if (!perf.ok) notes.push(`perf modes skipped: ${perf.why}`)
  const modes = args.includes('--offcpu') ? OFFCPU_MODES : perf.ok ? [...MODES, ...PERF_MODES] : MODES

  const runs = []
  for (let r = 0; r < rounds; r++) {
    for (const mode of modes) {
      const t = await trial(mode, loader, timing, warmKflame)
      if (t.bad) console.error(`http: round ${r} ${mode}: ${t.bad} failed requests`)
      runs.push({ round: r, ...t })
    }
  }

  const base = runs.filter((x) => x.mode === 'none')
  const cpuPerReq = (x) => x.cpuMs * 1000 / x.requests // µs of server CPU per request
  // With the CPU perf itself used in the window (0 for in-process modes).
  const cpuPerReqTotal = (x) => (x.cpuMs + (x.profilerCpuMs || 0)) * 1000 / x.requests
  const rows = modes.map((mode) => {
    const mine = runs.filter((x) => x.mode === mode)
    const ratio = (f) => median(mine.map((x) => f(x) / f(base.find((b) => b.round === x.round))))
    const inProcess = mode !== 'none' && mode !== 'cpu-prof' && !isPerf(mode)
    return {
      mode,
      rps: median(mine.map((x) => x.rps)),
      rpsChange: ratio((x) => x.rps) - 1,
      p99Ms: median(mine.map((x) => x.p99Ms)),
      cpuUsPerReq: median(mine.map(cpuPerReq)),
      extraCpuPerReq: ratio(cpuPerReq) - 1,
      extraCpuPerReqTotal: ratio(cpuPerReqTotal) - 1,
      rssGrowthMB: median(mine.map((x) => x.rssGrowthMB)),
      profilerMaxRssMB: isPerf(mode) ? median(mine.map((x) => (x.profilerMaxRssKiB || 0) / 1024)) : null,
      startMs: inProcess ? median(mine.map((x) => x.startMs)) : null,
      stopMs: inProcess ? median(mine.map((x) => x.stopMs)) : null,
      exitMs: median(mine.map((x) => x.exitMs)),
      postMs: isPerf(mode) ? median(mine.map((x) => x.postMs)) : null,
      samples: median(mine.map((x) => x.samples)),
      lost: median(mine.map((x) => x.lost || 0))
    }
  })

  console.log(`http: ${rounds} rounds, ${timing.warmS} s warm-up + ${timing.windowS} s window, ${CONNECTIONS} connections, ` +
    `${loader.name} ${loader.version}, ${runs[0].bodyBytes} B responses, ` +
    `${warmKflame ? 'kflame pre-warmed' : 'first kflame session'}; ${machineLine(machine)}${perf.ok ? `; ${perf.version}` : ''}`)
  console.log(formatTable(rows).join('\n'))
  for (const n of notes) console.log(`\nnote: ${n}`)
  if (jsonOut) {
    writeResults(jsonOut, machine, {
      loader: { name: loader.name, version: loader.version },
      tools: { perf: perf.ok ? perf.version : null },
      notes,
      connections: CONNECTIONS,
      path: REQUEST_PATH,
      quick,
      rounds,
      warmKflame,
      ...timing,
      rows,
      runs
    })
  }
}

const MODE_NAMES = {
  none: 'unprofiled',
  'kflame-99': 'kflame 99 Hz',
  'kflame-999': 'kflame 999 Hz',
  'v8-inspector': 'V8 CPU profiler (`inspector`)',
  'cpu-prof': '`node --cpu-prof`',
  'perf-99': '`perf record -F 99 -g` + `--perf-basic-prof`',
  'perf-999': '`perf record -F 999 -g` + `--perf-basic-prof`'
}

// The console's table: every column.
function formatTable (rows) {
  const pct = (x) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`
  const ms = (x, d = 2) => x === null || x === undefined ? '-' : x.toFixed(d)
  const out = []
  out.push('| mode | req/s (median) | req/s vs none | p99 ms | server CPU µs/req | extra CPU/req | with profiler process | RSS growth MB | profiler peak RSS MB | start() ms | stop() ms | exit ms | perf script ms | samples |')
  out.push('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |')
  for (const r of rows) {
    const none = r.mode === 'none'
    out.push(`| ${r.mode} | ${r.rps.toFixed(0)} | ${none ? '-' : pct(r.rpsChange)} | ${r.p99Ms.toFixed(2)} | ` +
      `${r.cpuUsPerReq.toFixed(1)} | ${none ? '-' : pct(r.extraCpuPerReq)} | ${none || r.extraCpuPerReqTotal === undefined ? '-' : pct(r.extraCpuPerReqTotal)} | ` +
      `${r.rssGrowthMB.toFixed(1)} | ${ms(r.profilerMaxRssMB, 1)} | ${ms(r.startMs)} | ${ms(r.stopMs)} | ${r.exitMs.toFixed(0)} | ${ms(r.postMs, 0)} | ${none ? '-' : r.samples} |`)
  }
  return out
}

// The table of docs/benchmarks.md from a results file (bench/table.js); `warm` is the
// --warm-kflame run, when there is one, for its "later profile" column.
function readmeTables (result, warm) {
  const pct = (x) => x === null || x === undefined ? '-' : `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`
  const ms = (x, d) => x === null || x === undefined ? '-' : x.toFixed(d)
  const out = []
  out.push('| mode | req/s vs unprofiled | extra CPU / request | with profiler process | RSS growth | profiler peak RSS | `start()` ms | `stop()` ms | exit ms | p99 ms |' +
    (warm ? ' later profile: extra CPU / request |' : ''))
  out.push('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |' + (warm ? ' --- |' : ''))
  for (const r of result.rows) {
    if (r.mode === 'none') continue
    const w = warm && warm.rows.find((x) => x.mode === r.mode)
    out.push(`| ${MODE_NAMES[r.mode] || r.mode} | ${pct(r.rpsChange)} | ${pct(r.extraCpuPerReq)} | ${pct(r.extraCpuPerReqTotal)} | ` +
      `${r.rssGrowthMB.toFixed(1)} MB | ${r.profilerMaxRssMB ? `${r.profilerMaxRssMB.toFixed(1)} MB` : '-'} | ${ms(r.startMs, 2)} | ${ms(r.stopMs, 1)} | ` +
      `${ms(r.exitMs, 0)} | ${ms(r.p99Ms, 1)} |` + (warm ? ` ${w ? pct(w.extraCpuPerReq) : '-'} |` : ''))
  }
  return out
}

module.exports = { readmeTables }

if (require.main === module) main().catch((err) => { console.error(err); process.exitCode = 1 })

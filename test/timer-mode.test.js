'use strict'
// The timer sampler where it is needed: perf_event_open refused by a seccomp
// filter (test/c/noperf.c, built by `make -C test/c shim`), with EPERM as
// Docker's and Podman's default profiles answer, and with ENOSYS. The whole
// tap suite also runs as an unprivileged user (scripts/test.sh), so these
// cases run both as root and not.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const http = require('node:http')
const { spawnSync, spawn } = require('node:child_process')
const { parseFolded, total, rootSummary, checkEveryThread } = require('./helpers')

const NOPERF = path.join(__dirname, 'c', 'build', 'noperf')
const FIXTURE = path.join(__dirname, 'fixtures', 'timer-mode.js')
const ROOT = path.join(__dirname, '..')

if (!fs.existsSync(NOPERF)) throw new Error(`${NOPERF} is missing: run make -C test/c shim`)

function noperf (errno, args, env = {}) {
  return spawnSync(NOPERF, [errno, process.execPath, ...args], {
    encoding: 'utf8', cwd: ROOT, env: { ...process.env, ...env }, maxBuffer: 64 << 20
  })
}

function runFixture (errno, mode) {
  const r = noperf(errno, [FIXTURE, ...(mode ? [mode] : [])])
  if (r.status !== 0) throw new Error(`timer-mode.js under noperf ${errno} failed (${r.status}): ${r.stderr}`)
  const out = JSON.parse(r.stdout)
  return { ...out, stacks: parseFolded(out.folded) }
}

const REFUSED = { EPERM: 'KFLAME_ERR_PERF_DENIED', ENOSYS: 'KFLAME_ERR_PERF_UNSUPPORTED' }

for (const errno of ['EPERM', 'ENOSYS']) {
  t.test(`perf_event_open refused (${errno}): auto mode profiles with timers`, async (t) => {
    const { stats, stacks } = runFixture(errno)
    t.equal(stats.mode, 'timer')
    t.equal(stats.kernel, false)
    t.equal(stats.details.perfRefused, REFUSED[errno])
    t.match(stats.warnings[0], new RegExp(`perf_event_open was refused \\(${REFUSED[errno]}\\).*timer.*no kernel frames`))
    t.equal(stats.lost, 0, 'nothing lost')

    const main = checkEveryThread(t, stacks, 'timerModeHot', 0.4)
    t.ok(total(main, (s) => s.frames.some((f) => f.startsWith('node::'))) > total(main) * 0.8,
      'main thread: node\'s native frames under the JS')
    t.ok(stats.details.timerThreads >= 5, `timers armed: ${stats.details.timerThreads}`)
  })
}

t.test('mode "perf" where perf is refused: the error, not a fallback', async (t) => {
  const r = noperf('EPERM', ['-e', `
    const kflame = require('.')
    try { kflame.start({ mode: 'perf' }) } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }
    console.log(JSON.stringify({ running: kflame.isRunning() }))`])
  t.equal(r.status, 0, r.stderr)
  const [err, state] = r.stdout.trim().split('\n').map((l) => JSON.parse(l))
  t.equal(err.code, 'KFLAME_ERR_PERF_DENIED')
  t.match(err.message, /seccomp.*--cap-add PERFMON/)
  t.equal(state.running, false)
})

t.test('mode "timer" where perf works: timers all the same, no warning', async (t) => {
  const r = spawnSync(process.execPath, [FIXTURE, 'timer'], { encoding: 'utf8', cwd: ROOT, maxBuffer: 64 << 20 })
  t.equal(r.status, 0, r.stderr)
  const { stats } = JSON.parse(r.stdout)
  t.equal(stats.mode, 'timer')
  t.equal(stats.details.perfRefused, null)
  t.same(stats.warnings, [])
})

t.test('KFLAME_MODE for kflame/register; a bad value stops the app', async (t) => {
  const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'kflame-timer-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const out = path.join(dir, 'p.folded')
  const app = 'let x = 0; const end = Date.now() + 300; function registerHot () { for (let i = 0; i < 1e5; i++) x += i % 7 } while (Date.now() < end) registerHot()'
  const r = noperf('EPERM', ['-r', './register.js', '-e', app], { KFLAME_MODE: 'timer', KFLAME_OUT: out, KFLAME_HZ: '499' })
  t.equal(r.status, 0, r.stderr)
  const stacks = parseFolded(fs.readFileSync(out, 'utf8'))
  t.ok(total(stacks, (s) => s.frames.some((f) => f.startsWith('registerHot '))) > 20, rootSummary(stacks))
  const bad = spawnSync(process.execPath, ['-r', './register.js', '-e', '1'], {
    encoding: 'utf8', cwd: ROOT, env: { ...process.env, KFLAME_MODE: 'ebpf', KFLAME_OUT: out }
  })
  t.equal(bad.status, 2)
  t.match(bad.stderr, /KFLAME_MODE="ebpf" is not a sampler kflame knows: set it to auto, perf, timer/)
})

t.test('HTTP /start?mode=timer, and a bad mode is a 400', async (t) => {
  const child = spawn(NOPERF, ['EPERM', process.execPath, '-e', `
    const kflame = require('.')
    const server = require('node:http').createServer(kflame.http())
    server.listen(0, '127.0.0.1', () => console.log(server.address().port))
    function httpHot () { let x = 0; for (let i = 0; i < 1e5; i++) x += Math.sqrt(i); return x }
    setInterval(() => { const end = Date.now() + 20; while (Date.now() < end) httpHot() }, 25)`], { cwd: ROOT })
  t.teardown(() => child.kill())
  const port = await new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve(Number(String(d).trim())))
    child.once('exit', (code) => reject(new Error(`server exited ${code}`)))
  })
  const get = (p) => new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: p }, (res) => {
      let body = ''
      res.on('data', (d) => { body += d })
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }))
    }).on('error', reject)
  })
  const bad = await get('/start?mode=ebpf')
  t.equal(bad.status, 400)
  t.match(bad.body, /mode must be one of auto, perf, timer/)
  t.equal((await get('/start?mode=timer&hz=499')).status, 200)
  await new Promise((resolve) => setTimeout(resolve, 400))
  const stop = await get('/stop?format=folded')
  t.equal(stop.status, 200)
  t.equal(stop.headers['x-kflame-mode'], 'timer')
  const stacks = parseFolded(stop.body)
  t.ok(total(stacks, (s) => s.frames.some((f) => f.startsWith('httpHot '))) > 10, rootSummary(stacks))
})

// V8's profile of a loop, with kflame's timer sampling it at the same time:
// how many of V8's samples V8 put in bothHot, and V8's busiest leaves.
// bothHot is optimized before either profile starts: V8 shows the builtins
// that unoptimized code calls (MathSqrt) and its bytecode handlers as leaves
// of their own, on about half of its samples with or without kflame, so a
// loop still waiting for its optimized code (a busy machine: one CI run had
// 67 of 551) would say nothing about kflame.
t.test('an inspector CPU profile taken at the same time is unharmed', async (t) => {
  const r = noperf('EPERM', ['--allow-natives-syntax', '-e', `
    const inspector = require('node:inspector')
    const kflame = require('.')
    const session = new inspector.Session()
    session.connect()
    function bothHot () { let x = 0; for (let i = 0; i < 2e5; i++) x += Math.sqrt(i); return x }
    ;%PrepareFunctionForOptimization(bothHot)
    bothHot()
    bothHot()
    ;%OptimizeFunctionOnNextCall(bothHot)
    bothHot()
    session.post('Profiler.enable', () => session.post('Profiler.start', () => {
      kflame.start({ hz: 999 })
      const end = Date.now() + 600
      while (Date.now() < end) bothHot()
      const p = kflame.stop()
      session.post('Profiler.stop', (err, { profile }) => {
        const names = new Map(profile.nodes.map((n) => [n.id, n.callFrame.functionName || '(anonymous)']))
        const leaves = {}
        for (const id of profile.samples) leaves[names.get(id)] = (leaves[names.get(id)] || 0) + 1
        console.log(JSON.stringify({ err, mode: p.stats.mode, v8Samples: profile.samples.length, v8Hot: leaves.bothHot || 0, leaves, folded: p.folded }))
      })
    }))`])
  t.equal(r.status, 0, r.stderr)
  const out = JSON.parse(r.stdout)
  t.equal(out.err, null)
  t.equal(out.mode, 'timer')
  // V8's sampler (SIGPROF, every 1 ms by default) keeps its rate and its
  // view: about 550 samples in 600 ms, 300-350 with both cores busy three
  // times over (its thread waits for a CPU then, kflame or not).
  const leaves = Object.entries(out.leaves).sort((a, b) => b[1] - a[1]).slice(0, 5).map(([f, n]) => `${f}=${n}`).join(' ')
  t.ok(out.v8Samples > 250, `V8's profile has ${out.v8Samples} samples`)
  t.ok(out.v8Hot > out.v8Samples * 0.5, `V8 sees bothHot in ${out.v8Hot} of ${out.v8Samples} (${leaves})`)
  const stacks = parseFolded(out.folded)
  t.ok(total(stacks, (s) => s.frames.some((f) => f.startsWith('bothHot '))) > total(stacks) * 0.5, rootSummary(stacks))
})

t.test('stress: timer samples while the app allocates, collects garbage and starts and ends workers', async (t) => {
  const r = noperf('EPERM', ['--expose-gc', '-e', `
    const { Worker } = require('node:worker_threads')
    const kflame = require('.')
    kflame.start({ hz: 999 })
    let live = 0
    let started = 0
    function churn () {
      while (live < 3 && started < 24) {
        live++; started++
        new Worker('const a = []; for (let i = 0; i < 2e5; i++) a.push({ i, s: String(i) }); a.length = 0', { eval: true })
          .on('exit', () => { live--; churn() })
      }
      if (live === 0) {
        const p = kflame.stop()
        console.log(JSON.stringify({ stats: p.stats, workers: started }))
      }
    }
    churn()
    const end = Date.now() + 800
    while (Date.now() < end) {
      const junk = []
      for (let i = 0; i < 5e4; i++) junk.push({ i, t: [i, i] })
      if (Math.random() < 0.2) globalThis.gc()
    }`])
  t.equal(r.status, 0, r.stderr)
  const { stats, workers } = JSON.parse(r.stdout)
  t.equal(workers, 24)
  t.equal(stats.mode, 'timer')
  t.equal(stats.details.corrupt, 0)
  t.equal(stats.details.noMemory, 0)
  t.ok(stats.samples > 300, `samples: ${stats.samples}`)
  t.ok(stats.details.timerThreads > 10, `threads armed: ${stats.details.timerThreads}`)
})

'use strict'

const t = require('tap')
const { execFileSync } = require('node:child_process')
const kflame = require('..')
const { parseFolded, openFds, threadCount, spin } = require('./helpers')

t.test('stop() without start() and start() twice are errors with codes', async (t) => {
  t.throws(() => kflame.stop(), { code: 'KFLAME_ERR_NOT_RUNNING', message: /start\(\)/ })
  kflame.start()
  t.equal(kflame.isRunning(), true)
  t.throws(() => kflame.start(), { code: 'KFLAME_ERR_RUNNING', message: /stop\(\)/ })
  t.equal(kflame.isRunning(), true, 'the failed start left the running profile alone')
  kflame.stop()
  t.equal(kflame.isRunning(), false)
  t.throws(() => kflame.stop(), { code: 'KFLAME_ERR_NOT_RUNNING' })
})

t.test('a profile has folded stacks and stats', async (t) => {
  kflame.start({ hz: 499 })
  let x = 0
  spin(300, () => { x += Math.sqrt(x + 1) })
  const p = kflame.stop()
  t.type(p, kflame.Profile)
  const s = p.stats
  for (const key of ['samples', 'lost', 'threads', 'durationMs', 'hz']) t.type(s[key], 'number', key)
  t.equal(s.hz, 499)
  t.equal(s.event, 'cpu-clock')
  t.type(s.kernel, 'boolean')
  t.ok(Array.isArray(s.warnings))
  t.ok(s.durationMs >= 300 && s.durationMs < 5000, `durationMs ${s.durationMs}`)
  // ~150 samples expected for 300 ms at 499 Hz on the main thread.
  t.ok(s.samples > 75 && s.samples < 400, `samples ${s.samples}`)
  t.equal(s.lost, 0)
  const stacks = parseFolded(p.folded)
  t.ok(stacks.length > 0)
  t.equal(stacks.reduce((n, st) => n + st.count, 0), s.samples, 'every sample is in the folded text')
  for (const st of stacks) {
    t.ok(Number.isInteger(st.count) && st.count > 0)
    t.notOk(st.frames.includes(''), 'no empty frame')
  }
  const main = stacks.filter((st) => st.frames[0] === 'main')
  t.ok(main.reduce((n, st) => n + st.count, 0) > s.samples * 0.8, 'the busy main thread has most samples')
  t.ok(main.some((st) => st.frames.includes('node::Start(int, char**)')), 'node C++ frames are named and demangled')
  t.ok(main.some((st) => st.frames.some((f) => f.endsWith('_[j]'))), 'JIT frames are marked _[j]')
  t.equal(new Set(p.folded.trim().split('\n').map((l) => l.slice(0, l.lastIndexOf(' ')))).size, stacks.length,
    'equal stacks are merged')
})

const posixTimers = () => require('node:fs').readFileSync('/proc/self/timers', 'utf8').split('\n').filter((l) => l.startsWith('ID:')).length
// The reserved signal's action, as /proc shows it: caught signals (SigCgt).
const caughtSignals = () => /SigCgt:\s*(\w+)/.exec(require('node:fs').readFileSync('/proc/self/status', 'utf8'))[1]

for (const mode of ['perf', 'timer']) {
  t.test(`1000 start/stop cycles (${mode} mode) leak no fd, thread, timer, handler or memory`, async (t) => {
    // Warm up: the first stop loads ELF symbol tables, kept for later stops.
    for (let i = 0; i < 20; i++) { kflame.start({ mode }); kflame.stop() }
    global.gc?.()
    const fds = openFds()
    const threads = threadCount()
    const timers = posixTimers()
    const caught = caughtSignals()
    const rss = process.memoryUsage.rss()
    let x = 0
    const ran = new Set()
    for (let i = 0; i < 1000; i++) {
      kflame.start({ hz: 999, mode })
      if (i % 100 === 0) spin(5, () => { x += Math.sqrt(x + 1) }) // some with samples in flight
      ran.add(kflame.stop().stats.mode)
    }
    t.same([...ran], [mode])
    t.equal(openFds(), fds, 'open fds')
    t.equal(threadCount(), threads, 'threads')
    t.equal(posixTimers(), timers, 'POSIX timers')
    t.equal(caughtSignals(), caught, 'the same signals caught: the reserved one given back')
    const grown = (process.memoryUsage.rss() - rss) / 1048576
    t.ok(grown < 20, `RSS grew ${grown.toFixed(1)} MiB`)
  })
}

t.test('no perf fd reaches a child process', async (t) => {
  kflame.start()
  const listing = execFileSync('ls', ['-l', '/proc/self/fd/'], { encoding: 'utf8' })
  kflame.stop()
  t.notMatch(listing, /perf_event/)
})

t.test('samples of a forked child are not taken (inherit_thread)', async (t) => {
  kflame.start({ hz: 999 })
  // The child burns CPU for 300 ms; none of it may show up here.
  execFileSync(process.execPath, ['-e', 'const e=Date.now()+300;while(Date.now()<e);'])
  const p = kflame.stop()
  t.equal(p.stats.details.foreign, 0)
  const roots = new Set(parseFolded(p.folded).map((s) => s.frames[0]))
  t.ok(p.stats.samples < 100, `only this process's samples (${p.stats.samples}, roots ${[...roots]})`)
})

t.test('a profile started on a worker and stopped on the main thread says how it was taken', async (t) => {
  const os = require('node:os')
  const fs = require('node:fs')
  const path = require('node:path')
  const { Worker } = require('node:worker_threads')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-iso-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const map = path.join(dir, 'perf.map')
  const before = Date.now()
  const w = new Worker(`
    const kflame = require(${JSON.stringify(path.join(__dirname, '..'))})
    kflame.start({ event: 'task-clock', hz: 499, perfMap: ${JSON.stringify(map)} })
    require('node:worker_threads').parentPort.postMessage('started')`, { eval: true })
  await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })
  spin(100, () => {})
  const p = kflame.stop()
  await w.terminate()
  t.equal(p.stats.event, 'task-clock')
  t.equal(p.stats.details.perfMap, map)
  t.ok(p.stats.details.perfMapLines > 0, `perf map lines: ${p.stats.details.perfMapLines}`)
  t.ok(fs.statSync(map).size > 0, 'the map was written')
  t.ok(p.timing.wallStart >= before - 1 && p.timing.wallStart <= Date.now(), `wallStart ${p.timing.wallStart}`)
})

t.test('profile.write() in every format, the folded text and SVG straight from C', async (t) => {
  const os = require('node:os')
  const fs = require('node:fs')
  const path = require('node:path')
  const zlib = require('node:zlib')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-write-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  kflame.start({ hz: 999 })
  spin(100, () => {})
  const p = kflame.stop()
  t.equal(p.write(path.join(dir, 'a.folded')), 'folded')
  t.equal(p.write(path.join(dir, 'a.svg'), { svg: { title: 'written' } }), 'svg')
  t.equal(p.write(path.join(dir, 'a.cpuprofile')), 'cpuprofile')
  t.equal(p.write(path.join(dir, 'a.json')), 'trace')
  t.equal(p.write(path.join(dir, 'a.pb.gz')), 'pprof')
  t.equal(p.write(path.join(dir, 'plain'), { format: 'folded' }), 'folded')
  t.equal(fs.readFileSync(path.join(dir, 'a.folded'), 'utf8'), p.folded, 'the file is the folded text')
  t.equal(fs.readFileSync(path.join(dir, 'plain'), 'utf8'), p.folded)
  t.equal(p.stats.details.foldedBytes, Buffer.byteLength(p.folded))
  const svg = fs.readFileSync(path.join(dir, 'a.svg'), 'utf8')
  t.equal(svg, p.svg({ title: 'written' }), 'the SVG file is what svg() returns')
  t.match(svg, />written</)
  t.same(JSON.parse(fs.readFileSync(path.join(dir, 'a.cpuprofile'), 'utf8')).nodes.length, p.cpuprofile().nodes.length)
  t.ok(zlib.gunzipSync(fs.readFileSync(path.join(dir, 'a.pb.gz'))).length > 0)
  t.throws(() => p.write(path.join(dir, 'a.unknown')), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => p.write('a\0b.folded'), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => p.write(''), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.same(fs.readdirSync(dir).sort(), ['a.cpuprofile', 'a.folded', 'a.json', 'a.pb.gz', 'a.svg', 'plain'], 'no temporary file is left')
  t.equal(p.samples.line.length, p.stats.samples, 'samples made on first use')
})

t.test('stop() reports what start() took, phase by phase', async (t) => {
  kflame.start({ hz: 99 })
  const d = kflame.stop().stats.details.startMs
  for (const k of ['total', 'sampler', 'collector', 'offCpu']) {
    t.type(d[k], 'number', k)
    t.ok(d[k] >= 0 && d[k] < 10000, `${k} ${d[k]} ms`)
  }
  t.ok(d.total > 0, 'start() took some time')
  t.ok(d.sampler + d.collector <= d.total + 1e-6, 'the phases fit in the whole')
  t.ok(d.offCpu <= d.total + 1e-6, 'off-CPU time within the whole')
})

// Source for the child scripts below: threadsNamed(comm), the tids of the
// child's threads of that name.
const THREADS_NAMED = `
    const threadsNamed = (comm) => require('node:fs').readdirSync('/proc/self/task').filter((tid) => {
      try { return require('node:fs').readFileSync('/proc/self/task/' + tid + '/comm', 'utf8').trim() === comm } catch { return false }
    })`

// The collector's thread (src/util/parked.h): made by the first start(),
// parked between profiles, so a start() creates no thread; with
// KFLAME_PARK=off each profile has one of its own, gone after stop().
t.test('the collector runs on one parked thread, or with KFLAME_PARK=off on its own', async (t) => {
  const script = `
    const kflame = require(${JSON.stringify(require.resolve('..'))})${THREADS_NAMED}
    const collectors = () => threadsNamed('kflame-collect')
    // A joined thread can stay listed for a moment (the kernel wakes the
    // joiner as the thread leaves its memory, before reaping it).
    const left = process.env.KFLAME_PARK === 'off' ? 0 : 1
    const settle = () => {
      for (let ms = 0; ms < 1000 && collectors().length > left; ms++) {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1)
      }
    }
    const out = { before: collectors().length, during: [], after: [] }
    // The first profile also loads the symbol tables, on a thread the
    // collector creates: it has its creator's name, kflame-collect, until
    // the collector renames it a moment later. The profiles checked follow.
    kflame.start({ hz: 99 })
    kflame.stop()
    settle()
    for (let i = 0; i < 3; i++) {
      kflame.start({ hz: 99 })
      out.during.push(collectors())
      const p = kflame.stop()
      if (!(p.stats.samples >= 0)) throw new Error('no profile')
      settle()
      out.after.push(collectors())
    }
    console.log(JSON.stringify(out))`
  const run = (env) => JSON.parse(execFileSync(process.execPath, ['-e', script], { env: { ...process.env, ...env }, encoding: 'utf8' }).trim())
  const parked = run({ KFLAME_PARK: '' })
  t.equal(parked.before, 0, 'no collector thread before the first start()')
  t.same(parked.during.map((x) => x.length), [1, 1, 1], 'one collector while a profile runs')
  t.equal(new Set(parked.during.flat()).size, 1, 'the same thread for every profile')
  t.same(parked.after, parked.during, 'it stays, parked, after stop()')
  const own = run({ KFLAME_PARK: 'off' })
  t.same(own.during.map((x) => x.length), [1, 1, 1], 'KFLAME_PARK=off: one collector while a profile runs')
  t.equal(new Set(own.during.flat()).size, 3, 'a new thread for each profile')
  t.same(own.after, [[], [], []], 'none after stop()')
})

// The perf hook holder (src/sample/perfwarm.h): one parked thread once kflame
// loads, none with KFLAME_PERF_WARM=off.
t.test('kflame-warm holds the kernel\'s perf hooks on, unless KFLAME_PERF_WARM=off', async (t) => {
  const script = `
    require(${JSON.stringify(require.resolve('..'))})${THREADS_NAMED}
    const warm = () => threadsNamed('kflame-warm').length
    const end = Date.now() + 2000
    while (warm() === 0 && Date.now() < end) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10)
    console.log(warm())`
  const run = (env) => Number(execFileSync(process.execPath, ['-e', script], { env: { ...process.env, ...env }, encoding: 'utf8' }).trim())
  const { paranoid } = require('./helpers')
  if (paranoid() > 2 && process.getuid() !== 0) t.equal(run({}), 0, 'perf refused: the thread gave up')
  else t.equal(run({}), 1, 'one parked thread')
  t.equal(run({ KFLAME_PERF_WARM: 'off' }), 0, 'none when turned off')
})

'use strict'

// One profiling session per process (lib/session.js), whichever isolate
// starts or stops it: a profile stopped on another thread than the one that
// started it says how it was taken, any thread sees what runs and who started
// it, and the HTTP endpoints and continuous() never take a profile the
// application started for their own.

const t = require('tap')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const http = require('node:http')
const { Worker } = require('node:worker_threads')
const kflame = require('..')
const session = require('../lib/session')
const { spin } = require('./helpers')
const { request, listenOn, close } = require('./fixtures/http-client')

const ROOT = path.join(__dirname, '..')

// A worker that loads kflame and does what it is told: start, status, stop,
// or serve kflame.http() on a port of its own.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
const kflame = require(workerData.root)
const session = require(workerData.root + '/lib/session')
let server
parentPort.on('message', (m) => {
  try {
    if (m.do === 'start') {
      kflame.start(m.options)
      parentPort.postMessage({ ok: true })
    } else if (m.do === 'status') {
      parentPort.postMessage({ ok: true, status: session.status() })
    } else if (m.do === 'stop') {
      parentPort.postMessage({ ok: true, stats: kflame.stop().stats })
    } else if (m.do === 'serve') {
      server = require('node:http').createServer(kflame.http())
      server.listen(0, '127.0.0.1', () => parentPort.postMessage({ ok: true, port: server.address().port }))
    } else if (m.do === 'close') {
      if (server) server.close()
      parentPort.postMessage({ ok: true })
    }
  } catch (err) {
    parentPort.postMessage({ ok: false, code: err.code, message: err.message })
  }
})`

async function worker (t) {
  const w = new Worker(WORKER, { eval: true, workerData: { root: ROOT } })
  t.teardown(() => w.terminate())
  await new Promise((resolve, reject) => { w.once('online', resolve); w.once('error', reject) })
  return function ask (message) {
    return new Promise((resolve, reject) => {
      w.once('message', (reply) => reply.ok ? resolve(reply) : reject(Object.assign(new Error(reply.message), { code: reply.code })))
      w.postMessage(message)
    })
  }
}

function tmpDir (t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-session-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

t.afterEach(() => {
  if (kflame.isRunning()) kflame.stop()
})

t.test('started on the main thread, stopped on a worker: the worker sees it and its stats are true', async (t) => {
  const ask = await worker(t)
  const map = path.join(tmpDir(t), 'perf.map')
  kflame.start({ event: 'task-clock', hz: 499, what: 'cpu', perfMap: map })
  const { status } = await ask({ do: 'status' })
  t.match(status, { owner: 'application', hz: 499, mode: /^(perf|timer)$/, what: 'cpu', event: 'task-clock', perfMap: map, kernel: true },
    'the worker reads the running profile as it was started')
  t.equal(status.id, session.status().id, 'the same session from both isolates')
  spin(100, () => {})
  const { stats } = await ask({ do: 'stop' })
  t.equal(kflame.isRunning(), false)
  t.equal(stats.event, 'task-clock')
  t.equal(stats.hz, 499)
  t.equal(status.mode, stats.mode, `status gave the sampler 'auto' chose: ${stats.mode}`)
  t.equal(stats.details.perfMap, map)
  t.ok(stats.details.perfMapLines > 0, `perf map lines: ${stats.details.perfMapLines}`)
})

t.test('started on a worker in timer mode, stopped on the main thread: the stats say timer', async (t) => {
  const ask = await worker(t)
  const map = path.join(tmpDir(t), 'perf.map')
  await ask({ do: 'start', options: { mode: 'timer', hz: 199, perfMap: map } })
  t.match(session.status(), { owner: 'application', hz: 199, mode: 'timer', event: 'cpu-clock', perfMap: map },
    'the main thread reads the worker\'s profile')
  spin(100, () => {})
  const p = kflame.stop()
  t.equal(p.stats.mode, 'timer')
  t.equal(p.stats.event, 'thread-cpu-timer')
  t.equal(p.stats.hz, 199)
  t.equal(p.stats.details.perfMap, map)
  t.equal((await ask({ do: 'status' })).status, null, 'the worker sees it stopped')
  await t.rejects(ask({ do: 'stop' }), { code: 'KFLAME_ERR_NOT_RUNNING' })
})

t.test('stop(id) ends only that session', async (t) => {
  const id = session.start({ hz: 99 })
  kflame.stop()
  kflame.start()
  t.throws(() => session.stop({ id }), { code: 'KFLAME_ERR_NOT_RUNNING', message: /stopped elsewhere/ })
  t.equal(kflame.isRunning(), true, 'the profile running now is left alone')
  t.throws(() => session.cut(id), { code: 'KFLAME_ERR_NOT_RUNNING' })
  const other = session.status().id
  t.ok(other > id, 'each start has a new id')
  t.equal(session.owns(other), true)
  t.equal(session.owns(id), false)
  session.stop({ id: other })
  t.equal(session.status(), null)
  t.equal(session.owns(other), false)
})

async function serverWith (options, t) {
  const server = http.createServer(kflame.http(options))
  const port = await listenOn(server)
  t.teardown(() => close(server))
  return port
}

t.test('HTTP: a profile the application stopped and started again is not the endpoints\'', async (t) => {
  const port = await serverWith({ maxDuration: 300 }, t)
  t.equal((await request(port, 'POST', '/start?hz=199')).status, 200)
  kflame.stop()
  kflame.start({ hz: 299 })
  let r = await request(port, 'GET', '/status')
  t.match(r.json(), { running: true, owner: 'application', hz: 299, autoStopAt: null })
  r = await request(port, 'POST', '/stop')
  t.equal(r.json().code, 'KFLAME_ERR_HTTP_NOT_OWNER')
  // Past the endpoints' maxDuration: their timer must not stop it.
  await new Promise((resolve) => setTimeout(resolve, 600))
  t.equal(kflame.isRunning(), true, 'the application\'s profile runs on')
  t.equal((await request(port, 'GET', '/status')).json().uncollected, null, 'nothing was kept for /stop')
  t.equal(kflame.stop().stats.hz, 299)
})

t.test('HTTP: endpoints on a worker see the main thread\'s endpoint profile and leave it alone', async (t) => {
  const ask = await worker(t)
  const { port: theirs } = await ask({ do: 'serve' })
  t.teardown(() => ask({ do: 'close' }))
  const ours = await serverWith({}, t)
  t.equal((await request(ours, 'POST', '/start?hz=199&what=cpu')).status, 200)

  let r = await request(theirs, 'GET', '/status')
  t.match(r.json(), { running: true, owner: 'http', hz: 199, what: 'cpu', mode: /^(perf|timer)$/, event: 'cpu-clock' })
  r = await request(theirs, 'POST', '/stop')
  t.equal(r.status, 409)
  t.match(r.json(), { code: 'KFLAME_ERR_HTTP_NOT_OWNER', error: /over HTTP on another thread/ })
  r = await request(theirs, 'POST', '/start')
  t.match(r.json(), { code: 'KFLAME_ERR_RUNNING', error: /over HTTP on another thread/ })
  t.equal(kflame.isRunning(), true)

  r = await request(ours, 'POST', '/stop?format=folded')
  t.equal(r.status, 200)
  t.equal(r.headers['x-kflame-hz'], '199')
  t.match((await request(theirs, 'GET', '/status')).json(), { running: false, owner: null, hz: null })
})

t.test('continuous: a profile stopped behind its back ends it, and the next one is not its own', async (t) => {
  const windows = []
  const failed = []
  const c = kflame.continuous({ every: 1, to: (p) => { windows.push(p.stats.hz) }, hz: 199 })
  c.on('failed', (err) => failed.push(err))
  kflame.stop()
  kflame.start({ hz: 299 })
  await new Promise((resolve) => setTimeout(resolve, 1400))
  t.equal(failed.length, 1, 'the cut after the stop fails once')
  t.equal(failed[0] && failed[0].code, 'KFLAME_ERR_NOT_RUNNING')
  t.same(windows, [], 'no window of the application\'s profile')
  const stats = await c.stop()
  t.equal(stats.failed, 1)
  t.equal(kflame.isRunning(), true, 'stop() left the application\'s profile running')
  t.equal(kflame.stop().stats.hz, 299)
})

t.test('continuous: a profile stopped behind its back does not throw from its timer', async (t) => {
  const failed = []
  const c = kflame.continuous({ every: 1, to: () => {} })
  c.on('failed', (err) => failed.push(err))
  kflame.stop()
  await new Promise((resolve) => setTimeout(resolve, 1400))
  t.equal(failed.length, 1)
  t.equal(c.stopSync().failed, 1, 'nothing more to stop')
  t.throws(() => kflame.continuous({ every: 1, to: () => {}, hz: 0 }), { code: 'KFLAME_ERR_OUT_OF_RANGE' })
  const again = kflame.continuous({ every: 1, to: () => {} })
  t.throws(() => kflame.continuous({ every: 1, to: () => {} }), { code: 'KFLAME_ERR_RUNNING', message: /continuous profile is running/ })
  await again.stop()
  t.equal(kflame.isRunning(), false)
})

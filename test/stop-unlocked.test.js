'use strict'

// One profiler per process, shared by every isolate under one mutex: stop()
// takes its session out under the mutex and names it outside, so a worker's
// cheap calls (running(), labels, cut()) do not wait for the naming, and a
// worker may start the next profile while the last one is still named.

const t = require('tap')
const path = require('node:path')
const { Worker } = require('node:worker_threads')
const kflame = require('..')
const binding = require('../lib/binding')
const { spin } = require('./helpers')

// A worker that calls binding.running() in a loop: phase 1 (the main
// thread stops) to phase 2; it reports the longest single call that ended
// in phase 1 or after. `then` runs in the worker once, when in phase 1 it
// finds no profile running (the main thread's stop() took it out).
function caller (flags, then = '') {
  return new Worker(`
    const { parentPort, workerData } = require('node:worker_threads')
    const binding = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'binding'))})
    const flags = new Int32Array(workerData)
    let longest = 0, calls = 0, started = false
    Atomics.store(flags, 1, 1) // ready
    for (;;) {
      const phase = Atomics.load(flags, 0)
      const t0 = process.hrtime.bigint()
      const running = binding.running()
      const ms = Number(process.hrtime.bigint() - t0) / 1e6
      if (Atomics.load(flags, 0) >= 1) {
        longest = Math.max(longest, ms)
        calls++
        if (!started && !running && phase === 1) { started = true; ${then} }
      }
      if (phase === 2) break
    }
    parentPort.postMessage({ longest, calls })`, { eval: true, workerData: flags.buffer })
}

async function stopBeside (then) {
  const flags = new Int32Array(new SharedArrayBuffer(8))
  const worker = caller(flags, then)
  const report = new Promise((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject) })
  while (Atomics.load(flags, 1) === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  // Symbol tables dropped: this stop waits for them to load (tens of ms),
  // the part of a stop that must not hold the mutex. Stopped soon after the
  // start, while they still load (they load on their own thread from
  // start() on, faster without kernel symbols).
  kflame.dropCaches()
  kflame.start({ hz: 999 })
  spin(5, () => {})
  Atomics.store(flags, 0, 1)
  await new Promise((resolve) => setTimeout(resolve, 5)) // the worker is in its loop
  const t0 = process.hrtime.bigint()
  const profile = kflame.stop()
  const stopMs = Number(process.hrtime.bigint() - t0) / 1e6
  Atomics.store(flags, 0, 2)
  const r = await report
  await worker.terminate()
  return { ...r, stopMs, profile, then: Atomics.load(flags, 1) }
}

t.test('a worker\'s running() does not wait for the main thread\'s stop()', async (t) => {
  const rounds = []
  for (let i = 0; i < 3; i++) rounds.push(await stopBeside())
  const summary = rounds.map((r) => `stop ${r.stopMs.toFixed(1)} ms, longest call ${r.longest.toFixed(2)} ms of ${r.calls}`).join('; ')
  // 10 ms: a call that waited for the mutex would take most of it (the
  // symbol tables load in 10-30 ms without kernel symbols, 75-105 ms with).
  t.ok(rounds.every((r) => r.stopMs >= 10), `each stop took long enough to tell (${summary})`)
  // The best round: on a loaded machine one call may be preempted, but a
  // call that waits for the mutex waits for the whole stop every time.
  t.ok(Math.min(...rounds.map((r) => r.longest / r.stopMs)) < 0.3, `the worker's calls went on (${summary})`)
})

t.test('a worker starts the next profile while the last one is named', async (t) => {
  const r = await stopBeside(`
    try {
      binding.start({ hz: 199 })
      // 2: started while the main thread was still in stop()
      Atomics.store(flags, 1, Atomics.load(flags, 0) === 1 ? 2 : 3)
    } catch (err) { Atomics.store(flags, 1, 4) }`)
  t.equal(r.then, 2, 'the worker started while the main thread was in stop()')
  t.ok(r.profile.stats.samples > 0, 'the stopped profile is whole')
  t.match(r.profile.folded, /\S+ \d+/)
  t.equal(kflame.isRunning(), true, 'the worker\'s profile runs')
  const next = kflame.stop()
  t.ok(next.stats.samples >= 0)
  t.equal(kflame.isRunning(), false)
  // and the symbol tables went back: the next stop is quick again
  kflame.start({ hz: 99 })
  spin(30, () => {})
  t.ok(kflame.stop().stats.samples >= 0)
})

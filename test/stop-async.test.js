'use strict'

// kflame.stopAsync(): stop() with the draining, naming and folding on
// libuv's thread pool, so a server's event loop goes on while a profile is
// named (the HTTP endpoints' /stop uses it).

const t = require('tap')
const kflame = require('..')
const { spin } = require('./helpers')

const ticksUntil = async (promise) => {
  let ticks = 0
  let done = false
  const tick = () => { if (!done) { ticks++; setImmediate(tick) } }
  setImmediate(tick)
  const value = await promise
  done = true
  return { value, ticks }
}

t.test('the profile comes back whole, and the event loop ran while it was named', async (t) => {
  // Symbol tables dropped and the stop right after the start: the stop
  // waits for them to load (10-100 ms), long enough for the loop to turn.
  kflame.dropCaches()
  kflame.start({ hz: 999 })
  spin(30, () => {})
  const promise = kflame.stopAsync()
  t.ok(promise instanceof Promise)
  t.notOk(kflame.isRunning(), 'sampling ended at the call')
  const { value: profile, ticks } = await ticksUntil(promise)
  t.ok(ticks > 0, `the event loop turned ${ticks} times while the profile was named`)
  t.ok(profile.stats.samples > 0, `${profile.stats.samples} samples`)
  t.match(profile.folded, /^main;/m, 'folded stacks of the main thread')
  t.ok(profile.svg().startsWith('<?xml'), 'renders')
})

t.test('idle: rejects with KFLAME_ERR_NOT_RUNNING, never throws', async (t) => {
  let promise
  t.doesNotThrow(() => { promise = kflame.stopAsync() })
  await t.rejects(promise, { code: 'KFLAME_ERR_NOT_RUNNING' })
})

t.test('the next profile may start while the last one is named', async (t) => {
  kflame.dropCaches()
  kflame.start({ hz: 999 })
  spin(20, () => {})
  const first = kflame.stopAsync()
  kflame.start({ hz: 499 })
  spin(20, () => {})
  const second = kflame.stop()
  const profile = await first
  t.equal(profile.stats.hz, 999, 'the first profile keeps its settings')
  t.ok(profile.stats.samples > 0)
  t.equal(second.stats.hz, 499)
  t.ok(second.stats.samples > 0)
})

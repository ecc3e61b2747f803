'use strict'

// kflame: in-process flame graphs for Node.js from Linux perf_events.
//
//   const kflame = require('kflame')
//   kflame.start({ hz: 99 })
//   ... work ...
//   const profile = kflame.stop()   // profile.folded, profile.stats

const binding = require('./binding')
const { checkStartOptions } = require('./options')
const { Profile, makeStats } = require('./profile')

let current = null // options of the running profile

function start (options) {
  const o = checkStartOptions(options)
  binding.start({
    hz: o.hz,
    taskClock: o.event === 'task-clock',
    kernel: o.kernel,
    ringPages: o.ringPages
  })
  current = o
}

function stop () {
  const raw = binding.stop() // throws KFLAME_ERR_NOT_RUNNING when idle
  const options = current || { event: 'cpu-clock' }
  current = null
  return new Profile(raw.folded, makeStats(raw.stats, options))
}

function isRunning () {
  return binding.running()
}

module.exports = { start, stop, isRunning, Profile }

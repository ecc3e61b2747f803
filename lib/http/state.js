'use strict'

// The endpoints' own profile, on top of the process's one session
// (lib/session.js). C knows what runs and who started it, for every
// isolate; what only this isolate can hold is kept here: the timer that
// stops a forgotten profile after maxDuration, and a profile it stopped
// that waits for the next /stop. Every handler of this isolate shares it.
//
// The profile is held by its session id: one the application stopped (and
// maybe started again) is noticed, never taken for the endpoints' own.

const session = require('../session')
const { HttpError } = require('./reply')

const state = {
  // The profile the endpoints started: { id, via: 'start' | 'profile', hz,
  // seconds, startedAt, maxDuration, prefix, timer }.
  own: null,
  // A profile stopped by its maxDuration, kept for the next /stop:
  // { profile, own, stoppedAt }.
  kept: null
}

// The endpoints' profile, unless application code stopped it behind our
// back with kflame.stop() (that caller got the profile; nothing is left for
// us).
function live () {
  const s = state.own
  if (s && !session.owns(s.id)) end(s)
  return state.own
}

function end (own) {
  clearTimeout(own.timer)
  if (state.own === own) state.own = null
}

function describe (own) {
  const since = new Date(own.startedAt).toISOString()
  return own.via === 'profile'
    ? `a ${own.seconds} s profile requested from ${own.prefix}/profile at ${since} is collecting`
    : `a profile started from ${own.prefix}/start at ${since} is running`
}

// Who started the running profile, as /status says it: 'http' and
// 'http-profile' for the endpoints' (of this isolate or another),
// 'application' for anything else, or null when none runs.
function ownerOf (running) {
  const own = live()
  if (own) return own.via === 'profile' ? 'http-profile' : 'http'
  if (!running) return null
  return running.owner === 'http' || running.owner === 'http-profile' ? running.owner : 'application'
}

// A profile that is not this isolate's endpoints', said for a 409.
function foreign (running) {
  return running.owner === 'http' || running.owner === 'http-profile'
    ? 'a profile started over HTTP on another thread of this process'
    : 'a profile started by the application (kflame.start())'
}

// Refuses to start when anything holds the profiler.
function checkIdle () {
  if (state.kept) {
    throw new HttpError(409, 'KFLAME_ERR_HTTP_UNCOLLECTED',
      `a profile started at ${new Date(state.kept.own.startedAt).toISOString()} stopped itself after ` +
      `maxDuration and waits to be collected: ${state.kept.own.prefix}/stop returns it, then start again`)
  }
  const own = live()
  if (own) {
    throw new HttpError(409, 'KFLAME_ERR_RUNNING', `${describe(own)}; ` +
      (own.via === 'profile' ? 'wait for it to end' : `stop it with ${own.prefix}/stop`) + ', then start again')
  }
  const running = session.status()
  if (running) {
    throw new HttpError(409, 'KFLAME_ERR_RUNNING',
      `${foreign(running)} is running; one profile runs at a time per process: start again after ` +
      (ownerOf(running) === 'application' ? 'the application stops it' : 'it ends'))
  }
}

// kflame.start()'s own errors, with a status: bad options are the client's
// fault, a host that refuses perf events is a server that cannot do this.
const UNAVAILABLE = ['KFLAME_ERR_MLOCK', 'KFLAME_ERR_FD_LIMIT', 'KFLAME_ERR_TIMER', 'KFLAME_ERR_NO_SIGNAL', 'KFLAME_ERR_OFFCPU_PARANOID']

function startError (err) {
  const code = err.code || 'KFLAME_ERR_HTTP_INTERNAL'
  let status = 500
  if (code === 'KFLAME_ERR_RUNNING') status = 409
  else if (code === 'KFLAME_ERR_OUT_OF_RANGE' || code === 'KFLAME_ERR_INVALID_ARG' || code === 'KFLAME_ERR_OFFCPU_TIMER') status = 400
  else if (code.startsWith('KFLAME_ERR_PERF_') || UNAVAILABLE.includes(code)) status = 503
  return new HttpError(status, code, err.message)
}

// Starts the endpoints' profile: via '/start' or '/profile', with the
// query's { hz, mode, what, maxSwitchRate, sourceMaps, seconds }.
function begin (config, via, p) {
  checkIdle()
  let id
  try {
    id = session.start({ hz: p.hz, mode: p.mode, what: p.what, maxSwitchRate: p.maxSwitchRate, sourceMaps: p.sourceMaps },
      { owner: via === 'profile' ? 'http-profile' : 'http' })
  } catch (err) {
    throw startError(err)
  }
  const own = {
    id,
    via,
    hz: p.hz,
    seconds: p.seconds,
    startedAt: Date.now(),
    maxDuration: config.maxDuration,
    prefix: config.prefix,
    timer: null
  }
  state.own = own
  return own
}

// Ends the endpoints' profile -> the Profile; KFLAME_ERR_NOT_RUNNING (409)
// when it was stopped elsewhere meanwhile. `keep: false`: the result is
// dropped, nothing is mapped.
function finish (own, { keep = true } = {}) {
  end(own)
  try {
    return session.stop({ id: own.id, sourceMaps: keep })
  } catch (err) {
    if (err.code !== 'KFLAME_ERR_NOT_RUNNING') throw err
    if (!keep) return null
    throw new HttpError(409, 'KFLAME_ERR_NOT_RUNNING',
      'the profile was stopped by the application (kflame.stop()) before it was collected')
  }
}

// A profile left running stops itself after maxDuration and waits for
// /stop. unref: it must not keep the process alive.
function stopAfter (own, ms) {
  own.timer = setTimeout(() => {
    if (state.own !== own) return
    end(own)
    try {
      state.kept = { profile: session.stop({ id: own.id }), own, stoppedAt: Date.now() }
    } catch {
      // The application stopped it (and maybe started its own): nothing
      // of ours is left to keep.
    }
  }, ms).unref()
}

// finish() with the naming on libuv's pool (session.stopAsync): the event
// loop goes on while a big profile is named. The profile is no longer the
// endpoints' from the call on.
async function finishAsync (own) {
  end(own)
  try {
    return await session.stopAsync({ id: own.id })
  } catch (err) {
    if (err.code !== 'KFLAME_ERR_NOT_RUNNING') throw err
    throw new HttpError(409, 'KFLAME_ERR_NOT_RUNNING',
      'the profile was stopped by the application (kflame.stop()) before it was collected')
  }
}

// The profile stopped after maxDuration, handed over once, or null.
function takeKept () {
  const kept = state.kept
  state.kept = null
  return kept
}

function peekKept () {
  return state.kept
}

module.exports = { live, end, describe, ownerOf, foreign, checkIdle, begin, finish, finishAsync, stopAfter, takeKept, peekKept }

'use strict'

// The process's one profiling session. perf events and the C profiler are
// per process, and worker threads load the same addon, so what runs, who
// started it and how is asked of C (binding.status(), the stats stop()
// returns), never remembered here: every isolate sees the same session, and
// a profile stopped on another thread than the one that started it still
// says how it was taken.
//
// Each start has an id. A caller that keeps state about "its" profile (the
// HTTP endpoints, continuous(), kflame/register) holds the id and stops with
// it: stop(id) ends that profile only, so a profile the application stopped
// and started again is never taken for the one it kept.

// V8's side of JS names: its code-event hook, which feeds the code map, and
// --interpreted-frames-native-stack, which gives each interpreted function
// compiled afterwards a trampoline of its own so its frames can be named.
// Both cost an app that compiles (V8 builds source positions and names for
// every piece of code it makes: +9% on loading typescript, bench/hookcost.js),
// so by default (KFLAME_JIT=lazy) they wait for the first start() (or
// writePerfMap()) on an isolate, which then pays for V8 reporting the code
// that exists; they stay on after it, so later starts are quick.
// KFLAME_JIT=load: from load, before the binding arms the hook; off: never;
// profile: only while a profile runs, so every start() pays for V8's report
// and compiling costs nothing between profiles (settleJit).
const jitMode = ['load', 'off', 'profile'].includes(process.env.KFLAME_JIT) ? process.env.KFLAME_JIT : 'lazy'
const setNativeStackFlag = (on = true) =>
  require('node:v8').setFlagsFromString(on ? '--interpreted-frames-native-stack' : '--no-interpreted-frames-native-stack')
if (jitMode === 'load') setNativeStackFlag()

const binding = require('./binding')
const { checkStartOptions, MODES, PERF_SCOPES, WHATS } = require('./options')
const { Profile, makeStats } = require('./profile')
const workers = require('./workers')

// The flag for the whole process and the hook of this isolate's workers
// that never load kflame (through the inspector, lib/workers.js), at the
// first start() or writePerfMap(); the binding arms this isolate's own hook
// there (and times it for stats.details.startMs.jit).
let jitUp = false
function bringJitUp () {
  if (jitUp || jitMode === 'off') return
  jitUp = true
  if (jitMode === 'lazy' || jitMode === 'profile') setNativeStackFlag()
  workers.armWorkers()
}

// KFLAME_JIT=profile: once no profile runs (it ended, or it was only
// writePerfMap()), the flag and this isolate's hook go off again. Workers
// armed through the inspector keep theirs until they end.
function settleJit () {
  if (jitMode !== 'profile' || !jitUp || binding.running()) return
  jitUp = false
  setNativeStackFlag(false)
  binding.disarm()
}

// All of it now, for what will start profiles later (the HTTP endpoints):
// code V8 optimizes from now on is reported with its inlining. Not with
// KFLAME_JIT=profile, whose point is nothing on between profiles.
function armJit () {
  if (jitMode === 'profile') return
  bringJitUp()
  if (jitMode !== 'off') binding.arm()
}
if (jitMode === 'load') bringJitUp()

// Who starts a profile, as C keeps it for status(): lib/http's endpoints
// tell theirs apart from the application's.
const OWNERS = ['application', 'http', 'http-profile', 'continuous', 'register']

/**
 * Starts the process's profile with start()'s options (checked here unless
 * `checked`: then they are checkStartOptions()'s result). Returns its id.
 * Throws KFLAME_ERR_RUNNING when any isolate's profile runs.
 */
function start (options, { owner = 'application', checked = false } = {}) {
  const o = checked ? options : checkStartOptions(options)
  if (o.jit) bringJitUp()
  try {
    return startChecked(o, owner)
  } catch (err) {
    settleJit() // a refused start() leaves nothing on
    throw err
  }
}

function startChecked (o, owner) {
  return binding.start({
    hz: o.hz,
    mode: MODES.indexOf(o.mode), // kf_mode_t
    perfScope: PERF_SCOPES.indexOf(o.perfScope), // KF_SCOPE_*
    taskClock: o.event === 'task-clock',
    kernel: o.kernel,
    ringPages: o.ringPages || 0, // 0: the sampler's default
    stackBytes: o.stackBytes,
    timeline: o.timeline,
    jit: o.jit && jitMode !== 'off',
    tiers: o.tiers,
    dwarf: o.dwarf,
    what: WHATS.indexOf(o.what) + 1, // KF_WHAT_*
    maxSwitchRate: o.maxSwitchRate,
    sourceMaps: o.sourceMaps,
    perfMap: o.perfMap || undefined,
    // KFLAME_PARK=off: the collector on a thread of its own, ended by stop(),
    // instead of the one kflame keeps parked between profiles (read at every
    // start, so a benchmark can compare both in one process).
    park: process.env.KFLAME_PARK !== 'off',
    owner: OWNERS.includes(owner) ? owner : 'application'
  })
}

/**
 * Ends the profile: any, or with `id` only that one (KFLAME_ERR_NOT_RUNNING
 * when another runs, left running). -> a Profile; JS frames go through their
 * source maps when the profile was started with sourceMaps, unless
 * `sourceMaps: false`.
 */
function stop ({ id, sourceMaps = true } = {}) {
  const raw = id === undefined ? binding.stop() : binding.stop(id)
  settleJit()
  const profile = profileOf(raw)
  if (sourceMaps && raw.stats.sourceMaps) mapSources(profile)
  return profile
}

/**
 * stop() with the draining, naming and folding on libuv's thread pool: the
 * event loop goes on meanwhile. Sampling ends at the call. -> a Promise of
 * the Profile; rejects as stop() throws.
 */
async function stopAsync ({ id, sourceMaps = true } = {}) {
  const raw = await (id === undefined ? binding.stopAsync() : binding.stopAsync(id))
  settleJit()
  const profile = profileOf(raw)
  if (sourceMaps && raw.stats.sourceMaps) mapSources(profile)
  return profile
}

// A profile as stop() or takeWindow() hand it over: its stats are C's.
function profileOf (raw) {
  return Profile.fromNative(raw, makeStats(raw.stats, raw.labels, workers.status()),
    { startUs: raw.stats.startUs, wallStart: raw.stats.wallStartMs })
}

// JS frames named after their original sources (lib/sourcemaps.js), at
// stop() while the files are as they ran. A text too large for a JS string
// stays as it is, with a warning.
function mapSources (profile) {
  const details = profile.stats.details
  try {
    details.sourceMaps = profile.mapSources()
  } catch (err) {
    if (err.code !== 'KFLAME_ERR_TOO_LARGE') throw err
    profile.stats.warnings.push(`source maps were not applied: ${err.message}`)
    return
  }
  const { missing, broken, unmapped, mapped } = details.sourceMaps
  if (mapped > 0) details.foldedBytes = Buffer.byteLength(profile.folded)
  if (broken > 0) {
    profile.stats.warnings.push(`${broken} source map(s) could not be read or parsed: the frames of their files keep their JS names`)
  }
  if (unmapped > 0 && missing + broken === 0) {
    profile.stats.warnings.push(`${unmapped} JS frame(s) fell outside their files' source maps and keep their JS names`)
  }
}

/**
 * Continuous profiles: cut(id) asks for the samples so far to become a
 * window (false while the last one is not taken); takeWindow(ms) returns
 * it as a Profile, or null when it is not made yet.
 */
function cut (id) {
  return binding.cut(id)
}

function takeWindow (timeoutMs) {
  const raw = binding.takeWindow(timeoutMs)
  return raw === null ? null : profileOf(raw)
}

function running () {
  return binding.running()
}

/**
 * The running profile as it was started, whichever isolate started it:
 * { id, owner, hz, mode (the sampler in use: 'auto' resolved), what, event, kernel, maxSwitchRate,
 * sourceMaps, perfMap, wallStartMs }, or null when none runs.
 */
function status () {
  return binding.status()
}

// Whether the profile `id` is the one running.
function owns (id) {
  const s = binding.status()
  return s !== null && s.id === id
}

module.exports = { start, stop, stopAsync, cut, takeWindow, running, status, owns, jitMode, bringJitUp, settleJit, armJit, OWNERS }

'use strict'

// kflame: in-process flame graphs for Node.js from Linux perf_events.
//
//   const kflame = require('kflame')
//   kflame.start({ hz: 99 })
//   ... work ...
//   const profile = kflame.stop()   // profile.folded, profile.stats

// Interpreted functions get a trampoline of their own, so their frames can
// be named; it applies to functions compiled from now on. Set before the
// binding loads, which arms V8's code-event hook (unless KFLAME_JIT=lazy:
// then the first start() arms it; KFLAME_JIT=off leaves V8 alone).
const jitMode = process.env.KFLAME_JIT || 'load'
if (jitMode !== 'off') require('node:v8').setFlagsFromString('--interpreted-frames-native-stack')

const binding = require('./binding')
const { checkStartOptions, defaultPerfMapPath, MODES, WHATS } = require('./options')
const { kflameError } = require('./errors')
const { checkPath } = require('./safefile')
const { Profile, makeStats } = require('./profile')
const { renderSvg, renderSvgFile } = require('./svg')
const { renderHtml } = require('./html')
const { fromFolded } = require('./folded')
const { label } = require('./labels')
const workers = require('./workers')

// Workers that never load kflame get their code-event hook through the
// inspector (lib/workers.js), from load like this isolate's own.
if (jitMode === 'load') workers.armWorkers()

function start (options) {
  const o = checkStartOptions(options)
  if (jitMode === 'lazy' && o.jit) workers.armWorkers()
  binding.start({
    hz: o.hz,
    mode: MODES.indexOf(o.mode), // kf_mode_t
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
    perfMap: o.perfMap || undefined
  })
}

// The session is the C core's (one per process): stop() may end a profile
// that another isolate (a worker) started, and the result says how it was
// taken, not what this isolate remembers.
function stop () {
  const raw = binding.stop() // throws KFLAME_ERR_NOT_RUNNING when idle
  const profile = Profile.fromNative(raw, makeStats(raw.stats, raw.labels, workers.status()),
    { startUs: raw.stats.startUs, wallStart: raw.stats.wallStartMs })
  if (raw.stats.sourceMaps) mapSources(profile)
  return profile
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

// Frees the symbol tables kept from one profile to the next (ELF symbols of
// every mapped object, kallsyms): { objects, symbols, bytes } freed. The next
// start() loads them again. Throws KFLAME_ERR_RUNNING while profiling.
function dropCaches () {
  return binding.dropCaches()
}

// A profile without end, handed over in windows (lib/continuous.js).
function continuous (options) {
  return require('./continuous').continuous(options)
}

function isRunning () {
  return binding.running()
}

// Writes the live JIT code map as a perf map (atomically, mode 0644, never
// through a link or into a device or FIFO at `path`: src/safefile.h) for an
// external `perf report` / `perf script`. Returns { path, lines }.
function writePerfMap (path = defaultPerfMapPath()) {
  checkPath(path, 'writePerfMap(path): path')
  if (jitMode === 'off') {
    throw kflameError(Error, 'KFLAME_ERR_JIT_OFF', 'writePerfMap(): the JIT hook is off (KFLAME_JIT=off); unset KFLAME_JIT')
  }
  return { path, lines: binding.writePerfMap(path) }
}

module.exports = { start, stop, isRunning, dropCaches, continuous, label, writePerfMap, fromFolded, renderSvg, renderSvgFile, renderHtml, Profile }

// The HTTP endpoints (lib/http.js: http, listen, fastify) drive start/stop
// through this module, so they join it last.
Object.assign(module.exports, require('./http'))

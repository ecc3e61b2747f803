'use strict'

// kflame: in-process flame graphs for Node.js from Linux perf_events.
//
//   const kflame = require('kflame')
//   kflame.start({ hz: 99 })
//   ... work ...
//   const profile = kflame.stop()   // profile.folded, profile.stats

// The facade: the process's one session (lib/session.js: start, stop, what
// runs, for every isolate alike), the renderers, labels and the HTTP
// endpoints (lib/http/). Loaded first, the session sets V8's flags before
// the addon loads.
const session = require('./session')
const binding = require('./binding')
const { defaultPerfMapPath } = require('./options')
const { kflameError } = require('./errors')
const { checkPath } = require('./safefile')
const { Profile } = require('./profile')
const { renderSvg, renderSvgFile } = require('./svg')
const { renderHtml } = require('./html')
const { fromFolded } = require('./folded')
const { label } = require('./labels')
const { http, listen, fastify } = require('./http')

function start (options) {
  session.start(options)
}

// The session is the C core's (one per process): stop() may end a profile
// that another isolate (a worker) started, and the result says how it was
// taken, not what this isolate remembers.
function stop () {
  return session.stop() // throws KFLAME_ERR_NOT_RUNNING when idle
}

// stop() whose draining, naming and folding run on libuv's thread pool: for
// servers, whose event loop must not wait for a big profile to be named.
function stopAsync () {
  return session.stopAsync()
}

// Frees the symbol tables kept from one profile to the next (ELF symbols of
// every mapped object, kallsyms): { objects, symbols, bytes } freed. The next
// start() loads them again. Throws KFLAME_ERR_RUNNING while profiling.
function dropCaches () {
  return binding.dropCaches()
}

// A profile without end, handed over in windows (lib/continuous.js, loaded
// when first asked for: it brings node:https).
function continuous (options) {
  return require('./continuous').continuous(options)
}

function isRunning () {
  return session.running()
}

// Writes the live JIT code map as a perf map (atomically, mode 0644, never
// through a link or into a device or FIFO at `path`: src/util/safefile.h) for an
// external `perf report` / `perf script`. Returns { path, lines }.
function writePerfMap (path = defaultPerfMapPath()) {
  checkPath(path, 'writePerfMap(path): path')
  if (session.jitMode === 'off') {
    throw kflameError(Error, 'KFLAME_ERR_JIT_OFF', 'writePerfMap(): the JIT hook is off (KFLAME_JIT=off); unset KFLAME_JIT')
  }
  session.bringJitUp()
  try {
    return { path, lines: binding.writePerfMap(path) }
  } finally {
    session.settleJit()
  }
}

module.exports = {
  start, stop, stopAsync, isRunning, dropCaches, continuous, label, writePerfMap, fromFolded,
  renderSvg, renderSvgFile, renderHtml, Profile, http, listen, fastify
}

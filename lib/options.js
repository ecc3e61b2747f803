'use strict'

// The one place options are checked and converted: start()'s options as JS
// values, the same options written as text (a query parameter of the HTTP
// endpoints, an environment variable of kflame/register, a flag of the
// kflame command), and the shape every options object of the API shares.
// Unknown names and wrong types are refused rather than ignored: a typo must
// not silently profile at the wrong rate. Each caller words a failure in its
// own idiom (an HTTP 400, KFLAME_ERR_CONFIG, a usage error), from the one rule
// here.

const fs = require('node:fs')
const { kflameError, invalid, outOfRange } = require('./errors')
const { checkPath } = require('./safefile')
const { sourceMapsDefault } = require('./sourcemaps')

const EVENTS = ['cpu-clock', 'task-clock']
// 'auto': perf events, else (perf_event_open refused) the timer sampler.
const MODES = ['auto', 'perf', 'timer']
// Where perf events are opened, for CPU time: 'auto' opens one per CPU with
// a kernel filter that keeps this process's samples when the kernel allows
// it (root: CAP_PERFMON and CAP_BPF), which costs nothing at a context
// switch, else one per thread; 'threads' always per thread (also through
// KFLAME_PERF_SCOPE, for every start() of the process). The index is the C
// core's KF_SCOPE_*.
const PERF_SCOPES = ['auto', 'threads']
// What is sampled: CPU time, off-CPU time (context switches), or both. The
// index + 1 is the C core's KF_WHAT_* bit set.
const WHATS = ['cpu', 'offcpu', 'both']
// Off-CPU: switched-out samples with stacks per thread and second, at most
// (perf's frequency mode), or 0: every switch, the default. A bound samples
// one switch in N and weighs it N times: the waits between two samples go to
// the sampled one's stack, so a rare long wait among many short ones can be
// missed; it is there for servers that switch so often that the stacks cost
// too much (see README, "Off-CPU time").
const MAX_SWITCH_RATE = 0
// A sample record's size is a 16-bit field: the stack copy must leave room
// for the rest of it (the callchain, up to 127 frames by default).
const MAX_STACK_BYTES = 60000

const DEFAULTS = Object.freeze({
  hz: 99,
  mode: 'auto',
  // null: KFLAME_PERF_SCOPE, else 'auto'
  perfScope: null,
  event: 'cpu-clock',
  kernel: true,
  // null: the sampler's choice. perf mode: 64 pages per CPU with stack
  // copies (each sample carries stackBytes more), 16 without; timer mode:
  // per thread, 32 with stack copies, 16 without (a thread's signals come at
  // most at the scheduler tick).
  ringPages: null,
  // Bytes of each sampled user stack the kernel copies, to read V8's own
  // frames: the function a bytecode handler runs and interpreted functions'
  // names. 0 turns it off.
  stackBytes: 16384,
  jit: true,
  tiers: false,
  // Frames a frame-pointer walk skips under a leaf in a library built
  // without frame pointers (glibc), put back from its DWARF call-frame
  // information (needs stackBytes).
  dwarf: true,
  perfMap: false,
  // Samples kept with their times and threads for the exports that replay
  // a profile over time (cpuprofile, trace events): true keeps the newest
  // TIMELINE_DEFAULT (an hour at 99 Hz on three busy threads, ~6 MB), a
  // number that many, false none. Folded text and SVG never need it.
  timeline: true,
  what: 'cpu',
  maxSwitchRate: MAX_SWITCH_RATE,
  // null: on when node runs with --enable-source-maps or KFLAME_SOURCE_MAPS=1
  // (lib/sourcemaps.js).
  sourceMaps: null
})
const TIMELINE_DEFAULT = 1000000
const TIMELINE_MAX = 0xffffffff

function maxSampleRate () {
  try {
    const value = Number(fs.readFileSync('/proc/sys/kernel/perf_event_max_sample_rate', 'utf8'))
    if (Number.isInteger(value) && value > 0) return value
  } catch {}
  return 100000 // the kernel's default
}

// `fn`'s options object over its defaults: an object or undefined, known
// names only (those in `ignored` are skipped), undefined values left at their
// default.
function takeOptions (fn, options, defaults, ignored = []) {
  if (options === undefined) options = {}
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalid(`${fn}(options): options must be an object`)
  }
  const o = { ...defaults }
  for (const [name, value] of Object.entries(options)) {
    if (ignored.includes(name)) continue
    if (!Object.hasOwn(defaults, name)) {
      throw kflameError(TypeError, 'KFLAME_ERR_UNKNOWN_OPTION',
        `${fn}(options): unknown option "${name}"; known: ${Object.keys(defaults).join(', ')}`)
    }
    if (value !== undefined) o[name] = value
  }
  return o
}

// An integer option within [min, max].
function checkInteger (fn, name, value, [min, max], unit = '') {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw invalid(`${fn}(options): ${name} must be an integer${unit}`)
  }
  if (value < min || value > max) {
    throw outOfRange(`${fn}(options): ${name} must be from ${min} to ${max}${unit}, got ${value}`)
  }
}

// The start options written as text, and how each reads.
const TEXT_OPTIONS = {
  hz: { min: 1 }, // to `max`, by default kernel.perf_event_max_sample_rate
  maxSwitchRate: { min: 0 }, // to kernel.perf_event_max_sample_rate
  mode: { choices: MODES },
  perfScope: { choices: PERF_SCOPES },
  what: { choices: WHATS },
  sourceMaps: { choices: ['true', 'false', '1', '0'], value: (text) => text === 'true' || text === '1' }
}

/**
 * A start option written as text -> { value }, or why it is not one, for
 * the caller to word:
 *   { fail: 'form' }            hz, maxSwitchRate: not a whole number
 *   { fail: 'range', min, max } hz, maxSwitchRate: a whole number outside [min, max]
 *   { fail: 'choice', choices } not one of the choices
 * `max` bounds hz instead of the kernel's bound (the endpoints' maxHz).
 */
function fromText (name, text, { max } = {}) {
  const rule = TEXT_OPTIONS[name]
  if (rule.choices) {
    if (!rule.choices.includes(text)) return { fail: 'choice', choices: rule.choices }
    return { value: rule.value ? rule.value(text) : text }
  }
  if (!/^\d+$/.test(text)) return { fail: 'form' }
  const value = Number(text)
  // With `max` (the endpoints' maxHz), start() still holds hz to the kernel's
  // bound, with its own error.
  const hi = max === undefined ? maxSampleRate() : max
  if (value < rule.min || value > hi) return { fail: 'range', min: rule.min, max: hi }
  return { value }
}

function checkStartOptions (options) {
  const o = takeOptions('start', options, DEFAULTS)

  if (typeof o.hz !== 'number' || !Number.isInteger(o.hz)) {
    throw invalid(`start(options): hz must be an integer, got ${typeof o.hz === 'number' ? o.hz : typeof o.hz}`)
  }
  const max = maxSampleRate()
  if (o.hz < 1 || o.hz > max) {
    throw outOfRange(`start(options): hz must be from 1 to ${max} (kernel.perf_event_max_sample_rate), got ${o.hz}`)
  }
  if (typeof o.event !== 'string') throw invalid('start(options): event must be a string')
  if (!EVENTS.includes(o.event)) {
    throw outOfRange(`start(options): event must be one of ${EVENTS.join(', ')}, got "${o.event}"`)
  }
  if (typeof o.mode !== 'string') throw invalid('start(options): mode must be a string')
  if (!MODES.includes(o.mode)) {
    throw outOfRange(`start(options): mode must be one of ${MODES.join(', ')}, got "${o.mode}"`)
  }
  if (o.perfScope === null) {
    o.perfScope = process.env.KFLAME_PERF_SCOPE || 'auto'
    if (!PERF_SCOPES.includes(o.perfScope)) {
      throw outOfRange(`start(options): KFLAME_PERF_SCOPE must be one of ${PERF_SCOPES.join(', ')}, got "${o.perfScope}": set it so, or unset it`)
    }
  }
  if (typeof o.perfScope !== 'string') throw invalid('start(options): perfScope must be a string')
  if (!PERF_SCOPES.includes(o.perfScope)) {
    throw outOfRange(`start(options): perfScope must be one of ${PERF_SCOPES.join(', ')}, got "${o.perfScope}"`)
  }
  if (typeof o.kernel !== 'boolean') throw invalid('start(options): kernel must be a boolean')
  if (typeof o.stackBytes !== 'number' || !Number.isInteger(o.stackBytes)) {
    throw invalid('start(options): stackBytes must be an integer')
  }
  if (o.stackBytes !== 0 && (o.stackBytes < 64 || o.stackBytes > MAX_STACK_BYTES || o.stackBytes % 8 !== 0)) {
    throw outOfRange(`start(options): stackBytes must be 0 (off) or a multiple of 8 from 64 to ${MAX_STACK_BYTES}, got ${o.stackBytes}`)
  }
  if (o.ringPages !== null && (typeof o.ringPages !== 'number' || !Number.isInteger(o.ringPages))) {
    throw invalid('start(options): ringPages must be an integer')
  }
  if (o.ringPages !== null && (o.ringPages < 1 || o.ringPages > 4096 || (o.ringPages & (o.ringPages - 1)) !== 0)) {
    throw outOfRange(`start(options): ringPages must be a power of two from 1 to 4096, got ${o.ringPages}`)
  }
  for (const name of ['jit', 'tiers', 'dwarf']) {
    if (typeof o[name] !== 'boolean') throw invalid(`start(options): ${name} must be a boolean`)
  }
  if (o.timeline === true) o.timeline = TIMELINE_DEFAULT
  else if (o.timeline === false) o.timeline = 0
  else if (typeof o.timeline !== 'number' || !Number.isInteger(o.timeline)) {
    throw invalid('start(options): timeline must be a boolean or a number of samples')
  } else if (o.timeline < 0 || o.timeline > TIMELINE_MAX) {
    throw outOfRange(`start(options): timeline must be from 0 to ${TIMELINE_MAX} samples, got ${o.timeline}`)
  }
  if (typeof o.what !== 'string') throw invalid('start(options): what must be a string')
  if (!WHATS.includes(o.what)) {
    throw outOfRange(`start(options): what must be one of ${WHATS.join(', ')}, got "${o.what}"`)
  }
  if (o.what !== 'cpu' && o.mode === 'timer') {
    throw kflameError(RangeError, 'KFLAME_ERR_OFFCPU_TIMER',
      `start(options): what: '${o.what}' needs perf events (mode 'perf' or 'auto'): the timer sampler counts CPU time only and cannot see a thread that waits`)
  }
  if (typeof o.maxSwitchRate !== 'number' || !Number.isInteger(o.maxSwitchRate)) {
    throw invalid('start(options): maxSwitchRate must be an integer')
  }
  if (o.maxSwitchRate < 0 || o.maxSwitchRate > max) {
    throw outOfRange(`start(options): maxSwitchRate must be from 0 (every switch) to ${max} (kernel.perf_event_max_sample_rate), got ${o.maxSwitchRate}`)
  }
  if (o.sourceMaps === null) o.sourceMaps = sourceMapsDefault()
  if (typeof o.sourceMaps !== 'boolean') throw invalid('start(options): sourceMaps must be a boolean')
  if (o.perfMap === true) o.perfMap = defaultPerfMapPath()
  if (o.perfMap !== false && (typeof o.perfMap !== 'string' || o.perfMap === '')) {
    throw invalid('start(options): perfMap must be a boolean or a file path')
  }
  if (o.perfMap !== false) checkPath(o.perfMap, 'start(options): perfMap')
  if (o.perfMap && !o.jit) throw invalid('start(options): perfMap needs jit: true')
  return o
}

// Where perf looks for a process's JIT names.
function defaultPerfMapPath () {
  return `/tmp/perf-${process.pid}.map`
}

module.exports = {
  checkStartOptions, takeOptions, checkInteger, fromText, defaultPerfMapPath,
  DEFAULTS, EVENTS, MODES, PERF_SCOPES, WHATS, TIMELINE_DEFAULT, MAX_STACK_BYTES
}

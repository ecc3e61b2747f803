'use strict'

// What stop() and fromFolded() return: the folded stacks, the numbers
// behind them, every sample's time and thread when known, and the renderings.
//
// A live profile (from stop()) keeps its data in C: stop() costs the naming,
// not copies. The folded text and the samples become JS values on first use,
// and a text too large for one JS string is still written out whole by
// write(path), straight from C.

const os = require('node:os')
const binding = require('./binding')
const { renderSvg, checkSvgOptions } = require('./svg')
const { renderHtml, profileHtml } = require('./html')
const { toCpuprofile, toTraceEvents, toPprof } = require('./exports')
const { parseLine } = require('./foldedtext')
const { applyLabels } = require('./labels')
const output = require('./output')
const { invalid } = require('./errors')
const { MAX_STACK_BYTES } = require('./options')
const { dirname } = require('node:path')
const { writeFileSafe, checkPath, ensureDir } = require('./safefile')

// Rate assumed for folded text of unknown rate, to space synthetic samples.
const DEFAULT_HZ = 99

class Profile {
  #folded // string, or null until a live profile's text is asked for
  #samples // { line, time, tid }, null (folded text), or undefined until asked
  #native // the C profile of a live one, or null
  #labels // a live profile's label log, applied on first use, or null
  #rewritten // the text is no longer C's (labels or source maps applied)

  // timing: { startUs (CLOCK_MONOTONIC), wallStart (ms since the epoch) }
  // of a live profile; null for folded text.
  constructor (folded, stats, samples = null, timing = null) {
    this.#folded = folded
    this.#samples = samples
    this.#native = null
    this.#labels = null
    this.#rewritten = false
    /** { samples, lost, threads, durationMs, hz, event, kernel, warnings, ... } */
    this.stats = stats
    Object.defineProperty(this, 'timing', { value: timing, enumerable: false })
  }

  // stop()'s result: { profile (C), labels, stats } as the binding gives it.
  static fromNative (raw, stats, timing) {
    const p = new Profile(null, stats, null, timing)
    p.#samples = undefined // made on first use (the default parameter would make it null)
    p.#native = raw.profile
    p.#labels = raw.labels && raw.labels.tid.length > 0 ? raw.labels : null
    p.#rewritten = p.#labels !== null
    return p
  }

  // stop() with source maps on: JS frames named after the original sources
  // (lib/sourcemaps.js), now, while the files are as they ran. The text is
  // then this object's, not C's; what the maps did goes into stats.
  mapSources (mapper) {
    const { applySourceMaps } = require('./sourcemaps')
    const mapped = applySourceMaps(this.folded, this.samples, mapper)
    // Nothing mapped (no file has a map): the text stays C's, which renders
    // and writes without a JS copy.
    if (mapped.stats.mapped === 0) return mapped.stats
    this.#folded = mapped.folded
    this.#samples = mapped.samples
    this.#rewritten = true
    return mapped.stats
  }

  /** FlameGraph's collapsed format: "root;...;leaf COUNT" per line. */
  get folded () {
    if (this.#folded === null) this.#materialize()
    return this.#folded
  }

  // { line, time, tid } typed arrays, one entry per sample, `line` indexing
  // the lines of `folded`; null from folded text.
  get samples () {
    if (this.#samples === undefined) this.#materialize()
    return this.#samples
  }

  #materialize () {
    const samples = binding.profileSamples(this.#native)
    if (this.#labels === null) {
      if (this.#folded === null) this.#folded = binding.profileFolded(this.#native)
      this.#samples = samples
      return
    }
    const labelled = applyLabels(binding.profileFolded(this.#native), samples, this.#labels)
    this.#folded = labelled.folded
    this.#samples = labelled.samples
    this.#labels = null
  }

  // The C text is the profile's own when no labels or source maps rewrite it.
  #nativeText () {
    return this.#native !== null && !this.#rewritten ? this.#native : null
  }

  // The flame graph's options, checked, with this profile's subtitle.
  #svgOptions (options) {
    return checkSvgOptions({ subtitle: subtitleOf(this.stats), ...options })
  }

  /** A self-contained interactive flame graph (SVG text). */
  svg (options) {
    const checked = this.#svgOptions(options)
    const native = this.#nativeText()
    return native ? binding.profileSvg(native, checked).svg : renderSvg(this.folded, checked).svg
  }

  /**
   * The HTML flame graph (a self-contained page drawn on a canvas, for
   * profiles too big for an SVG), with the SVG's options.
   */
  html (options) {
    const checked = this.#svgOptions(options)
    const native = this.#nativeText()
    return native ? profileHtml(native, checked).html : renderHtml(this.folded, checked).html
  }

  /**
   * Writes the profile to `path` in `options.format` (by default the one the
   * extension picks: .svg, .html, .folded/.txt, .cpuprofile, .json, .pb.gz),
   * with `options.svg` as the flame graph's options (SVG and HTML). The file is created anew
   * beside the target and renamed over it (see docs/security.md). Folded
   * text and SVG of a live profile go from C to the file, whatever their
   * size. Returns the format written.
   */
  write (path, options = {}) {
    checkPath(path, 'profile.write(path)')
    if (options === null || typeof options !== 'object') {
      throw invalid('profile.write(path, options): options must be an object')
    }
    const { format = output.formatOfPath(path), svg: svgOptions } = options
    if (format === null) {
      throw invalid(`cannot tell the format of "${path}": end it with ${output.EXTENSION_LIST}`)
    }
    const native = this.#nativeText()
    if (native && (format === 'folded' || format === 'svg')) {
      ensureDir(dirname(path)) // as writeFileSafe does
      if (format === 'folded') binding.profileWrite(native, path)
      else binding.profileSvgFile(native, path, this.#svgOptions(svgOptions))
      return format
    }
    writeFileSafe(path, output.renderProfile(this, format, svgOptions))
    return format
  }

  /** Chrome DevTools / speedscope .cpuprofile (an object; JSON.stringify it). */
  cpuprofile () { return toCpuprofile(modelOf(this)) }

  /** Chrome trace events for Perfetto / chrome://tracing (an object). */
  traceEvents () { return toTraceEvents(modelOf(this)) }

  /** gzipped pprof protobuf for go tool pprof, Pyroscope, Grafana (a Buffer). */
  pprof () { return toPprof(modelOf(this)) }
}

// The exports' model (lib/exports/frames.js): stacks in the order of the
// folded lines, which is what samples.line indexes.
function modelOf (profile) {
  const stacks = profile.folded.split('\n').filter(Boolean).map(parseLine)
  const hz = profile.stats.hz || DEFAULT_HZ
  const timing = profile.timing
  const total = stacks.reduce((n, s) => n + s.count, 0)
  const startTime = timing ? timing.startUs : 0
  const endTime = timing ? timing.startUs + profile.stats.durationMs * 1000 : total * 1e6 / hz
  return {
    stacks,
    samples: profile.samples,
    hz,
    startTime,
    endTime,
    wallStart: timing ? timing.wallStart : undefined,
    pid: timing ? process.pid : undefined
  }
}

function subtitleOf (stats) {
  if (!stats || !stats.hz || stats.durationMs == null) return undefined
  const threads = stats.threads === 1 ? '1 thread' : `${stats.threads} threads`
  const what = stats.what === 'both' ? ', on and off CPU' : stats.what === 'offcpu' ? ', off CPU' : ''
  return `${stats.samples} samples at ${stats.hz} Hz (${stats.event}${what}), ${threads}, ` +
    `${(stats.durationMs / 1000).toFixed(2)} s${stats.lost ? `, ${stats.lost} lost` : ''}`
}

function warningsFor (raw, labels, workers) {
  const warnings = []
  if (raw.perfRefused) {
    warnings.push(`perf_event_open was refused (${raw.perfRefused}), so kflame sampled with per-thread ` +
      'CPU-time timers instead (mode "timer"): no kernel frames, and time inside system calls shows ' +
      `under the call that made it. To get perf mode back: ${raw.perfRefusedAdvice}`)
  }
  if (raw.timerUnarmed > 0) {
    warnings.push(`${raw.timerUnarmed} thread(s) could not get a CPU-time timer (${raw.timerArmError}) and were not sampled`)
  }
  if (workers && workers.failed > 0) {
    warnings.push(`${workers.failed} worker thread(s) could not get kflame's JIT hook (${workers.lastError}): ` +
      'their JS frames show as [jit]; require kflame in the worker to name them')
  }
  if (raw.kernelRefused) {
    warnings.push('kernel frames are not sampled: kernel.perf_event_paranoid forbids it for this user ' +
      '(needs <= 1, root, or CAP_PERFMON); time spent inside system calls is not counted')
  }
  if (raw.kernelHidden) {
    warnings.push('kernel addresses are hidden (kernel.kptr_restrict): kernel frames are shown as [kernel]_[k]')
  }
  if (raw.ringPages < raw.ringPagesAsked) {
    warnings.push(`ring buffers were cut from ${raw.ringPagesAsked} to ${raw.ringPages} pages per CPU by the ` +
      'locked-memory limit (kernel.perf_event_mlock_kb, ulimit -l); samples may be lost at high hz')
  }
  if (raw.lost > 0) {
    warnings.push(`${raw.lost} samples were lost because a ring buffer filled up: lower hz or raise ringPages`)
  }
  // JS compiled before kflame turned V8's flag on is named from the stack
  // copy; a frame of it deeper than the copy stays "(interpreted)".
  if (raw.stackBytes > 0 && raw.stackCopiesShort > 0.01 * raw.samples) {
    const share = (100 * raw.stackCopiesShort / raw.samples).toFixed(1)
    const deeper = Math.min(2 * raw.stackBytes, MAX_STACK_BYTES)
    warnings.push(`${raw.stackCopiesShort} samples (${share}%) had JS frames deeper than their ${raw.stackBytes}-byte ` +
      'stack copy, left (interpreted)_[j]: ' + (raw.stackBytes < MAX_STACK_BYTES
      ? `start({ stackBytes: ${deeper} }) reaches deeper, at more cost per sample`
      : 'this is the largest copy; requiring kflame earlier (node -r kflame/register) leaves fewer such frames'))
  }
  if (raw.corrupt > 0) warnings.push(`${raw.corrupt} malformed ring records were skipped`)
  if (raw.noMemory > 0) warnings.push(`${raw.noMemory} samples were dropped: out of memory`)
  if (raw.timelineDropped > 0 && raw.timelineSamples > 0) {
    warnings.push(`the timeline kept the newest ${raw.timelineSamples} samples and dropped ${raw.timelineDropped} older ones ` +
      '(start({ timeline: N }) keeps more): exports over time begin later; folded text and SVG count every sample')
  }
  if (raw.codeEventsDropped > 0) {
    warnings.push(`${raw.codeEventsDropped} JIT code events were dropped: out of memory; some JS frames may be unnamed`)
  }
  if (raw.perfMapError) {
    // the errno's name (EACCES, ENOSPC) beside the advice, which has its text
    const name = Object.keys(os.constants.errno).find((k) => os.constants.errno[k] === raw.perfMapErrno)
    const when = raw.perfMapLines < 0 ? 'at stop' : `${raw.perfMapErrors} time(s) while profiling`
    warnings.push(`the perf map could not be written to ${raw.perfMap} ${when}${name ? ` (${name})` : ''}: ${raw.perfMapError}`)
  }
  if (labels && labels.dropped > 0) {
    warnings.push(`${labels.dropped} labels were not recorded (over ${labels.tid.length} in one profile, ` +
      'or out of memory): their samples show without them')
  }
  if (raw.foreign > 0) {
    warnings.push(`${raw.foreign} samples of child processes were discarded ` +
      '(this kernel lacks inherit_thread, Linux < 5.13)')
  }
  return warnings
}

// The stats of a live profile, from what the C session reported: it, not
// the isolate that called start(), knows how the profile was taken.
function makeStats (raw, labels = null, workers = null) {
  return {
    samples: raw.samples,
    lost: raw.lost + raw.corrupt + raw.noMemory,
    threads: raw.threads,
    durationMs: raw.durationMs,
    hz: raw.hz,
    what: raw.what || 'cpu',
    mode: raw.mode,
    event: raw.mode === 'timer' ? 'thread-cpu-timer' : raw.taskClock ? 'task-clock' : 'cpu-clock',
    kernel: raw.kernel,
    warnings: warningsFor(raw, labels, workers),
    details: {
      lostInRing: raw.lost,
      perfRefused: raw.perfRefused || null,
      timerSignal: raw.timerSignal || 0,
      timerThreads: raw.timerThreads || 0,
      timerUnwalked: raw.timerUnwalked || 0,
      timerOverHandler: raw.timerOverHandler || 0,
      corrupt: raw.corrupt,
      noMemory: raw.noMemory,
      duplicates: raw.duplicates,
      foreign: raw.foreign,
      kernelHidden: raw.kernelHidden,
      inheritThread: raw.inheritThread,
      // perf mode: 'cpus' (an event per CPU, filtered to this process in
      // the kernel) or 'threads'; why 'auto' could not use CPU-wide events
      perfScope: raw.perfScope || null,
      perfScopeError: raw.perfScopeError || null,
      ringPages: raw.ringPages,
      attachedThreads: raw.attached,
      cpus: raw.cpus,
      jitFrames: raw.jitFrames,
      // What the stack copies added (see "JS frames" in the README).
      stackBytes: raw.stackBytes,
      stackCopies: raw.stackCopies,
      stackCopyBytes: raw.stackCopyBytes,
      stackCopiesShort: raw.stackCopiesShort,
      v8Layout: raw.v8Layout,
      interpretedNamed: raw.interpretedNamed,
      interpretedUnnamed: raw.interpretedUnnamed,
      runningAdded: raw.runningAdded,
      // Frames of code V8 never reported (OSR code compiled before the
      // hook was armed): named from their frame, or left [jit].
      unreportedNamed: raw.unreportedNamed,
      unreportedUnnamed: raw.unreportedUnnamed,
      // Frames of RegExp code compiled before the hook was armed, which
      // V8 reports without its expression: named from their frame, or
      // left 'RegExp:(compiled before start)'.
      regexpNamed: raw.regexpNamed,
      regexpUnnamed: raw.regexpUnnamed,
      inlinedFrames: raw.inlinedFrames,
      // Of those, from V8's own inlining ids; inlined functions left out
      // (not nameable); optimized code whose inlining was read, or could
      // not be (since the addon loaded).
      inlinedExact: raw.inlinedExact,
      inlinedUnnamed: raw.inlinedUnnamed,
      inliningRead: raw.inliningRead,
      inliningFailed: raw.inliningFailed,
      // Native names (distinct addresses): from separate debug files or
      // MiniDebugInfo, and folded into "[object]" for want of a symbol.
      nativeFromDebug: raw.nativeFromDebug,
      nativeFolded: raw.nativeFolded,
      // Samples under a leaf without frame pointers: tried, given frames
      // back from DWARF (and how many), left as they were.
      dwarfTried: raw.dwarfTried,
      dwarfRecovered: raw.dwarfRecovered,
      dwarfFrames: raw.dwarfFrames,
      dwarfBroke: raw.dwarfBroke,
      workersArmed: workers ? workers.armed : 0,
      workersFailed: workers ? workers.failed : 0,
      codeEntries: raw.codeEntries,
      codeBytes: raw.codeBytes,
      codeEvicted: raw.codeEvicted,
      codeMoved: raw.codeMoved,
      // Code events (V8 compiling, moving code) that found the code map's
      // lock held by the collector's lookups, and the ms they waited.
      codeLockWaits: raw.codeLockWaits,
      codeLockWaitMs: raw.codeLockWaitMs,
      codeEventsDropped: raw.codeEventsDropped,
      perfMap: raw.perfMap || null,
      perfMapLines: raw.perfMap ? raw.perfMapLines : 0,
      perfMapWrites: raw.perfMapWrites,
      perfMapErrors: raw.perfMapErrors,
      foldedBytes: raw.foldedBytes,
      // Samples kept with their times (start({ timeline })), dropped past
      // its bound, and the bytes they take.
      timelineSamples: raw.timelineSamples,
      timelineDropped: raw.timelineDropped,
      timelineBytes: raw.timelineBytes,
      // What the profile held at stop: distinct stacks and frame names, and
      // their bytes with the timeline's (memory grows with these, not time).
      stacks: raw.namedStacks,
      frameNames: raw.namedFrames,
      profileBytes: raw.aggregateBytes,
      // Symbol tables kept for the next profile (kflame.dropCaches() frees them).
      symbolCacheBytes: raw.symbolCacheBytes,
      // What stop() took in C: in all, the last drain (joining the
      // collector), naming what the collector left, folding into text,
      // handing freed heap back to the system.
      stopMs: { total: raw.stopMs, drain: raw.stopDrainMs, name: raw.stopNameMs, fold: raw.stopFoldMs, trim: raw.stopTrimMs },
      // What start() took in C: in all, opening the sampler (perf events
      // and rings for every thread, or the timers), starting the collector
      // (its thread starts the first profile's symbol preload), and how
      // much of it the calling thread spent off its CPU (asleep in the
      // kernel or preempted).
      startMs: {
        total: raw.startMs,
        jit: raw.startJitMs,
        sampler: raw.startSamplerMs,
        collector: raw.startCollectorMs,
        offCpu: raw.startOffCpuMs
      },
      // Off-CPU (what: 'offcpu' or 'both'): switched-out samples taken
      // (perf's rate bound: maxSwitchRate per thread and second), paired
      // with the thread's return to a CPU or not, the off-CPU time they
      // weigh (ms, scaled by the switches each stands for) and the samples
      // of 1/hz s it made.
      maxSwitchRate: raw.what && raw.what !== 'cpu' ? raw.maxSwitchRate : null,
      switchSamples: raw.switchSamples || 0,
      switchPaired: raw.switchPaired || 0,
      switchUnpaired: raw.switchUnpaired || 0,
      offCpuMs: raw.offCpuMs || 0,
      offCpuSamples: raw.offCpuSamples || 0,
      // Where switch-ins came from: 'tracepoint' (CPU-wide as root, with
      // tracefs: stamped in the kernel for the sampled waits only) or
      // 'records' (a PERF_RECORD_SWITCH for every switch); why not the
      // tracepoint, when it was tried and could not be used.
      switchIns: raw.switchIns || null,
      switchInsError: raw.switchInsError || null,
      sourceMaps: null,
      labels: labels ? labels.tid.length : 0,
      labelsDropped: labels ? labels.dropped : 0
    }
  }
}

module.exports = { Profile, makeStats }

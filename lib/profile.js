'use strict'

// What stop() and fromFolded() return: the folded stacks, the numbers
// behind them, every sample's time and thread when known, and the renderings.

const { renderSvg } = require('./svg')
const { toCpuprofile, toTraceEvents, toPprof, parseFoldedLine } = require('./exports')

// Rate assumed for folded text of unknown rate, to space synthetic samples.
const DEFAULT_HZ = 99

class Profile {
  // timing: { startUs (CLOCK_MONOTONIC), wallStart (ms since the epoch) }
  // of a live profile; null for folded text.
  constructor (folded, stats, samples = null, timing = null) {
    /** FlameGraph's collapsed format: "root;...;leaf COUNT" per line. */
    this.folded = folded
    /** { samples, lost, threads, durationMs, hz, event, kernel, warnings, ... } */
    this.stats = stats
    // { line, time (µs, CLOCK_MONOTONIC), tid } typed arrays, one entry per
    // sample, `line` indexing the lines of `folded`; null from folded text.
    Object.defineProperty(this, 'samples', { value: samples, enumerable: false })
    Object.defineProperty(this, 'timing', { value: timing, enumerable: false })
  }

  /** A self-contained interactive flame graph (SVG text). */
  svg (options) {
    return renderSvg(this.folded, { subtitle: subtitleOf(this.stats), ...options }).svg
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
  const stacks = profile.folded.split('\n').filter(Boolean).map(parseFoldedLine)
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
  return `${stats.samples} samples at ${stats.hz} Hz (${stats.event}), ${threads}, ` +
    `${(stats.durationMs / 1000).toFixed(2)} s${stats.lost ? `, ${stats.lost} lost` : ''}`
}

function warningsFor (raw, labels) {
  const warnings = []
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
  if (raw.corrupt > 0) warnings.push(`${raw.corrupt} malformed ring records were skipped`)
  if (raw.noMemory > 0) warnings.push(`${raw.noMemory} samples were dropped: out of memory`)
  if (raw.codeEventsDropped > 0) {
    warnings.push(`${raw.codeEventsDropped} JIT code events were dropped: out of memory; some JS frames may be unnamed`)
  }
  if (raw.perfMapErrors > 0 || raw.perfMapLines < 0) {
    warnings.push('the perf map could not be written (see details.perfMapErrors): check the path is writable')
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

function makeStats (raw, options, labels = null) {
  return {
    samples: raw.samples,
    lost: raw.lost + raw.corrupt + raw.noMemory,
    threads: raw.threads,
    durationMs: raw.durationMs,
    hz: raw.hz,
    event: options.event,
    kernel: raw.kernel,
    warnings: warningsFor(raw, labels),
    details: {
      lostInRing: raw.lost,
      corrupt: raw.corrupt,
      noMemory: raw.noMemory,
      duplicates: raw.duplicates,
      foreign: raw.foreign,
      kernelHidden: raw.kernelHidden,
      inheritThread: raw.inheritThread,
      ringPages: raw.ringPages,
      attachedThreads: raw.attached,
      cpus: raw.cpus,
      jitFrames: raw.jitFrames,
      codeEntries: raw.codeEntries,
      codeBytes: raw.codeBytes,
      codeEvicted: raw.codeEvicted,
      codeMoved: raw.codeMoved,
      codeEventsDropped: raw.codeEventsDropped,
      perfMap: options.perfMap || null,
      perfMapLines: options.perfMap ? raw.perfMapLines : 0,
      perfMapWrites: raw.perfMapWrites,
      perfMapErrors: raw.perfMapErrors,
      labels: labels ? labels.tid.length : 0,
      labelsDropped: labels ? labels.dropped : 0
    }
  }
}

module.exports = { Profile, makeStats }

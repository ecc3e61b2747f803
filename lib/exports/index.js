'use strict'

// The export formats, from one model of a profile (see ./frames.js):
//   toCpuprofile(model)   Chrome DevTools / speedscope .cpuprofile (an object)
//   toTraceEvents(model)  Perfetto / chrome://tracing trace events (an object)
//   toPprof(model)        gzipped pprof protobuf (a Buffer)
// modelFromFolded(text, hz) builds the model from FlameGraph's folded text,
// for profiles saved before (no sample times: the exports synthesise them).

const { kflameError } = require('../errors')
const { toCpuprofile } = require('./cpuprofile')
const { toTraceEvents } = require('./traceevents')
const { toPprof } = require('./pprof')
const { parseFrame } = require('./frames')

// "root;caller;...;leaf COUNT": the count is the last space-separated word,
// frame names may hold spaces but no ';'.
function parseFoldedLine (line) {
  const space = line.lastIndexOf(' ')
  if (space <= 0) return null
  const digits = line.slice(space + 1)
  // As in C (flametree.c): up to 18 digits (leading zeros too), and a value
  // past 2^53 - 1 is a bad line. Number() of a larger value never rounds
  // down to a safe integer, so the test is exact.
  if (!/^\d{1,18}$/.test(digits) || !Number.isSafeInteger(Number(digits))) return null
  const frames = line.slice(0, space).split(';')
  if (frames.some((f) => f === '')) return null
  return { frames, count: Number(digits) }
}

/**
 * modelFromFolded(text, hz = 99) -> { model, badLines }
 * text: folded stacks (string or Buffer). Lines that do not parse (no count,
 * a count that is not a whole number, an empty frame) are skipped and
 * counted in badLines; blank lines are ignored. Repeated stacks add up, in
 * the order they first appear. The model has samples: null, startTime 0 and
 * endTime = samples * 1e6 / hz.
 */
function modelFromFolded (text, hz = 99) {
  if (Buffer.isBuffer(text)) text = text.toString('utf8')
  if (typeof text !== 'string') {
    throw kflameError(TypeError, 'KFLAME_ERR_INVALID_ARG', 'modelFromFolded(text, hz): text must be a string or a Buffer')
  }
  if (typeof hz !== 'number' || !Number.isFinite(hz)) {
    throw kflameError(TypeError, 'KFLAME_ERR_INVALID_ARG', 'modelFromFolded(text, hz): hz must be a number')
  }
  if (!(hz > 0)) throw kflameError(RangeError, 'KFLAME_ERR_OUT_OF_RANGE', 'modelFromFolded(text, hz): hz must be above 0')

  const stacks = []
  const byStack = new Map()
  let badLines = 0
  let total = 0
  for (const raw of text.split('\n')) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw
    if (line.trim() === '') continue
    const parsed = parseFoldedLine(line)
    // As lib/folded.js: past Number.MAX_SAFE_INTEGER in all, a bad line.
    if (!parsed || parsed.count > Number.MAX_SAFE_INTEGER - total) {
      badLines++
      continue
    }
    total += parsed.count
    const key = line.slice(0, line.lastIndexOf(' '))
    const seen = byStack.get(key)
    if (seen) {
      seen.count += parsed.count
    } else {
      byStack.set(key, parsed)
      stacks.push(parsed)
    }
  }
  return {
    model: { stacks, samples: null, hz, startTime: 0, endTime: total * 1e6 / hz },
    badLines
  }
}

module.exports = { toCpuprofile, toTraceEvents, toPprof, modelFromFolded, parseFoldedLine, parseFrame }

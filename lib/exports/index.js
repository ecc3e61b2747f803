'use strict'

// The export formats, from one model of a profile (see ./frames.js):
//   toCpuprofile(model)   Chrome DevTools / speedscope .cpuprofile (an object)
//   toTraceEvents(model)  Perfetto / chrome://tracing trace events (an object)
//   toPprof(model)        gzipped pprof protobuf (a Buffer)
// modelFromFolded(text, hz) builds the model from FlameGraph's folded text,
// for profiles saved before (no sample times: the exports synthesise them).

const { invalid, outOfRange } = require('../errors')
const { toCpuprofile } = require('./cpuprofile')
const { toTraceEvents } = require('./traceevents')
const { toPprof } = require('./pprof')
const { parseFrame } = require('./frames')
const { parseText } = require('../foldedtext')

/**
 * modelFromFolded(text, hz = 99) -> { model, badLines }
 * text: folded stacks (string or Buffer), read by lib/foldedtext.js. Lines
 * that do not parse (no count, a count that is not a whole number, an empty
 * frame, a total past 2^53 - 1) are skipped and counted in badLines; blank
 * lines are ignored; a zero count is kept. Repeated stacks add up, in the
 * order they first appear. The model has samples: null, startTime 0 and
 * endTime = samples * 1e6 / hz.
 */
function modelFromFolded (text, hz = 99) {
  if (Buffer.isBuffer(text)) text = text.toString('utf8')
  if (typeof text !== 'string') {
    throw invalid('modelFromFolded(text, hz): text must be a string or a Buffer')
  }
  if (typeof hz !== 'number' || !Number.isFinite(hz)) {
    throw invalid('modelFromFolded(text, hz): hz must be a number')
  }
  if (!(hz > 0)) throw outOfRange('modelFromFolded(text, hz): hz must be above 0')

  const { stacks: byStack, badLines, total } = parseText(text, { keepZero: true })
  const stacks = []
  for (const [stack, count] of byStack) stacks.push({ frames: stack.split(';'), count })
  return {
    model: { stacks, samples: null, hz, startTime: 0, endTime: total * 1e6 / hz },
    badLines
  }
}

module.exports = { toCpuprofile, toTraceEvents, toPprof, modelFromFolded, parseFrame }

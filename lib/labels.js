'use strict'

// Labels: kflame.label(name, fn) names a stretch of a thread's time, and
// every sample taken on that thread meanwhile gets `name` as a frame right
// under the thread's root: "main;GET /users;...". The C log (src/collect/labels.c)
// stamps each open and close with the thread and CLOCK_MONOTONIC, the clock
// of the samples; stop() matches the two (applyLabels).
//
// When no profile runs, a label costs one load of the C log's "recording"
// word (mapped into JS by the binding) and the call of fn.

const binding = require('./binding')
const { invalid } = require('./errors')
const { sanitizeFrame, splitCount, formatText } = require('./foldedtext')

// Int32Array over the C word; absent where V8 forbids external buffers.
const recording = binding.labelsRecording || new Int32Array([1])

function checkName (name, api) {
  if (typeof name !== 'string' || name === '') {
    throw invalid(`${api}: name must be a non-empty string`)
  }
}

// A label's name becomes a frame name, sanitised by the rule of every frame
// name (lib/foldedtext.js: ';' -> ':', control characters -> ' '); the C
// log cuts it at 512 bytes.

// Opens a label on the calling thread until closeLabel(handle); for hooks
// that see the start and the end of a stretch apart (test runners).
function openLabel (name) {
  checkName(name, 'openLabel(name)')
  return recording[0] === 0 ? -1 : binding.labelOpen(sanitizeFrame(name))
}

function closeLabel (handle) {
  if (handle >= 0) binding.labelClose(handle)
}

// Runs fn() under the label and returns what it returns. When fn returns a
// promise (a thenable), the label stays open until it settles and label()
// returns a promise that settles the same way.
function label (name, fn) {
  checkName(name, 'label(name, fn)')
  if (typeof fn !== 'function') {
    throw invalid('label(name, fn): fn must be a function')
  }
  if (recording[0] === 0) return fn()
  const handle = binding.labelOpen(sanitizeFrame(name))
  if (handle < 0) return fn()
  let result, then
  try {
    result = fn()
    // Read once: a `then` getter may throw, or answer differently twice.
    then = thenOf(result)
  } catch (err) {
    binding.labelClose(handle)
    throw err
  }
  if (typeof then !== 'function') {
    binding.labelClose(handle)
    return result
  }
  // A `then` that throws rejects the promise, which closes the label.
  return new Promise((resolve, reject) => then.call(result, resolve, reject)).then(
    (value) => { binding.labelClose(handle); return value },
    (err) => { binding.labelClose(handle); throw err })
}

function thenOf (value) {
  return value !== null && (typeof value === 'object' || typeof value === 'function') ? value.then : undefined
}

// Puts each sample under the labels open on its thread at its time, outer
// labels first, right after the root frame. Takes stop()'s raw result and
// returns { folded, samples } with the lines re-folded and samples.line
// pointing at them. Unlabelled stacks keep their lines.
function applyLabels (folded, samples, labels) {
  if (!labels || labels.tid.length === 0 || samples.line.length === 0) return { folded, samples }
  const lines = folded.split('\n')
  if (lines[lines.length - 1] === '') lines.pop()
  // C's text (src/render/folded.c): every line is a stack and its count.
  const split = lines.map(splitCount)
  const stacks = split.map((s) => s.stack)
  const byThread = intervalsByThread(labels)
  const counts = new Map()
  const keyOf = new Array(samples.line.length)
  for (const [tid, order] of samplesByThread(samples)) {
    const intervals = byThread.get(tid) || []
    const open = [] // intervals begun by the current time, ended lazily
    let next = 0
    for (const i of order) {
      const t = samples.time[i]
      while (next < intervals.length && intervals[next].start <= t) open.push(intervals[next++])
      const names = []
      for (let k = open.length - 1; k >= 0; k--) {
        if (open[k].end <= t) open.splice(k, 1)
      }
      for (const interval of open) names.push(labels.names[interval.name])
      const stack = stacks[samples.line[i]]
      let key = stack
      if (names.length > 0) {
        const cut = stack.indexOf(';')
        key = cut < 0
          ? `${stack};${names.join(';')}`
          : `${stack.slice(0, cut)};${names.join(';')}${stack.slice(cut)}`
      }
      keyOf[i] = key
      counts.set(key, (counts.get(key) || 0) + 1)
    }
  }
  // Samples the timeline dropped (start({ timeline })) have no time: they
  // keep their unlabelled lines.
  const kept = new Float64Array(lines.length)
  for (const l of samples.line) kept[l]++
  for (let l = 0; l < lines.length; l++) {
    const missing = split[l].count - kept[l]
    if (missing > 0) counts.set(stacks[l], (counts.get(stacks[l]) || 0) + missing)
  }
  const relabelled = formatText(counts)
  const index = new Map(relabelled.keys.map((k, i) => [k, i]))
  const line = new Uint32Array(samples.line.length)
  for (let i = 0; i < line.length; i++) line[i] = index.get(keyOf[i])
  return { folded: relabelled.folded, samples: { line, time: samples.time, tid: samples.tid } }
}

// tid -> intervals sorted by start (an enclosing label before the ones it
// encloses, so names come outer first).
function intervalsByThread (labels) {
  const byThread = new Map()
  for (let i = 0; i < labels.tid.length; i++) {
    const tid = labels.tid[i]
    if (!byThread.has(tid)) byThread.set(tid, [])
    byThread.get(tid).push({ start: labels.start[i], end: labels.end[i], name: labels.name[i], seq: i })
  }
  for (const list of byThread.values()) list.sort((a, b) => a.start - b.start || a.seq - b.seq)
  return byThread
}

// tid -> sample indices in time order.
function samplesByThread (samples) {
  const byThread = new Map()
  for (let i = 0; i < samples.tid.length; i++) {
    const tid = samples.tid[i]
    if (!byThread.has(tid)) byThread.set(tid, [])
    byThread.get(tid).push(i)
  }
  for (const order of byThread.values()) order.sort((a, b) => samples.time[a] - samples.time[b])
  return byThread
}

module.exports = { label, openLabel, closeLabel, applyLabels }

'use strict'

// Chrome's trace-event JSON, which Perfetto (ui.perfetto.dev) and
// chrome://tracing open: a flame chart over time, one track per thread.
// As traceviewify did for DTrace's output, consecutive samples of a thread
// that share a frame prefix extend the same slices, so a function that ran
// for 40 samples in a row is one 40-sample slice with its callees below.
//
// A sample lasts until the thread's next sample, at most 2 sampling intervals
// (the thread was off CPU in between: its slices close), and one interval
// when it is the thread's last. Times are whole µs, so slices that end
// together end at exactly the same number and nest without rounding doubt.

const { frameParser, compareStrings, checkModel, sampleRuns, modelPid, timingNote } = require('./frames')

const CATEGORY = { js: 'js', jit: 'jit', native: 'native', kernel: 'kernel', root: 'thread' }

// The sample runs of each thread, in time order: Map tid -> [run index].
function runsByThread (runs) {
  const threads = new Map()
  for (let i = 0; i < runs.line.length; i++) {
    const tid = runs.tid[i]
    let list = threads.get(tid)
    if (!list) threads.set(tid, (list = []))
    list.push(i)
  }
  return threads
}

// Start and end (whole µs) of each run of one thread.
function runSpans (runs, list) {
  const cap = Math.round(2 * runs.interval)
  const one = Math.max(1, Math.round(runs.interval))
  return list.map((r, k) => {
    const ts = Math.round(runs.time[r])
    if (runs.synthetic) return { ts, end: Math.round(runs.end[r]) }
    const next = k + 1 < list.length ? Math.round(runs.time[list[k + 1]]) : null
    return { ts, end: next === null ? ts + one : ts + Math.min(next - ts, cap) }
  })
}

function sliceEvent (frame, ts, end, depth, pid, tid, parse) {
  const f = parse(frame)
  const event = { name: f.functionName, cat: CATEGORY[f.kind], ph: 'X', ts, dur: end - ts, pid, tid }
  if (f.kind === 'js') event.args = { url: f.url, line: f.lineNumber, column: f.columnNumber }
  event.depth = depth // for sorting; removed before output
  return event
}

// The slices of one thread: walk its samples, keep the open slices as a stack
// and close those the next sample does not share.
function threadSlices (model, runs, list, pid, tid, parse) {
  const spans = runSpans(runs, list)
  const events = []
  const open = [] // { frame, ts }
  let openEnd = 0
  const closeAbove = (depth, at) => {
    while (open.length > depth) {
      const s = open.pop()
      if (at > s.ts) events.push(sliceEvent(s.frame, s.ts, at, open.length, pid, tid, parse))
    }
  }
  list.forEach((r, k) => {
    const frames = model.stacks[runs.line[r]].frames // frames[0] is the thread: it names the track
    const { ts, end } = spans[k]
    let shared = 0
    if (ts <= openEnd) {
      while (shared < open.length && shared + 1 < frames.length && open[shared].frame === frames[shared + 1]) shared++
    }
    closeAbove(shared, Math.min(openEnd, ts))
    for (let d = shared + 1; d < frames.length; d++) open.push({ frame: frames[d], ts })
    openEnd = end
  })
  closeAbove(0, openEnd)
  return events
}

// Names of each thread: its root frames in order of first appearance (a
// thread that renamed itself while sampled has two).
function threadNames (model, runs, threads) {
  const names = new Map()
  for (const [tid, list] of threads) {
    const seen = []
    for (const r of list) {
      const root = model.stacks[runs.line[r]].frames[0]
      if (!seen.includes(root)) seen.push(root)
    }
    names.set(tid, seen.join(' / '))
  }
  return names
}

/**
 * toTraceEvents(model) -> { traceEvents, displayTimeUnit: 'ms', otherData }
 * (JSON.stringify it to save). pid is model.pid when given, else 1; tid is
 * the sampled thread's id, or for a model from folded text a stable number
 * per root frame (the tid in its name when it has one, the pid for main).
 */
function toTraceEvents (model) {
  checkModel(model)
  const parse = frameParser()
  const pid = modelPid(model)
  const runs = sampleRuns(model)
  const threads = runsByThread(runs)
  const names = threadNames(model, runs, threads)

  // main first, then by tid.
  const tids = [...threads.keys()].sort((a, b) => (names.get(b) === 'main') - (names.get(a) === 'main') || a - b)
  const meta = [{
    name: 'process_name',
    ph: 'M',
    pid,
    tid: 0,
    ts: 0,
    args: { name: typeof model.processName === 'string' ? model.processName : 'node' }
  }]
  const slices = []
  tids.forEach((tid, index) => {
    meta.push({ name: 'thread_name', ph: 'M', pid, tid, ts: 0, args: { name: names.get(tid) } })
    meta.push({ name: 'thread_sort_index', ph: 'M', pid, tid, ts: 0, args: { sort_index: index } })
    const events = threadSlices(model, runs, threads.get(tid), pid, tid, parse)
    // Parents before children, then time: the order viewers nest by.
    events.sort((a, b) => a.ts - b.ts || a.depth - b.depth || compareStrings(a.name, b.name))
    for (const e of events) {
      delete e.depth
      slices.push(e)
    }
  })

  let samples = 0
  for (let i = 0; i < runs.line.length; i++) samples += runs.count ? runs.count[i] : 1
  return {
    traceEvents: meta.concat(slices),
    displayTimeUnit: 'ms',
    otherData: {
      source: 'kflame',
      hz: model.hz,
      samples,
      threads: tids.length,
      startTime: model.startTime,
      endTime: model.endTime,
      clock: 'CLOCK_MONOTONIC, µs',
      timing: timingNote(model)
    }
  }
}

module.exports = { toTraceEvents }

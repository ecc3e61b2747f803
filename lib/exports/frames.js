'use strict'

// What the three exports (cpuprofile, trace events, pprof) share: taking
// kflame's frame names apart, checking the model they are given, and laying
// its samples out in time.
//
// The model:
//   { stacks: [{ frames: string[], count }],  frames root-first, frames[0] the thread
//     samples: null | { line: Uint32Array, time: Float64Array, tid: Uint32Array },
//     hz, startTime, endTime,                  times in µs on CLOCK_MONOTONIC
//     pid?, processName?, wallStart? }         optional, see the exports

const { invalid, outOfRange } = require('../errors')

// "name url:line:col" is how V8 names code of a JS function; kflame appends _[j].
const JS_POSITION = /:(\d+):(\d+)$/
// What a script URL can start with: a path, a scheme (node:, file:), node's
// [eval]/[stdin]/[worker eval], vm's evalmachine.<anonymous>, V8's symbol names.
const URL_START = /^(?:\/|\.\.?\/|[A-Za-z][\w+.-]*:|\[|<|evalmachine\.|symbol\(hash )/
// V8's names for its own code, never a JS function even with a ":n:n" tail:
// src/render/framekinds.json, the list src/render/svg.c colours by too.
const { v8CodePrefixes } = require('../../src/render/framekinds.json')
const isV8Code = (body) => v8CodePrefixes.some((prefix) => body.startsWith(prefix))
// Code of an object that no symbol covers: "[libc.so.6]" (kflame folds it
// into one frame per object), or "libc.so.6+0x891f5" (older profiles).
const OBJECT_FOLDED = /^\[([^\s[\]]+)\]$/
// Bracketed names that are not objects.
const NOT_OBJECTS = new Set(['unknown', 'jit', 'thread', 'vdso'])
const OBJECT_OFFSET = /^([^\s()]+)\+0x[0-9a-fA-F]+$/
const TIERS = '~^+*'

// Most profiles have far more samples than distinct frames; above this many,
// synthesising one sample per count would only exhaust memory.
const MAX_SYNTHETIC_SAMPLES = 5e7

function parsed (functionName, url, lineNumber, columnNumber, kind, tier = '') {
  return { functionName, url, lineNumber, columnNumber, kind, tier }
}

// Where the function name ends and the URL begins in "name url". Both may hold
// spaces ("get foo", "/home/me/My App/a.js"): the first space followed by
// something that looks like a URL wins, else the last space (a relative
// file name such as vm's "a.js"). -1 when there is no space at all.
function nameEnd (head) {
  let last = -1
  for (let i = head.indexOf(' '); i >= 0; i = head.indexOf(' ', i + 1)) {
    const rest = head.slice(i + 1)
    if (rest === '' || URL_START.test(rest)) return i
    last = i
  }
  return last
}

function parseJs (body) {
  const pos = JS_POSITION.exec(body)
  if (!pos) return null
  const head = body.slice(0, pos.index)
  const end = nameEnd(head)
  if (end <= 0) return null // no space, or no name before it
  const functionName = head.slice(0, end)
  // With tiers: true kflame keeps V8's marker (~ interpreted, ^ Sparkplug,
  // + Maglev, * TurboFan) in front: it stays in the name, the user asked for it.
  const tier = functionName.length > 1 && TIERS.includes(functionName[0]) ? functionName[0] : ''
  return parsed(functionName, head.slice(end + 1), Number(pos[1]), Number(pos[2]), 'js', tier)
}

/**
 * Takes one of kflame's frame names apart.
 *
 *   parseFrame('alpha /app/a.js:14:16_[j]')
 *     -> { functionName: 'alpha', url: '/app/a.js', lineNumber: 14, columnNumber: 16, kind: 'js', tier: '' }
 *
 * kind: 'js' (a JS function; name_[i] when inlined), 'jit' (other generated code: Builtin:X,
 * BytecodeHandler:X, RegExp:/src/flags, (interpreted), [jit]), 'kernel' (name_[k]),
 * 'native' (ELF symbols, [libfoo.so], lib+0xOFF, [unknown]) or 'root' (the
 * thread; say so with isRoot, the name alone cannot tell). lineNumber and
 * columnNumber are 1-based as in the name, 0 when unknown. url is the script
 * for JS frames, the object file for "[libfoo.so]" and "lib+0xOFF" frames,
 * '' otherwise.
 */
function parseFrame (name, isRoot = false) {
  if (typeof name !== 'string') throw invalid('parseFrame(name): name must be a string')
  if (isRoot) return parsed(name, '', 0, 0, 'root')
  if (name.endsWith('_[k]')) return parsed(name.slice(0, -4), '', 0, 0, 'kernel')
  if (name.endsWith('_[j]')) {
    const body = name.slice(0, -4)
    return (!isV8Code(body) && parseJs(body)) || parsed(body, '', 0, 0, 'jit')
  }
  // a JS function inlined into its caller's optimized code
  if (name.endsWith('_[i]')) {
    const body = name.slice(0, -4)
    return (!isV8Code(body) && parseJs(body)) || parsed(body, '', 0, 0, 'jit')
  }
  let object = OBJECT_FOLDED.exec(name)
  if (object && NOT_OBJECTS.has(object[1])) object = null
  if (!object) object = OBJECT_OFFSET.exec(name)
  return parsed(name, object ? object[1] : '', 0, 0, 'native')
}

// parseFrame with a cache: exports meet the same frame in many stacks.
function frameParser () {
  const cache = new Map()
  return (name, isRoot = false) => {
    const key = isRoot ? '\0' + name : name
    let f = cache.get(key)
    if (f === undefined) {
      f = parseFrame(name, isRoot)
      cache.set(key, f)
    }
    return f
  }
}

// Code-unit order, not the locale's: the same on every machine.
function compareStrings (a, b) {
  return a < b ? -1 : a > b ? 1 : 0
}

function isSequence (a) {
  return Array.isArray(a) || ArrayBuffer.isView(a)
}

/** Throws KFLAME_ERR_INVALID_ARG when the model is not one the exports can read. */
function checkModel (model) {
  if (model === null || typeof model !== 'object') throw invalid('model must be an object')
  if (!Array.isArray(model.stacks)) throw invalid('model.stacks must be an array')
  if (typeof model.hz !== 'number' || !(model.hz > 0) || !Number.isFinite(model.hz)) {
    throw invalid('model.hz must be a positive number')
  }
  for (const key of ['startTime', 'endTime']) {
    if (typeof model[key] !== 'number' || !Number.isFinite(model[key])) throw invalid(`model.${key} must be a finite number`)
  }
  model.stacks.forEach((s, i) => {
    if (s === null || typeof s !== 'object' || !Array.isArray(s.frames) || s.frames.length === 0 ||
        !s.frames.every((f) => typeof f === 'string')) {
      throw invalid(`model.stacks[${i}].frames must be a non-empty array of strings`)
    }
    if (!Number.isSafeInteger(s.count) || s.count < 0) throw invalid(`model.stacks[${i}].count must be a non-negative integer`)
  })
  const samples = model.samples
  if (samples === null || samples === undefined) return
  if (typeof samples !== 'object' || !isSequence(samples.line) || !isSequence(samples.time) || !isSequence(samples.tid) ||
      samples.line.length !== samples.time.length || samples.line.length !== samples.tid.length) {
    throw invalid('model.samples must be null or { line, time, tid } of equal lengths')
  }
  for (let i = 0; i < samples.line.length; i++) {
    const line = samples.line[i]
    if (!Number.isInteger(line) || line < 0 || line >= model.stacks.length) {
      throw invalid(`model.samples.line[${i}] = ${line} is not an index of model.stacks`)
    }
    if (!Number.isFinite(samples.time[i])) throw invalid(`model.samples.time[${i}] must be a finite number`)
  }
}

// Indexes of the samples in time order (ties in their given order): the
// model promises time order, this keeps the exports right when it is not.
function timeOrder (samples) {
  const n = samples.time.length
  const order = new Uint32Array(n)
  let sorted = true
  for (let i = 0; i < n; i++) {
    order[i] = i
    if (i > 0 && samples.time[i] < samples.time[i - 1]) sorted = false
  }
  if (sorted) return order
  return Uint32Array.from(Array.from(order).sort((a, b) => samples.time[a] - samples.time[b] || a - b))
}

/**
 * Samples per stack: counted from model.samples when there are (what a
 * replay over time shows), else, or with `whole`, the stacks' counts (every
 * sample, also those a bounded timeline dropped).
 */
function lineCounts (model, whole = false) {
  const counts = new Float64Array(model.stacks.length)
  if (model.samples && !whole) {
    for (const line of model.samples.line) counts[line]++
  } else {
    model.stacks.forEach((s, i) => { counts[i] = s.count })
  }
  return counts
}

// Folded text has no thread ids. Give each root a stable one: the tid in its
// name ("libuv-worker-4117"), the pid for main (the main thread's tid is the
// pid), and for the rest (or clashes) numbers above all of those, in name order.
function rootThreadIds (roots, pid) {
  const names = [...new Set(roots)].sort(compareStrings)
  if (names.includes('main')) {
    names.splice(names.indexOf('main'), 1)
    names.unshift('main')
  }
  const ids = new Map()
  const used = new Set()
  let top = pid
  for (const name of names) {
    const m = /-(\d{1,9})$/.exec(name)
    const id = name === 'main' ? pid : m ? Number(m[1]) : 0
    if (id > 0 && !used.has(id)) {
      ids.set(name, id)
      used.add(id)
      top = Math.max(top, id)
    }
  }
  for (const name of names) if (!ids.has(name)) ids.set(name, ++top)
  return ids
}

function modelPid (model) {
  return Number.isSafeInteger(model.pid) && model.pid > 0 ? model.pid : 1
}

/**
 * The samples in time order as runs of back-to-back samples of one stack:
 *   { line, time, end, tid, count, synthetic, interval }  (parallel arrays)
 * Measured samples (model.samples) are runs of one with end null: how long a
 * sample lasts is the caller's rule. Without samples, the stacks' counts are
 * laid out one after the other from startTime, one sample every 1e6/hz µs,
 * each run ending exactly where the next begins.
 */
function sampleRuns (model) {
  const interval = 1e6 / model.hz
  if (model.samples) {
    const { line, time, tid } = model.samples
    const order = timeOrder(model.samples)
    const n = order.length
    const runs = {
      line: new Uint32Array(n),
      time: new Float64Array(n),
      end: null,
      tid: new Float64Array(n),
      count: null,
      synthetic: false,
      interval
    }
    for (let i = 0; i < n; i++) {
      const k = order[i]
      runs.line[i] = line[k]
      runs.time[i] = time[k]
      runs.tid[i] = tid[k]
    }
    return runs
  }
  const lines = []
  model.stacks.forEach((s, i) => { if (s.count > 0) lines.push(i) })
  const ids = rootThreadIds(lines.map((i) => model.stacks[i].frames[0]), modelPid(model))
  const runs = {
    line: Uint32Array.from(lines),
    time: new Float64Array(lines.length),
    end: new Float64Array(lines.length),
    tid: new Float64Array(lines.length),
    count: new Float64Array(lines.length),
    synthetic: true,
    interval
  }
  let k = 0
  lines.forEach((line, i) => {
    const s = model.stacks[line]
    runs.time[i] = syntheticTime(model, k)
    k += s.count
    runs.end[i] = syntheticTime(model, k) // the same expression as the next run's time: no gap
    runs.tid[i] = ids.get(s.frames[0])
    runs.count[i] = s.count
  })
  return runs
}

function syntheticTime (model, k) {
  return model.startTime + k * 1e6 / model.hz
}

/**
 * Calls fn(line, time) for every sample in time order; synthesises them from
 * the counts when the model has no samples (see sampleRuns).
 */
function forEachSample (model, fn) {
  const runs = sampleRuns(model)
  if (!runs.synthetic) {
    for (let i = 0; i < runs.line.length; i++) fn(runs.line[i], runs.time[i])
    return
  }
  let total = 0
  for (const c of runs.count) total += c
  if (total > MAX_SYNTHETIC_SAMPLES) {
    throw outOfRange(`the model's counts add up to ${total} samples, more than the ${MAX_SYNTHETIC_SAMPLES} that can be laid out one by one`)
  }
  let k = 0
  for (let i = 0; i < runs.line.length; i++) {
    for (let j = 0; j < runs.count[i]; j++) fn(runs.line[i], syntheticTime(model, k++))
  }
}

/** Words for the output's metadata: where the times came from. */
function timingNote (model) {
  return model.samples
    ? 'measured: sample times from perf_events, CLOCK_MONOTONIC'
    : `synthesised: the profile came from folded text, without times; samples are laid out stack after stack, ${(1e6 / model.hz).toFixed(3)} µs apart (1/hz)`
}

module.exports = {
  parseFrame,
  frameParser,
  compareStrings,
  checkModel,
  lineCounts,
  rootThreadIds,
  modelPid,
  sampleRuns,
  forEachSample,
  timingNote,
  MAX_SYNTHETIC_SAMPLES
}

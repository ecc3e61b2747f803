'use strict'

// pprof's profile.proto (github.com/google/pprof/blob/main/proto/profile.proto),
// gzipped: what `go tool pprof`, pprof.me, Grafana Pyroscope and Datadog
// read. Encoded by hand (a few varints and length-delimited fields) so that
// kflame needs no protobuf library at run time.
//
// One Sample per distinct stack, values [samples, cpu ns], and with off-CPU
// stacks (an "[off-cpu]" or "(idle)" frame under the thread's root, see
// README "Off-CPU time") a third, off_cpu ns: each sample stands for 1/hz s
// of either. Location ids are
// leaf first, as pprof wants. The thread is not a frame here but a string
// label "thread" on the sample: pprof can then group, filter and tag by it.

const zlib = require('node:zlib')
const { frameParser, compareStrings, checkModel, lineCounts } = require('./frames')

// Field numbers of profile.proto.
const PROFILE = {
  sampleType: 1,
  sample: 2,
  mapping: 3,
  location: 4,
  function: 5,
  stringTable: 6,
  timeNanos: 9,
  durationNanos: 10,
  periodType: 11,
  period: 12,
  comment: 13
}
const VALUE_TYPE = { type: 1, unit: 2 }
const SAMPLE = { locationId: 1, value: 2, label: 3 }
const LABEL = { key: 1, str: 2 }
const MAPPING = { id: 1, filename: 5, hasFunctions: 7, hasFilenames: 8, hasLineNumbers: 9 }
const LOCATION = { id: 1, mappingId: 2, line: 4 }
const LINE = { functionId: 1, line: 2, column: 3 }
const FUNCTION = { id: 1, name: 2, systemName: 3, filename: 4, startLine: 5 }

const VARINT = 0
const LENGTH_DELIMITED = 2

// A growable byte buffer with protobuf's primitives. Proto3 leaves scalar
// fields at their default (0, false) out, so the scalar writers do too.
class Writer {
  constructor () {
    this.buf = Buffer.allocUnsafe(256)
    this.len = 0
  }

  reserve (n) {
    if (this.len + n <= this.buf.length) return
    const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + n))
    this.buf.copy(bigger, 0, 0, this.len)
    this.buf = bigger
  }

  // Unsigned varint of an integer in [0, 2^53) or a BigInt; negative int64
  // values take ten bytes of two's complement, as protobuf encodes them.
  varint (value) {
    if (typeof value === 'bigint') return this.bigVarint(BigInt.asUintN(64, value))
    if (value < 0) return this.bigVarint(BigInt.asUintN(64, BigInt(value)))
    if (!Number.isSafeInteger(value)) throw new RangeError(`pprof: ${value} is not an integer protobuf can carry here`)
    this.reserve(10)
    while (value >= 0x80) {
      this.buf[this.len++] = (value % 0x80) | 0x80
      value = Math.floor(value / 0x80)
    }
    this.buf[this.len++] = value
  }

  bigVarint (value) {
    this.reserve(10)
    while (value >= 0x80n) {
      this.buf[this.len++] = Number(value & 0x7fn) | 0x80
      value >>= 7n
    }
    this.buf[this.len++] = Number(value)
  }

  key (field, wireType) {
    this.varint(field * 8 + wireType)
  }

  uint (field, value) {
    if (!value) return // 0 and 0n
    this.key(field, VARINT)
    this.varint(value)
  }

  bool (field, value) {
    if (value) this.uint(field, 1)
  }

  bytes (field, bytes) {
    this.key(field, LENGTH_DELIMITED)
    this.varint(bytes.length)
    this.reserve(bytes.length)
    this.buf.set(bytes, this.len)
    this.len += bytes.length
  }

  // Repeated strings are written even when empty: string_table[0] is ''.
  string (field, s) {
    this.bytes(field, Buffer.from(s, 'utf8'))
  }

  message (field, writer) {
    this.bytes(field, writer.finish())
  }

  // Packed repeated varints (proto3's default for repeated scalars).
  packed (field, values) {
    if (values.length === 0) return
    const inner = new Writer()
    for (const v of values) inner.varint(v)
    this.message(field, inner)
  }

  finish () {
    return this.buf.subarray(0, this.len)
  }
}

function valueType (type, unit) {
  const w = new Writer()
  w.uint(VALUE_TYPE.type, type)
  w.uint(VALUE_TYPE.unit, unit)
  return w
}

// string_table: index 0 is '', every other string once.
function stringTable () {
  const strings = ['']
  const index = new Map([['', 0]])
  const id = (s) => {
    let i = index.get(s)
    if (i === undefined) {
      i = strings.length
      strings.push(s)
      index.set(s, i)
    }
    return i
  }
  return { strings, id }
}

// Where pprof shows a function's file: the script for JS, the object file for
// an address no symbol covers, perf's name for the kernel.
function fileOf (f) {
  if (f.kind === 'kernel') return '[kernel.kallsyms]'
  return f.url
}

// Distinct stacks with their sample counts, in frame order (stacks may repeat
// in a model: they add up). Stacks without samples are left out. Counted
// from the stacks: a timeline past its bound holds only the newest samples.
function aggregate (model) {
  const counts = lineCounts(model, true)
  const byKey = new Map()
  model.stacks.forEach((s, line) => {
    if (counts[line] === 0) return
    const key = JSON.stringify(s.frames) // names may hold any character, ';' too
    const entry = byKey.get(key)
    if (entry) entry.count += counts[line]
    else byKey.set(key, { frames: s.frames, count: counts[line] })
  })
  return [...byKey.values()].sort((a, b) => compareFrames(a.frames, b.frames))
}

// Past 2^53 a Number is no longer exact: BigInt, which the writer takes too.
function exactProduct (a, b) {
  const p = a * b
  return Number.isSafeInteger(p) ? p : BigInt(a) * BigInt(b)
}

function int64 (x) {
  return Number.isSafeInteger(x) ? x : BigInt(x)
}

function compareFrames (a, b) {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const c = compareStrings(a[i], b[i])
    if (c) return c
  }
  return a.length - b.length
}

/**
 * toPprof(model) -> Buffer, a gzipped profile.proto.
 * period = 1e9/hz ns of CPU per sample. time_nanos (wall clock) is written
 * when the model has wallStart (ms since the epoch); the model's own times
 * are CLOCK_MONOTONIC, which pprof cannot show as a date.
 */
function toPprof (model) {
  checkModel(model)
  const parse = frameParser()
  const strings = stringTable()
  const period = Math.round(1e9 / model.hz)
  const stacks = aggregate(model)
  const cpu = valueType(strings.id('cpu'), strings.id('nanoseconds'))
  const offCpu = stacks.some(isOffCpu)

  // One Location (and one Function) per distinct frame below the roots, ids
  // in name order.
  const frameNames = new Set()
  for (const s of stacks) for (let i = 1; i < s.frames.length; i++) frameNames.add(s.frames[i])
  const locationIds = new Map()
  for (const name of [...frameNames].sort(compareStrings)) locationIds.set(name, locationIds.size + 1)

  const out = new Writer()
  out.message(PROFILE.sampleType, valueType(strings.id('samples'), strings.id('count')))
  out.message(PROFILE.sampleType, cpu)
  if (offCpu) out.message(PROFILE.sampleType, valueType(strings.id('off_cpu'), strings.id('nanoseconds')))

  const threadKey = strings.id('thread')
  for (const s of stacks) {
    const w = new Writer()
    const ids = []
    for (let i = s.frames.length - 1; i >= 1; i--) ids.push(locationIds.get(s.frames[i])) // leaf first
    w.packed(SAMPLE.locationId, ids)
    const ns = exactProduct(s.count, period)
    w.packed(SAMPLE.value, !offCpu ? [s.count, ns] : isOffCpu(s) ? [s.count, 0, ns] : [s.count, ns, 0])
    const label = new Writer()
    label.uint(LABEL.key, threadKey)
    label.uint(LABEL.str, strings.id(s.frames[0]))
    w.message(SAMPLE.label, label)
    out.message(PROFILE.sample, w)
  }

  // A single mapping that says every location is already symbolized, so
  // pprof does not go looking for binaries. '[' marks it as no real file.
  const mapping = new Writer()
  mapping.uint(MAPPING.id, 1)
  mapping.uint(MAPPING.filename, strings.id('[kflame]'))
  mapping.bool(MAPPING.hasFunctions, true)
  mapping.bool(MAPPING.hasFilenames, true)
  mapping.bool(MAPPING.hasLineNumbers, true)
  out.message(PROFILE.mapping, mapping)

  const functions = []
  for (const [name, id] of locationIds) {
    const f = parse(name)
    // JS frames know where their function starts, not which line ran.
    const line = new Writer()
    line.uint(LINE.functionId, id)
    line.uint(LINE.line, f.lineNumber)
    line.uint(LINE.column, f.columnNumber)
    const location = new Writer()
    location.uint(LOCATION.id, id)
    location.uint(LOCATION.mappingId, 1)
    location.message(LOCATION.line, line)
    out.message(PROFILE.location, location)

    const fn = new Writer()
    fn.uint(FUNCTION.id, id)
    fn.uint(FUNCTION.name, strings.id(f.functionName))
    fn.uint(FUNCTION.systemName, strings.id(name)) // the frame as in the folded text
    fn.uint(FUNCTION.filename, strings.id(fileOf(f)))
    fn.uint(FUNCTION.startLine, f.lineNumber)
    functions.push(fn)
  }
  for (const fn of functions) out.message(PROFILE.function, fn)

  const comment = strings.id(`kflame, ${model.hz} Hz`)
  const durationNanos = int64(Math.max(0, Math.round((model.endTime - model.startTime) * 1000)))
  // Nanoseconds since the epoch pass 2^53: a BigInt, from whole µs.
  const timeNanos = typeof model.wallStart === 'number' && Number.isFinite(model.wallStart) && model.wallStart > 0
    ? BigInt(Math.round(model.wallStart * 1000)) * 1000n
    : 0
  // The string table goes last: every id above has been handed out by now.
  for (const s of strings.strings) out.string(PROFILE.stringTable, s)
  out.uint(PROFILE.timeNanos, timeNanos)
  out.uint(PROFILE.durationNanos, durationNanos)
  out.message(PROFILE.periodType, cpu)
  out.uint(PROFILE.period, period)
  out.packed(PROFILE.comment, [comment])
  return zlib.gzipSync(out.finish())
}

// A stack of off-CPU time: its frame under the root says so (a label may
// come between).
function isOffCpu (s) {
  for (let i = 1; i < s.frames.length && i < 8; i++) {
    if (s.frames[i] === '[off-cpu]' || s.frames[i] === '(idle)') return true
  }
  return false
}

module.exports = { toPprof, Writer }

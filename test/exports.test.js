'use strict'

// The export formats (cpuprofile, trace events, pprof) on hand-made models:
// structure each viewer relies on, exact flame-chart slices, pprof decoded
// by an independent reader (pprof-format), hostile names, and goldens.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const zlib = require('node:zlib')
const { Profile: PprofProfile } = require('pprof-format')
const { toCpuprofile, toTraceEvents, toPprof, modelFromFolded, parseFrame } = require('../lib/exports')
const { Writer } = require('../lib/exports/pprof')

const GOLDEN_DIR = path.join(__dirname, 'golden', 'exports')
const GOLDENS = ['two-threads', 'folded', 'hostile']
const UPDATE = process.env.KFLAME_UPDATE_GOLDENS === '1'

// A model as stored in JSON, with the typed arrays the exports get from stop().
function loadModel (name) {
  const m = JSON.parse(fs.readFileSync(path.join(GOLDEN_DIR, `${name}.model.json`), 'utf8'))
  if (m.samples) {
    m.samples = {
      line: Uint32Array.from(m.samples.line),
      time: Float64Array.from(m.samples.time),
      tid: Uint32Array.from(m.samples.tid)
    }
  }
  return m
}

function sampleCount (model) {
  return model.samples ? model.samples.line.length : model.stacks.reduce((n, s) => n + s.count, 0)
}

// pprof-format's classes, as plain JSON (numbers, not BigInts).
function decodePprof (buf) {
  const p = PprofProfile.decode(zlib.gunzipSync(buf))
  const num = (v) => Number(v)
  const vt = (v) => v && { type: num(v.type), unit: num(v.unit) }
  return {
    sampleType: p.sampleType.map(vt),
    sample: p.sample.map((s) => ({
      locationId: s.locationId.map(num),
      value: s.value.map(num),
      label: s.label.map((l) => ({ key: num(l.key), str: num(l.str), num: num(l.num), numUnit: num(l.numUnit) }))
    })),
    mapping: p.mapping.map((m) => ({
      id: num(m.id),
      memoryStart: num(m.memoryStart),
      memoryLimit: num(m.memoryLimit),
      fileOffset: num(m.fileOffset),
      filename: num(m.filename),
      buildId: num(m.buildId),
      hasFunctions: m.hasFunctions,
      hasFilenames: m.hasFilenames,
      hasLineNumbers: m.hasLineNumbers,
      hasInlineFrames: m.hasInlineFrames
    })),
    location: p.location.map((l) => ({
      id: num(l.id),
      mappingId: num(l.mappingId),
      address: num(l.address),
      line: l.line.map((x) => ({ functionId: num(x.functionId), line: num(x.line), column: num(x.column) })),
      isFolded: l.isFolded
    })),
    function: p.function.map((f) => ({
      id: num(f.id),
      name: num(f.name),
      systemName: num(f.systemName),
      filename: num(f.filename),
      startLine: num(f.startLine)
    })),
    stringTable: p.stringTable.strings.slice(),
    dropFrames: num(p.dropFrames),
    keepFrames: num(p.keepFrames),
    timeNanos: String(p.timeNanos), // may pass 2^53
    durationNanos: num(p.durationNanos),
    periodType: vt(p.periodType),
    period: num(p.period),
    comment: p.comment.map(num),
    defaultSampleType: num(p.defaultSampleType)
  }
}

// --- what each viewer relies on --------------------------------------------

function checkCpuprofile (t, profile, model) {
  const n = sampleCount(model)
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  t.equal(byId.size, profile.nodes.length, 'node ids are unique')
  t.equal(profile.nodes[0].id, 1, 'the first node is id 1')
  t.equal(profile.nodes[0].callFrame.functionName, '(root)', 'named (root)')
  const parents = new Map()
  const problems = []
  for (const node of profile.nodes) {
    const f = node.callFrame
    if (!(Number.isInteger(node.id) && node.id > 0)) problems.push(`id ${node.id}`)
    if (typeof f.functionName !== 'string' || typeof f.scriptId !== 'string' || typeof f.url !== 'string') problems.push(`callFrame types of ${node.id}`)
    if (!(Number.isInteger(f.lineNumber) && f.lineNumber >= -1 && Number.isInteger(f.columnNumber) && f.columnNumber >= -1)) {
      problems.push(`position of ${node.id}: lineNumber and columnNumber are 0-based or -1`)
    }
    for (const child of node.children) {
      if (!byId.has(child)) problems.push(`child ${child} of ${node.id} is missing`)
      if (parents.has(child)) problems.push(`child ${child} has two parents`)
      parents.set(child, node.id)
    }
  }
  t.same(problems, [], 'ids, call frames and children are well formed')
  t.equal(parents.size, profile.nodes.length - 1, 'every node but (root) is somebody\'s child')
  t.equal(profile.samples.length, n, 'every sample is listed')
  t.equal(profile.timeDeltas.length, n, 'one time delta per sample')
  t.ok(profile.samples.every((id) => byId.has(id)), 'samples reference nodes')
  t.equal(profile.nodes.reduce((s, node) => s + node.hitCount, 0), n, 'hitCounts add up to the samples')
  const hits = new Map()
  for (const id of profile.samples) hits.set(id, (hits.get(id) || 0) + 1)
  t.ok(profile.nodes.every((node) => node.hitCount === (hits.get(node.id) || 0)), 'each hitCount is its samples')
  t.ok(profile.timeDeltas.every((d) => Number.isInteger(d) && d >= 0), 'time deltas are whole and non-negative')
  const sum = profile.timeDeltas.reduce((a, b) => a + b, 0)
  if (n > 0) {
    const last = model.samples
      ? Math.round(Math.max(...model.samples.time))
      : Math.round(model.startTime + (n - 1) * 1e6 / model.hz)
    t.equal(profile.startTime + sum, last, 'time deltas add up to the last sample')
  }
  t.ok(profile.startTime <= profile.endTime, 'startTime <= endTime')
  t.ok(profile.startTime + sum <= profile.endTime, 'samples end by endTime')
  // Thread roots hang off (root), one per thread.
  const roots = new Set(model.stacks.filter((s) => s.count > 0).map((s) => s.frames[0]))
  const rootChildren = profile.nodes[0].children.map((id) => byId.get(id).callFrame.functionName)
  t.same(new Set(rootChildren), roots, 'the threads are the children of (root)')
  return byId
}

// The X slices of each thread nest: a slice starting inside another ends
// inside it too.
function checkTraceEvents (t, trace, model) {
  t.equal(trace.displayTimeUnit, 'ms')
  t.type(trace.otherData, 'object')
  t.ok(Array.isArray(trace.traceEvents))
  const named = new Map()
  const slices = new Map()
  const problems = []
  for (const e of trace.traceEvents) {
    if (!(e.ph === 'X' || e.ph === 'M')) problems.push(`phase ${e.ph}`)
    if (!(Number.isInteger(e.pid) && Number.isInteger(e.tid))) problems.push(`pid/tid of ${JSON.stringify(e)}`)
    if (e.ph === 'M') {
      if (e.name === 'thread_name') named.set(e.tid, e.args.name)
      continue
    }
    if (typeof e.name !== 'string') problems.push(`name of ${JSON.stringify(e)}`)
    if (!['js', 'jit', 'native', 'kernel'].includes(e.cat)) problems.push(`category ${e.cat}`)
    if (!(e.ts >= 0 && e.dur > 0 && Number.isInteger(e.ts) && Number.isInteger(e.dur))) problems.push(`ts/dur of ${JSON.stringify(e)}`)
    if (!slices.has(e.tid)) slices.set(e.tid, [])
    slices.get(e.tid).push(e)
  }
  t.same(problems, [], 'every event well formed, X events with whole ts >= 0 and dur > 0')
  for (const [tid, list] of slices) {
    t.ok(named.has(tid), `thread ${tid} has a thread_name`)
    const sorted = list.slice().sort((a, b) => a.ts - b.ts || b.dur - a.dur)
    const open = []
    let nested = true
    for (const e of sorted) {
      while (open.length && open[open.length - 1] <= e.ts) open.pop()
      if (open.length && e.ts + e.dur > open[open.length - 1]) nested = false
      open.push(e.ts + e.dur)
    }
    t.ok(nested, `slices of thread ${tid} nest`)
  }
  const roots = new Set(model.stacks.filter((s) => s.count > 0).map((s) => s.frames[0]))
  t.same(new Set(named.values()), roots, 'one thread_name per thread root')
}

function checkPprof (t, buf, model) {
  t.ok(Buffer.isBuffer(buf), 'a Buffer')
  t.equal(buf[0], 0x1f, 'gzip')
  t.equal(buf[1], 0x8b, 'gzip')
  const p = decodePprof(buf)
  const str = (i) => p.stringTable[i]
  t.equal(p.stringTable[0], '', 'string_table[0] is empty')
  t.equal(new Set(p.stringTable).size, p.stringTable.length, 'no string twice')
  t.same(p.sampleType.map((v) => [str(v.type), str(v.unit)]), [['samples', 'count'], ['cpu', 'nanoseconds']])
  t.same([str(p.periodType.type), str(p.periodType.unit)], ['cpu', 'nanoseconds'])
  const period = Math.round(1e9 / model.hz)
  t.equal(p.period, period, 'period is 1e9/hz')
  const n = sampleCount(model)
  t.equal(p.sample.reduce((s, x) => s + x.value[0], 0), n, 'sample counts add up')
  t.equal(p.sample.reduce((s, x) => s + x.value[1], 0), n * period, 'cpu ns add up')

  const fns = new Map(p.function.map((f) => [f.id, f]))
  const locs = new Map(p.location.map((l) => [l.id, l]))
  t.equal(locs.size, p.location.length, 'location ids are unique')
  t.equal(fns.size, p.function.length, 'function ids are unique')
  const ids = new Set(p.mapping.map((m) => m.id))
  t.ok(p.location.every((l) => ids.has(l.mappingId)), 'location mappings exist')
  t.ok(p.location.every((l) => l.line.length === 1 && fns.has(l.line[0].functionId)), 'one line per location, its function exists')
  // Each sample, read back: the thread label and the frames leaf first
  // give back the model's stacks with their counts.
  const expected = new Map()
  const counts = new Array(model.stacks.length).fill(0)
  if (model.samples) for (const line of model.samples.line) counts[line]++
  else model.stacks.forEach((s, i) => { counts[i] = s.count })
  model.stacks.forEach((s, i) => {
    if (!counts[i]) return
    const key = JSON.stringify(s.frames)
    expected.set(key, (expected.get(key) || 0) + counts[i])
  })
  const got = new Map()
  t.ok(p.sample.every((s) => s.label.length === 1 && str(s.label[0].key) === 'thread'), 'each sample has one label: thread')
  t.ok(p.sample.every((s) => s.value[1] === s.value[0] * period), 'cpu ns = count * period')
  for (const s of p.sample) {
    const frames = s.locationId.map((id) => str(fns.get(locs.get(id).line[0].functionId).systemName)).reverse()
    const key = JSON.stringify([str(s.label[0].str), ...frames])
    if (got.has(key)) t.fail(`two samples for one stack ${key}`)
    got.set(key, s.value[0])
  }
  t.same(got, expected, 'stacks and counts come back (thread label + leaf-first locations)')
  return p
}

// --- tests -------------------------------------------------------------------

t.test('parseFrame takes kflame\'s frame names apart', async (t) => {
  const cases = [
    ['alpha /app/a.js:14:16_[j]', { functionName: 'alpha', url: '/app/a.js', lineNumber: 14, columnNumber: 16, kind: 'js' }],
    ['(anonymous) node:internal/x:3:5_[j]', { functionName: '(anonymous)', url: 'node:internal/x', lineNumber: 3, columnNumber: 5, kind: 'js' }],
    ['~alpha /app/a.js:14:16_[j]', { functionName: '~alpha', kind: 'js', tier: '~' }],
    ['*alpha /app/a.js:14:16_[j]', { functionName: '*alpha', kind: 'js', tier: '*' }],
    ['get foo /home/me/My App/a.js:1:2_[j]', { functionName: 'get foo', url: '/home/me/My App/a.js', lineNumber: 1 }],
    ['get foo a.js:1:2_[j]', { functionName: 'get foo', url: 'a.js' }],
    ['evaled :3:5_[j]', { functionName: 'evaled', url: '', lineNumber: 3, columnNumber: 5, kind: 'js' }],
    ['x evalmachine.<anonymous>:1:1_[j]', { functionName: 'x', url: 'evalmachine.<anonymous>' }],
    ['x [eval]:1:1_[j]', { functionName: 'x', url: '[eval]' }],
    ['Builtin:JSEntry_[j]', { functionName: 'Builtin:JSEntry', url: '', lineNumber: 0, columnNumber: 0, kind: 'jit' }],
    ['BytecodeHandler:Ldar_[j]', { functionName: 'BytecodeHandler:Ldar', kind: 'jit' }],
    ['RegExp:/a b:1:2/_[j]', { functionName: 'RegExp:/a b:1:2/', kind: 'jit' }],
    ['(interpreted)_[j]', { functionName: '(interpreted)', kind: 'jit' }],
    ['[jit]_[j]', { functionName: '[jit]', kind: 'jit' }],
    ['do_syscall_64_[k]', { functionName: 'do_syscall_64', url: '', kind: 'kernel' }],
    ['[kernel]_[k]', { functionName: '[kernel]', kind: 'kernel' }],
    ['node::Start(int, char**)', { functionName: 'node::Start(int, char**)', url: '', kind: 'native' }],
    ['malloc', { functionName: 'malloc', kind: 'native' }],
    ['libc.so.6+0x891f5', { functionName: 'libc.so.6+0x891f5', url: 'libc.so.6', kind: 'native' }],
    ['[libc.so.6]', { functionName: '[libc.so.6]', url: 'libc.so.6', kind: 'native' }],
    ['[node]', { functionName: '[node]', url: 'node', kind: 'native' }],
    ['[unknown]', { functionName: '[unknown]', url: '', kind: 'native' }],
    ['[unknown]', { functionName: '[unknown]', url: '', lineNumber: 0, kind: 'native' }],
    ['Builtins_JSEntry', { kind: 'native' }],
    ['/app/a.js:1:2_[j]', { functionName: '/app/a.js:1:2', kind: 'jit' }] // no name: not taken for JS
  ]
  for (const [name, want] of cases) t.match(parseFrame(name), want, name)
  t.match(parseFrame('libuv-worker-12', true), { functionName: 'libuv-worker-12', kind: 'root', url: '' })
  t.throws(() => parseFrame(42), { code: 'KFLAME_ERR_INVALID_ARG' })
})

t.test('modelFromFolded parses, merges repeats and counts bad lines', async (t) => {
  const text = [
    'main;a;b 3',
    'main;a;b 2', // same stack again: adds up
    'main;a c d;e 1\r', // spaces in names, CRLF
    '',
    '   ',
    'no count here',
    'main;a 1.5', // not a whole number
    'main;;a 4', // empty frame
    ' 5', // no stack
    'main;a -1',
    'main;zero 0',
    'worker-thread-9;x 7'
  ].join('\n')
  const { model, badLines } = modelFromFolded(text, 100)
  t.equal(badLines, 5)
  t.same(model.stacks, [
    { frames: ['main', 'a', 'b'], count: 5 },
    { frames: ['main', 'a c d', 'e'], count: 1 },
    { frames: ['main', 'zero'], count: 0 },
    { frames: ['worker-thread-9', 'x'], count: 7 }
  ])
  t.equal(model.samples, null)
  t.equal(model.hz, 100)
  t.equal(model.startTime, 0)
  t.equal(model.endTime, 13 * 1e6 / 100)
  t.same(modelFromFolded(Buffer.from('main;a 2\n'), 99).model.stacks, [{ frames: ['main', 'a'], count: 2 }], 'a Buffer')
  t.equal(modelFromFolded('main;a 2\n').model.hz, 99, 'hz defaults to 99')
  t.same(modelFromFolded('').model.stacks, [])
  t.throws(() => modelFromFolded(42), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => modelFromFolded('a 1', 0), { code: 'KFLAME_ERR_OUT_OF_RANGE' })
  t.throws(() => modelFromFolded('a 1', '99'), { code: 'KFLAME_ERR_INVALID_ARG' })
})

t.test('cpuprofile: structure, times and names', async (t) => {
  const model = loadModel('two-threads')
  const profile = toCpuprofile(model)
  const byId = checkCpuprofile(t, profile, model)
  const frames = profile.nodes.map((n) => n.callFrame)
  t.match(frames.find((f) => f.functionName === 'alpha'), { url: '/app/work.js', lineNumber: 13, columnNumber: 15 }, '0-based position')
  t.match(frames.find((f) => f.url === 'node:internal/timers'), { functionName: '', lineNumber: 2 }, 'anonymous is nameless, as V8 writes it')
  t.match(frames.find((f) => f.functionName === 'ksys_write'), { url: '', lineNumber: -1, columnNumber: -1, scriptId: '0' })
  const alpha = frames.find((f) => f.functionName === 'alpha')
  const beta = frames.find((f) => f.functionName === 'beta')
  t.equal(alpha.scriptId, beta.scriptId, 'one script id per URL')
  t.not(alpha.scriptId, '0')
  t.equal(profile.startTime, Math.round(model.startTime))
  t.equal(profile.endTime, Math.round(model.endTime))
  t.equal(profile.timeDeltas[0], Math.round(model.samples.time[0]) - profile.startTime)
  // Two threads under (root), not merged.
  t.equal(byId.get(1).children.length, 2)
  t.same(toCpuprofile(model), profile, 'deterministic')
})

t.test('cpuprofile: samples out of order, before startTime, stacks never sampled', async (t) => {
  const model = {
    stacks: [{ frames: ['main', 'a'], count: 1 }, { frames: ['main', 'b'], count: 1 }, { frames: ['main', 'never'], count: 0 }],
    samples: { line: Uint32Array.of(1, 0), time: Float64Array.of(300, 100), tid: Uint32Array.of(1, 1) },
    hz: 100,
    startTime: 200,
    endTime: 250
  }
  const profile = toCpuprofile(model)
  checkCpuprofile(t, profile, model)
  t.equal(profile.startTime, 100, 'startTime moves back to the first sample')
  t.equal(profile.endTime, 300, 'endTime moves on to the last')
  t.same(profile.timeDeltas, [0, 200])
  const names = profile.nodes.map((n) => n.callFrame.functionName)
  t.same(names, ['(root)', 'main', 'a', 'b'], 'depth first, by name; unsampled stacks left out')
  t.same(profile.samples, [3, 4], 'in time order')
})

t.test('cpuprofile from folded text: synthesised times', async (t) => {
  const model = loadModel('folded')
  const profile = toCpuprofile(model)
  checkCpuprofile(t, profile, model)
  const interval = 1e6 / model.hz
  t.ok(profile.timeDeltas.slice(1).every((d) => Math.abs(d - interval) <= 1), 'one interval apart')
  t.equal(profile.timeDeltas[0], 0, 'the first sample at startTime')
})

t.test('trace events: the slices of a known sample sequence', async (t) => {
  // hz 100: 10,000 µs between samples, a sample lasts at most 20,000 µs.
  const model = {
    stacks: [
      { frames: ['main', 'a', 'b'], count: 3 },
      { frames: ['main', 'a', 'c'], count: 1 },
      { frames: ['main', 'd'], count: 1 },
      { frames: ['libuv-worker-200', 'uv_work', 'x'], count: 2 }
    ],
    samples: {
      line: Uint32Array.of(0, 3, 0, 3, 1, 2, 0),
      time: Float64Array.of(1000, 5000, 11000, 15000, 21000, 31000, 100000),
      tid: Uint32Array.of(100, 200, 100, 200, 100, 100, 100)
    },
    hz: 100,
    startTime: 0,
    endTime: 120000,
    pid: 100,
    processName: 'my-app'
  }
  const trace = toTraceEvents(model)
  checkTraceEvents(t, trace, model)
  const slices = trace.traceEvents.filter((e) => e.ph === 'X').map((e) => [e.tid, e.name, e.ts, e.ts + e.dur])
  t.same(slices, [
    [100, 'a', 1000, 31000], // a runs through 4 samples: one slice
    [100, 'b', 1000, 21000],
    [100, 'c', 21000, 31000],
    [100, 'd', 31000, 51000], // next main sample 69 ms later: capped at 2 intervals
    [100, 'a', 100000, 110000], // the last sample lasts one interval
    [100, 'b', 100000, 110000],
    [200, 'uv_work', 5000, 25000],
    [200, 'x', 5000, 25000]
  ])
  const meta = trace.traceEvents.filter((e) => e.ph === 'M')
  t.same(meta.filter((e) => e.name === 'thread_name').map((e) => [e.tid, e.args.name]), [[100, 'main'], [200, 'libuv-worker-200']])
  t.ok(meta.every((e) => e.pid === 100), 'pid from the model')
  t.equal(meta.find((e) => e.name === 'process_name').args.name, 'my-app')
  t.match(trace.otherData, { source: 'kflame', hz: 100, samples: 7, threads: 2, timing: /^measured/ })
})

t.test('trace events: two threads with measured times', async (t) => {
  const model = loadModel('two-threads')
  const trace = toTraceEvents(model)
  checkTraceEvents(t, trace, model)
  const tids = new Set(trace.traceEvents.filter((e) => e.ph === 'X').map((e) => e.tid))
  t.same([...tids].sort(), [4100, 4117])
  const alpha = trace.traceEvents.find((e) => e.name === 'alpha')
  t.same(alpha.args, { url: '/app/work.js', line: 14, column: 16 })
  t.equal(alpha.cat, 'js')
  t.equal(trace.traceEvents.find((e) => e.name === 'ksys_write').cat, 'kernel')
  t.equal(trace.traceEvents.find((e) => e.name === 'Builtin:JSEntry').cat, 'jit')
  t.equal(trace.traceEvents.find((e) => e.name === 'worker').cat, 'native')
  t.same(toTraceEvents(model), trace, 'deterministic')
})

t.test('trace events from folded text: back to back, threads numbered from their names', async (t) => {
  const model = loadModel('folded')
  const trace = toTraceEvents(model)
  checkTraceEvents(t, trace, model)
  const names = new Map(trace.traceEvents.filter((e) => e.name === 'thread_name').map((e) => [e.args.name, e.tid]))
  t.equal(names.get('main'), 1, 'main is the pid')
  t.equal(names.get('v8-worker-9'), 9, 'the tid in the name')
  t.equal(names.get('worker-thread-77'), 77)
  t.ok(names.get('node') > 9001, 'a name without a tid gets a number of its own')
  t.equal(new Set(names.values()).size, names.size, 'distinct')
  t.match(trace.otherData.timing, /^synthesised/)
  // The fib stacks (5 then 2 samples) run back to back: one outer fib slice
  // of 7 samples with an inner one of 5.
  const interval = 1e6 / model.hz
  const fib = trace.traceEvents.filter((e) => e.name === 'fib')
  t.equal(fib.length, 2)
  t.ok(Math.abs(fib[0].dur - 7 * interval) <= 1, `outer fib lasts 7 samples (${fib[0].dur})`)
  t.ok(Math.abs(fib[1].dur - 5 * interval) <= 1, `inner fib lasts 5 samples (${fib[1].dur})`)
  // Main's total time is its samples, not more: synthesised samples last one interval.
  const main = trace.traceEvents.filter((e) => e.ph === 'X' && e.tid === 1 && e.name === 'node::Start(int, char**)')
  t.ok(Math.abs(main.reduce((s, e) => s + e.dur, 0) - 10 * interval) <= 1, 'main: 10 samples long')
})

t.test('pprof: decoded by pprof-format', async (t) => {
  const model = loadModel('two-threads')
  const buf = toPprof(model)
  const p = checkPprof(t, buf, model)
  const str = (i) => p.stringTable[i]
  const fn = (name) => p.function.find((f) => str(f.name) === name)
  t.match(fn('alpha'), { startLine: 14 })
  t.equal(str(fn('alpha').filename), '/app/work.js')
  t.equal(str(fn('alpha').systemName), 'alpha /app/work.js:14:16_[j]')
  t.equal(str(fn('ksys_write').filename), '[kernel.kallsyms]')
  t.equal(str(fn('libcrypto.so.3+0x1a2b').filename), 'libcrypto.so.3')
  const alphaLoc = p.location.find((l) => l.line[0].functionId === fn('alpha').id)
  t.same(alphaLoc.line[0], { functionId: fn('alpha').id, line: 14, column: 16 })
  t.notOk(p.function.some((f) => ['main', 'libuv-worker-4117'].includes(str(f.name))), 'threads are not functions')
  t.same(new Set(p.sample.map((s) => str(s.label[0].str))), new Set(['main', 'libuv-worker-4117']))
  // Leaf first: the first location of alpha's own stack is alpha.
  const own = p.sample.find((s) => s.locationId[0] === alphaLoc.id)
  t.ok(own, 'a sample whose leaf is alpha')
  t.equal(str(fn('node::Start(int, char**)').name), 'node::Start(int, char**)')
  t.equal(own.locationId[own.locationId.length - 1], p.location.find((l) => l.line[0].functionId === fn('node::Start(int, char**)').id).id, 'the outermost frame last')
  t.equal(p.durationNanos, Math.round((model.endTime - model.startTime) * 1000))
  t.equal(p.timeNanos, '0', 'no wall clock in the model: no time')
  t.equal(p.mapping.length, 1)
  t.match(p.mapping[0], { id: 1, hasFunctions: true, hasFilenames: true, hasLineNumbers: true })
  t.same(toPprof(model), buf, 'deterministic bytes')

  const wall = decodePprof(toPprof({ ...model, wallStart: 1700000000123.456 }))
  t.equal(wall.timeNanos, '1700000000123456000', 'wallStart (ms) becomes time_nanos past 2^53')
})

t.test('pprof: from folded text, stacks repeated in the model add up', async (t) => {
  const model = loadModel('folded')
  checkPprof(t, toPprof(model), model)
  const twice = { ...model, stacks: model.stacks.concat(model.stacks) }
  const p = checkPprof(t, toPprof(twice), twice)
  t.equal(p.sample.length, model.stacks.filter((s) => s.count > 0).length, 'repeats merge')
})

t.test('pprof: the hand-written protobuf writer', async (t) => {
  const bytes = (fn) => {
    const w = new Writer()
    fn(w)
    return [...w.finish()]
  }
  t.same(bytes((w) => w.varint(0)), [0])
  t.same(bytes((w) => w.varint(127)), [127])
  t.same(bytes((w) => w.varint(128)), [0x80, 1])
  t.same(bytes((w) => w.varint(300)), [0xac, 0x02])
  t.same(bytes((w) => w.varint(2 ** 53 - 1)), [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f])
  t.same(bytes((w) => w.varint(-1)), [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])
  t.same(bytes((w) => w.varint(2n ** 63n)), [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01])
  t.throws(() => bytes((w) => w.varint(0.5)), RangeError)
  t.same(bytes((w) => w.uint(1, 0)), [], 'proto3 defaults are left out')
  t.same(bytes((w) => w.uint(2, 150)), [0x10, 0x96, 0x01])
  t.same(bytes((w) => w.string(6, '')), [0x32, 0x00], 'an empty repeated string is written')
  t.same(bytes((w) => w.packed(1, [3, 270])), [0x0a, 0x03, 0x03, 0x8e, 0x02])
  t.same(bytes((w) => w.packed(1, [])), [])
  // Big enough to grow the buffer several times.
  const big = 'x'.repeat(100000)
  const b = bytes((w) => w.string(1, big))
  t.equal(b.length, 1 + 3 + 100000)
})

t.test('hostile names survive every format', async (t) => {
  const model = loadModel('hostile')
  const long = model.stacks[0].frames[3]
  t.ok(long.length > 5000, 'a very long name')

  const profile = JSON.parse(JSON.stringify(toCpuprofile(model)))
  checkCpuprofile(t, profile, model)
  const names = profile.nodes.map((n) => n.callFrame.functionName)
  t.ok(names.includes('<script>alert("x&y")</script>'), 'markup kept as text')
  t.ok(names.includes('λ函数😀'), 'unicode kept')
  t.ok(names.includes('e\u0301 مرحبا \u2028\u2029 back\\slash'), 'combining marks, RTL, line separators kept')
  t.ok(names.includes('worker-thread-77 <"&\'>'), 'hostile thread name')
  t.equal(profile.nodes.find((n) => n.callFrame.functionName === 'λ函数😀').callFrame.url, '/srv/ünï cödé/日本.js')

  const trace = JSON.parse(JSON.stringify(toTraceEvents(model)))
  checkTraceEvents(t, trace, model)
  t.ok(trace.traceEvents.some((e) => e.name === long.slice(0, -' /app/long.js:1:1_[j]'.length)), 'long JS name')

  const p = checkPprof(t, toPprof(model), model)
  t.ok(p.stringTable.includes('a;b with semicolon'), 'a ; inside a name stays one frame')
  t.ok(p.stringTable.includes('\t\u0000control'), 'control characters kept byte for byte')

  // A lone surrogate is not valid UTF-8: written as U+FFFD, never a throw.
  const lone = { stacks: [{ frames: ['main', 'bad\ud800'], count: 1 }], samples: null, hz: 99, startTime: 0, endTime: 1e6 / 99 }
  t.ok(decodePprof(toPprof(lone)).stringTable.includes('bad\ufffd'))
  t.doesNotThrow(() => JSON.stringify(toTraceEvents(lone)))
  t.doesNotThrow(() => JSON.stringify(toCpuprofile(lone)))

  // Deep stacks: no recursion limits.
  const deep = { stacks: [{ frames: ['main', ...Array.from({ length: 20000 }, (_, i) => `f${i}`)], count: 2 }], samples: null, hz: 99, startTime: 0, endTime: 2e6 / 99 }
  const deepProfile = toCpuprofile(deep)
  t.equal(deepProfile.nodes.length, 20002)
  checkTraceEvents(t, toTraceEvents(deep), deep)
  t.equal(decodePprof(toPprof(deep)).sample[0].locationId.length, 20000)
})

t.test('empty and invalid models', async (t) => {
  const empty = { stacks: [], samples: null, hz: 99, startTime: 0, endTime: 0 }
  t.same(toCpuprofile(empty), {
    nodes: [{ id: 1, callFrame: { functionName: '(root)', scriptId: '0', url: '', lineNumber: -1, columnNumber: -1 }, hitCount: 0, children: [] }],
    startTime: 0,
    endTime: 0,
    samples: [],
    timeDeltas: []
  })
  t.same(toTraceEvents(empty).traceEvents.filter((e) => e.ph === 'X'), [])
  t.same(decodePprof(toPprof(empty)).sample, [])

  const good = { stacks: [{ frames: ['main'], count: 1 }], samples: null, hz: 99, startTime: 0, endTime: 1 }
  const bad = [
    null,
    {},
    { ...good, stacks: null },
    { ...good, hz: 0 },
    { ...good, hz: Infinity },
    { ...good, startTime: undefined },
    { ...good, stacks: [{ frames: [], count: 1 }] },
    { ...good, stacks: [{ frames: ['main', 3], count: 1 }] },
    { ...good, stacks: [{ frames: ['main'], count: -1 }] },
    { ...good, stacks: [{ frames: ['main'], count: 1.5 }] },
    { ...good, samples: { line: [0], time: [1] } },
    { ...good, samples: { line: [1], time: [1], tid: [1] } },
    { ...good, samples: { line: [0], time: [NaN], tid: [1] } }
  ]
  for (const model of bad) {
    for (const fn of [toCpuprofile, toTraceEvents, toPprof]) {
      t.throws(() => fn(model), { code: 'KFLAME_ERR_INVALID_ARG' }, `${fn.name} refuses ${JSON.stringify(model)}`)
    }
  }
  // Counts too large to lay out sample by sample: refused, not out of memory.
  // pprof needs no timeline and takes them.
  const huge = { stacks: [{ frames: ['main', 'a'], count: 1e12 }], samples: null, hz: 99, startTime: 0, endTime: 1e12 * 1e6 / 99 }
  t.throws(() => toCpuprofile(huge), { code: 'KFLAME_ERR_OUT_OF_RANGE' })
  t.equal(decodePprof(toPprof(huge)).sample[0].value[0], 1e12)
  const slices = toTraceEvents(huge).traceEvents.filter((e) => e.ph === 'X')
  t.equal(slices.length, 1, 'trace events lay a run of samples out as one slice')
})

t.test('goldens', async (t) => {
  for (const name of GOLDENS) {
    t.test(name, async (t) => {
      const model = loadModel(name)
      const outputs = {
        cpuprofile: toCpuprofile(model),
        'trace.json': toTraceEvents(model),
        'pprof.json': decodePprof(toPprof(model))
      }
      for (const [ext, value] of Object.entries(outputs)) {
        const file = path.join(GOLDEN_DIR, `${name}.${ext}`)
        const text = JSON.stringify(value, null, 1) + '\n'
        if (UPDATE) fs.writeFileSync(file, text)
        if (!fs.existsSync(file)) {
          t.fail(`${path.relative(process.cwd(), file)} is missing: run with KFLAME_UPDATE_GOLDENS=1 to write it`)
          continue
        }
        t.same(JSON.parse(text), JSON.parse(fs.readFileSync(file, 'utf8')), `${name}.${ext} matches its golden`)
      }
    })
  }
})

t.test('a real profile exports in every format, every sample counted', async (t) => {
  const kflame = require('..')
  const { Worker } = require('node:worker_threads')
  kflame.start({ hz: 999 })
  const worker = new Worker('const e = Date.now() + 150; while (Date.now() < e);', { eval: true })
  const end = Date.now() + 200
  while (Date.now() < end) JSON.parse(JSON.stringify({ a: [1, 2, 3] }))
  await new Promise((resolve) => worker.on('exit', resolve))
  const profile = kflame.stop()
  const n = profile.stats.samples
  t.ok(n > 100, `${n} samples`)

  const cp = profile.cpuprofile()
  t.equal(cp.samples.length, n, 'cpuprofile: one entry per sample')
  t.equal(cp.nodes.reduce((sum, node) => sum + node.hitCount, 0), n)
  t.ok(cp.startTime <= cp.endTime)
  t.ok(cp.nodes.some((node) => node.callFrame.url.endsWith('exports.test.js')), 'JS frames carry their url')

  const trace = profile.traceEvents()
  const names = trace.traceEvents.filter((e) => e.name === 'thread_name').map((e) => e.args.name)
  t.ok(names.includes('main') && names.some((name) => /^worker-thread-\d+$/.test(name)), `threads: ${names}`)

  const pprof = decodePprof(profile.pprof())
  t.equal(pprof.sample.reduce((sum, s) => sum + Number(s.value[0]), 0), n, 'pprof: every sample counted')

  const folded = kflame.fromFolded(profile.folded, { hz: 999 })
  t.equal(decodePprof(folded.pprof()).sample.reduce((sum, s) => sum + Number(s.value[0]), 0), n, 'from folded text too')
  t.equal(folded.cpuprofile().samples.length, n)
})

// test/fixtures/frame-kinds.txt, which test/c/test_svg.c reads too: the
// exports call a JIT frame 'jit' exactly when the SVG colours it as V8's code
// (one list, src/render/framekinds.json).
t.test('parseFrame and the SVG agree on which JIT frames are V8\'s own code', async (t) => {
  const lines = fs.readFileSync(path.join(__dirname, 'fixtures', 'frame-kinds.txt'), 'utf8')
    .split('\n').filter((l) => l && !l.startsWith('#'))
  t.ok(lines.length >= 20)
  for (const line of lines) {
    const kind = line.slice(0, line.indexOf(' '))
    const name = line.slice(kind.length + 1)
    t.equal(parseFrame(name).kind, kind, name)
  }
})

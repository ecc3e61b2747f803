'use strict'

// How right the profiles are, kflame against V8's CPU profiler (inspector,
// in-process, 1 ms) and `perf record -g` with node's --perf-basic-prof, in one
// run. Each trial is a fresh node process; tools alternate (A B C, A B C, ...).
//
//   split   three JS functions with a known split of the main thread's CPU
//           time (about 50/30/20: integer arithmetic; allocation and a sort
//           with a JS comparator; strings, JSON and a regex). The truth is
//           measured inside the process: the thread's CPU time
//           (clock_gettime(CLOCK_THREAD_CPUTIME_ID), ns) around every call. A tool's
//           share of a function is the share of samples with that function
//           on the stack among samples with any of the three; the error is
//           the largest gap, in points, to the truth. Shares are pooled over
//           the rounds (and the per-round errors reported too). At 99 Hz a
//           round has few hundred samples: the binomial noise (1 sd) of the
//           pooled shares is printed next to them, so an error can be read
//           against what sampling alone explains. "Left on the caller" is
//           the share of samples whose innermost JS function is the driver:
//           a split function inlined into it, or skipped by a frame-pointer
//           walk from a leaf builtin that builds no frame.
//   names   a mixed workload (JSON, regex, crypto, recursion, closures,
//           classes, getters, a `new Function`): among samples with any JS or
//           JIT frame, the share with at least one named JS function frame
//           ("name file:line:col"), the share with an unnamed JIT frame
//           ([jit], or [unknown] inside JS code), the mean stack depth, the
//           mean number of named JS function frames and of "(interpreted)"
//           frames (functions compiled before --interpreted-frames-native-
//           stack was on, which kflame cannot name). perf's stacks are folded
//           here from `perf script` (bench/common.js: foldPerfScript), named
//           as kflame names them. The inspector's nodes are always named and
//           hold JS only: its depth is JS frames.
//
// The goals (plan 5) are named JS frames in >= 98% of JS samples and shares
// within 3 points. The workloads are not tuned to meet them.
//
//   node bench/accuracy.js [--quick] [--rounds N] [--seconds S] [--periodic]
//     [--tools kflame-99,kflame-999,kflame-timer-99,kflame-timer-999,v8-inspector,perf-99,perf-999]
//     [--json bench/results/accuracy.json]
//
// kflame-timer-* is kflame's timer sampler (start({ mode: 'timer' })), the
// one that runs where perf_event_open is refused.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const {
  median, mulberry32, startInspectorProfiler, machineNotes, machineLine, writeResults, option, perfCheck, perfRecordArgv,
  perfScript, foldPerfScript, foldedToMap
} = require('./common')

// In a kflame child, kflame loads first, as an app would load it (node -r
// kflame/register): code compiled from then on, this file's functions too, gets
// interpreted frames of its own (--interpreted-frames-native-stack).
if (process.argv[2] === '--child' && (process.argv[4] || '').startsWith('kflame-')) require('..')

const ALL_TOOLS = ['kflame-99', 'kflame-999', 'kflame-timer-99', 'kflame-timer-999', 'v8-inspector', 'perf-99', 'perf-999']
// Naming does not depend on the rate: the names part runs each tool once, at its
// finest rate.
const NAME_TOOLS = ['kflame-999', 'kflame-timer-999', 'v8-inspector', 'perf-999']
const MARK = 'KFLAME_BENCH_RESULT '
const FILE = path.basename(__filename)

// "kflame-999" -> { hz: 999 }; "kflame-timer-99" -> { hz: 99, mode: 'timer' }
function kflameStartOptions (tool) {
  const m = /^kflame-(?:(timer)-)?(\d+)$/.exec(tool)
  if (!m) throw new Error(`not a kflame tool: ${tool}`)
  return m[1] ? { hz: Number(m[2]), mode: m[1] } : { hz: Number(m[2]) }
}

// --- the split workload ---------------------------------------------------------

// Exact, through kflame's binding (loaded in every tool's process; loading
// it starts nothing): schedstat moves only at the scheduler's tick (4 ms
// here) while the thread runs, which biased the truth by 1-3 points.
const { threadCpuNs } = require('../lib/binding')

// Each runs for about `ms` of wall time; what counts is the CPU time the
// thread spent inside, measured by the caller.
function splitCrunch (ms) {
  const end = performance.now() + ms
  let x = 1
  while (performance.now() < end) {
    for (let i = 0; i < 2000; i++) x = (Math.imul(x, 1103515245) + 12345) | 0
  }
  return x
}

function splitBuild (ms) {
  const end = performance.now() + ms
  let n = 0
  while (performance.now() < end) {
    const rows = []
    for (let i = 0; i < 200; i++) rows.push({ id: i, key: (i * 7919) % 1009, tags: [i, i + 1] })
    rows.sort((a, b) => a.key - b.key)
    n += rows[0].key
  }
  return n
}

function splitText (ms) {
  const end = performance.now() + ms
  let n = 0
  while (performance.now() < end) {
    const s = JSON.stringify({ user: 'u' + n, items: ['a', 'b', 'c'], at: n })
    n += JSON.parse(s).items.length + s.replace(/[aeiou]/g, '_').length
  }
  return n
}

const SPLIT = [['splitCrunch', splitCrunch, 10], ['splitBuild', splitBuild, 6], ['splitText', splitText, 4]]

// Runs the three in turn for `ms`; returns each one's thread CPU time (ms).
// Each call lasts its mean time x 0.5-1.5, from a seeded PRNG: a strictly
// periodic cycle (10 + 6 + 4 ms, a little over 20 ms with the bookkeeping)
// locks in phase with a 10.1 ms (99 Hz) sampling period, and then every
// tool at 99 Hz, kflame and perf alike, is off by 5-20 points from aliasing,
// not from how it samples or unwinds. --periodic keeps the fixed cycle, to
// show that.
function runSplit (ms, periodic) {
  const rand = mulberry32(0x5eed)
  const truth = Object.fromEntries(SPLIT.map(([name]) => [name, 0]))
  const end = performance.now() + ms
  while (performance.now() < end) {
    for (const [name, fn, mean] of SPLIT) {
      const t = threadCpuNs()
      fn(periodic ? mean : mean * (0.5 + rand()))
      truth[name] += (threadCpuNs() - t) / 1e6
    }
  }
  return truth
}

// --- the mixed workload ---------------------------------------------------------

class Shape {
  constructor (w, h) { this.w = w; this.h = h }
  area () { return this.w * this.h }
  get perimeter () { return 2 * (this.w + this.h) }
}

class Square extends Shape {
  constructor (s) { super(s, s) }
  area () { return super.area() + 0 }
}

function makeCounter (step) {
  let count = 0
  return (x) => { count += x * step; return count }
}

function walk (node) {
  return node ? 1 + walk(node.left) + walk(node.right) : 0
}

function buildTree (depth) {
  return depth === 0 ? null : { left: buildTree(depth - 1), right: buildTree(depth - 1) }
}

function mixedJson (doc) {
  return JSON.parse(JSON.stringify(doc)).items.length
}

function mixedRegex (lines) {
  let n = 0
  for (const line of lines) {
    const m = /^(\w+)=(\d+);\s*(?:#(.*))?$/.exec(line)
    if (m) n += m[2].length
    n += line.split(/[;=]/).length
  }
  return n
}

function mixedCrypto (buf) {
  const crypto = require('node:crypto')
  return crypto.createHash('sha256').update(buf).digest()[0] + crypto.createHmac('sha1', 'k').update(buf).digest()[1]
}

function mixedClasses (shapes) {
  let a = 0
  for (const s of shapes) a += s.area() + s.perimeter
  return a
}

// Template engines compile with new Function: code without a file.
const compiled = new Function('x', 'let s = 0; for (let i = 0; i < 50; i++) s += (x * i) % 7; return s') // eslint-disable-line no-new-func

function runMixed (ms) {
  const doc = { items: Array.from({ length: 100 }, (_, i) => ({ i, s: `item-${i}`, t: [i, i * 2] })) }
  const lines = Array.from({ length: 200 }, (_, i) => `key${i}=${i * 31}; #note ${i}`)
  const buf = Buffer.alloc(1 << 14, 3)
  const shapes = Array.from({ length: 500 }, (_, i) => i % 2 ? new Square(i) : new Shape(i, i + 1))
  const tree = buildTree(12)
  const counter = makeCounter(3)
  const tasks = [
    () => mixedJson(doc),
    () => mixedRegex(lines),
    () => mixedCrypto(buf),
    () => walk(tree),
    () => { let c = 0; for (let i = 0; i < 5000; i++) c = counter(i & 7); return c },
    () => mixedClasses(shapes),
    () => { let s = 0; for (let i = 0; i < 2000; i++) s += compiled(i); return s },
    function anonymousish () { return [...lines].map((l) => l.length).reduce((a, b) => a + b, 0) }
  ]
  const end = performance.now() + ms
  let sink = 0
  while (performance.now() < end) for (const task of tasks) sink += task()
  return sink
}

// --- the profiled process (child) -----------------------------------------------

// The inspector's profile as folded stacks named like kflame's JS frames
// ("name url:line:col_[j]", 1-based as V8 prints positions); its own nodes
// ("(program)", "(garbage collector)", "(idle)") stay as they are.
function inspectorFolded (profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map()
  for (const n of profile.nodes) for (const c of n.children || []) parent.set(c, n.id)
  const frame = (n) => {
    const f = n.callFrame
    if (f.functionName.startsWith('(') && !f.url) return f.functionName
    return `${f.functionName || '(anonymous)'} ${f.url}:${f.lineNumber + 1}:${f.columnNumber + 1}_[j]`
  }
  const counts = new Map()
  for (const id of profile.samples) counts.set(id, (counts.get(id) || 0) + 1)
  const lines = []
  for (const [id, count] of counts) {
    const frames = []
    for (let n = byId.get(id); n && n.callFrame.functionName !== '(root)'; n = byId.get(parent.get(n.id))) frames.unshift(frame(n))
    lines.push(`main;${frames.join(';')} ${count}`)
  }
  return lines.join('\n')
}

function child (part, tool, seconds, periodic) {
  const kflame = tool.startsWith('kflame-') ? require('..') : null
  const run = part === 'split' ? (ms) => runSplit(ms, periodic) : runMixed
  run(300) // warm up the JIT before measuring
  let session
  if (kflame) kflame.start(kflameStartOptions(tool))
  if (tool === 'v8-inspector') session = startInspectorProfiler()
  const t0 = process.hrtime.bigint()
  const truth = run(seconds * 1000)
  const t1 = process.hrtime.bigint()
  let folded = null
  if (kflame) folded = kflame.stop().folded
  if (session) {
    session.post('Profiler.stop', (err, r) => { if (!err) folded = inspectorFolded(r.profile) })
    session.disconnect()
  }
  return { part, tool, pid: process.pid, truth: part === 'split' ? truth : null, windowNs: [Number(t0), Number(t1)], folded }
}

// --- one trial (parent) ------------------------------------------------------------

function trial (part, tool, seconds, periodic) {
  const childArgv = [__filename, '--child', part, tool, String(seconds), ...(periodic ? ['--periodic'] : [])]
  if (!tool.startsWith('perf-')) {
    const r = parseResult(execFileSync(process.execPath, childArgv, { encoding: 'utf8', maxBuffer: 256 << 20 }))
    return { ...r, ...foldedToMap(r.folded), folded: undefined }
  }
  // In a directory of its own: --perf-basic-prof makes V8 leave an
  // isolate-*.log in the cwd.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kflame-accuracy-${tool}-`))
  try {
    const data = path.join(dir, 'perf.data')
    const argv = perfRecordArgv(Number(tool.slice(5)), data, childArgv)
    const r = parseResult(execFileSync(argv[0], argv.slice(1), { cwd: dir, encoding: 'utf8', maxBuffer: 256 << 20 }))
    const script = perfScript(data, r.pid)
    if (script.error) throw new Error(script.error)
    const [fromNs, toNs] = r.windowNs
    return { ...r, ...foldPerfScript(script.text, { pid: r.pid, fromNs, toNs }) }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

function parseResult (stdout) {
  const m = new RegExp(`^${MARK}(.*)$`, 'm').exec(stdout)
  if (!m) throw new Error(`no result from the child: ${stdout.slice(0, 200)}`)
  return JSON.parse(m[1])
}

// --- measures ---------------------------------------------------------------------

const frameRe = (name) => new RegExp(`^[~^+*]?${name} \\S*${FILE.replace('.', '\\.')}:\\d+:\\d+_\\[j\\]$`)

// Shares (%) of the three split functions in a Map(stack -> samples): a
// sample counts for a function that is anywhere on its stack.
// Samples whose innermost named JS frame is the driver, runSplit, count as
// `inCaller`: normally its own few instructions, but when V8 inlines a split
// function into it, that function's time shows up there (a tool sees the
// optimized code of runSplit, unless it reads V8's inlining positions).
function splitShares (stacks) {
  const res = SPLIT.map(([name]) => frameRe(name))
  const driver = frameRe('runSplit')
  const hits = SPLIT.map(() => 0)
  let inCaller = 0
  for (const [stack, n] of stacks) {
    const frames = stack.split(';')
    let hit = false
    res.forEach((re, i) => { if (frames.some((f) => re.test(f))) { hits[i] += n; hit = true } })
    if (!hit && driver.test(frames.filter(isNamedJs).pop() || '')) inCaller += n
  }
  const sum = hits.reduce((a, b) => a + b, 0)
  return { counted: sum, inCaller, shares: hits.map((h) => sum ? 100 * h / sum : 0) }
}

function truthShares (truth) {
  const sum = SPLIT.reduce((a, [name]) => a + truth[name], 0)
  return SPLIT.map(([name]) => 100 * truth[name] / sum)
}

const maxError = (shares, truth) => Math.max(...shares.map((s, i) => Math.abs(s - truth[i])))

// A JS function frame with a name: "name file:line:col_[j]", or _[i] for a
// function kflame found inlined (file may be empty for eval and new
// Function code). Builtins, RegExp code and the interpreter's shared
// trampoline are JIT frames, not named functions.
const isNamedJs = (f) => /_\[[ij]\]$/.test(f) && !f.startsWith('RegExp:') && / \S*:\d+:\d+_\[[ij]\]$/.test(f)
// kflame names builtins V8 reported in its code map "Builtin:Name_[j]" and
// the rest, from node's ELF symbols, "Builtins_Name"; perf's are folded to
// the former. Both are JIT frames here, so the two count alike.
const isJit = (f) => /_\[[ij]\]$/.test(f) || f.startsWith('Builtins_')
const isUnnamedJit = (f) => f === '[jit]_[j]' || f === '[unknown]'

// Naming quality over a Map(stack -> samples): see the header.
function nameQuality (stacks, tool) {
  let js = 0
  let named = 0
  let unnamed = 0
  let depth = 0
  let jsFrames = 0
  let interpreted = 0
  const noName = new Map()
  const withUnnamed = new Map()
  const inspector = tool === 'v8-inspector'
  for (const [stack, n] of stacks) {
    const frames = stack.split(';').slice(1) // the thread root
    const firstJit = frames.findIndex(isJit)
    if (firstJit < 0) continue
    js += n
    depth += n * frames.length
    const namedHere = frames.filter(isNamedJs).length
    jsFrames += n * namedHere
    interpreted += n * frames.filter((f) => f === '(interpreted)_[j]').length
    if (namedHere) named += n
    else noName.set(leafEnd(frames), (noName.get(leafEnd(frames)) || 0) + n)
    // Inside JS: deeper than (called from) the outermost JIT frame.
    if (frames.slice(firstJit).some(isUnnamedJit)) {
      unnamed += n
      withUnnamed.set(leafEnd(frames), (withUnnamed.get(leafEnd(frames)) || 0) + n)
    }
  }
  const top = (m) => [...m].sort((a, b) => b[1] - a[1]).slice(0, 5).map(([stack, samples]) => ({ stack, samples }))
  return {
    jsSamples: js,
    namedShare: js ? named / js : null,
    unnamedJitShare: js ? unnamed / js : null,
    // The inspector holds only JS frames: its depth is its JS depth.
    meanDepth: js ? depth / js : null,
    meanNamedJsFrames: js ? jsFrames / js : null,
    // Functions compiled before --interpreted-frames-native-stack was on
    // (for kflame: node's bootstrap and module loader, before kflame loaded)
    // run on V8's shared trampoline: a frame, but not which function.
    meanInterpretedFrames: js ? interpreted / js : null,
    depthIsJsOnly: inspector,
    examples: { withoutNamedJs: top(noName), withUnnamedJit: top(withUnnamed) }
  }
}

// The leaf end of a stack, for the examples: enough to see where it is.
const leafEnd = (frames) => frames.slice(-8).join(';')

function addInto (total, stacks) {
  for (const [k, n] of stacks) total.set(k, (total.get(k) || 0) + n)
  return total
}

// --- main ---------------------------------------------------------------------------

function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') {
    process.stdout.write(MARK + JSON.stringify(child(args[1], args[2], Number(args[3]), args.includes('--periodic'))) + '\n')
    return
  }
  const machine = machineNotes()
  const quick = args.includes('--quick')
  const rounds = Number(option(args, '--rounds')) || (quick ? 2 : 5)
  const seconds = Number(option(args, '--seconds')) || (quick ? 2 : 8)
  const jsonOut = option(args, '--json')
  const periodic = args.includes('--periodic')
  let tools = option(args, '--tools') ? option(args, '--tools').split(',') : ALL_TOOLS
  const notes = []
  const perf = tools.some((t) => t.startsWith('perf-')) ? perfCheck() : null
  if (perf && !perf.ok) {
    notes.push(`perf skipped: ${perf.why}`)
    console.error(notes[0])
    tools = tools.filter((t) => !t.startsWith('perf-'))
  }
  const nameTools = NAME_TOOLS.filter((t) => tools.includes(t))

  const runs = []
  for (let r = 0; r < rounds; r++) {
    for (const tool of tools) {
      const t = trial('split', tool, seconds, periodic)
      const s = splitShares(t.stacks)
      const truth = truthShares(t.truth)
      runs.push({ part: 'split', round: r, tool, samples: t.samples, counted: s.counted, inCaller: s.inCaller, shares: s.shares, truth, truthMs: t.truth, maxError: maxError(s.shares, truth), stacks: t.stacks })
      console.error(`  split round ${r + 1}/${rounds} ${tool}: ${s.counted} samples, max error ${maxError(s.shares, truth).toFixed(1)} pts`)
    }
    for (const tool of nameTools) {
      const t = trial('mixed', tool, seconds, false)
      runs.push({ part: 'names', round: r, tool, samples: t.samples, stacks: t.stacks })
      console.error(`  names round ${r + 1}/${rounds} ${tool}: ${t.samples} samples`)
    }
  }

  const split = tools.map((tool) => {
    const mine = runs.filter((x) => x.part === 'split' && x.tool === tool)
    const pooled = splitShares(mine.reduce((m, x) => addInto(m, x.stacks), new Map()))
    const truthMs = Object.fromEntries(SPLIT.map(([name]) => [name, mine.reduce((a, x) => a + x.truthMs[name], 0)]))
    const truth = truthShares(truthMs)
    // Binomial noise of a share at the pooled sample count (1 sd, points).
    const noise = Math.max(...truth.map((p) => 100 * Math.sqrt((p / 100) * (1 - p / 100) / Math.max(1, pooled.counted))))
    return {
      tool,
      rounds: mine.length,
      samplesPerRound: median(mine.map((x) => x.counted)),
      samplesPooled: pooled.counted,
      // Share of split-or-driver samples left on the driver (see splitShares).
      inCallerShare: pooled.inCaller / Math.max(1, pooled.counted + pooled.inCaller),
      functions: SPLIT.map(([name]) => name),
      shares: pooled.shares,
      truth,
      maxError: maxError(pooled.shares, truth),
      medianRoundMaxError: median(mine.map((x) => x.maxError)),
      worstRoundMaxError: Math.max(...mine.map((x) => x.maxError)),
      noiseSd: noise
    }
  })
  const names = nameTools.map((tool) => {
    const mine = runs.filter((x) => x.part === 'names' && x.tool === tool)
    return { tool, rounds: mine.length, ...nameQuality(mine.reduce((m, x) => addInto(m, x.stacks), new Map()), tool) }
  })

  console.log(`accuracy: ${rounds} rounds of ${seconds} s${periodic ? ', periodic split' : ''}; ${machineLine(machine)}${perf && perf.ok ? `; ${perf.version}` : ''}`)
  console.log(formatTables({ split, names }).join('\n'))
  for (const n of notes) console.log(`\nnote: ${n}`)
  if (jsonOut) {
    writeResults(jsonOut, machine, {
      quick,
      rounds,
      seconds,
      periodic,
      tools: { perf: perf && perf.ok ? perf.version : null },
      notes,
      split,
      names,
      runs: runs.map(({ stacks, ...rest }) => rest)
    })
  }
}

const TOOL_NAMES = {
  'kflame-99': 'kflame 99 Hz',
  'kflame-999': 'kflame 999 Hz',
  'kflame-timer-99': 'kflame timer mode 99 Hz',
  'kflame-timer-999': 'kflame timer mode 999 Hz',
  'v8-inspector': 'V8 CPU profiler (`inspector`, 1 ms)',
  'perf-99': '`perf record -F 99 -g` + `--perf-basic-prof`',
  'perf-999': '`perf record -F 999 -g` + `--perf-basic-prof`'
}

// The two markdown tables, shared with bench/table.js.
function formatTables ({ split, names }) {
  const out = []
  const fmt = (xs) => xs.map((x) => x.toFixed(1)).join(' / ')
  if (split.length) {
    out.push(`| tool | samples per round | shares: ${split[0].functions.join(' / ')} (%) | truth (%) | max error, pooled (pts) | max error per round: median, worst (pts) | sampling noise, 1 sd (pts) | left on the caller |`)
    out.push('| --- | --- | --- | --- | --- | --- | --- | --- |')
    for (const r of split) {
      out.push(`| ${TOOL_NAMES[r.tool] || r.tool} | ${r.samplesPerRound} | ${fmt(r.shares)} | ${fmt(r.truth)} | ${r.maxError.toFixed(1)} | ` +
        `${r.medianRoundMaxError.toFixed(1)}, ${r.worstRoundMaxError.toFixed(1)} | ${r.noiseSd.toFixed(1)} | ` +
        `${r.inCallerShare === undefined ? '-' : `${(100 * r.inCallerShare).toFixed(1)}%`} |`)
    }
  }
  if (names.length) {
    const pct = (x) => x === null ? '-' : `${(100 * x).toFixed(1)}%`
    const num = (x) => x === null ? '-' : x.toFixed(1)
    if (out.length) out.push('')
    out.push('| tool | JS samples | with a named JS frame | with an unnamed JIT frame | mean stack depth | mean named JS frames | mean `(interpreted)` frames |')
    out.push('| --- | --- | --- | --- | --- | --- | --- |')
    for (const r of names) {
      out.push(`| ${TOOL_NAMES[r.tool] || r.tool} | ${r.jsSamples} | ${pct(r.namedShare)} | ${pct(r.unnamedJitShare)} | ` +
        `${r.depthIsJsOnly ? `${num(r.meanDepth)} (JS only)` : num(r.meanDepth)} | ${num(r.meanNamedJsFrames)} | ` +
        `${r.depthIsJsOnly ? '-' : num(r.meanInterpretedFrames ?? null)} |`)
    }
  }
  return out
}

module.exports = { formatTables }

if (require.main === module) main()

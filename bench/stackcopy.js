'use strict'

// What the user-stack copy (start({ stackBytes })) costs the app, and what
// each size buys, so that the default can be chosen by measurement.
//
//   node bench/stackcopy.js [--quick] [--rounds N] [--coverage-rounds N]
//     [--sizes 0,4096,8192,16384,32768] [--hz 999] [--window-ms 150]
//     [--seed N] [--json bench/results/stackcopy.json]
//
// Cost: one process (a child started with --expose-gc) runs a CPU-bound
// mixed JS workload (JSON, regex, recursive descent over nested expressions,
// small recursive functions, string building, and functions compiled afresh
// before each window, so some code runs in the interpreter) in windows of
// ~150 ms. Each round runs every window kind once, in a seeded random order:
// unprofiled, and kflame at 999 Hz with each stackBytes value. The VM this
// was written on scatters 10-20% between processes; alternating windows in
// one process resolves 1-2%. Before each window: a full GC and the fresh
// functions, then kflame.start(); the timed part is the work loop alone;
// after it, the collector thread's CPU is read, then kflame.stop() (timed
// apart). Work is counted in units (a fixed cycle of 16 inputs) per ms of
// the main thread's CPU (/proc/thread-self/schedstat, ns) and per ms of wall
// time; each round's kinds are divided by that round's unprofiled window
// (and by its stackBytes 0 window: the copy's own cost). The tables give the
// median of the per-round ratios, as extra CPU (or wall time) per unit of
// work, with a bootstrap 95% interval of that median (seeded, 2000
// resamples of the rounds). The collector thread (kflame-collect) exists
// from start() to stop(): its schedstat is read just before stop(), so its
// CPU per sample leaves out the final drain inside stop().
//
// Coverage: children run deep-stack workloads whose functions were compiled
// before kflame was loaded (so no trampoline of their own names their
// interpreter frames: only the stack copy can), and profile one window per
// stackBytes value per round, in random order:
// - acorn parsing node_modules/typescript/lib/typescript.js (9 MB; one
//   parse per window), default tiers: what tiers up is named by the JIT
//   code map whatever the copy;
// - a synthetic recursion of four interpreted functions 50-200 deep, in a
//   child run with --no-opt --no-sparkplug --no-maglev.
// From each window's main-thread samples: the share with an
// `(interpreted)_[j]` frame left, named JS frames (those with a source
// position) per sample; from stats.details: interpretedNamed /
// (interpretedNamed + interpretedUnnamed) and stackCopyBytes / stackCopies.
// The kernel's callchain holds at most perf_event_max_stack (127) frames, so
// the root side of deeper stacks is cut whatever the copy.

const fs = require('node:fs')
const path = require('node:path')
const { median, mulberry32, machineNotes, machineLine, writeResults, option } = require('./common')
const {
  MARK, runChild: runChildOf, ROOT, windowsSetup, timedUnits, alternate, loadKflame, addonMtime, collectorCpu, shuffle, summarize, extraPerUnit
} = require('./windows')

const DEFAULT_SIZES = [0, 4096, 8192, 16384, 32768]

// Main-thread samples of a folded profile: samples, how many hold an
// `(interpreted)_[j]` frame (and one above the leaf: at the leaf the
// trampoline may not have built its frame yet, and is left as it is), named
// JS frames (a source position: `name
// file:line:col_[j]`) and all frames, summed over samples.
function mainThreadCounts (folded) {
  const c = { samples: 0, withInterpreted: 0, withInterpretedInner: 0, namedJsFrames: 0, jsFrames: 0, frames: 0 }
  for (const line of folded.split('\n')) {
    if (!line.startsWith('main;')) continue
    const sp = line.lastIndexOf(' ')
    const n = Number(line.slice(sp + 1))
    const frames = line.slice(0, sp).split(';')
    let named = 0
    let js = 0
    let interp = false
    let inner = false
    for (let i = 1; i < frames.length; i++) {
      const f = frames[i]
      if (!f.endsWith('_[j]')) continue
      js++
      if (f === '(interpreted)_[j]') { interp = true; if (i < frames.length - 1) inner = true }
      else if (/:\d+:\d+_\[j\]$/.test(f)) named++
    }
    c.samples += n
    if (interp) c.withInterpreted += n
    if (inner) c.withInterpretedInner += n
    c.namedJsFrames += named * n
    c.jsFrames += js * n
    c.frames += (frames.length - 1) * n
  }
  return c
}

const DETAIL_KEYS = ['stackCopies', 'stackCopyBytes', 'interpretedNamed', 'interpretedUnnamed', 'runningAdded', 'lostInRing', 'jitFrames']

// --- cost (child) ------------------------------------------------------------------

function costChild ({ sizes, hz, rounds, windowMs, seed }) {
  const { gc, w, kflame, addon0 } = windowsSetup('cost')
  const kinds = ['none', ...sizes.map((s) => `sb-${s}`)]
  let sink = 0

  function window (kind) {
    gc()
    w.freshPool()
    const profiled = kind !== 'none'
    const stackBytes = profiled ? Number(kind.slice(3)) : null
    let collectorMs = null
    if (profiled) {
      kflame.start({ hz, stackBytes })
      collectorMs = collectorCpu()
    }
    const { sink: s, ...timed } = timedUnits(w, windowMs)
    sink += s
    const r = { kind, ...timed }
    if (profiled) {
      r.collectorMs = collectorMs()
      const s0 = process.hrtime.bigint()
      const p = kflame.stop()
      r.stopMs = Number(process.hrtime.bigint() - s0) / 1e6
      r.samples = p.stats.samples
      r.lost = p.stats.lost
      r.ringPages = p.stats.details.ringPages
      for (const k of DETAIL_KEYS) r[k] = p.stats.details[k]
    }
    return r
  }

  // Two warm-up rounds: the first profile loads symbol tables on a thread
  // of its own; a window of each kind after it.
  const runs = alternate(kinds, window, { rounds, seed, warmups: 2 })
  return { runs, addon: [addon0, addonMtime()], sink: sink % 1000 }
}

// --- coverage workloads (child) ------------------------------------------------------

function acornWorkload () {
  const acorn = require(path.join(ROOT, 'node_modules', 'acorn'))
  const src = fs.readFileSync(path.join(ROOT, 'node_modules', 'typescript', 'lib', 'typescript.js'), 'utf8')
  // One parse before kflame loads compiles the parser's functions (lazily,
  // on first call) with the shared interpreter trampoline.
  const run = () => acorn.parse(src, { ecmaVersion: 'latest' }).body.length
  run()
  return { run, name: 'acorn parsing typescript.js' }
}

function syntheticWorkload (windowMs) {
  const rand = mulberry32(99)
  // Four functions in a cycle, a little work at every level and more at the
  // bottom, recursing 50 to 200 deep.
  function leaf (s) {
    let t = ''
    for (let i = 0; i < 60; i++) t += ((s + i) % 1000).toString(36)
    return t.length
  }
  function fa (n, acc) { let s = acc; for (let i = 0; i < 4; i++) s = (s * 31 + i) | 0; return n === 0 ? leaf(s) : fb(n - 1, s) + 1 }
  function fb (n, acc) { let s = acc; for (let i = 0; i < 4; i++) s = (s * 17 + i) | 0; return n === 0 ? leaf(s) : fc(n - 1, s) + 1 }
  function fc (n, acc) { let s = acc; for (let i = 0; i < 4; i++) s = (s * 13 + i) | 0; return n === 0 ? leaf(s) : fd(n - 1, s) + 1 }
  function fd (n, acc) { let s = acc; for (let i = 0; i < 4; i++) s = (s * 7 + i) | 0; return n === 0 ? leaf(s) : fa(n - 1, s) + 1 }
  const once = () => fa(50 + Math.floor(rand() * 151), 1)
  once()
  const run = () => {
    const end = Date.now() + windowMs
    let sink = 0
    while (Date.now() < end) sink += once()
    return sink
  }
  return { run, name: 'synthetic recursion 50-200 deep, interpreted' }
}

function coverageChild ({ workload, sizes, hz, rounds, seed, windowMs }) {
  const w = workload === 'acorn' ? acornWorkload() : syntheticWorkload(windowMs)
  const kflame = loadKflame()
  const addon0 = addonMtime()
  // Warm-up profile (symbol tables), not kept.
  kflame.start({ hz })
  w.run()
  kflame.stop()
  const rand = mulberry32(seed)
  const runs = []
  for (let round = 0; round < rounds; round++) {
    for (const stackBytes of shuffle(sizes, rand)) {
      kflame.start({ hz, stackBytes })
      const t0 = process.hrtime.bigint()
      w.run()
      const wallMs = Number(process.hrtime.bigint() - t0) / 1e6
      const p = kflame.stop()
      const r = { round, stackBytes, wallMs, samples: p.stats.samples, lost: p.stats.lost, ringPages: p.stats.details.ringPages }
      for (const k of DETAIL_KEYS) r[k] = p.stats.details[k]
      Object.assign(r, { main: mainThreadCounts(p.folded) })
      runs.push(r)
    }
  }
  return { workload: w.name, runs, addon: [addon0, addonMtime()], flags: process.execArgv }
}

function costRows (runs, kinds, seed) {
  // Extra main-thread CPU (or wall time) per unit of work, against `base`.
  const extra = (kind, base, f) => extraPerUnit(runs, kind, base, f)
  const sum = (xs) => xs.reduce((a, b) => a + b, 0)
  return kinds.map((kind, i) => {
    const mine = runs.filter((r) => r.kind === kind)
    const row = {
      kind,
      stackBytes: kind === 'none' ? null : Number(kind.slice(3)),
      windows: mine.length,
      unitsPerCpuMs: median(mine.map((r) => r.units / r.cpuMs)),
      unitsPerWallMs: median(mine.map((r) => r.units / r.wallMs))
    }
    if (kind === 'none') return row
    row.extraCpu = summarize(extra(kind, 'none', (r) => r.cpuMs), seed + i)
    row.extraWall = summarize(extra(kind, 'none', (r) => r.wallMs), seed + 100 + i)
    if (kind !== 'sb-0' && kinds.includes('sb-0')) {
      row.extraCpuVsSb0 = summarize(extra(kind, 'sb-0', (r) => r.cpuMs), seed + 200 + i)
      row.extraWallVsSb0 = summarize(extra(kind, 'sb-0', (r) => r.wallMs), seed + 300 + i)
    }
    const samples = sum(mine.map((r) => r.samples))
    const coll = mine.filter((r) => r.collectorMs !== null)
    row.samplesPerWindow = median(mine.map((r) => r.samples))
    row.collectorUsPerSample = samples ? sum(coll.map((r) => r.collectorMs)) * 1000 / sum(coll.map((r) => r.samples)) : null
    row.stopMs = median(mine.map((r) => r.stopMs))
    row.lost = sum(mine.map((r) => r.lost))
    row.lostInRing = sum(mine.map((r) => r.lostInRing))
    row.lostShare = samples + row.lost ? row.lost / (samples + row.lost) : 0
    row.ringPages = median(mine.map((r) => r.ringPages))
    const copies = sum(mine.map((r) => r.stackCopies))
    row.meanCopyBytes = copies ? sum(mine.map((r) => r.stackCopyBytes)) / copies : 0
    return row
  })
}

function coverageRows (runs, sizes) {
  const sum = (xs) => xs.reduce((a, b) => a + b, 0)
  return sizes.map((stackBytes) => {
    const mine = runs.filter((r) => r.stackBytes === stackBytes)
    const m = (k) => sum(mine.map((r) => r.main[k]))
    const named = sum(mine.map((r) => r.interpretedNamed))
    const unnamed = sum(mine.map((r) => r.interpretedUnnamed))
    const copies = sum(mine.map((r) => r.stackCopies))
    const samples = m('samples')
    return {
      stackBytes,
      windows: mine.length,
      mainSamples: samples,
      withInterpretedShare: samples ? m('withInterpreted') / samples : null,
      withInterpretedInnerShare: samples ? m('withInterpretedInner') / samples : null,
      interpretedNamedShare: named + unnamed ? named / (named + unnamed) : null,
      interpretedNamed: named,
      interpretedUnnamed: unnamed,
      namedJsFramesPerSample: samples ? m('namedJsFrames') / samples : null,
      jsFramesPerSample: samples ? m('jsFrames') / samples : null,
      framesPerSample: samples ? m('frames') / samples : null,
      runningAddedPerSample: samples ? sum(mine.map((r) => r.runningAdded)) / sum(mine.map((r) => r.samples)) : null,
      meanCopyBytes: copies ? sum(mine.map((r) => r.stackCopyBytes)) / copies : 0,
      lost: sum(mine.map((r) => r.lost))
    }
  })
}

// --- tables ----------------------------------------------------------------------------

function formatTables (r) {
  const pct = (x, d = 1) => x === null || x === undefined ? '-' : `${(x * 100).toFixed(d)}%`
  const ci = (s) => s ? `${pct(s.median)} [${pct(s.ci95[0])}, ${pct(s.ci95[1])}]` : '-'
  const num = (x, d = 1) => x === null || x === undefined ? '-' : x.toFixed(d)
  const name = (row) => row.kind === 'none' ? 'unprofiled' : `stackBytes ${row.stackBytes}`
  const out = []
  out.push(`Cost: ${r.hz} Hz, ${r.rounds} rounds of ${r.kinds.length} alternating ~${r.windowMs} ms windows in one process; ` +
    'extra per unit of work, median of per-round ratios [bootstrap 95% interval]')
  out.push('')
  out.push('| kind | extra main-thread CPU | extra wall time | extra CPU vs stackBytes 0 | extra wall vs stackBytes 0 | collector µs/sample | samples/window | lost | ring pages | mean bytes copied (all threads) | `stop()` ms |')
  out.push('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |')
  for (const row of r.cost) {
    if (row.kind === 'none') {
      out.push('| unprofiled | - | - | - | - | - | - | - | - | - | - |')
      continue
    }
    out.push(`| ${name(row)} | ${ci(row.extraCpu)} | ${ci(row.extraWall)} | ${ci(row.extraCpuVsSb0)} | ${ci(row.extraWallVsSb0)} | ` +
      `${num(row.collectorUsPerSample)} | ${row.samplesPerWindow} | ${row.lost} (${pct(row.lostShare, 2)}) | ${row.ringPages} | ` +
      `${num(row.meanCopyBytes, 0)} | ${num(row.stopMs)} |`)
  }
  for (const c of r.coverage) {
    out.push('')
    out.push(`Coverage: ${c.workload}${c.flags.length ? ` (${c.flags.join(' ')})` : ''}, ${c.rounds} rounds, main thread`)
    out.push('')
    out.push('| stackBytes | samples | with `(interpreted)_[j]` | ... above the leaf | interpreter frames named | named JS frames/sample | JS frames/sample | running function added/sample | mean bytes copied (all threads) | lost |')
    out.push('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |')
    for (const x of c.rows) {
      out.push(`| ${x.stackBytes} | ${x.mainSamples} | ${pct(x.withInterpretedShare)} | ${pct(x.withInterpretedInnerShare)} | ${pct(x.interpretedNamedShare)} | ` +
        `${num(x.namedJsFramesPerSample, 2)} | ${num(x.jsFramesPerSample, 2)} | ${num(x.runningAddedPerSample, 3)} | ${num(x.meanCopyBytes, 0)} | ${x.lost} |`)
    }
  }
  return out
}

const readmeTables = (r) => formatTables(r)

// --- main (parent) ------------------------------------------------------------------------

const runChild = (nodeFlags, args) => runChildOf(__filename, nodeFlags, args)

function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') {
    const a = JSON.parse(args[1])
    const r = a.mode === 'cost' ? costChild(a) : coverageChild(a)
    process.stdout.write(MARK + JSON.stringify(r) + '\n')
    return
  }
  const machine = machineNotes()
  const quick = args.includes('--quick')
  const rounds = Number(option(args, '--rounds')) || (quick ? 8 : 40)
  const coverageRounds = Number(option(args, '--coverage-rounds')) || (quick ? 2 : 5)
  const sizes = option(args, '--sizes') ? option(args, '--sizes').split(',').map(Number) : DEFAULT_SIZES
  const hz = Number(option(args, '--hz')) || 999
  const windowMs = Number(option(args, '--window-ms')) || 150
  const seed = Number(option(args, '--seed')) || 1
  const jsonOut = option(args, '--json')
  const kinds = ['none', ...sizes.map((s) => `sb-${s}`)]
  const notes = []

  console.error(`cost: ${rounds} rounds × ${kinds.length} windows ...`)
  const cost = runChild(['--expose-gc'], { mode: 'cost', sizes, hz, rounds, windowMs, seed })
  const coverage = []
  for (const [workload, flags, ms] of [['acorn', [], null], ['synthetic', ['--no-opt', '--no-sparkplug', '--no-maglev'], 400]]) {
    console.error(`coverage: ${workload}, ${coverageRounds} rounds × ${sizes.length} windows ...`)
    const c = runChild(flags, { mode: 'coverage', workload, sizes, hz, rounds: coverageRounds, seed: seed + 1, windowMs: ms })
    coverage.push({ workload: c.workload, flags: c.flags, rounds: coverageRounds, rows: coverageRows(c.runs, sizes), runs: c.runs, addon: c.addon })
  }
  const addons = new Set([...cost.addon, ...coverage.flatMap((c) => c.addon)].map(String))
  if (addons.size > 1) notes.push(`the addon was rebuilt during the run (build/Release/kflame.node mtimes: ${[...addons].join(', ')})`)

  const result = {
    quick,
    rounds,
    coverageRounds,
    hz,
    windowMs,
    seed,
    sizes,
    kinds,
    addonMtime: [...addons][0],
    notes,
    cost: costRows(cost.runs, kinds, seed),
    coverage: coverage.map(({ runs, addon, ...c }) => c),
    runs: { cost: cost.runs, coverage: coverage.map((c) => c.runs) }
  }
  console.log(`stackcopy: ${machineLine(machine)}`)
  console.log(formatTables(result).join('\n'))
  for (const n of notes) console.log(`\nnote: ${n}`)
  if (jsonOut) writeResults(jsonOut, machine, result)
}

module.exports = { formatTables, readmeTables }

if (require.main === module) main()

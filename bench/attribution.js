'use strict'

// Where a sample's cost goes, measured: what kflame at 999 Hz costs the app,
// split into the kernel's sample path, the stack copy, the collector thread,
// CPU contention from it, the code map's lock, and the code-event hook;
// beside `perf record -F 999 -g` of the same process in the same run (the
// floor).
//
//   node bench/attribution.js [--quick] [--rounds N] [--hook-pairs N]
//     [--steady N] [--window-ms 150] [--hz 999] [--seed N] [--json bench/results/attribution.json]
//
// --hz N: kflame's and both perfs' rate (999 by default; 99 gives the floor
// of the 99 Hz goal: perf at that rate in the same run).
//
// In one process (bench/windows.js: a child started with --expose-gc runs
// the mixed workload in ~150 ms windows, each round every kind once in a
// seeded random order; per-round ratios against the round's unprofiled
// window, median and bootstrap 95% interval):
// - none: unprofiled (kflame loaded, hook armed);
// - sb-0: kflame, stackBytes 0: the kernel walks the callchain only;
// - sb-16384: kflame, the 16 KiB user-stack copy on top;
// - perf-dwarf: `perf record -e cpu-clock -F 999 --call-graph dwarf,16384`,
//   the same way: perf copying the same 16 KiB of user stack per sample as
//   kflame's default (it unwinds them with DWARF afterwards, off the run).
// - perf-nocg: `perf record -e cpu-clock -F 999 -p CHILD`, no callchain:
//   what a sample costs before any stack is walked (the timer interrupt,
//   the record), so the callchain's part is sb-0 against it.
// - perf: `perf record -e cpu-clock -F 999 -g -p CHILD`, started once by
//   the child with its events disabled (-D -1) and enabled around each
//   perf window through its control fifo (the ack waited for), so its start
//   is never inside a window. Its own process's CPU in the window is read
//   from /proc. Disabled, its events stay on the child's threads: every
//   window pays perf's context-switch hook alike.
// The kernel's sample path runs on the sampled thread and lands in its CPU
// time (a sample on the JS thread, an interrupt of it); the collector's CPU
// is its thread's schedstat; contention shows as wall time beyond CPU time
// and as the JS thread's involuntary context switches. Code map lock waits
// come from stats.details (codeLockWaits, codeLockWaitMs).
//
// The windows start a profile each, so their collector begins every window
// with cold caches. Its steady state: fresh children (--steady N, 3) each
// profile the same workload for one 5 s profile, fresh functions every
// 150 ms, and report the collector's CPU per sample.
//
// Separate processes (the hook cannot be removed from a process): pairs of
// fresh children, in alternating order, each running the workload for
// ~1.5 s with functions compiled afresh every 150 ms: plain node, against
// node with kflame loaded and never started (by default nothing of V8's is
// armed until the first start(); bench/hookcost.js measures it armed).

const fs = require('node:fs')
const path = require('node:path')
const { machineNotes, machineLine, writeResults, option, median, startPerf, perfCheck, procCpuMs } = require('./common')
const {
  MARK, runChild: runChildOf, windowsSetup, timedUnits, alternate, loadKflame, addonMtime, schedNs, mainCpuNs, findThread, collectorCpu, makeMixedWorkload, summarize, extraPerUnit
} = require('./windows')

const DEFAULT_HZ = 999
const KINDS = ['none', 'sb-0', 'sb-16384', 'perf', 'perf-dwarf', 'perf-nocg']

// nonvoluntary_ctxt_switches (preempted) and voluntary (slept) of a thread.
function switches (statusFile) {
  try {
    const s = fs.readFileSync(statusFile, 'utf8')
    return { vol: Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(s)[1]), invol: Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(s)[1]) }
  } catch { return null }
}

// --- perf under control (child) ----------------------------------------------------


// --- windows (child) ------------------------------------------------------------------

async function windowsChild ({ rounds, windowMs, seed, hz: HZ }) {
  const { gc, w, kflame, addon0 } = windowsSetup('windows')
  const perfs = { perf: startPerf({ pid: process.pid, hz: HZ }) }
  if (perfs.perf) {
    perfs['perf-dwarf'] = startPerf({ pid: process.pid, hz: HZ, callGraph: 'dwarf,16384' })
    perfs['perf-nocg'] = startPerf({ pid: process.pid, hz: HZ, callGraph: null })
  }
  const kinds = KINDS.filter((k) => !k.startsWith('perf') || perfs[k])
  let sink = 0

  function window (kind) {
    gc()
    w.freshPool()
    let collector = null
    if (kind.startsWith('sb-')) {
      kflame.start({ hz: HZ, stackBytes: Number(kind.slice(3)) })
      const tid = findThread('kflame-collect')
      collector = tid && `/proc/self/task/${tid}`
    }
    const perf = perfs[kind]
    if (perf) perf.enable()
    const perf0 = perf ? procCpuMs(perf.pid) : null
    const col0 = collector && { ns: schedNs(`${collector}/schedstat`), sw: switches(`${collector}/status`) }
    const sw0 = switches('/proc/thread-self/status')
    const { sink: s, ...timed } = timedUnits(w, windowMs)
    sink += s
    const sw1 = switches('/proc/thread-self/status')
    const r = { kind, ...timed, preempted: sw1.invol - sw0.invol }
    if (perf) r.perfCpuMs = procCpuMs(perf.pid) - perf0
    if (collector) {
      const sw = switches(`${collector}/status`)
      r.collectorMs = (schedNs(`${collector}/schedstat`) - col0.ns) / 1e6
      r.collectorWakeups = sw.vol - col0.sw.vol
      r.collectorPreempted = sw.invol - col0.sw.invol
      const p = kflame.stop()
      r.samples = p.stats.samples
      r.mainSamples = p.folded.split('\n').filter((l) => l.startsWith('main;')).reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)
      r.codeLockWaits = p.stats.details.codeLockWaits
      r.codeLockWaitMs = p.stats.details.codeLockWaitMs
    } else if (perf) perf.disable()
    return r
  }

  const runs = alternate(kinds, window, { rounds, seed })
  for (const perf of Object.values(perfs)) if (perf) await perf.close()
  return { runs, kinds, addon: [addon0, addonMtime()], sink: sink % 1000 }
}

// One steady profile: the collector's CPU per sample over ms of the
// workload, once its caches have met the process's code.
function steadyChild ({ ms, hz: HZ }) {
  const { w, kflame } = windowsSetup('steady')
  kflame.start({ hz: HZ })
  const collectorCpuMs = collectorCpu()
  let units = 0
  let sink = 0
  const t0 = Date.now()
  while (Date.now() - t0 < ms) {
    w.freshPool()
    const end = Date.now() + 150
    while (Date.now() < end) sink += w.unit(units++)
  }
  const collectorMs = collectorCpuMs()
  const p = kflame.stop()
  return { ms, samples: p.stats.samples, collectorMs, usPerSample: collectorMs * 1000 / p.stats.samples, sink: sink % 1000 }
}

// One process of a hook pair: the workload for ~1.5 s, fresh functions every
// 150 ms, with or without kflame loaded.
function hookChild ({ withKflame, ms }) {
  const w = makeMixedWorkload()
  if (withKflame) loadKflame()
  w.freshPool()
  for (let i = 0; i < 500; i++) w.unit(i)
  let units = 0
  let sink = 0
  const c0 = mainCpuNs()
  const t0 = Date.now()
  while (Date.now() - t0 < ms) {
    w.freshPool()
    const end = Date.now() + 150
    while (Date.now() < end) sink += w.unit(units++)
  }
  return { units, cpuMs: (mainCpuNs() - c0) / 1e6, sink: sink % 1000 }
}

// --- rows (parent) ---------------------------------------------------------------------

function rows (runs, kinds, hookPairs, steady, seed, hz) {
  const sum = (xs) => xs.reduce((a, b) => a + b, 0)
  const extra = (kind, base, f, s) => summarize(extraPerUnit(runs, kind, base, f), s)
  const of = (kind) => runs.filter((r) => r.kind === kind)
  const perSec = (kind, k) => sum(of(kind).map((r) => r[k])) / (sum(of(kind).map((r) => r.wallMs)) / 1000)
  const cpu = (r) => r.cpuMs
  const wall = (r) => r.wallMs
  const out = {}
  // Main-thread samples per window (kflame's), to turn shares into µs.
  const mainSamples = median(of('sb-0').map((r) => r.mainSamples))
  const cpuPerWindow = median(of('none').map((r) => r.cpuMs))
  const usPerSample = (s) => s ? s.median * cpuPerWindow * 1000 / mainSamples : null
  out.kernelCallchain = { what: 'the kernel\'s sample path, callchain only (stackBytes 0 against unprofiled), main-thread CPU', cpu: extra('sb-0', 'none', cpu, seed) }
  out.kernelCallchain.usPerSample = usPerSample(out.kernelCallchain.cpu)
  out.stackCopy = { what: 'the 16 KiB stack copy on top (stackBytes 16384 against 0), main-thread CPU', cpu: extra('sb-16384', 'sb-0', cpu, seed + 1) }
  out.stackCopy.usPerSample = usPerSample(out.stackCopy.cpu)
  out.kflame = { what: 'kflame at its default (stackBytes 16384) against unprofiled', cpu: extra('sb-16384', 'none', cpu, seed + 2), wall: extra('sb-16384', 'none', wall, seed + 3) }
  for (const kind of ['sb-0', 'sb-16384']) {
    const mine = of(kind)
    const samples = sum(mine.map((r) => r.samples))
    out[`collector-${kind}`] = {
      what: `the collector thread (${kind === 'sb-0' ? 'stackBytes 0' : 'stackBytes 16384'})`,
      usPerSample: sum(mine.map((r) => r.collectorMs)) * 1000 / samples,
      shareOfMainCpu: sum(mine.map((r) => r.collectorMs)) / sum(mine.map((r) => r.cpuMs)),
      wakeupsPerSec: perSec(kind, 'collectorWakeups'),
      samplesPerSec: samples / (sum(mine.map((r) => r.wallMs)) / 1000),
      lockWaits: sum(mine.map((r) => r.codeLockWaits)),
      lockWaitMs: sum(mine.map((r) => r.codeLockWaitMs)),
      windows: mine.length
    }
  }
  out.contention = {
    what: 'the JS thread preempted (involuntary context switches per second)',
    none: perSec('none', 'preempted'),
    'sb-0': perSec('sb-0', 'preempted'),
    'sb-16384': perSec('sb-16384', 'preempted'),
    perf: kinds.includes('perf') ? perSec('perf', 'preempted') : null,
    'perf-dwarf': kinds.includes('perf-dwarf') ? perSec('perf-dwarf', 'preempted') : null,
    'perf-nocg': kinds.includes('perf-nocg') ? perSec('perf-nocg', 'preempted') : null
  }
  // A perf kind against unprofiled, its own process's CPU, and kflame against it.
  const peer = (kind, what, versus, s) => ({
    peer: {
      what: `\`perf record -e cpu-clock -F ${hz} ${what} -p PID\` against unprofiled`,
      cpu: extra(kind, 'none', cpu, s),
      wall: extra(kind, 'none', wall, s + 1),
      perfProcessShareOfMainCpu: sum(of(kind).map((r) => r.perfCpuMs)) / sum(of(kind).map((r) => r.cpuMs))
    },
    kflame: { what: `kflame (stackBytes 16384) against ${versus}, same run`, cpu: extra('sb-16384', kind, cpu, s + 2), wall: extra('sb-16384', kind, wall, s + 3) }
  })
  if (kinds.includes('perf')) {
    ({ peer: out.perf, kflame: out.kflameVsPerf } = peer('perf', '-g', 'perf', seed + 4))
    out.sb0VsPerf = { what: 'kflame (stackBytes 0) against perf, same run', cpu: extra('sb-0', 'perf', cpu, seed + 8) }
  }
  if (kinds.includes('perf-dwarf')) {
    ({ peer: out.perfDwarf, kflame: out.kflameVsPerfDwarf } = peer('perf-dwarf', '--call-graph dwarf,16384', 'perf copying the same 16 KiB', seed + 10))
  }
  if (kinds.includes('perf-nocg')) {
    out.perfNoCallchain = { what: `\`perf record -e cpu-clock -F ${hz} -p PID\` (no callchain) against unprofiled`, cpu: extra('perf-nocg', 'none', cpu, seed + 12), wall: extra('perf-nocg', 'none', wall, seed + 13) }
    out.perfNoCallchain.usPerSample = usPerSample(out.perfNoCallchain.cpu)
    out.callchainWalk = { what: 'the callchain walk: kflame (stackBytes 0) against perf without a callchain, same run', cpu: extra('sb-0', 'perf-nocg', cpu, seed + 14) }
    out.callchainWalk.usPerSample = usPerSample(out.callchainWalk.cpu)
  }
  if (steady.length) {
    out.collectorSteady = { what: 'collector thread, one 5 s profile per fresh process', usPerSample: median(steady.map((s) => s.usPerSample)), each: steady.map((s) => s.usPerSample), processes: steady.length }
  }
  if (hookPairs.length) {
    const ratios = hookPairs.map((p) => (p.with.cpuMs / p.with.units) / (p.without.cpuMs / p.without.units) - 1)
    out.hook = { what: 'kflame loaded, never started (nothing armed: KFLAME_JIT lazy) against plain node; separate processes', cpu: summarize(ratios, seed + 9), pairs: hookPairs.length }
  }
  return out
}

// --- tables ---------------------------------------------------------------------------

function readmeTables (r) {
  const a = r.attribution
  const pct = (x, d = 1) => x === null || x === undefined ? '-' : `${(x * 100).toFixed(d)}%`
  const ci = (s) => s ? `${pct(s.median)} [${pct(s.ci95[0])}, ${pct(s.ci95[1])}]` : '-'
  const num = (x, d = 1) => x === null || x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(d)
  const c0 = a['collector-sb-0']
  const c16 = a['collector-sb-16384']
  const out = [
    `${r.hz} Hz, ${r.rounds} rounds of ${r.kinds.length} alternating ~${r.windowMs} ms windows in one process ` +
      '(median of per-round ratios of main-thread CPU per unit of work [bootstrap 95% interval]); ' +
      `the hook row from ${a.hook ? a.hook.pairs : 0} pairs of separate processes`,
    '',
    '| where the cost goes | main-thread CPU | per main-thread sample | other |',
    '| --- | --- | --- | --- |',
    `| kernel sample path, callchain only (stackBytes 0 vs unprofiled) | ${ci(a.kernelCallchain.cpu)} | ${num(a.kernelCallchain.usPerSample)} µs | - |`,
    `| + 16 KiB stack copy (stackBytes 16384 vs 0) | ${ci(a.stackCopy.cpu)} | ${num(a.stackCopy.usPerSample)} µs | - |`,
    `| collector thread (its own CPU) | - | ${num(c16.usPerSample)} µs per sample (${num(c0.usPerSample)} without the copy) | ${pct(c16.shareOfMainCpu, 2)} of the main thread's CPU; ${num(c16.wakeupsPerSec, 0)} wake-ups/s for ${num(c16.samplesPerSec, 0)} samples/s |`,
    ...(a.collectorSteady ? [`| collector thread, steady state (one 5 s profile in each of ${a.collectorSteady.processes} fresh processes, median) | - | ${num(a.collectorSteady.usPerSample)} µs per sample (${a.collectorSteady.each.map((x) => num(x)).join(', ')}) | - |`] : []),
    `| contention: JS thread preempted | - | - | ${num(a.contention.none, 1)}/s unprofiled, ${num(a.contention['sb-16384'], 1)}/s kflame, ${num(a.contention.perf, 1)}/s perf |`,
    `| code map lock: code events that waited | - | - | ${c16.lockWaits + c0.lockWaits} waits, ${num(c16.lockWaitMs + c0.lockWaitMs, 3)} ms in ${c16.windows + c0.windows} windows |`,
    `| kflame loaded, never started: nothing of V8's armed (separate processes; armed: bench/hookcost.js) | ${a.hook ? ci(a.hook.cpu) : '-'} | - | compile-heavy: fresh functions every 150 ms |`,
    `| **kflame, default** (stackBytes 16384 vs unprofiled) | ${ci(a.kflame.cpu)} | - | wall ${ci(a.kflame.wall)} |`
  ]
  if (a.perf) {
    out.push(`| **floor: perf record -F ${r.hz || 999} -g** (vs unprofiled) | ${ci(a.perf.cpu)} | - | wall ${ci(a.perf.wall)}; perf's own process ${pct(a.perf.perfProcessShareOfMainCpu, 2)} of the main thread's CPU |`)
    out.push(`| kflame against perf, same run | ${ci(a.kflameVsPerf.cpu)} | - | stackBytes 0 against perf: ${ci(a.sb0VsPerf.cpu)} |`)
  }
  if (a.perfDwarf) {
    out.push(`| perf copying the same 16 KiB: perf record -F ${r.hz || 999} --call-graph dwarf,16384 (vs unprofiled) | ${ci(a.perfDwarf.cpu)} | - | wall ${ci(a.perfDwarf.wall)}; perf's own process ${pct(a.perfDwarf.perfProcessShareOfMainCpu, 2)} of the main thread's CPU; JS thread preempted ${num(a.contention['perf-dwarf'], 1)}/s |`)
    out.push(`| kflame against perf with the same copy, same run | ${ci(a.kflameVsPerfDwarf.cpu)} | - | wall ${ci(a.kflameVsPerfDwarf.wall)} |`)
  }
  if (a.perfNoCallchain) {
    out.push(`| a sample before any stack: perf record -F ${r.hz || 999}, no callchain (vs unprofiled) | ${ci(a.perfNoCallchain.cpu)} | ${num(a.perfNoCallchain.usPerSample)} µs | wall ${ci(a.perfNoCallchain.wall)}; JS thread preempted ${num(a.contention['perf-nocg'], 1)}/s |`)
    out.push(`| the callchain walk: kflame stackBytes 0 vs perf without a callchain | ${ci(a.callchainWalk.cpu)} | ${num(a.callchainWalk.usPerSample)} µs | - |`)
  }
  return out
}

// --- main (parent) ------------------------------------------------------------------------

const runChild = (nodeFlags, args) => runChildOf(__filename, nodeFlags, args)

async function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') {
    const a = JSON.parse(args[1])
    const r = a.mode === 'windows' ? await windowsChild(a) : a.mode === 'steady' ? steadyChild(a) : hookChild(a)
    process.stdout.write(MARK + JSON.stringify(r) + '\n')
    return
  }
  const machine = machineNotes()
  const quick = args.includes('--quick')
  const rounds = Number(option(args, '--rounds')) || (quick ? 10 : 60)
  const nPairs = Number(option(args, '--hook-pairs')) || (quick ? 3 : 12)
  const nSteady = Number(option(args, '--steady')) || (quick ? 1 : 3)
  const windowMs = Number(option(args, '--window-ms')) || 150
  const seed = Number(option(args, '--seed')) || 1
  const hz = Number(option(args, '--hz')) || DEFAULT_HZ
  const jsonOut = option(args, '--json')
  const notes = []
  if (!perfCheck().ok) notes.push(`no perf row: ${perfCheck().why}`)

  console.error(`windows: ${rounds} rounds × ${KINDS.length} windows ...`)
  const w = runChild(['--expose-gc'], { mode: 'windows', rounds, windowMs, seed, hz })
  console.error(`hook: ${nPairs} pairs of processes ...`)
  const hookPairs = []
  for (let i = 0; i < nPairs; i++) {
    const order = i % 2 ? [true, false] : [false, true]
    const pair = {}
    for (const withKflame of order) pair[withKflame ? 'with' : 'without'] = runChild([], { mode: 'hook', withKflame, ms: 1500 })
    hookPairs.push(pair)
  }
  console.error(`steady: ${nSteady} processes ...`)
  const steady = []
  for (let i = 0; i < nSteady; i++) steady.push(runChild(['--expose-gc'], { mode: 'steady', ms: 5000, hz }))
  const addons = new Set(w.addon.map(String))
  if (addons.size > 1) notes.push(`the addon was rebuilt during the run (mtimes ${[...addons].join(', ')})`)
  const result = {
    quick,
    rounds,
    hz,
    windowMs,
    seed,
    kinds: w.kinds,
    notes,
    attribution: rows(w.runs, w.kinds, hookPairs, steady, seed, hz),
    runs: w.runs,
    hookPairs,
    steady
  }
  console.log(`attribution: ${machineLine(machine)}`)
  console.log(readmeTables(result).join('\n'))
  for (const n of notes) console.log(`\nnote: ${n}`)
  if (jsonOut) writeResults(jsonOut, machine, result)
}

module.exports = { readmeTables }

if (require.main === module) main().catch((err) => { console.error(err); process.exitCode = 1 })

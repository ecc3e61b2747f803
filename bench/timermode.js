'use strict'

// What the timer sampler (start({ mode: 'timer' }), for hosts that refuse
// perf_event_open) costs the app, beside perf mode and V8's own CPU
// profiler, at 99 and 999 samples per second.
//
//   node bench/timermode.js [--quick] [--rounds N] [--window-ms 150] [--lead-ms 0] [--seed N]
//     [--json bench/results/timermode.json]
//
// Method: alternating windows in one process (bench/windows.js). A child
// started with --expose-gc runs the mixed workload in ~150 ms windows; each
// round runs every kind once, in a seeded random order: unprofiled; kflame in
// perf mode and in timer mode; V8's CPU profiler through the inspector, in
// process, with its sampling interval set to the same rate (10101 µs,
// 1001 µs). Before each window: a full GC, fresh functions, then the
// profiler's start; the timed part is the work loop alone; its stop is timed
// apart. The tables give the median of per-round ratios of main-thread CPU
// (and wall time) per unit of work against the round's unprofiled window,
// with a bootstrap 95% interval. The costs of a sample on the app's thread
// land in its CPU either way: the kernel's sample path (perf) and the signal
// handler (timer) both run on the interrupted thread. The collector
// thread's CPU is read just before stop(), per sample.
//
// Timer mode's signals come at the scheduler tick (CONFIG_HZ): above it,
// one signal stands for several periods. "signals/window" counts the
// handler's runs (stack copies), "samples/window" the periods.
//
// fresh-99 is perf mode at 99 Hz with KFLAME_PARK=off: the collector on a
// thread created at start() and ended by stop(), as before kflame kept one
// parked between profiles (src/util/parked.h): what a new thread costs the
// app's thread right after start().
//
// --lead-ms N: N ms of untimed work after the profiler's start (after the
// GC and fresh functions, in every kind, unprofiled too) before the timed
// part. With 0 the timed part includes what follows start() at once, when
// V8's helper threads are still busy with that GC and those compiles.

const { machineNotes, machineLine, writeResults, option, median } = require('./common')
const { MARK, runChild, windowsSetup, timedUnits, alternate, addonMtime, collectorCpu, summarize, extraPerUnit } = require('./windows')

const KINDS = ['none', 'perf-99', 'fresh-99', 'timer-99', 'v8-99', 'perf-999', 'timer-999', 'v8-999']
const NAMES = {
  none: 'unprofiled',
  'perf-99': 'kflame perf mode, 99 Hz',
  'fresh-99': 'the same, collector on a new thread (KFLAME_PARK=off)',
  'timer-99': 'kflame timer mode, 99 Hz',
  'v8-99': "V8's profiler, 10101 µs",
  'perf-999': 'kflame perf mode, 999 Hz',
  'timer-999': 'kflame timer mode, 999 Hz',
  'v8-999': "V8's profiler, 1001 µs"
}

// --- the child ---------------------------------------------------------------------

function costChild ({ rounds, windowMs, leadMs = 0, seed }) {
  const { gc, w, kflame, addon0 } = windowsSetup('cost')
  const session = new (require('node:inspector').Session)()
  session.connect()
  session.post('Profiler.enable')
  let sink = 0

  function window (kind) {
    gc()
    w.freshPool()
    const [tool, rate] = kind === 'none' ? ['none', 0] : kind.split('-')
    const hz = Number(rate)
    const kflameKind = tool === 'perf' || tool === 'timer' || tool === 'fresh'
    let collectorMs = null
    if (kflameKind) {
      if (tool === 'fresh') process.env.KFLAME_PARK = 'off'
      kflame.start({ hz, mode: tool === 'fresh' ? 'perf' : tool })
      delete process.env.KFLAME_PARK
      collectorMs = collectorCpu()
    } else if (tool === 'v8') {
      session.post('Profiler.setSamplingInterval', { interval: Math.round(1e6 / hz) })
      session.post('Profiler.start')
    }
    if (leadMs) sink += timedUnits(w, leadMs).sink
    const { sink: s, ...timed } = timedUnits(w, windowMs)
    sink += s
    const r = { kind, ...timed }
    const s0 = process.hrtime.bigint()
    if (kflameKind) {
      r.collectorMs = collectorMs()
      const p = kflame.stop()
      r.samples = p.stats.samples
      r.signals = p.stats.details.stackCopies
      r.lost = p.stats.lost
      r.mode = p.stats.mode
    } else if (tool === 'v8') {
      session.post('Profiler.stop', (err, res) => {
        if (err) throw new Error(`Profiler.stop: ${err.message}`)
        r.samples = res.profile.samples.length
      })
    }
    if (tool !== 'none') r.stopMs = Number(process.hrtime.bigint() - s0) / 1e6
    return r
  }

  const runs = alternate(KINDS, window, { rounds, seed })
  session.disconnect()
  return { runs, addon: [addon0, addonMtime()], sink: sink % 1000 }
}

// --- the parent ----------------------------------------------------------------------

function costRows (runs, seed) {
  const sum = (xs) => xs.reduce((a, b) => a + b, 0)
  return KINDS.map((kind, i) => {
    const mine = runs.filter((r) => r.kind === kind)
    const row = { kind, windows: mine.length, unitsPerCpuMs: median(mine.map((r) => r.units / r.cpuMs)) }
    if (kind === 'none') return row
    row.extraCpu = summarize(extraPerUnit(runs, kind, 'none', (r) => r.cpuMs), seed + i)
    row.extraWall = summarize(extraPerUnit(runs, kind, 'none', (r) => r.wallMs), seed + 100 + i)
    row.samplesPerWindow = median(mine.map((r) => r.samples))
    row.stopMs = median(mine.map((r) => r.stopMs))
    if (!kind.startsWith('v8')) {
      const coll = mine.filter((r) => r.collectorMs !== null)
      const samples = sum(coll.map((r) => r.samples))
      row.collectorUsPerSample = samples ? sum(coll.map((r) => r.collectorMs)) * 1000 / samples : null
      row.signalsPerWindow = median(mine.map((r) => r.signals))
      row.lost = sum(mine.map((r) => r.lost))
      row.modes = [...new Set(mine.map((r) => r.mode))]
    }
    return row
  })
}

function formatTables (r) {
  const pct = (x, d = 1) => x === null || x === undefined ? '-' : `${(x * 100).toFixed(d)}%`
  const ci = (s) => s ? `${pct(s.median)} [${pct(s.ci95[0])}, ${pct(s.ci95[1])}]` : '-'
  const num = (x, d = 1) => x === null || x === undefined ? '-' : x.toFixed(d)
  const out = []
  const lead = r.leadMs ? ` (each after ${r.leadMs} ms of untimed work with the profiler on)` : ''
  out.push(`Cost: ${r.rounds} rounds of ${KINDS.length} alternating ~${r.windowMs} ms windows${lead} in one process; ` +
    'extra per unit of work, median of per-round ratios [bootstrap 95% interval]')
  out.push('')
  out.push('| kind | extra main-thread CPU | extra wall time | samples/window | signals/window | collector µs/sample | lost | stop ms |')
  out.push('| --- | --- | --- | --- | --- | --- | --- | --- |')
  for (const row of r.cost) {
    if (row.kind === 'none') continue
    out.push(`| ${NAMES[row.kind]} | ${ci(row.extraCpu)} | ${ci(row.extraWall)} | ${row.samplesPerWindow} | ` +
      `${row.signalsPerWindow ?? '-'} | ${num(row.collectorUsPerSample)} | ${row.lost ?? '-'} | ${num(row.stopMs)} |`)
  }
  return out
}

const readmeTables = (r) => formatTables(r)

function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') {
    process.stdout.write(MARK + JSON.stringify(costChild(JSON.parse(args[1]))) + '\n')
    return
  }
  const machine = machineNotes()
  const quick = args.includes('--quick')
  const rounds = Number(option(args, '--rounds')) || (quick ? 6 : 40)
  const windowMs = Number(option(args, '--window-ms')) || 150
  const leadMs = Number(option(args, '--lead-ms')) || 0
  const seed = Number(option(args, '--seed')) || 1
  const jsonOut = option(args, '--json')
  console.error(`cost: ${rounds} rounds × ${KINDS.length} windows ...`)
  const cost = runChild(__filename, ['--expose-gc'], { rounds, windowMs, leadMs, seed })
  const notes = []
  if (new Set(cost.addon.map(String)).size > 1) notes.push(`the addon was rebuilt during the run (${cost.addon.join(', ')})`)
  const rows = costRows(cost.runs, seed)
  for (const row of rows) {
    if (row.modes && row.modes.some((m) => m !== row.kind.split('-')[0].replace('fresh', 'perf'))) notes.push(`${row.kind} ran in mode ${row.modes.join('/')}`)
  }
  const result = { quick, rounds, windowMs, leadMs, seed, kinds: KINDS, addonMtime: cost.addon[0], notes, cost: rows, runs: cost.runs }
  console.log(`timermode: ${machineLine(machine)}`)
  console.log(formatTables(result).join('\n'))
  for (const n of notes) console.log(`\nnote: ${n}`)
  if (jsonOut) writeResults(jsonOut, machine, result)
}

module.exports = { formatTables, readmeTables }

if (require.main === module) main()

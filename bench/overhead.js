'use strict'

// Overhead of profiling a CPU-bound workload, kflame against V8's own CPU
// profiler (through `inspector`, in-process, its default 1 ms interval),
// `perf record` with node's --perf-basic-prof, and 0x (V8's --prof tick
// profiler behind a wrapper that post-processes into an HTML flame graph),
// in one run. Each trial is a fresh node process; modes alternate (A B C D,
// A B C D, ...) so drift on the machine hits them alike. Reports medians and
// the median of per-round ratios against the unprofiled run.
//
//   node bench/overhead.js [--quick] [--rounds N] [--modes none,kflame-99,...]
//     [--no-perf] [--no-0x] [--json bench/results/overhead.json]
//
// In-process modes (kflame, inspector) start and stop around each measured
// window, so the window's CPU is the process's. perf and 0x run outside and
// for the whole life of the process; for them the child also reads the CPU
// its profiler (its parent: perf, or 0x's node) used during the window, from
// /proc, and the table shows the process's extra CPU and the total with the
// profiler's. What they do after the workload ends is reported apart:
// perf record's wrap-up (build-ids) and `perf script`, which turns its data
// into stacks; 0x's processing of the V8 log into its flame graph. Their
// whole-run CPU (GNU time over the tree, minus node's own) is in the JSON.
//
// kflame is loaded (hook armed, --interpreted-frames-native-stack on) in the
// unprofiled and the in-process modes, so those differ only by profiling. The
// perf and 0x children do not load kflame; perf gets
// --interpreted-frames-native-stack on its command line (for named
// interpreted frames, as kflame has them), 0x runs node as 0x does.
//
// RSS growth is the process's RSS at the end of stop() against just before
// start(); for perf and 0x the profiler's own peak RSS (VmHWM of the parent,
// read at the end of the workload) is shown too. perf and 0x are skipped,
// with a note, where perf is missing or refused, or 0x cannot be installed
// (npm install into ~/.cache/kflame-bench, outside the repository) or run.

const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const {
  median, startInspectorProfiler, machineNotes, machineLine, writeResults, option, procCpuMs, procHwmKiB,
  timed, readTimeFile, hasGnuTime, perfCheck, perfRecordArgv, perfScript, foldPerfScript, ensure0x
} = require('./common')

const ALL_MODES = ['none', 'kflame-99', 'kflame-999', 'v8-inspector', 'perf-99', 'perf-999', '0x']
const MARK = 'KFLAME_BENCH_RESULT '
const external = (mode) => mode.startsWith('perf-') || mode === '0x'

function workload () {
  const crypto = require('node:crypto')
  const fib = (n) => n < 2 ? n : fib(n - 1) + fib(n - 2)
  const doc = { items: Array.from({ length: 300 }, (_, i) => ({ i, s: `item-${i}`, t: [i, i * 2] })) }
  const buf = Buffer.alloc(1 << 16, 7)
  let sink = 0
  for (let round = 0; round < 12; round++) {
    sink += fib(25)
    for (let i = 0; i < 150; i++) sink += JSON.parse(JSON.stringify(doc)).items.length
    for (let i = 0; i < 150; i++) sink += crypto.createHash('sha256').update(buf).digest()[0]
    for (let i = 0; i < 2000; i++) sink += /(\d+)-(\w+)/.exec(`x ${i}-abc y`)[1].length
  }
  return sink
}

// --- the profiled process (child) ------------------------------------------------

function child (mode) {
  const kflame = external(mode) ? null : require('..')
  // perf and 0x start this process: their CPU and memory are the parent's.
  const profilerPid = external(mode) ? process.ppid : null
  workload() // warm up the JIT before measuring
  // A process's first profile also loads the ELF symbol tables and kallsyms
  // (on a background thread, so its stop() only names); later profiles find
  // them cached. Both are measured: the first, then the steady state.
  const first = profileOnce(mode, kflame, profilerPid)
  const later = profileOnce(mode, kflame, profilerPid)
  const total = process.cpuUsage()
  return {
    mode,
    pid: process.pid,
    workMs: later.workMs,
    cpuMs: later.cpuMs,
    profilerCpuMs: later.profilerCpuMs,
    startMs: later.startMs,
    stopMs: later.stopMs,
    samples: later.samples,
    rssGrowthMB: later.rssGrowthMB,
    windowNs: later.windowNs,
    firstCpuMs: first.cpuMs,
    firstProfilerCpuMs: first.profilerCpuMs,
    firstStopMs: first.stopMs,
    firstRssGrowthMB: first.rssGrowthMB,
    rssEndMB: process.memoryUsage.rss() / 2 ** 20,
    profilerMaxRssKiB: profilerPid ? procHwmKiB(profilerPid) : null,
    // Node's CPU over its whole life, to take out of GNU time's tree total.
    processCpuMs: (total.user + total.system) / 1000
  }
}

function profileOnce (mode, kflame, profilerPid) {
  let session
  const rss0 = process.memoryUsage.rss()
  const t0 = process.hrtime.bigint()
  if (mode.startsWith('kflame-')) kflame.start({ hz: Number(mode.slice(7)) })
  if (mode === 'v8-inspector') {
    session = startInspectorProfiler()
  }
  const started = process.hrtime.bigint()
  const cpu0 = process.cpuUsage()
  const prof0 = profilerPid ? procCpuMs(profilerPid) : 0
  workload()
  const worked = process.hrtime.bigint()
  let samples = null
  if (mode.startsWith('kflame-')) samples = kflame.stop().stats.samples
  if (mode === 'v8-inspector') {
    session.post('Profiler.stop', (err, r) => { if (!err) samples = r.profile.samples.length })
    session.disconnect()
  }
  if (mode === 'none') samples = 0
  const stopped = process.hrtime.bigint()
  // CPU up to the end of stop(): work done at stop (naming) counts too.
  const cpu = process.cpuUsage(cpu0)
  const prof1 = profilerPid ? procCpuMs(profilerPid) : 0
  return {
    workMs: Number(worked - started) / 1e6,
    cpuMs: (cpu.user + cpu.system) / 1000,
    profilerCpuMs: prof1 - prof0,
    startMs: Number(started - t0) / 1e6,
    stopMs: Number(stopped - worked) / 1e6,
    rssGrowthMB: (process.memoryUsage.rss() - rss0) / 2 ** 20,
    // CLOCK_MONOTONIC, as perf record -k mono stamps its samples.
    windowNs: [Number(started), Number(stopped)],
    samples
  }
}

// --- one trial (parent) ------------------------------------------------------------

// Runs argv; resolves with the child's result, when it arrived and when the
// whole command (profiler included) exited.
function runTrial (argv, cwd) {
  return new Promise((resolve, reject) => {
    const p = spawn(argv[0], argv.slice(1), { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    let result = null
    let resultAt = null
    p.stdout.on('data', (d) => {
      out += d
      if (!result) {
        const m = new RegExp(`^${MARK}(.*)$`, 'm').exec(out)
        if (m) { result = JSON.parse(m[1]); resultAt = process.hrtime.bigint() }
      }
    })
    p.stderr.on('data', (d) => { if (err.length < 1 << 16) err += d })
    p.on('error', reject)
    p.on('close', (code, signal) => {
      const exitAt = process.hrtime.bigint()
      if (!result) {
        reject(new Error(`${argv.slice(0, 3).join(' ')} ...: exit ${code ?? signal}, no result: ${err.trim().split('\n').slice(-3).join(' | ')}`))
        return
      }
      resolve({ result, afterRunMs: Number(exitAt - resultAt) / 1e6, code, stderr: err })
    })
  })
}

async function trial (mode, tools) {
  const childArgv = [__filename, '--child', mode]
  if (!external(mode)) return (await runTrial([process.execPath, ...childArgv])).result

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kflame-overhead-${mode}-`))
  const timeFile = path.join(dir, 'time.txt')
  try {
    if (mode.startsWith('perf-')) {
      const data = path.join(dir, 'perf.data')
      // In `dir`: --perf-basic-prof makes V8 leave an isolate-*.log in the cwd.
      const t = await runTrial(timed(perfRecordArgv(Number(mode.slice(5)), data, childArgv), timeFile), dir)
      const r = t.result
      const tree = readTimeFile(timeFile)
      // `perf script` is what turns the recording into stacks (the input of
      // any flame graph): perf's post-processing, timed here.
      const script = perfScript(data, r.pid)
      if (script.error) throw new Error(script.error)
      const [fromNs, toNs] = r.windowNs
      return {
        ...r,
        samples: foldPerfScript(script.text, { pid: r.pid, fromNs, toNs }).samples,
        afterRunMs: t.afterRunMs,
        postMs: script.ms,
        profilerTotalCpuMs: tree ? tree.cpuMs - r.processCpuMs : null
      }
    }
    // 0x writes the V8 log in its working directory, then processes it into
    // an HTML flame graph in --output-dir.
    const out = path.join(dir, 'out')
    const t = await runTrial(timed([process.execPath, tools.zeroX.cli, '-q', '--output-dir', out, '--',
      process.execPath, ...childArgv], timeFile), dir)
    const tree = readTimeFile(timeFile)
    let ticks = null
    let html = false
    try {
      const log = fs.readdirSync(out).find((f) => /^isolate-.*-v8\.log$/.test(f))
      if (log) ticks = (fs.readFileSync(path.join(out, log), 'utf8').match(/^tick,/mg) || []).length
      html = fs.readdirSync(out).some((f) => f.endsWith('.html'))
    } catch {}
    if (!html) throw new Error(`0x wrote no flame graph: ${t.stderr.trim().split('\n').slice(-2).join(' | ')}`)
    return {
      ...t.result,
      samplesWholeRun: ticks,
      afterRunMs: t.afterRunMs,
      postMs: null,
      profilerTotalCpuMs: tree ? tree.cpuMs - t.result.processCpuMs : null
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

// --- main ------------------------------------------------------------------------

async function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') { process.stdout.write(MARK + JSON.stringify(child(args[1])) + '\n'); return }
  const machine = machineNotes()
  const quick = args.includes('--quick')
  const rounds = Number(option(args, '--rounds')) || (quick ? 3 : 9)
  const jsonOut = option(args, '--json')
  let modes = option(args, '--modes') ? option(args, '--modes').split(',') : ALL_MODES
  const notes = []
  const tools = {}

  if (modes.some((m) => m.startsWith('perf-'))) {
    const perf = args.includes('--no-perf') ? { ok: false, why: '--no-perf' } : perfCheck()
    if (perf.ok) tools.perf = perf.version
    else { notes.push(`perf modes skipped: ${perf.why}`); modes = modes.filter((m) => !m.startsWith('perf-')) }
  }
  if (modes.includes('0x')) {
    const zeroX = args.includes('--no-0x') ? { ok: false, why: '--no-0x' } : ensure0x()
    if (zeroX.ok) tools.zeroX = zeroX
    else { notes.push(`0x skipped: ${zeroX.why}`); modes = modes.filter((m) => m !== '0x') }
  }
  if (modes.some(external) && !hasGnuTime()) notes.push('no GNU time at /usr/bin/time: the profilers\' whole-run CPU is not measured')
  if (!modes.includes('none')) throw new Error('--modes must include none (the baseline)')
  for (const n of notes) console.error(n)

  const runs = []
  const dropped = new Set()
  for (let r = 0; r < rounds; r++) {
    for (const mode of modes) {
      if (dropped.has(mode)) continue
      try {
        runs.push({ round: r, ...await trial(mode, tools) })
      } catch (err) {
        if (!external(mode)) throw err
        // A peer that fails once is left out from then on, with the reason.
        notes.push(`${mode} dropped in round ${r}: ${err.message.slice(0, 300)}`)
        console.error(notes[notes.length - 1])
        dropped.add(mode)
      }
    }
  }

  const base = runs.filter((x) => x.mode === 'none')
  const rows = modes.filter((m) => runs.some((x) => x.mode === m)).map((mode) => {
    const mine = runs.filter((x) => x.mode === mode)
    const ratio = (f) => median(mine.map((x) => f(x) / f(base.find((b) => b.round === x.round))))
    const med = (f) => { const xs = mine.map(f).filter((x) => x !== null && x !== undefined); return xs.length ? median(xs) : null }
    return {
      mode,
      runs: mine.length,
      workMs: med((x) => x.workMs),
      slowdown: ratio((x) => x.workMs) - 1,
      extraCpu: ratio((x) => x.cpuMs) - 1,
      // The process's CPU plus its profiler's (perf, 0x) in the same window.
      extraCpuTotal: ratio((x) => x.cpuMs + (x.profilerCpuMs || 0)) - 1,
      startMs: external(mode) ? null : med((x) => x.startMs),
      stopMs: external(mode) ? null : med((x) => x.stopMs),
      samples: med((x) => x.samples),
      samplesWholeRun: med((x) => x.samplesWholeRun),
      firstExtraCpu: ratio((x) => x.firstCpuMs) - 1,
      firstExtraCpuTotal: ratio((x) => x.firstCpuMs + (x.firstProfilerCpuMs || 0)) - 1,
      firstStopMs: external(mode) ? null : med((x) => x.firstStopMs),
      rssGrowthMB: med((x) => x.rssGrowthMB),
      firstRssGrowthMB: med((x) => x.firstRssGrowthMB),
      profilerMaxRssMB: external(mode) ? med((x) => x.profilerMaxRssKiB && x.profilerMaxRssKiB / 1024) : null,
      afterRunMs: external(mode) ? med((x) => x.afterRunMs) : null,
      postMs: external(mode) ? med((x) => x.postMs) : null,
      profilerTotalCpuMs: external(mode) ? med((x) => x.profilerTotalCpuMs) : null
    }
  })

  console.log(`overhead: ${rounds} rounds; ${machineLine(machine)}` +
    (tools.perf ? `; ${tools.perf}` : '') + (tools.zeroX ? `; 0x ${tools.zeroX.version}` : ''))
  console.log(formatTables(rows).join('\n'))
  for (const n of notes) console.log(`\nnote: ${n}`)
  if (jsonOut) {
    writeResults(jsonOut, machine, {
      quick,
      rounds,
      tools: { perf: tools.perf || null, zeroX: tools.zeroX ? tools.zeroX.version : null },
      notes,
      rows,
      runs
    })
  }
}

// The two markdown tables (cost; memory and after the run), shared with
// bench/table.js so the console and docs/benchmarks.md print the same.
function formatTables (rows) {
  const pct = (x) => x === null || x === undefined ? '-' : `${(x * 100).toFixed(1)}%`
  const num = (x, d = 2) => x === null || x === undefined ? '-' : x.toFixed(d)
  const name = {
    none: 'unprofiled',
    'kflame-99': 'kflame 99 Hz',
    'kflame-999': 'kflame 999 Hz',
    'v8-inspector': 'V8 CPU profiler (`inspector`, 1 ms)',
    'perf-99': '`perf record -F 99 -g` + `--perf-basic-prof`',
    'perf-999': '`perf record -F 999 -g` + `--perf-basic-prof`',
    '0x': '0x (V8 `--prof`, 1 ms)'
  }
  const out = []
  out.push('| mode | work (ms) | slowdown | extra CPU: process | extra CPU: with profiler process | `start()` ms | `stop()` ms | samples | first profile: extra CPU | first `stop()` ms |')
  out.push('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |')
  for (const r of rows) {
    const none = r.mode === 'none'
    let samples = r.samples !== null && r.samples !== undefined ? String(r.samples) : '-'
    if (samples === '-' && r.samplesWholeRun) samples = `${r.samplesWholeRun} (whole run)`
    out.push(`| ${name[r.mode] || r.mode} | ${r.workMs.toFixed(0)} | ${pct(r.slowdown)} | ${pct(r.extraCpu)} | ` +
      `${none ? '-' : pct(r.extraCpuTotal)} | ${none ? '-' : num(r.startMs)} | ${none ? '-' : num(r.stopMs)} | ${samples} | ` +
      `${none ? '-' : pct(r.firstExtraCpu) + (external(r.mode) ? ` (${pct(r.firstExtraCpuTotal)} with profiler)` : '')} | ${none ? '-' : num(r.firstStopMs)} |`)
  }
  // Results from before RSS was measured have no second table.
  if (!rows.some((r) => r.firstRssGrowthMB !== undefined)) return out
  out.push('')
  out.push('| mode | RSS growth: first profile (MB) | RSS growth: later profile (MB) | profiler process peak RSS (MB) | profiler exit after the workload (ms) | `perf script` (ms) | profiler process CPU, whole run (ms) |')
  out.push('| --- | --- | --- | --- | --- | --- | --- |')
  for (const r of rows) {
    if (r.mode === 'none') continue
    out.push(`| ${name[r.mode] || r.mode} | ${num(r.firstRssGrowthMB, 1)} | ${num(r.rssGrowthMB, 1)} | ${num(r.profilerMaxRssMB, 1)} | ` +
      `${num(r.afterRunMs, 0)} | ${num(r.postMs, 0)} | ${num(r.profilerTotalCpuMs, 0)} |`)
  }
  return out
}

module.exports = { formatTables }

if (require.main === module) main().catch((err) => { console.error(err); process.exitCode = 1 })

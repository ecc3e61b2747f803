'use strict'

// Overhead of profiling a CPU-bound workload, kflame against V8's own CPU
// profiler (through `inspector`, in-process, its default 1 ms interval), in
// one run. Each trial is a fresh node process; modes alternate (A B C D, A B
// C D, ...) so drift on the machine hits them alike. Reports medians and the
// median of per-round ratios against the unprofiled run.
//
//   node bench/overhead.js [--rounds N] [--json bench/results/overhead.json]

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { median, startInspectorProfiler } = require('./common')

const MODES = ['none', 'kflame-99', 'kflame-999', 'v8-inspector']

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

function child (mode) {
  const kflame = require('..')
  workload() // warm up the JIT before measuring
  // A process's first profile also loads the ELF symbol tables and kallsyms
  // (on a background thread, so its stop() only names); later profiles find
  // them cached. Both are measured: the first, then the steady state.
  const first = profileOnce(mode, kflame)
  const later = profileOnce(mode, kflame)
  return {
    mode,
    workMs: later.workMs,
    cpuMs: later.cpuMs,
    startMs: later.startMs,
    stopMs: later.stopMs,
    samples: later.samples,
    firstCpuMs: first.cpuMs,
    firstStopMs: first.stopMs
  }
}

function profileOnce (mode, kflame) {
  let session
  const t0 = process.hrtime.bigint()
  if (mode.startsWith('kflame-')) kflame.start({ hz: Number(mode.slice(7)) })
  if (mode === 'v8-inspector') {
    session = startInspectorProfiler()
  }
  const started = process.hrtime.bigint()
  const cpu0 = process.cpuUsage()
  workload()
  const worked = process.hrtime.bigint()
  let samples = 0
  if (mode.startsWith('kflame-')) samples = kflame.stop().stats.samples
  if (mode === 'v8-inspector') {
    session.post('Profiler.stop', (err, r) => { if (!err) samples = r.profile.samples.length })
    session.disconnect()
  }
  const stopped = process.hrtime.bigint()
  // CPU up to the end of stop(): work done at stop (naming) counts too.
  const cpu = process.cpuUsage(cpu0)
  return {
    workMs: Number(worked - started) / 1e6,
    cpuMs: (cpu.user + cpu.system) / 1000,
    startMs: Number(started - t0) / 1e6,
    stopMs: Number(stopped - worked) / 1e6,
    samples
  }
}


function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') { console.log(JSON.stringify(child(args[1]))); return }
  const rounds = Number(args[args.indexOf('--rounds') + 1]) || 7
  const jsonOut = args.includes('--json') ? args[args.indexOf('--json') + 1] : null
  const runs = []
  for (let r = 0; r < rounds; r++) {
    for (const mode of MODES) {
      const out = execFileSync(process.execPath, [__filename, '--child', mode], { encoding: 'utf8' })
      runs.push({ round: r, ...JSON.parse(out) })
    }
  }
  const base = runs.filter((x) => x.mode === 'none')
  const rows = MODES.map((mode) => {
    const mine = runs.filter((x) => x.mode === mode)
    const ratio = (key) => median(mine.map((x) => x[key] / base.find((b) => b.round === x.round)[key]))
    return {
      mode,
      workMs: median(mine.map((x) => x.workMs)),
      slowdown: ratio('workMs') - 1,
      extraCpu: ratio('cpuMs') - 1,
      startMs: median(mine.map((x) => x.startMs)),
      stopMs: median(mine.map((x) => x.stopMs)),
      firstExtraCpu: ratio('firstCpuMs') - 1,
      firstStopMs: median(mine.map((x) => x.firstStopMs)),
      samples: median(mine.map((x) => x.samples))
    }
  })
  const pct = (x) => `${(x * 100).toFixed(1)}%`
  console.log(`overhead: ${rounds} rounds, node ${process.version}, ${os.cpus().length} CPUs, ${os.release()}`)
  console.log('| mode | work (ms, median) | slowdown | extra CPU | start() ms | stop() ms | samples | first profile: extra CPU | first stop() ms |')
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
  for (const r of rows) {
    console.log(`| ${r.mode} | ${r.workMs.toFixed(0)} | ${pct(r.slowdown)} | ${pct(r.extraCpu)} | ` +
      `${r.startMs.toFixed(2)} | ${r.stopMs.toFixed(2)} | ${r.samples} | ${pct(r.firstExtraCpu)} | ${r.firstStopMs.toFixed(2)} |`)
  }
  if (jsonOut) {
    fs.mkdirSync(path.dirname(jsonOut), { recursive: true })
    fs.writeFileSync(jsonOut, JSON.stringify({
      date: new Date().toISOString(), node: process.version, kernel: os.release(), cpus: os.cpus().length, rounds, rows, runs
    }, null, 2))
  }
}

main()

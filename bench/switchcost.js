'use strict'

// What perf events on a thread cost it at every context switch, and what
// events per CPU cost instead: bench/c/switchcost.c, built here with cc, is
// run once per kind in each round (seeded random order, a fresh process
// each, 1 s), two threads pinned to one CPU passing a byte back and forth.
// Each kind's median round trip (two switches), and its extra per switch
// as the median of per-round differences against the round's run without
// events, with a bootstrap 95% interval. The reason kflame opens one event
// per CPU with a BPF filter where it may (src/sample/pidfilter.h), and
// samples off-CPU switches with a tracepoint program rather than a software
// event with records (src/sample/switchin.h).
//
//   node bench/switchcost.js [--rounds N] [--json bench/results/switchcost.json]

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { mulberry32, median, machineNotes, machineLine, writeResults } = require('./common')
const { shuffle, summarize } = require('./windows')

const KINDS = {
  none: 'no event',
  dummy: 'a per-thread dummy event (one per thread and CPU)',
  clock: 'a per-thread `cpu-clock` event at 99 Hz (one per thread and CPU: kflame per thread, `perf record -p`)',
  'clock-any': 'a per-thread `cpu-clock` event on any CPU (`cpu=-1`)',
  percpu: 'one `cpu-clock` event per CPU (`pid=-1`: kflame as root)',
  'switch-records': 'off-CPU per CPU without tracefs: a context-switch event per CPU (200 samples/s) with a `PERF_RECORD_SWITCH_CPU_WIDE` record per switch',
  'switch-events': 'of which the context-switch events per CPU alone (no records)',
  'switch-tracepoint': "off-CPU per CPU, kflame's way: a `sched_switch` tracepoint event per CPU, its program (`src/sample/switchin.c`) sampling 200 of this process's switches a second and stamping their switch-ins"
}

function main () {
  const args = process.argv.slice(2)
  const rounds = Number(args[args.indexOf('--rounds') + 1]) || 15
  const jsonOut = args.includes('--json') ? args[args.indexOf('--json') + 1] : null
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-switchcost-'))
  const bin = path.join(dir, 'switchcost')
  const src = path.join(__dirname, '..', 'src')
  const cc = spawnSync('cc', ['-O2', '-pthread', '-I', src, '-o', bin, path.join(__dirname, 'c', 'switchcost.c'),
    ...['switchin.c', 'bpfring.c', 'bpf.c', 'pidfilter.c'].map((f) => path.join(src, 'sample', f))], { encoding: 'utf8' })
  if (cc.error || cc.status !== 0) {
    console.log(`switchcost: skipped, cc failed: ${cc.error ? cc.error.message : cc.stderr.trim().split('\n')[0]}`)
    return
  }
  const machine = machineNotes()
  const once = (kind) => {
    const r = spawnSync(bin, [kind, '1'], { encoding: 'utf8' })
    return r.status === 0 ? Number(r.stdout) : null // null: not allowed here (percpu unprivileged)
  }
  const kinds = Object.keys(KINDS).filter((k) => once(k) !== null)
  const rand = mulberry32(41)
  const runs = []
  for (let round = 0; round < rounds; round++) {
    for (const kind of shuffle(kinds, rand)) runs.push({ round, kind, ns: once(kind) })
  }
  fs.rmSync(dir, { recursive: true, force: true })
  const rows = kinds.map((kind) => {
    const mine = runs.filter((r) => r.kind === kind)
    const perSwitch = mine.map((r) => (r.ns - runs.find((b) => b.round === r.round && b.kind === 'none').ns) / 2)
    return { kind, roundTripNs: median(mine.map((r) => r.ns)), extraPerSwitch: kind === 'none' ? null : summarize(perSwitch, 43) }
  })
  console.log(`switchcost: ${rounds} rounds, a fresh process per kind, 1 s each; ${machineLine(machine)}`)
  for (const line of readmeTables({ rows })) console.log(line)
  if (jsonOut) writeResults(jsonOut, machine, { rounds, rows, runs })
}

function readmeTables (r) {
  const us = (ns) => `${(ns / 1000).toFixed(2)} µs`
  return [
    '| events on the two threads | round trip (2 switches) | extra per switch (median, 95% CI) |',
    '| --- | --- | --- |',
    ...r.rows.map((x) => `| ${KINDS[x.kind]} | ${us(x.roundTripNs)} | ` +
      `${x.extraPerSwitch ? `${us(x.extraPerSwitch.median)} [${us(x.extraPerSwitch.ci95[0])}, ${us(x.extraPerSwitch.ci95[1])}]` : '-'} |`)
  ]
}

if (require.main === module) main()
module.exports = { readmeTables }

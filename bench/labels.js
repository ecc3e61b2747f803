'use strict'

// What kflame.label(name, fn) costs per call, against calling fn directly:
// while no profile runs (the promise of the API: next to nothing) and while
// one runs at 99 Hz. Sync labels; an async one adds a promise of its own.
// Rounds alternate the three, in one process, and report medians.
//
//   node bench/labels.js [--rounds N] [--json bench/results/labels.json]

const kflame = require('..')
const { median, machineNotes, machineLine, writeResults, option } = require('./common')

const CALLS = 1e6

let sink = 0
function work () { sink++ }

// Nanoseconds per call of body(i) over `calls` calls.
function perCall (calls, body) {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < calls; i++) body()
  return Number(process.hrtime.bigint() - t0) / calls
}

const modes = {
  direct: () => perCall(CALLS, work),
  'label, not profiling': () => perCall(CALLS, () => kflame.label('bench', work)),
  'label, profiling': () => {
    kflame.start({ hz: 99 })
    try {
      return perCall(CALLS / 10, () => kflame.label('bench', work))
    } finally {
      kflame.stop()
    }
  }
}

function main () {
  const args = process.argv.slice(2)
  const rounds = Number(option(args, '--rounds') || 9)
  const json = option(args, '--json')
  const machine = machineNotes()
  const ns = Object.fromEntries(Object.keys(modes).map((m) => [m, []]))
  for (const run of Object.values(modes)) run() // warm up the JIT
  for (let r = 0; r < rounds; r++) {
    for (const [m, run] of Object.entries(modes)) ns[m].push(run())
  }
  const direct = median(ns.direct)
  const rows = Object.keys(modes).map((m) => ({
    mode: m,
    nsPerCall: +median(ns[m]).toFixed(2),
    extraNs: m === 'direct' ? 0 : +(median(ns[m]) - direct).toFixed(2)
  }))
  console.log(`kflame.label() cost, ${rounds} rounds, medians (${machineLine(machine)})`)
  console.log('mode                     ns/call   extra ns')
  for (const r of rows) console.log(`${r.mode.padEnd(24)} ${String(r.nsPerCall).padStart(8)} ${String(r.extraNs).padStart(10)}`)
  if (json) writeResults(json, machine, { rounds, rows })
  if (sink < 0) console.log(sink)
}

main()

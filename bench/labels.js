'use strict'

// What kflame.label(name, fn) costs per call, against calling fn directly:
// while no profile runs (the promise of the API: next to nothing) and while
// one runs at 99 Hz. Sync labels; an async one adds a promise of its own.
// Rounds alternate the three, in one process, and report medians.
//
//   node bench/labels.js [--rounds N] [--json bench/results/labels.json]

const fs = require('node:fs')
const path = require('node:path')
const kflame = require('..')
const { median } = require('./common')

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
  const at = (name) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined }
  const rounds = Number(at('--rounds') || 9)
  const json = at('--json')
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
  console.log(`kflame.label() cost, ${rounds} rounds, medians (node ${process.version})`)
  console.log('mode                     ns/call   extra ns')
  for (const r of rows) console.log(`${r.mode.padEnd(24)} ${String(r.nsPerCall).padStart(8)} ${String(r.extraNs).padStart(10)}`)
  if (json) {
    fs.mkdirSync(path.dirname(path.resolve(json)), { recursive: true })
    fs.writeFileSync(json, JSON.stringify({ date: new Date().toISOString(), node: process.version, rounds, rows }, null, 2) + '\n')
  }
  if (sink < 0) console.log(sink)
}

main()

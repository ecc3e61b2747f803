'use strict'

// What arming V8's code-event hook in workers that never load kflame costs
// (lib/workers.js: the inspector's NodeWorker domain, then process.dlopen
// of the addon in each worker): a pool of short-lived workers, each doing a
// little JS and exiting, created one after another.
//
// Method: separate processes, alternated (plain node; node that loaded
// kflame with the hook armed at load; the same with KFLAME_JIT=lazy, where
// workers are not armed until start()), --rounds rounds each, median and
// range of the time per worker (creation to 'exit'). No profile runs: this
// is the cost of arming alone; profiling adds what bench/overhead.js shows.
//
//   node bench/workers.js [--workers 40] [--rounds 7] [--json FILE]

const { spawnSync } = require('node:child_process')
const path = require('node:path')
const { machineNotes, machineLine, writeResults, option, median } = require('./common')

const ROOT = path.join(__dirname, '..')
const args = process.argv.slice(2)
const workers = Number(option(args, '--workers') || 40)
const rounds = Number(option(args, '--rounds') || (args.includes('--quick') ? 3 : 7))
const json = option(args, '--json')

function formatTables (r) {
  return [
    '| mode | ms per worker, median of rounds (range) | workers armed |',
    '| --- | --- | --- |',
    ...r.modes.map((m) => `| ${m.name} | ${m.msPerWorker.toFixed(2)} (${m.min.toFixed(2)}-${m.max.toFixed(2)}) | ${m.armed} |`)
  ]
}

const CHILD = `
const load = process.argv[1]
if (load !== 'none') require(${JSON.stringify(ROOT)})
const { Worker } = require('node:worker_threads')
const code = 'let s = 0; for (let i = 0; i < 2e5; i++) s += i % 7; require("node:worker_threads").parentPort.postMessage(s)'
const n = Number(process.argv[2])
const times = []
let armed = 0
function one (i) {
  if (i === n) {
    if (load !== 'none') armed = require(${JSON.stringify(path.join(ROOT, 'lib', 'workers.js'))}).status().armed
    process.stdout.write(JSON.stringify({ times, armed }))
    return
  }
  const t0 = performance.now()
  const w = new Worker(code, { eval: true })
  w.on('message', () => {})
  w.on('exit', () => { times.push(performance.now() - t0); setImmediate(one, i + 1) })
}
one(0)
`

const MODES = [
  { name: 'node alone', load: 'none', env: {} },
  { name: 'kflame loaded, workers armed', load: 'kflame', env: {} },
  { name: 'kflame loaded, KFLAME_JIT=lazy', load: 'kflame', env: { KFLAME_JIT: 'lazy' } }
]

function main () {
  const perMode = MODES.map(() => [])
  const armedCounts = MODES.map(() => [])
  for (let r = 0; r < rounds; r++) {
    MODES.forEach((m, i) => {
      const res = spawnSync(process.execPath, ['-e', CHILD, m.load, String(workers)], {
        env: { ...process.env, ...m.env }, encoding: 'utf8', timeout: 120000
      })
      if (res.status !== 0) throw new Error(`${m.name}: exit ${res.status}: ${res.stderr}`)
      const out = JSON.parse(res.stdout)
      perMode[i].push(median(out.times))
      armedCounts[i].push(out.armed)
    })
  }

  const machine = machineNotes()
  const result = {
    workers,
    rounds,
    modes: MODES.map((m, i) => ({
      name: m.name,
      msPerWorker: median(perMode[i]),
      min: Math.min(...perMode[i]),
      max: Math.max(...perMode[i]),
      armed: median(armedCounts[i])
    }))
  }
  console.log(`workers: ${workers} short-lived workers in a row, ${rounds} rounds per mode, ${machineLine(machine)}`)
  console.log(formatTables(result).join('\n'))
  if (json) writeResults(json, machine, result)
}

if (require.main === module) main()

module.exports = { formatTables }


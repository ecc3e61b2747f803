'use strict'

// How long `/stop` holds the event loop: kflame.stop() (drain, join, name
// the stacks) plus rendering the answer, for profiles of the length an
// endpoint user takes (10 s, 60 s) at 99 and 999 Hz, while a mixed workload
// runs on the main thread and the libuv pool. Each profile is taken in a
// fresh process after one warm-up profile (symbols loaded: the steady state
// of a server that has been profiled before). Medians over the rounds.
//
//   node bench/stop.js [--quick] [--rounds N] [--json bench/results/stop.json]

const { execFileSync } = require('node:child_process')
const { median, machineNotes, machineLine, writeResults, option } = require('./common')

const FORMATS = ['folded', 'svg', 'cpuprofile', 'trace', 'pprof']

// Runs in the child: profiles `seconds` of work, then times stop() and
// every rendering, one after the other as /stop would for one of them.
async function child (seconds, hz) {
  const kflame = require('..')
  const crypto = require('node:crypto')
  const fib = (n) => n < 2 ? n : fib(n - 1) + fib(n - 2)
  const doc = { items: Array.from({ length: 200 }, (_, i) => ({ i, s: `item-${i}` })) }
  let sink = 0
  const work = async (ms) => {
    const end = Date.now() + ms
    while (Date.now() < end) {
      sink += fib(20)
      sink += JSON.parse(JSON.stringify(doc)).items.length
      sink += /(\d+)-(\w+)/.exec(`x ${end}-abc`)[1].length
      await new Promise((resolve) => crypto.pbkdf2('pw', 'salt', 2000, 32, 'sha256', resolve))
    }
  }
  kflame.start({ hz })
  await work(300)
  kflame.stop() // warm-up: loads the symbol tables
  kflame.start({ hz })
  await work(seconds * 1000)
  const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6
  let t0 = process.hrtime.bigint()
  const profile = kflame.stop()
  // Lines are counted after the renderings: the first read of profile.folded
  // makes the JS string (a live profile's text stays in C until then), and
  // that cost belongs to the folded column.
  const result = { stopMs: ms(t0), samples: profile.stats.samples }
  const render = {
    folded: () => profile.folded,
    svg: () => profile.svg(),
    cpuprofile: () => JSON.stringify(profile.cpuprofile()),
    trace: () => JSON.stringify(profile.traceEvents()),
    pprof: () => profile.pprof()
  }
  for (const f of FORMATS) {
    t0 = process.hrtime.bigint()
    render[f]()
    result[f] = ms(t0)
  }
  result.lines = profile.folded.split('\n').length - 1
  result.sink = sink
  process.stdout.write(JSON.stringify(result))
}

function main () {
  const args = process.argv.slice(2)
  const quick = args.includes('--quick')
  const rounds = Number(option(args, '--rounds') || (quick ? 1 : 3))
  const json = option(args, '--json')
  const cases = quick ? [[5, 99], [5, 999]] : [[10, 99], [10, 999], [60, 99], [60, 999]]
  const machine = machineNotes()
  console.log(`/stop cost: stop() and each rendering, ${rounds} rounds (${machineLine(machine)})`)
  const rows = []
  for (const [seconds, hz] of cases) {
    const runs = []
    for (let r = 0; r < rounds; r++) {
      const out = execFileSync(process.execPath, [__filename, '--child', String(seconds), String(hz)], { encoding: 'utf8' })
      runs.push(JSON.parse(out))
    }
    const row = { seconds, hz, samples: median(runs.map((x) => x.samples)), lines: median(runs.map((x) => x.lines)) }
    row.stopMs = +median(runs.map((x) => x.stopMs)).toFixed(1)
    for (const f of FORMATS) row[f] = +median(runs.map((x) => x[f])).toFixed(1)
    rows.push(row)
    console.log(JSON.stringify(row))
  }
  if (json) writeResults(json, machine, { quick, rounds, formats: FORMATS, rows })
}

// The table of docs/benchmarks.md, for bench/table.js.
function readmeTables (r) {
  return [
    '| profile | samples | stacks | `stop()` ms | + folded | + svg | + cpuprofile | + trace | + pprof |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...r.rows.map((x) => `| ${x.seconds} s at ${x.hz} Hz | ${x.samples} | ${x.lines} | ${x.stopMs} | ` +
      r.formats.map((f) => x[f]).join(' | ') + ' |')
  ]
}

if (process.argv[2] === '--child') {
  child(Number(process.argv[3]), Number(process.argv[4]))
} else if (require.main === module) {
  main()
}

module.exports = { readmeTables }

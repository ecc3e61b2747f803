'use strict'

// What off-CPU sampling costs an HTTP server under load, by the alternating-
// windows method (bench/windows.js): separate server processes scatter by
// 10-20% on a shared VM, so one server process is profiled in ~1 s windows,
// each round every kind once in a seeded random order, while one autocannon
// process keeps it loaded for the whole run. A window's cost is the server
// process's CPU time (every thread, user and system: the kernel's callchain
// walks and stack copies at each switch are charged to the switching thread,
// the collector's draining to kflame-collect) per request served; the result
// is the per-round ratio against the round's unprofiled window: median and
// bootstrap 95% interval. start() and stop() are outside the windows. The
// floor beside them: `perf record -F 99 -g -p SERVER` windows (perf started
// for each and ended after, its start-up before its events are on; its own
// process's CPU reported apart): what per-thread perf events cost this
// server whoever opens them.
//
// The handler builds ~2 KB of JSON and every 4th request stats a file through
// the thread pool, so the pool's threads switch as a real server's do.
//
//   npm install --prefix /tmp/kfhttp autocannon      # not a dependency of kflame
//   node bench/offcpu.js --autocannon /tmp/kfhttp [--rounds N] [--json bench/results/offcpu.json]

const { fork, spawn } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { mulberry32, median, machineNotes, machineLine, writeResults, startPerf, perfCheck, procCpuMs } = require('./common')
const { shuffle, summarize } = require('./windows')

const KINDS = [
  { kind: 'none' },
  { kind: 'cpu-99', options: { hz: 99 } },
  // The timer sampler: no perf event on the threads, nothing at a switch.
  { kind: 'timer-99', options: { hz: 99, mode: 'timer' } },
  { kind: 'both-99', options: { hz: 99, what: 'both', maxSwitchRate: 0 } },
  { kind: 'both-99-r1000', options: { hz: 99, what: 'both', maxSwitchRate: 1000 } },
  { kind: 'both-99-r200', options: { hz: 99, what: 'both', maxSwitchRate: 200 } },
  // The floor: `perf record -F 99 -g -p SERVER` (per-thread events on every
  // CPU, as kflame's), its events switched on around its windows.
  { kind: 'perf-99', perf: true }
]
const WINDOW_MS = 1000
const CONNECTIONS = 10

function child () {
  const kflame = require('..')
  const http = require('node:http')
  let served = 0
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://localhost')
    const n = Math.min(Number(url.searchParams.get('n')) || 16, 100)
    const items = []
    for (let i = 0; i < n; i++) items.push({ id: i, name: `item ${i} ${url.searchParams.get('q')}`, price: 19.99 + i * 3.5, tags: ['a', 'b', String(i % 7)] })
    const body = JSON.stringify({ items, total: n })
    const send = () => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(body); served++ }
    if (served % 4 === 0) fs.stat(__filename, send)
    else send()
  })
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }))
  process.on('message', (msg) => {
    if (msg.cmd !== 'window') return
    const k = KINDS.find((x) => x.kind === msg.kind)
    if (k.options) kflame.start(k.options)
    const cpu0 = process.cpuUsage()
    const served0 = served
    const t0 = process.hrtime.bigint()
    setTimeout(() => {
      const cpu = process.cpuUsage(cpu0)
      const requests = served - served0
      const wallMs = Number(process.hrtime.bigint() - t0) / 1e6
      let switches = 0
      if (k.options) {
        const p = kflame.stop()
        switches = p.stats.details.switchSamples
      }
      process.send({ kind: k.kind, requests, cpuMs: (cpu.user + cpu.system) / 1000, wallMs, switches })
    }, WINDOW_MS)
  })
}

async function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') { child(); return }
  const rounds = Number(args[args.indexOf('--rounds') + 1]) || 20
  const jsonOut = args.includes('--json') ? args[args.indexOf('--json') + 1] : null
  const dir = args.includes('--autocannon') ? args[args.indexOf('--autocannon') + 1] : process.env.AUTOCANNON_DIR
  const bin = dir && path.join(dir, 'node_modules', '.bin', 'autocannon')
  if (!bin || !fs.existsSync(bin)) {
    console.log('offcpu: skipped, no autocannon: pass --autocannon DIR after `npm install --prefix DIR autocannon`')
    return
  }
  const machine = machineNotes()
  const server = fork(__filename, ['--child'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const { port } = await new Promise((resolve) => server.once('message', resolve))
  const seconds = Math.ceil(rounds * KINDS.length * (WINDOW_MS + 300) / 1000) + 10 // perf's row included
  const loader = spawn(bin, ['-c', String(CONNECTIONS), '-d', String(seconds), `http://127.0.0.1:${port}/items?n=16&q=red`],
    { stdio: 'ignore' })
  await new Promise((resolve) => setTimeout(resolve, 3000)) // warm-up
  // perf is started for each of its windows and ended after: its events,
  // even disabled, would stay on the server's threads and tax every
  // context switch of the other windows too. Its start-up (reading the
  // process's maps) is before its events are switched on.
  const hasPerf = perfCheck().ok
  const kinds = KINDS.filter((k) => !k.perf || hasPerf)
  const window = async (kind) => {
    const perf = KINDS.find((k) => k.kind === kind).perf ? startPerf({ pid: server.pid, hz: 99 }) : null
    if (perf) perf.enable()
    const perf0 = perf ? procCpuMs(perf.pid) : 0
    const r = await new Promise((resolve) => {
      server.once('message', resolve)
      server.send({ cmd: 'window', kind })
    })
    if (perf) {
      r.perfCpuMs = procCpuMs(perf.pid) - perf0 // perf's own process, apart
      perf.disable()
      await perf.close()
    }
    return r
  }
  await window('both-99') // kflame's first session loads the symbol tables: not measured
  const rand = mulberry32(16)
  const runs = []
  for (let r = 0; r < rounds; r++) {
    for (const kind of shuffle(kinds.map((k) => k.kind), rand)) runs.push({ round: r, ...await window(kind) })
  }
  loader.kill()
  server.kill()

  const perReq = (x) => x.cpuMs / x.requests
  const rows = kinds.map(({ kind }) => {
    const mine = runs.filter((x) => x.kind === kind)
    const ratios = mine.map((x) => perReq(x) / perReq(runs.find((b) => b.round === x.round && b.kind === 'none')) - 1)
    return {
      kind,
      reqPerS: median(mine.map((x) => x.requests / x.wallMs * 1000)),
      cpuUsPerReq: median(mine.map(perReq)) * 1000,
      switchSamplesPerS: median(mine.map((x) => x.switches / x.wallMs * 1000)),
      perfOwnCpuUsPerReq: kind === 'perf-99' ? median(mine.map((x) => x.perfCpuMs / x.requests)) * 1000 : null,
      extraCpuPerReq: kind === 'none' ? null : summarize(ratios, 7)
    }
  })
  const pct = (v) => `${v >= 0 ? '+' : ''}${(v * 100).toFixed(1)}%`
  if (!hasPerf) console.log(`offcpu: no perf row: ${perfCheck().why}`)
  console.log(`offcpu: ${rounds} rounds × ${kinds.length} alternating ${WINDOW_MS} ms windows in one server process, ` +
    `${CONNECTIONS} connections (autocannon); ${machineLine(machine)}`)
  console.log('| kind | req/s | server CPU µs/req | switch stacks/s | extra CPU/req (median, 95% CI) |')
  console.log('| --- | --- | --- | --- | --- |')
  for (const r of rows) {
    const e = r.extraCpuPerReq
    console.log(`| ${r.kind} | ${Math.round(r.reqPerS)} | ${r.cpuUsPerReq.toFixed(1)} | ${Math.round(r.switchSamplesPerS)} | ` +
      `${e ? `${pct(e.median)} [${pct(e.ci95[0])}, ${pct(e.ci95[1])}]` : '-'} |` +
      `${r.perfOwnCpuUsPerReq !== null ? ` (perf's own process: ${r.perfOwnCpuUsPerReq.toFixed(1)} µs/req)` : ''}`)
  }
  if (jsonOut) writeResults(jsonOut, machine, { rounds, windowMs: WINDOW_MS, connections: CONNECTIONS, rows, runs })
}


// Rows of docs/benchmarks.md (bench/table.js), with the words the table needs beside it.
const KIND_NAMES = {
  none: 'unprofiled',
  'cpu-99': 'CPU, 99 Hz',
  'timer-99': 'CPU, 99 Hz, timer mode',
  'both-99': 'both, 99 Hz, every switch (`maxSwitchRate: 0`, the default)',
  'both-99-r1000': 'both, `maxSwitchRate: 1000`',
  'both-99-r200': 'both, `maxSwitchRate: 200`',
  'perf-99': 'floor: `perf record -F 99 -g -p` (its own process apart)'
}
function readmeTables (r) {
  const pct = (v) => `${v >= 0 ? '+' : ''}${(v * 100).toFixed(1)}%`
  return [
    '| kind | req/s | server CPU µs/req | switch stacks/s | extra CPU / request |',
    '| --- | --- | --- | --- | --- |',
    ...r.rows.map((x) => `| ${KIND_NAMES[x.kind] || x.kind} | ${Math.round(x.reqPerS).toLocaleString('en')} | ${x.cpuUsPerReq.toFixed(1)} | ` +
      `${x.switchSamplesPerS ? Math.round(x.switchSamplesPerS).toLocaleString('en') : '-'} | ` +
      `${x.extraCpuPerReq ? `${pct(x.extraCpuPerReq.median)} [${pct(x.extraCpuPerReq.ci95[0])}, ${pct(x.extraCpuPerReq.ci95[1])}]` : '-'}` +
      `${x.perfOwnCpuUsPerReq ? `; perf's own process ${x.perfOwnCpuUsPerReq.toFixed(1)} µs/req` : ''} |`)
  ]
}

if (require.main === module) main().catch((err) => { console.error(err); process.exit(1) })
module.exports = { readmeTables }

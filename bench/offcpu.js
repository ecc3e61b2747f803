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
// Latency: the parent keeps one more keep-alive connection busy during each
// window, one request at a time, and takes the window's p99 of those
// round trips (queueing behind the load's requests included); the row's
// figure is the per-round ratio against the round's unprofiled window.
//
// The handler builds ~2 KB of JSON and every 4th request stats a file through
// the thread pool, so the pool's threads switch as a real server's do.
//
//   npm install --prefix /tmp/kfhttp autocannon      # not a dependency of kflame
//   node bench/offcpu.js --autocannon /tmp/kfhttp [--rounds N] [--window-ms MS]
//        [--kinds none,cpu-99,...] [--json bench/results/offcpu.json]

const { fork, spawn } = require('node:child_process')
const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const { mulberry32, median, machineNotes, machineLine, writeResults, startPerf, perfCheck, procCpuMs } = require('./common')
const { shuffle, summarize } = require('./windows')

const KINDS = [
  { kind: 'none' },
  // Unprofiled again: what two unprofiled windows of a round differ by,
  // the method's own resolution (an A/A row).
  { kind: 'none-again' },
  // perf mode: CPU-wide events with the kernel's pid filter where allowed
  // (root), else per thread; and per thread forced.
  { kind: 'cpu-99', options: { hz: 99 } },
  { kind: 'cpu-99-threads', options: { hz: 99, perfScope: 'threads' } },
  // The timer sampler: no perf event on the threads, nothing at a switch.
  { kind: 'timer-99', options: { hz: 99, mode: 'timer' } },
  { kind: 'both-99', options: { hz: 99, what: 'both', maxSwitchRate: 0 } },
  { kind: 'both-99-r1000', options: { hz: 99, what: 'both', maxSwitchRate: 1000 } },
  { kind: 'both-99-r200', options: { hz: 99, what: 'both', maxSwitchRate: 200 } },
  { kind: 'both-99-r100', options: { hz: 99, what: 'both', maxSwitchRate: 100 } },
  // Off-CPU alone, bounded: what the switch events add to a CPU profile.
  { kind: 'offcpu-r200', options: { what: 'offcpu', maxSwitchRate: 200 } },
  { kind: 'offcpu-r100', options: { what: 'offcpu', maxSwitchRate: 100 } },
  // Nearly no stacks: what the switch events and the switch-in stamps cost
  // by themselves, at every switch.
  { kind: 'offcpu-r10', options: { what: 'offcpu', maxSwitchRate: 10 } },
  { kind: 'both-99-r10', options: { hz: 99, what: 'both', maxSwitchRate: 10 } },
  // Bounded, without the user-stack copy: what the copy adds to a stack.
  { kind: 'offcpu-r200-nocopy', options: { what: 'offcpu', maxSwitchRate: 200, stackBytes: 0 } },
  // Off-CPU per thread forced (as for any user but root): a per-thread
  // event costs its thread at every switch.
  { kind: 'both-99-r200-threads', options: { hz: 99, what: 'both', maxSwitchRate: 200, perfScope: 'threads' } },
  // The floor: `perf record -F 99 -g -p SERVER` (per-thread events on every
  // CPU, as kflame's), its events switched on around its windows.
  { kind: 'perf-99', perf: true }
]
const WINDOW_MS = 1000 // --window-ms
const CONNECTIONS = 10

function child (windowMs) {
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
    const ctx0 = contextSwitches()
    const threads0 = threadCpu()
    const cpu0 = process.cpuUsage()
    const served0 = served
    const t0 = process.hrtime.bigint()
    setTimeout(() => {
      const cpu = process.cpuUsage(cpu0)
      const requests = served - served0
      const wallMs = Number(process.hrtime.bigint() - t0) / 1e6
      const ctxSwitches = contextSwitches() - ctx0
      const threads = threadCpu()
      for (const [name, ns] of Object.entries(threads0)) threads[name] = (threads[name] || 0) - ns
      let switches = 0
      let switchIns = null
      if (k.options) {
        const p = kflame.stop()
        switches = p.stats.details.switchSamples
        switchIns = p.stats.details.switchIns
      }
      process.send({ kind: k.kind, requests, cpuMs: (cpu.user + cpu.system) / 1000, sysMs: cpu.system / 1000, wallMs, switches, ctxSwitches, switchIns, threads })
    }, windowMs)
  })
}

// The server's context switches so far, every thread's (threads that ended
// drop out: the server's do not end).
function contextSwitches () {
  let n = 0
  for (const tid of fs.readdirSync('/proc/self/task')) {
    try {
      const status = fs.readFileSync(`/proc/self/task/${tid}/status`, 'utf8')
      for (const m of status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)/gm)) n += Number(m[1])
    } catch {} // ended meanwhile
  }
  return n
}

// CPU ns of the server's threads so far: the event loop's, kflame's own
// threads', and the rest's (libuv's pool and V8's helpers, all named node).
function threadCpu () {
  const out = {}
  for (const tid of fs.readdirSync('/proc/self/task')) {
    try {
      const comm = fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim()
      const ns = Number(fs.readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0])
      const kind = tid === String(process.pid) ? 'main' : /^kflame/.test(comm) ? 'kflame' : 'other'
      out[kind] = (out[kind] || 0) + ns
    } catch {} // ended meanwhile
  }
  return out
}

// Sends requests one after another on one keep-alive connection until
// stop() is called -> the round trips in ms.
function probe (port) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const times = []
  let running = true
  const done = new Promise((resolve) => {
    const next = () => {
      if (!running) { agent.destroy(); resolve(times); return }
      const t0 = process.hrtime.bigint()
      http.get({ host: '127.0.0.1', port, path: '/items?n=16&q=probe', agent }, (res) => {
        res.resume()
        res.on('end', () => { times.push(Number(process.hrtime.bigint() - t0) / 1e6); next() })
      }).on('error', () => { running = false; next() })
    }
    next()
  })
  return { stop: () => { running = false; return done } }
}

const pct = (v) => `${v >= 0 ? '+' : ''}${(v * 100).toFixed(1)}%`
// A median with its 95% interval (windows.js summarize()).
const ci = (e) => e ? `${pct(e.median)} [${pct(e.ci95[0])}, ${pct(e.ci95[1])}]` : '-'

function quantile (values, q) {
  const v = [...values].sort((a, b) => a - b)
  return v[Math.min(v.length - 1, Math.floor(q * v.length))]
}

async function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') { child(Number(args[1])); return }
  const rounds = Number(args[args.indexOf('--rounds') + 1]) || 20
  const windowMs = args.includes('--window-ms') ? Number(args[args.indexOf('--window-ms') + 1]) : WINDOW_MS
  const only = args.includes('--kinds') ? args[args.indexOf('--kinds') + 1].split(',') : null
  const jsonOut = args.includes('--json') ? args[args.indexOf('--json') + 1] : null
  const dir = args.includes('--autocannon') ? args[args.indexOf('--autocannon') + 1] : process.env.AUTOCANNON_DIR
  const bin = dir && path.join(dir, 'node_modules', '.bin', 'autocannon')
  if (!bin || !fs.existsSync(bin)) {
    console.log('offcpu: skipped, no autocannon: pass --autocannon DIR after `npm install --prefix DIR autocannon`')
    return
  }
  const machine = machineNotes()
  const server = fork(__filename, ['--child', String(windowMs)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const { port } = await new Promise((resolve) => server.once('message', resolve))
  const seconds = Math.ceil(rounds * KINDS.length * (windowMs + 300) / 1000) + 10 // perf's row included
  const loader = spawn(bin, ['-c', String(CONNECTIONS), '-d', String(seconds), `http://127.0.0.1:${port}/items?n=16&q=red`],
    { stdio: 'ignore' })
  await new Promise((resolve) => setTimeout(resolve, 3000)) // warm-up
  // perf is started for each of its windows and ended after: its events,
  // even disabled, would stay on the server's threads and tax every
  // context switch of the other windows too. Its start-up (reading the
  // process's maps) is before its events are switched on.
  const hasPerf = perfCheck().ok
  const kinds = KINDS.filter((k) => (!k.perf || hasPerf) && (!only || only.includes(k.kind) || k.kind === 'none'))
  const window = async (kind) => {
    const perf = KINDS.find((k) => k.kind === kind).perf ? startPerf({ pid: server.pid, hz: 99 }) : null
    if (perf) perf.enable()
    const perf0 = perf ? procCpuMs(perf.pid) : 0
    const latency = probe(port)
    const r = await new Promise((resolve) => {
      server.once('message', resolve)
      server.send({ cmd: 'window', kind })
    })
    const times = await latency.stop()
    r.p99Ms = quantile(times, 0.99)
    r.p50Ms = quantile(times, 0.5)
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

  const rows = kinds.map(({ kind }) => {
    const mine = runs.filter((x) => x.kind === kind)
    const base = (x) => runs.find((b) => b.round === x.round && b.kind === 'none')
    const ratios = mine.map((x) => perReq(x) / perReq(base(x)) - 1)
    // the kernel's part alone (switch events, programs, callchain walks and
    // stack copies are system time): less noisy than the JS's user time
    const sysRatios = mine.map((x) => (x.sysMs / x.requests - base(x).sysMs / base(x).requests) / perReq(base(x)))
    const throughput = mine.map((x) => rate(x) / rate(base(x)) - 1)
    const p99 = mine.map((x) => x.p99Ms / base(x).p99Ms - 1)
    return {
      kind,
      reqPerS: median(mine.map((x) => x.requests / x.wallMs * 1000)),
      cpuUsPerReq: median(mine.map(perReq)) * 1000,
      switchSamplesPerS: median(mine.map((x) => x.switches / x.wallMs * 1000)),
      switchSamplesPerReq: median(mine.map((x) => x.switches / x.requests)),
      contextSwitchesPerReq: median(mine.map((x) => x.ctxSwitches / x.requests)),
      threadUsPerReq: Object.fromEntries(['main', 'kflame', 'other'].map((t) =>
        [t, median(mine.map((x) => (x.threads[t] || 0) / 1000 / x.requests))])),
      perfOwnCpuUsPerReq: kind === 'perf-99' ? median(mine.map((x) => x.perfCpuMs / x.requests)) * 1000 : null,
      p99Ms: median(mine.map((x) => x.p99Ms)),
      extraCpuPerReq: kind === 'none' ? null : summarize(ratios, 7),
      sysUsPerReq: median(mine.map((x) => x.sysMs / x.requests)) * 1000,
      extraSysPerReq: kind === 'none' ? null : summarize(sysRatios, 10),
      throughputChange: kind === 'none' ? null : summarize(throughput, 8),
      p99Change: kind === 'none' ? null : summarize(p99, 9),
      againstBoth: kind === 'none' ? null : againstBoth(runs, kind)
    }
  })
  if (!hasPerf) console.log(`offcpu: no perf row: ${perfCheck().why}`)
  console.log(`offcpu: ${rounds} rounds × ${kinds.length} alternating ${windowMs} ms windows in one server process, ` +
    `${CONNECTIONS} connections (autocannon); ${machineLine(machine)}`)
  console.log('| kind | req/s | server CPU µs/req | switch stacks/s | probe p99 ms | extra CPU/req (median, 95% CI) | throughput | probe p99 |')
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |')
  for (const r of rows) {
    console.log(`| ${r.kind} | ${Math.round(r.reqPerS)} | ${r.cpuUsPerReq.toFixed(1)} | ${Math.round(r.switchSamplesPerS)} | ` +
      `${r.p99Ms.toFixed(2)} | ${ci(r.extraCpuPerReq)} | ${ci(r.throughputChange)} | ${ci(r.p99Change)} |` +
      `${r.perfOwnCpuUsPerReq !== null ? ` (perf's own process: ${r.perfOwnCpuUsPerReq.toFixed(1)} µs/req)` : ''}`)
  }
  for (const r of rows.filter((x) => x.againstBoth)) {
    const b = r.againstBoth
    console.log(`offcpu: ${r.kind} against both unprofiled windows: CPU/req ${ci(b.extraCpuPerReq)}, ` +
      `throughput ${ci(b.throughputChange)}, probe p99 ${ci(b.p99Change)}`)
  }
  for (const r of rows) {
    console.log(`offcpu: ${r.kind}: system ${r.sysUsPerReq.toFixed(2)} µs/req, extra ${ci(r.extraSysPerReq)} of the CPU/req; ` +
      `${r.contextSwitchesPerReq.toFixed(2)} switches/req; CPU µs/req by thread: ` +
      Object.entries(r.threadUsPerReq).map(([t, us]) => `${t} ${us.toFixed(2)}`).join(', '))
  }
  const attributed = attribute(rows, runs)
  for (const a of attributed) {
    console.log(`offcpu: ${a.kind} attributed: ${pct(a.extra)} [${pct(a.low)}, ${pct(a.high)}] CPU/req = ` +
      `${a.contextSwitchesPerReq.toFixed(2)} switches/req × ${a.perSwitchUs.map((v) => v.toFixed(2)).join('-')} µs ` +
      `+ ${a.switchSamplesPerReq.toFixed(4)} stacks/req × ${a.perSampleUs.map((v) => v.toFixed(1)).join('-')} µs`)
  }
  if (jsonOut) writeResults(jsonOut, machine, { rounds, windowMs, connections: CONNECTIONS, rows, attributed, runs })
}

// What a bounded off-CPU profile costs, attributed: a window's difference
// of a few percent is within this VM's noise, but its two parts are each
// measured with a tight interval. Every context switch on the machine pays
// the per-CPU switch events and the sched_switch program (bench/switchcost.js:
// its switch-tracepoint row, this machine's), and every switched-out stack
// taken costs what the unbounded kind's stacks cost each (both-99, which
// takes tens of thousands a second: its extra CPU against cpu-99's, per
// stack). So a kind's cost is the unprofiled server's switches per request
// times the first plus its stacks per request times the second, the
// interval from both intervals' ends. Only where the run took switch-ins
// from the tracepoint (as root with tracefs), and both-99 and cpu-99 ran.
function attribute (rows, runs) {
  const row = (kind) => rows.find((r) => r.kind === kind)
  const none = row('none')
  const every = row('both-99')
  const cpu = row('cpu-99')
  const file = path.join(__dirname, 'results', 'switchcost.json')
  const perSwitch = fs.existsSync(file) &&
    JSON.parse(fs.readFileSync(file, 'utf8')).rows.find((r) => r.kind === 'switch-tracepoint')
  const tracepoint = runs.some((x) => x.switchIns === 'tracepoint') && !runs.some((x) => x.switchIns === 'records')
  if (!none || !every || !cpu || !perSwitch || !perSwitch.extraPerSwitch || !tracepoint) return []
  const switchUs = [perSwitch.extraPerSwitch.median, ...perSwitch.extraPerSwitch.ci95].map((ns) => ns / 1000)
  // both-99's extra over cpu-99's, per stack it took (µs): median, low, high
  const extraUs = (e, i) => [e.median, e.ci95[0], e.ci95[1]][i] * none.cpuUsPerReq
  const sampleUs = [0, 1, 2].map((i) => (extraUs(every.extraCpuPerReq, i) - extraUs(cpu.extraCpuPerReq, [0, 2, 1][i])) /
    every.switchSamplesPerReq)
  return rows.filter((r) => r.switchSamplesPerReq > 0 && r.kind !== 'both-99').map((r) => {
    const at = (i) => (none.contextSwitchesPerReq * switchUs[i] + r.switchSamplesPerReq * sampleUs[i]) / none.cpuUsPerReq
    return {
      kind: r.kind,
      extra: at(0),
      low: at(1),
      high: at(2),
      contextSwitchesPerReq: none.contextSwitchesPerReq,
      perSwitchUs: switchUs.slice(1),
      switchSamplesPerReq: r.switchSamplesPerReq,
      perSampleUs: sampleUs.slice(1)
    }
  })
}

// Rows of docs/benchmarks.md (bench/table.js), with the words the table needs beside it.
const KIND_NAMES = {
  none: 'unprofiled',
  'none-again': 'unprofiled again (A/A: a second unprofiled window in each round)',
  'cpu-99': 'CPU, 99 Hz (as root: an event per CPU, filtered in the kernel)',
  'cpu-99-threads': 'CPU, 99 Hz, `perfScope: \'threads\'` (per-thread events)',
  'timer-99': 'CPU, 99 Hz, timer mode',
  'both-99': 'both, 99 Hz, every switch (`maxSwitchRate: 0`, the default; as root: events per CPU)',
  'both-99-r1000': 'both, `maxSwitchRate: 1000`',
  'both-99-r200': 'both, `maxSwitchRate: 200`',
  'offcpu-r200': 'off-CPU only, `maxSwitchRate: 200`',
  'offcpu-r100': 'off-CPU only, `maxSwitchRate: 100`',
  'both-99-r100': 'both, `maxSwitchRate: 100`',
  'offcpu-r10': 'off-CPU only, `maxSwitchRate: 10`',
  'both-99-r10': 'both, `maxSwitchRate: 10`',
  'both-99-r200-threads': 'both, `maxSwitchRate: 200`, `perfScope: \'threads\'` (per-thread events, as for any user but root)',
  'perf-99': 'floor: `perf record -F 99 -g -p` (its own process apart)'
}
const perReq = (x) => x.cpuMs / x.requests
const rate = (x) => x.requests / x.wallMs

// A kind's changes against each round's two unprofiled windows together
// ('none' and the A/A window 'none-again': their geometric mean), which
// halves the base's own noise; null without an A/A window in the run.
function againstBoth (runs, kind) {
  const pairs = []
  for (const x of runs.filter((r) => r.kind === kind)) {
    const a = runs.find((b) => b.round === x.round && b.kind === 'none')
    const b = runs.find((b) => b.round === x.round && b.kind === 'none-again')
    if (a && b) pairs.push([x, a, b])
  }
  if (!pairs.length) return null
  const change = (f) => pairs.map(([x, a, b]) => f(x) / Math.sqrt(f(a) * f(b)) - 1)
  return {
    extraCpuPerReq: summarize(change(perReq), 11),
    throughputChange: summarize(change(rate), 12),
    p99Change: summarize(change((x) => x.p99Ms), 13)
  }
}

function readmeTables (r) {
  const attributed = (r.attributed || []).length === 0 ? [] : [
    '',
    '| kind | attributed extra CPU / request | server switches / request (unprofiled) × cost of a switch | switched-out stacks / request × cost of a stack |',
    '| --- | --- | --- | --- |',
    ...r.attributed.map((a) => `| ${KIND_NAMES[a.kind] || a.kind} | ${pct(a.extra)} [${pct(a.low)}, ${pct(a.high)}] | ` +
      `${a.contextSwitchesPerReq.toFixed(2)} × ${a.perSwitchUs.map((v) => v.toFixed(2)).join('-')} µs | ` +
      `${a.switchSamplesPerReq.toFixed(4)} × ${a.perSampleUs.map((v) => v.toFixed(1)).join('-')} µs |`)
  ]
  const both = r.rows.filter((x) => x.againstBoth)
  const againstBothTable = both.length === 0 ? [] : [
    '',
    'Against both unprofiled windows of each round (their geometric mean):',
    '',
    '| kind | extra CPU / request | throughput | probe p99 latency |',
    '| --- | --- | --- | --- |',
    ...both.map((x) => `| ${KIND_NAMES[x.kind] || x.kind} | ${ci(x.againstBoth.extraCpuPerReq)} | ` +
      `${ci(x.againstBoth.throughputChange)} | ${ci(x.againstBoth.p99Change)} |`)
  ]
  return [
    '| kind | req/s | server CPU µs/req | switch stacks/s | extra CPU / request | throughput | probe p99 latency |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...r.rows.map((x) => `| ${KIND_NAMES[x.kind] || x.kind} | ${Math.round(x.reqPerS).toLocaleString('en')} | ${x.cpuUsPerReq.toFixed(1)} | ` +
      `${x.switchSamplesPerS ? Math.round(x.switchSamplesPerS).toLocaleString('en') : '-'} | ` +
      `${ci(x.extraCpuPerReq)}${x.perfOwnCpuUsPerReq ? `; perf's own process ${x.perfOwnCpuUsPerReq.toFixed(1)} µs/req` : ''} | ` +
      `${ci(x.throughputChange)} | ${x.p99Ms ? `${x.p99Ms.toFixed(2)} ms` : ''}${x.p99Change ? `, ${ci(x.p99Change)}` : ''} |`),
    ...againstBothTable,
    ...attributed
  ]
}

if (require.main === module) main().catch((err) => { console.error(err); process.exit(1) })
module.exports = { readmeTables, againstBoth }

'use strict'

// Long profiles: does memory grow with what is distinct, not with time, and
// what does stop() cost at the end of one?
//
//   node bench/long.js [--quick] [--seconds S] [--hz 999,99,0] [--threads N]
//     [--async] [--json bench/results/long.json]
//
// --async stops with kflame.stopAsync() (naming on libuv's pool) and also
// reports the longest turn of the event loop until the profile is back.
//
// A fresh node process per rate runs N busy threads (the main thread and
// N - 1 worker_threads, each a mixed JS load: recursion, JSON, regular
// expressions, over 64 generated functions so stacks vary as on a server)
// and profiles them for S seconds (default 600) after a warm-up profile of
// 1 s (symbol tables loaded: a server profiled before). The workers run
// from before start() to after stop(), so RSS compares like with like. RSS is
// read every second from /proc/self/statm. Then:
//   stop      ms that kflame.stop() held the event loop
//   after     RSS right after stop(), against RSS just before start()
//   released  the Profile dropped and two full GCs (--expose-gc)
//   dropped   kflame.dropCaches() too (symbol tables, the code map's dead
//             code): what is left is kflame's fixed cost
// Rate 0 is the control: the same process and load, never profiled, whose
// RSS is the app's own (V8's heaps of N isolates settle over minutes).
// "growth" is the least-squares slope of RSS over the second half of the
// profile, in MB per minute: what a profile costs as it goes on.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const { machineNotes, machineLine, writeResults, option } = require('./common')

const PAGE = 4096
// ns the calling thread has been on a CPU (schedstat): stop()'s own cost,
// apart from the time the busy threads take the CPUs from it.
const threadCpuNs = () => Number(fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0])
const rssMb = () => Number(fs.readFileSync('/proc/self/statm', 'utf8').split(' ')[1]) * PAGE / 1e6
// RSS of anonymous memory (heaps, kflame's tables) and of mapped files
// (program text and, once DWARF unwinding has read them, the objects'
// .eh_frame pages: clean page cache the kernel can drop at will).
function rssParts () {
  const text = fs.readFileSync('/proc/self/status', 'utf8')
  const kb = (key) => Number((new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(text) || [0, 0])[1]) / 1000
  return { anon: kb('RssAnon'), file: kb('RssFile') }
}

// The load: `kinds` distinct small functions called in a varying order, so
// that a thread's stacks are many but bounded, as a server's are.
function busyLoop (seconds, seed) {
  const kinds = 64
  const fns = []
  for (let k = 0; k < kinds; k++) {
    // eslint-disable-next-line no-new-func
    fns.push(new Function('doc', 'n', `
      let s = 0
      for (let i = 0; i < n; i++) s += JSON.parse(JSON.stringify(doc)).items.length + /(\\d+)-(\\w+)/.exec('x ' + i + '-k${k}')[1].length
      return s`))
  }
  const doc = { items: Array.from({ length: 20 }, (_, i) => ({ i, s: `item-${i}` })) }
  const fib = (n) => n < 2 ? n : fib(n - 1) + fib(n - 2)
  let x = seed
  let sink = 0
  const end = Date.now() + seconds * 1000
  while (Date.now() < end) {
    x = (x * 1103515245 + 12345) >>> 0
    sink += fns[x % kinds](doc, 1 + (x >>> 8) % 8) + fib(10 + (x >>> 16) % 6)
  }
  return sink
}

// `n` workers running busyLoop for `seconds`: a promise of their ends.
function startWorkers (n, seconds) {
  const { Worker } = require('node:worker_threads')
  const src = `const { parentPort, workerData } = require('node:worker_threads')
    ${busyLoop.toString()}
    parentPort.postMessage(busyLoop(workerData.seconds, workerData.seed))`
  const ends = []
  for (let i = 1; i <= n; i++) {
    ends.push(new Promise((resolve, reject) => {
      const w = new Worker(src, { eval: true, workerData: { seconds, seed: i + 1 } })
      w.once('message', resolve)
      w.once('error', reject)
    }))
  }
  return Promise.all(ends)
}

async function child (seconds, hz, threads, stopAsync) {
  const kflame = require('..')
  const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6
  kflame.start({ hz: hz || 99 })
  busyLoop(1, 1)
  kflame.stop() // warm-up: symbol tables loaded
  // The workers start before the profile and outlive it, so RSS at start
  // and at stop counts the same isolates.
  const workers = startWorkers(threads - 1, seconds + 4)
  busyLoop(1.5, 3)
  global.gc(); global.gc()
  const rssStart = rssMb()
  const partsStart = rssParts()
  const control = hz === 0 // the same load, not profiled: the app's own RSS
  if (!control) kflame.start({ hz })
  const started = Date.now()
  // The main thread works in slices of 200 ms and reads RSS between them.
  const rss = []
  let nextRead = 0
  while (Date.now() - started < seconds * 1000) {
    busyLoop(0.2, 7)
    const t = (Date.now() - started) / 1000
    if (t >= nextRead) {
      rss.push([Math.round(t), rssMb()])
      nextRead = Math.floor(t) + 1
    }
    await new Promise((resolve) => setImmediate(resolve))
  }
  const rssBeforeStop = rssMb()
  const cpu0 = threadCpuNs()
  let t0 = process.hrtime.bigint()
  // --async: kflame.stopAsync(); what it holds the event loop for is the
  // longest turn of the loop until the profile is back (the call itself,
  // the profile's hand-over, and the busy load's own turns between).
  let profile = null
  let loopMaxMs = null
  let callMs = null
  if (!control && stopAsync) {
    const promise = kflame.stopAsync()
    callMs = loopMaxMs = ms(t0)
    let done = false
    promise.then(() => { done = true })
    let last = process.hrtime.bigint()
    while (!done) {
      await new Promise((resolve) => setImmediate(resolve))
      loopMaxMs = Math.max(loopMaxMs, ms(last))
      last = process.hrtime.bigint()
    }
    profile = await promise
  } else if (!control) profile = kflame.stop()
  const stopMs = ms(t0)
  const stopCpuMs = (threadCpuNs() - cpu0) / 1e6
  const rssAfter = rssMb()
  const partsAfter = rssParts()
  t0 = process.hrtime.bigint()
  const lines = control ? 0 : profile.folded.split('\n').length - 1
  const foldedMs = ms(t0)
  const stats = control ? { samples: 0, lost: 0, details: {} } : profile.stats
  const result = {
    hz,
    threads,
    seconds,
    samples: stats.samples,
    lost: stats.lost,
    lines,
    timelineDropped: stats.details.timelineDropped,
    stopPhases: stats.details.stopMs,
    stacks: stats.details.stacks,
    profileBytes: stats.details.profileBytes,
    symbolCacheBytes: stats.details.symbolCacheBytes,
    rssStart,
    rss,
    rssBeforeStop,
    stopMs,
    stopCpuMs,
    stopAsync,
    loopMaxMs,
    callMs,
    foldedMs,
    rssAfter,
    anonAfter: partsAfter.anon - partsStart.anon,
    fileAfter: partsAfter.file - partsStart.file
  }
  profile = null
  // The Profile's C memory goes with the external's finalizer, which runs
  // after a collection, on a later turn of the loop.
  for (let i = 0; i < 3; i++) {
    global.gc()
    await new Promise((resolve) => setImmediate(resolve))
  }
  result.rssReleased = rssMb()
  await workers
  if (!control && typeof kflame.dropCaches === 'function') { // older builds lack it
    result.dropped = kflame.dropCaches()
    result.rssDropped = rssMb()
  }
  process.stdout.write(JSON.stringify(result))
}

// Least-squares slope of RSS (MB) per minute over the second half.
function growthPerMin (rss) {
  const pts = rss.slice(Math.floor(rss.length / 2))
  if (pts.length < 2) return null
  const n = pts.length
  const mx = pts.reduce((a, p) => a + p[0], 0) / n
  const my = pts.reduce((a, p) => a + p[1], 0) / n
  let num = 0
  let den = 0
  for (const [x, y] of pts) {
    num += (x - mx) * (y - my)
    den += (x - mx) ** 2
  }
  return den ? num / den * 60 : null
}

function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') {
    child(Number(args[1]), Number(args[2]), Number(args[3]), args[4] === 'async').catch((err) => {
      console.error(err)
      process.exit(1)
    })
    return
  }
  const quick = args.includes('--quick')
  const seconds = Number(option(args, '--seconds') || (quick ? 20 : 600))
  const rates = (option(args, '--hz') || '999,99,0').split(',').map(Number)
  const threads = Number(option(args, '--threads') || 4)
  const json = option(args, '--json')
  const machine = machineNotes()
  console.log(machineLine(machine))
  const runs = []
  for (const hz of rates) {
    const out = execFileSync(process.execPath, ['--expose-gc', __filename, '--child', String(seconds), String(hz), String(threads), args.includes('--async') ? 'async' : 'sync'],
      { encoding: 'utf8', maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'inherit'] })
    const r = JSON.parse(out)
    r.growthMbPerMin = growthPerMin(r.rss)
    runs.push(r)
    const at = (s) => { const p = r.rss.find((q) => q[0] >= s); return p ? (p[1] - r.rssStart).toFixed(1) : '-' }
    const marks = [10, 60, 300, 600].filter((s) => s <= seconds)
    console.log(`${hz ? `${hz} Hz` : 'not profiled'}, ${threads} threads, ${seconds} s: ${r.samples} samples, ${r.stacks} stacks (${(r.profileBytes / 1e6).toFixed(1)} MB), ${r.lines} lines, ` +
      `RSS +${marks.map((s) => `${at(s)} MB at ${s} s`).join(', ')}; growth ${r.growthMbPerMin.toFixed(2)} MB/min; ` +
      `stop${r.stopAsync ? 'Async' : ''} ${r.stopMs.toFixed(1)} ms${r.loopMaxMs !== null ? ` (longest event-loop turn ${r.loopMaxMs.toFixed(1)} ms, the call ${r.callMs.toFixed(1)} ms)` : ''}, ${r.stopCpuMs.toFixed(1)} ms on CPU (${r.stopPhases ? `drain ${r.stopPhases.drain.toFixed(1)}, name ${r.stopPhases.name.toFixed(1)}, fold ${r.stopPhases.fold.toFixed(1)}, trim ${r.stopPhases.trim.toFixed(1)}; ` : ''}` +
      `folded text ${r.foldedMs.toFixed(1)} ms); ` +
      `after stop +${(r.rssAfter - r.rssStart).toFixed(1)} MB (anonymous ${r.anonAfter.toFixed(1)}, files ${r.fileAfter.toFixed(1)}), released +${(r.rssReleased - r.rssStart).toFixed(1)} MB` +
      (r.rssDropped !== undefined ? `, caches dropped +${(r.rssDropped - r.rssStart).toFixed(1)} MB` : ''))
  }
  if (json) writeResults(json, machine, { seconds, threads, runs })
}

// Rows of docs/benchmarks.md: this run's rates, the control, and the same bench run
// against the code before profiles were named as they came (long-before.json,
// when there).
function readmeTables (r, before) {
  const mb = (x) => x === undefined || x === null ? '-' : `${x >= 0 ? '+' : ''}${x.toFixed(1)}`
  const at = (run, s) => { const p = run.rss.find((q) => q[0] >= s); return p ? mb(p[1] - run.rssStart) : '-' }
  const marks = [60, 300, 600].filter((s) => s <= r.seconds)
  const row = (label, run) => `| ${label} | ${run.samples || '-'} | ${run.stacks || '-'} | ` +
    `${run.profileBytes ? (run.profileBytes / 1e6).toFixed(1) : '-'} | ${marks.map((s) => at(run, s)).join(' | ')} | ` +
    `${run.growthMbPerMin.toFixed(2)} | ${run.hz ? `${run.stopMs.toFixed(1)} / ${run.stopCpuMs.toFixed(1)}` : '-'} | ` +
    `${mb(run.rssAfter - run.rssStart)} | ${mb(run.rssReleased - run.rssStart)} | ${run.rssDropped !== undefined ? mb(run.rssDropped - run.rssStart) : '-'} |`
  const lines = [
    `| run | samples | stacks | profile MB | ${marks.map((s) => `RSS at ${s} s, MB`).join(' | ')} | growth, MB/min (2nd half) | stop() ms, wall / on CPU | after stop() | Profile released | caches dropped |`,
    `| --- | --- | --- | --- | ${marks.map(() => '---').join(' | ')} | --- | --- | --- | --- | --- |`,
    ...r.runs.map((run) => row(run.hz ? `${run.hz} Hz, ${r.threads} threads, ${r.seconds} s` : `not profiled, ${r.threads} threads`, run))
  ]
  if (before) {
    lines.push('', `Before (the same bench against commit ${before.commit}, where raw stacks were kept to stop()): ` +
      before.runs.map((run) => `${run.hz} Hz, ${before.seconds} s: growth ${run.growthMbPerMin.toFixed(1)} MB/min, ` +
        `stop() ${run.stopMs.toFixed(0)} ms wall / ${run.stopCpuMs.toFixed(0)} ms on CPU, after stop() ${mb(run.rssAfter - run.rssStart)} MB`).join('; ') + '.')
  }
  return lines
}

if (require.main === module) main()
module.exports = { busyLoop, startWorkers, rssMb, rssParts, growthPerMin, readmeTables }

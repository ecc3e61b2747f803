'use strict'

// Continuous mode left running: is RSS flat once the first windows are out?
// Not part of npm test (it runs for half an hour by default).
//
//   node bench/soak.js [--minutes M] [--every S] [--hz N] [--threads N]
//     [--json bench/results/soak.json]
//
// One node process runs N busy threads (bench/long.js's load: the main
// thread and N - 1 workers) under kflame.continuous({ every, hz }) writing
// pprof windows to a temporary directory (keep 5), for M minutes (default
// 30). RSS is read every 10 s. Reported: RSS at the end of the first window
// and at the end, the least-squares slope over the second half (MB per
// hour), the windows made and delivered, and the peak of kflame's own
// profile bytes (details.profileBytes of each window).

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { machineNotes, machineLine, writeResults, option } = require('./common')
const { busyLoop, startWorkers, rssMb, growthPerMin } = require('./long')

async function child (minutes, every, hz, threads) {
  const kflame = require('..')
  const seconds = minutes * 60
  const workers = startWorkers(threads - 1, seconds + 2)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-soak-'))
  // As bench/long.js: symbol tables loaded by a warm-up profile, the
  // workers' isolates running, before RSS is first read.
  kflame.start({ hz })
  busyLoop(1.5, 3)
  kflame.stop()
  const rssStart = rssMb()
  let profileBytes = 0
  const c = kflame.continuous({ every, hz, keep: 5, format: 'pprof', to: dir })
  c.on('window', (info) => { profileBytes = Math.max(profileBytes, info.profileBytes) })
  const started = Date.now()
  const rss = []
  let next = 0
  while (Date.now() - started < seconds * 1000) {
    busyLoop(0.2, 7)
    const t = (Date.now() - started) / 1000
    if (t >= next) {
      rss.push([Math.round(t), rssMb()])
      next += 10
    }
    await new Promise((resolve) => setImmediate(resolve))
  }
  const stats = await c.stop()
  await workers
  fs.rmSync(dir, { recursive: true, force: true })
  process.stdout.write(JSON.stringify({ minutes, every, hz, threads, rssStart, rss, stats, profileBytes }))
}

function readmeTables (r) {
  const first = r.rss.find((p) => p[0] >= r.every) || r.rss[0]
  const end = r.rss[r.rss.length - 1]
  return [
    '| run | windows (delivered) | samples | RSS after the first window | RSS at the end | growth, 2nd half | a window\'s profile at most |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    `| ${r.minutes} min, windows of ${r.every} s at ${r.hz} Hz, ${r.threads} threads | ${r.stats.windows} (${r.stats.delivered}) | ${r.stats.samples} | ` +
      `+${(first[1] - r.rssStart).toFixed(1)} MB | +${(end[1] - r.rssStart).toFixed(1)} MB | ${r.growthMbPerHour.toFixed(1)} MB/hour | ${(r.profileBytes / 1e6).toFixed(2)} MB |`
  ]
}

function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') {
    child(...args.slice(1, 5).map(Number)).catch((err) => { console.error(err); process.exit(1) })
    return
  }
  const minutes = Number(option(args, '--minutes') || 30)
  const every = Number(option(args, '--every') || 10)
  const hz = Number(option(args, '--hz') || 99)
  const threads = Number(option(args, '--threads') || 4)
  const json = option(args, '--json')
  const machine = machineNotes()
  console.log(machineLine(machine))
  const out = execFileSync(process.execPath, [__filename, '--child', String(minutes), String(every), String(hz), String(threads)],
    { encoding: 'utf8', maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'inherit'] })
  const r = JSON.parse(out)
  const afterFirst = r.rss.find((p) => p[0] >= every) || r.rss[0]
  const end = r.rss[r.rss.length - 1]
  r.growthMbPerHour = growthPerMin(r.rss) * 60
  console.log(`continuous ${minutes} min, windows of ${every} s at ${hz} Hz, ${threads} threads: ` +
    `${r.stats.windows} windows (${r.stats.delivered} delivered), ${r.stats.samples} samples; ` +
    `RSS +${(afterFirst[1] - r.rssStart).toFixed(1)} MB after the first window, +${(end[1] - r.rssStart).toFixed(1)} MB at the end; ` +
    `second half ${r.growthMbPerHour.toFixed(2)} MB/hour; a window's profile at most ${(r.profileBytes / 1e6).toFixed(2)} MB`)
  if (json) writeResults(json, machine, r)
}

if (require.main === module) main()
module.exports = { readmeTables }

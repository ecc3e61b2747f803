'use strict'

// stop() of a profile with many distinct stacks (issue 19: "with about
// 100,000 distinct stacks stop() blocks the event loop 1.0 s and RSS goes
// 120 -> 452 MB, peak 735 MB"). A main thread and a worker recurse through
// random paths of functions, so nearly every sample is a stack of its own,
// at 9999 Hz until the process has used CPU_SECONDS of CPU (about 100,000
// samples). In a fresh process, after a warm-up profile (symbols loaded),
// it measures:
//   stopMs          kflame.stop(): drain, join, name, fold (the event loop is held)
//   foldedMs        first read of profile.folded (the text becomes a JS string)
//   rss*            RSS before start(), after stop(), after profile.folded,
//                   and after the Profile is dropped and two full GCs
//   peakDuringStop  peak RSS while stop() ran (VmHWM reset just before)
//   foldedMB        the folded text's size
//
//   node --expose-gc bench/distinct.js [--rounds N] [--seconds S] [--json FILE]

const fs = require('node:fs')
const { execFileSync } = require('node:child_process')
const { median, machineNotes, machineLine, writeResults, option } = require('./common')

function child (cpuSeconds) {
  const { Worker } = require('node:worker_threads')
  const kflame = require('..')
  const rssMB = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]) / 1024
  const hwmMB = () => Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]) / 1024
  // 16 functions, random paths 12 to 27 deep: almost every sample its own stack.
  const workload = `
    const fns = []
    let src = ''
    for (let i = 0; i < 16; i++) {
      src += 'fns.push(function distinctStackFrame' + i + ' (d, r) { if (d === 0) { let x = 0; for (let k = 0; k < 2000; k++) x += Math.sqrt(k + r); return x } ' +
        'return fns[(r >>> 27) & 15](d - 1, (Math.imul(r, 1103515245) + 12345) >>> 0) })\\n'
    }
    new Function('fns', src)(fns)
    let seed = Math.random() * 0xffffffff >>> 0
    function runOnce () { seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0; fns[seed >>> 28](12 + ((seed >>> 24) & 15), seed) }`
  const stopWord = new SharedArrayBuffer(4)
  const stop = new Int32Array(stopWord)
  const runOnce = new Function(workload + '; return runOnce')() // eslint-disable-line no-new-func
  kflame.start({ hz: 999 })
  const end = Date.now() + 300
  while (Date.now() < end) runOnce()
  kflame.stop() // warm-up: symbol tables loaded
  global.gc(); global.gc()
  const rssBefore = rssMB()
  kflame.start({ hz: 9999 })
  const worker = new Worker(`require(${JSON.stringify(require.resolve('..'))}); ${workload}
    const stop = new Int32Array(require('node:worker_threads').workerData)
    while (Atomics.load(stop, 0) === 0) runOnce()`, { eval: true, workerData: stopWord })
  const cpu0 = process.cpuUsage()
  for (;;) {
    for (let i = 0; i < 100; i++) runOnce()
    const used = process.cpuUsage(cpu0)
    if ((used.user + used.system) / 1e6 >= cpuSeconds) break
  }
  Atomics.store(stop, 0, 1)
  fs.writeFileSync('/proc/self/clear_refs', '5') // resets VmHWM to the current RSS
  let t0 = process.hrtime.bigint()
  let profile = kflame.stop()
  const stopMs = Number(process.hrtime.bigint() - t0) / 1e6
  const peakDuringStop = hwmMB()
  const rssAfterStop = rssMB()
  t0 = process.hrtime.bigint()
  const lines = profile.folded.length && profile.folded.split('\n').length - 1
  const foldedMs = Number(process.hrtime.bigint() - t0) / 1e6
  const rssWithString = rssMB()
  const result = {
    samples: profile.stats.samples,
    lines,
    foldedMB: Buffer.byteLength(profile.folded) / 1048576,
    stopMs,
    foldedMs,
    rssBefore,
    rssAfterStop,
    rssWithString,
    peakDuringStop
  }
  profile = null
  worker.terminate().then(() => {
    global.gc(); global.gc()
    setTimeout(() => {
      global.gc()
      result.rssReleased = rssMB()
      process.stdout.write(JSON.stringify(result))
    }, 200)
  })
}

function main () {
  const args = process.argv.slice(2)
  const rounds = Number(option(args, '--rounds') || 3)
  const seconds = Number(option(args, '--seconds') || 10)
  const json = option(args, '--json')
  const machine = machineNotes()
  const runs = []
  for (let i = 0; i < rounds; i++) {
    const out = execFileSync(process.execPath, ['--expose-gc', __filename, '--child', String(seconds)], { encoding: 'utf8', maxBuffer: 1 << 26 })
    runs.push(JSON.parse(out))
    process.stderr.write(`round ${i + 1}: ${out}\n`)
  }
  const keys = Object.keys(runs[0])
  const result = { rounds, seconds, medians: {} }
  for (const k of keys) result.medians[k] = median(runs.map((r) => r[k]))
  result.runs = runs
  console.log(machineLine(machine))
  console.table(result.medians)
  if (json) writeResults(json, machine, result)
}

// The table of docs/benchmarks.md, for bench/table.js.
function readmeTables (r) {
  const m = r.medians
  const mb = (x) => Math.round(x)
  return [
    '| samples | distinct stacks | folded text | `stop()` | first `profile.folded` | RSS before `start()` | after `stop()` | with the string | peak during `stop()` | Profile dropped, 2 GCs |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    `| ${m.samples} | ${m.lines} | ${mb(m.foldedMB)} MB | ${Math.round(m.stopMs)} ms | ${Math.round(m.foldedMs)} ms | ` +
      `${mb(m.rssBefore)} MB | ${mb(m.rssAfterStop)} MB | ${mb(m.rssWithString)} MB | ${mb(m.peakDuringStop)} MB | ${mb(m.rssReleased)} MB |`
  ]
}

if (process.argv[2] === '--child') child(Number(process.argv[3]))
else if (require.main === module) main()

module.exports = { readmeTables }

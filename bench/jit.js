'use strict'

// The JIT side of kflame, measured against V8's --perf-basic-prof in one run:
//
//   arm      cost of arming the code-event hook (V8 reports all existing
//            code), on a fresh heap and on one with many compiled functions;
//   compile  cost of compiling functions with the hook armed, against no
//            hook and against --perf-basic-prof (which writes a line per
//            compile), in alternating rounds;
//   churn    code compiled and dropped continuously: lines and bytes of
//            kflame's perf map (perfMap: true) against --perf-basic-prof's
//            /tmp/perf-PID.map, and RSS, over time;
//   reuse    V8 reusing code addresses (test/fixtures/code-reuse.js): share
//            of phase-B samples named after dead phase-A functions, kflame
//            against `perf record` + --perf-basic-prof (when perf is there
//            and allowed).
//
//   node bench/jit.js [--quick] [--json bench/results/jit.json]

const { execFileSync, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { median, machineNotes, machineLine, writeResults, perfCheck } = require('./common')

const ROOT = path.join(__dirname, '..')
const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'code-reuse.js')

let serial = 0
// Indirect eval rather than vm.runInThisContext, which Node keeps alive:
// churned code must be collectable. (V8 names eval'd code without a file.)
function compileFresh (count) {
  const fns = []
  for (let i = 0; i < count; i++) {
    const name = `f${serial++}`
    const fn = (0, eval)(`(function ${name} (n) { let x = 0; for (let k = 0; k < n; k++) x += k ^ ${i}; return x })`) // eslint-disable-line no-eval
    fn(50)
    fns.push(fn)
  }
  return fns
}

// --- children ---------------------------------------------------------------

function childArm (functions) {
  const keep = compileFresh(functions) // a heap with this much code
  const binding = require('../lib/binding') // KFLAME_JIT=lazy: not armed yet
  const t = process.hrtime.bigint()
  binding.arm()
  const armMs = Number(process.hrtime.bigint() - t) / 1e6
  // The map is written only to count the code ranges V8 reported.
  const map = path.join(os.tmpdir(), `kflame-arm-${process.pid}.map`)
  const entries = binding.writePerfMap(map)
  fs.rmSync(map, { force: true })
  return { functions: keep.length, armMs, entries }
}

function childCompile (mode) {
  if (mode === 'kflame') require('..')
  compileFresh(500) // warm up
  const t = process.hrtime.bigint()
  compileFresh(5000)
  return { mode, pid: process.pid, ms: Number(process.hrtime.bigint() - t) / 1e6 }
}

function childChurn (mode, seconds) {
  const kflame = mode === 'kflame' ? require('..') : null
  const file = mode === 'kflame' ? path.join(os.tmpdir(), `kflame-churn-${process.pid}.map`) : `/tmp/perf-${process.pid}.map`
  if (kflame) kflame.start({ hz: 99, perfMap: file })
  const points = []
  const t0 = Date.now()
  // Counting --perf-basic-prof's map costs its process time: look seldom.
  const every = seconds >= 60 ? 10000 : 1000
  let nextReport = t0 + every
  while (Date.now() - t0 < seconds * 1000) {
    let fns = compileFresh(200)
    for (const fn of fns) fn(2000)
    fns = null
    global.gc()
    if (Date.now() >= nextReport) {
      nextReport += every
      points.push({ s: Math.round((Date.now() - t0) / 1000), compiled: serial, ...mapSize(file), rssMb: process.memoryUsage().rss / 2 ** 20 })
    }
  }
  let stats = null
  if (kflame) stats = kflame.stop().stats.details
  try { fs.unlinkSync(file) } catch {}
  return { mode, points, codeBytes: stats && stats.codeBytes, codeEntries: stats && stats.codeEntries }
}

// Lines and bytes of a map file, read in chunks: --perf-basic-prof's grows
// past what one string may hold.
function mapSize (file) {
  let fd
  try { fd = fs.openSync(file, 'r') } catch { return { lines: 0, bytes: 0 } }
  const buf = Buffer.alloc(1 << 20)
  let lines = 0
  let bytes = 0
  for (let n; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0; bytes += n) {
    for (let i = buf.indexOf(10); i !== -1 && i < n; i = buf.indexOf(10, i + 1)) lines++
  }
  fs.closeSync(fd)
  return { lines, bytes }
}

// --- runs -------------------------------------------------------------------

// Each child runs in a directory of its own, removed after: --perf-basic-prof
// makes V8 leave an isolate-*.log in the cwd. Its /tmp/perf-PID.map goes too.
function run (flags, args, env = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-jit-'))
  try {
    const r = JSON.parse(execFileSync(process.execPath, [...flags, __filename, ...args],
      { cwd: dir, encoding: 'utf8', env: { ...process.env, ...env }, maxBuffer: 64 << 20 }))
    if (r.pid && flags.includes('--perf-basic-prof')) fs.rmSync(`/tmp/perf-${r.pid}.map`, { force: true })
    return r
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

const NATIVE_STACK = '--interpreted-frames-native-stack'

function benchArm () {
  return [0, 20000].map((functions) => {
    const runs = [0, 1, 2].map(() => run([], ['--child', 'arm', String(functions)], { KFLAME_JIT: 'lazy' }))
    return { functions, armMs: median(runs.map((r) => r.armMs)), entries: runs[0].entries }
  })
}

function benchCompile (rounds) {
  const modes = {
    none: [[NATIVE_STACK], { KFLAME_JIT: 'off' }],
    kflame: [[], {}],
    'perf-basic-prof': [['--perf-basic-prof', NATIVE_STACK], {}]
  }
  const runs = []
  for (let r = 0; r < rounds; r++) {
    for (const [mode, [flags, env]] of Object.entries(modes)) {
      runs.push({ round: r, ...run(flags, ['--child', 'compile', mode], env) })
    }
  }
  const base = (r) => runs.find((x) => x.mode === 'none' && x.round === r).ms
  return Object.keys(modes).map((mode) => {
    const mine = runs.filter((x) => x.mode === mode)
    return { mode, msPer1000: median(mine.map((x) => x.ms)) / 5, ratio: median(mine.map((x) => x.ms / base(x.round))) }
  })
}

function benchChurn (seconds) {
  return {
    kflame: run(['--expose-gc'], ['--child', 'churn', 'kflame', String(seconds)]),
    'perf-basic-prof': run(['--expose-gc', '--perf-basic-prof', NATIVE_STACK], ['--child', 'churn', 'perf-basic-prof', String(seconds)], { KFLAME_JIT: 'off' })
  }
}

function benchReuse () {
  const out = {}
  const k = JSON.parse(execFileSync(process.execPath, ['--expose-gc', '--compact-on-every-full-gc', FIXTURE], { encoding: 'utf8', maxBuffer: 64 << 20 }))
  let inB = 0
  let dead = 0
  for (const line of k.folded.split('\n')) {
    const n = Number(line.slice(line.lastIndexOf(' ') + 1))
    if (!/(^|;)phaseB /.test(line)) continue
    inB += n
    if (/;fnA\d+ /.test(line)) dead += n
  }
  out.kflame = { phaseBSamples: inB, namedAfterDead: dead, evicted: k.stats.details.codeEvicted, moved: k.stats.details.codeMoved }

  const perf = perfCheck()
  if (!perf.ok) {
    out.perf = { skipped: perf.why }
    return out
  }
  // In a directory of its own: --perf-basic-prof makes V8 leave an
  // isolate-*.log in the cwd.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-reuse-'))
  const data = path.join(dir, 'perf.data')
  const rec = spawnSync('perf', ['record', '-q', '-F', '999', '-g', '-k', 'mono', '-o', data, '--',
    process.execPath, '--perf-basic-prof', NATIVE_STACK, '--expose-gc', '--compact-on-every-full-gc', FIXTURE, '--no-kflame'],
  { cwd: dir, encoding: 'utf8', maxBuffer: 64 << 20 })
  if (rec.status !== 0) {
    fs.rmSync(dir, { recursive: true, force: true })
    out.perf = { skipped: `perf record failed: ${(rec.stderr || String(rec.error)).trim().split('\n')[0]}` }
    return out
  }
  const truth = JSON.parse(rec.stdout).truth
  const script = spawnSync('perf', ['script', '-i', data, '-F', 'pid,tid,time,ip,sym'], { encoding: 'utf8', maxBuffer: 512 << 20 })
  fs.rmSync(dir, { recursive: true, force: true })
  const pidLine = /^\s*(\d+)\/\d+/m.exec(script.stdout)
  const c = { inB: 0, dead: 0 }
  // -F pid,tid gives "PID/TID TIME:"; the main thread's tid is its pid.
  for (const block of script.stdout.split('\n\n')) {
    const h = /^\s*(\d+)\/(\d+)\s+(\d+\.\d+):/.exec(block)
    if (!h || h[1] !== h[2]) continue
    const ns = Number(h[3]) * 1e9
    if (ns < truth.phaseBStartNs || ns > truth.phaseBEndNs) continue
    c.inB++
    if (/[~^+*:]fnA\d+ /.test(block)) c.dead++
  }
  out.perf = { phaseBSamples: c.inB, namedAfterDead: c.dead, pid: pidLine && Number(pidLine[1]) }
  for (const f of fs.readdirSync('/tmp')) {
    if (/^perf-\d+\.map$/.test(f) && out.perf.pid && f === `perf-${out.perf.pid}.map`) fs.rmSync(path.join('/tmp', f))
  }
  return out
}

function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') {
    const [, what, a, b] = args
    const r = what === 'arm' ? childArm(Number(a)) : what === 'compile' ? childCompile(a) : childChurn(a, Number(b))
    process.stdout.write(JSON.stringify(r))
    return
  }
  const machine = machineNotes()
  const quick = args.includes('--quick')
  const jsonOut = args.includes('--json') ? args[args.indexOf('--json') + 1] : null
  const churnSeconds = quick ? 15 : 120
  const result = {
    quick,
    churnSeconds,
    arm: benchArm(),
    compile: benchCompile(quick ? 3 : 7),
    churn: benchChurn(churnSeconds),
    reuse: benchReuse()
  }
  console.log(`jit: ${machineLine(machine)}`)
  console.log('\narming the hook (V8 reports existing code):')
  for (const a of result.arm) console.log(`  heap with ${a.functions} extra functions: ${a.armMs.toFixed(1)} ms, ${a.entries} code ranges`)
  console.log('\ncompiling 1000 functions (median):')
  for (const c of result.compile) console.log(`  ${c.mode}: ${c.msPer1000.toFixed(1)} ms (x${c.ratio.toFixed(2)} of none)`)
  console.log(`\nchurn for ${churnSeconds} s: perf map at the end`)
  for (const [mode, r] of Object.entries(result.churn)) {
    const first = r.points[0]
    const last = r.points[r.points.length - 1]
    console.log(`  ${mode}: ${last.compiled} functions compiled; map ${first.lines} -> ${last.lines} lines, ` +
      `${(first.bytes / 1024).toFixed(0)} -> ${(last.bytes / 1024).toFixed(0)} KiB; RSS ${first.rssMb.toFixed(0)} -> ${last.rssMb.toFixed(0)} MiB` +
      (r.codeBytes ? `; code map ${r.codeEntries} entries, ${(r.codeBytes / 1024).toFixed(0)} KiB` : ''))
  }
  console.log('\naddress reuse: phase-B samples named after dead phase-A functions')
  for (const [mode, r] of Object.entries(result.reuse)) {
    console.log(r.skipped
      ? `  ${mode}: skipped (${r.skipped})`
      : `  ${mode}: ${r.namedAfterDead} of ${r.phaseBSamples} (${(100 * r.namedAfterDead / Math.max(1, r.phaseBSamples)).toFixed(1)}%)`)
  }
  if (jsonOut) writeResults(jsonOut, machine, result)
}

// The table of docs/benchmarks.md from a results file (bench/table.js).
function readmeTables (result) {
  const n = (x) => Math.round(x).toLocaleString('en-US')
  const kib = (b) => b >= 2 ** 20 * 10 ? `${n(b / 2 ** 20)} MiB` : `${n(b / 1024)} KiB`
  const out = []
  out.push('| measure | kflame | `--perf-basic-prof` |')
  out.push('| --- | --- | --- |')
  const [fresh, big] = result.arm
  out.push(`| arming the hook (V8 reports existing code): fresh heap | ${fresh.armMs.toFixed(1)} ms (${n(fresh.entries)} code ranges) | - |`)
  if (big) out.push(`| arming the hook: heap with ${n(big.functions)} more functions | ${big.armMs.toFixed(1)} ms (${n(big.entries)} code ranges) | - |`)
  const c = Object.fromEntries(result.compile.map((x) => [x.mode, x]))
  out.push(`| compiling 1,000 functions (no hook: ${c.none.msPer1000.toFixed(1)} ms) | ${c.kflame.msPer1000.toFixed(1)} ms (x${c.kflame.ratio.toFixed(2)}) | ` +
    `${c['perf-basic-prof'].msPer1000.toFixed(1)} ms (x${c['perf-basic-prof'].ratio.toFixed(2)}) |`)
  const churn = (r) => {
    const first = r.points[0]
    const last = r.points[r.points.length - 1]
    return `${n(first.lines)} -> **${n(last.lines)} lines**, ${kib(last.bytes)}, for ${n(last.compiled)} functions compiled`
  }
  const seconds = result.churnSeconds || result.churn.kflame.points.slice(-1)[0].s
  out.push(`| perf map after ${seconds} s of churn (compile 200 functions, run, drop, GC, repeat) | ${churn(result.churn.kflame)} | ${churn(result.churn['perf-basic-prof'])} |`)
  const k = result.churn.kflame
  if (k.codeBytes) out.push(`| code map memory at the end of that run | ${n(k.codeEntries)} entries, ${kib(k.codeBytes)} | - |`)
  const reuse = (r) => {
    if (r.skipped) return `skipped: ${r.skipped}`
    const share = r.namedAfterDead ? ` (${(100 * r.namedAfterDead / r.phaseBSamples).toFixed(1)}%)` : ''
    return `**${r.namedAfterDead} of ${r.phaseBSamples}${share}**`
  }
  out.push('| code-address reuse (`test/fixtures/code-reuse.js`; perf: `perf record -g -k mono`): phase-B samples named after a dead phase-A function | ' +
    `${reuse(result.reuse.kflame)} | ${result.reuse.perf ? reuse(result.reuse.perf) : '-'} |`)
  return out
}

module.exports = { readmeTables }

if (require.main === module) main()

'use strict'

// Alternating windows in one process: the method that resolves a 1-2%
// overhead on a VM where separate processes scatter by 10-20%. A child runs a
// CPU-bound mixed JS workload in windows of ~150 ms, each round every window
// kind once in a seeded random order, and the parent takes per-round ratios
// against the round's unprofiled window: their median, with a bootstrap 95%
// interval. Used by bench/stackcopy.js, bench/timermode.js and bench/attribution.js.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { mulberry32, median } = require('./common')

const ROOT = path.join(__dirname, '..')
const ADDON = path.join(ROOT, 'build', 'Release', 'kflame.node')

const sleepMs = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

// kflame, waiting out a rebuild of the addon (another hand may be running
// node-gyp while this runs): up to 10 tries 20 s apart.
function loadKflame () {
  for (let i = 0; ; i++) {
    try {
      return require('..')
    } catch (err) {
      if (i >= 9) throw err
      console.error(`require(kflame) failed (${err.message.split('\n')[0]}); retrying in 20 s`)
      for (const id of Object.keys(require.cache)) if (id.startsWith(path.join(ROOT, 'lib'))) delete require.cache[id]
      sleepMs(20000)
    }
  }
}

const addonMtime = () => { try { return fs.statSync(ADDON).mtime.toISOString() } catch { return null } }

// ns on CPU of a thread, from schedstat.
function schedNs (file) {
  try { return Number(fs.readFileSync(file, 'utf8').split(' ')[0]) } catch { return null }
}
// The calling thread's CPU time: exact through kflame's binding once the
// process has loaded kflame (clock_gettime(CLOCK_THREAD_CPUTIME_ID));
// otherwise schedstat, which moves only at the scheduler's tick while the
// thread runs (4 ms here: about 1% of a 150 ms window, at each end).
const BINDING = path.join(ROOT, 'lib', 'binding.js')
const mainCpuNs = () => {
  const loaded = require.cache[BINDING]
  return loaded ? loaded.exports.threadCpuNs() : schedNs('/proc/thread-self/schedstat')
}

// This process's threads named comm (their tids), and the first of them.
function findThreads (comm) {
  return fs.readdirSync('/proc/self/task').filter((tid) => {
    try { return fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim() === comm } catch { return false }
  })
}
const findThread = (comm) => findThreads(comm)[0] || null

// The collector's CPU from now on: a function giving its ms since the call
// (null when no collector runs). Its thread is the one kflame keeps parked
// between profiles, so its schedstat counts every earlier profile too; with
// KFLAME_PARK=off the profile's own thread runs it beside the idle parked
// one, so every kflame-collect is summed. A thread that sleeps between
// drains has schedstat exact at each switch.
function collectorCpu () {
  const files = findThreads('kflame-collect').map((tid) => `/proc/self/task/${tid}/schedstat`)
  if (!files.length) return () => null
  const total = () => files.reduce((sum, f) => sum + (schedNs(f) || 0), 0)
  const ns0 = total()
  return () => (total() - ns0) / 1e6
}

function shuffle (xs, rand) {
  const a = [...xs]
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1))
    ;[a[i], a[j]] = [a[j], a[i]]
  }
  return a
}

// --- the workload ----------------------------------------------------------------

// A mixed JS workload in units: JSON, regex, recursive descent over nested
// expressions, small recursive functions, string building, and functions
// compiled afresh before each window (freshPool), so some code runs in the
// interpreter.
function makeMixedWorkload () {
  const rand = mulberry32(12345)
  // A nested document (depth 5, fan-out 3) for JSON and a recursive walk.
  const node = (d) => ({
    id: Math.floor(rand() * 1e6),
    name: `node-${d}-${Math.floor(rand() * 1000)}`,
    tags: ['a', 'b', 'c'].slice(0, 1 + Math.floor(rand() * 3)),
    children: d > 0 ? Array.from({ length: 3 }, () => node(d - 1)) : []
  })
  const doc = node(4)
  // Arithmetic expressions nested 6 to 24 deep, for a recursive-descent
  // evaluator (three JS frames per level).
  const expr = (d) => {
    if (d === 0) return String(1 + Math.floor(rand() * 9))
    const op = '+-*'[Math.floor(rand() * 3)]
    return rand() < 0.5 ? `(${expr(d - 1)}${op}${1 + Math.floor(rand() * 9)})` : `${1 + Math.floor(rand() * 9)}${op}(${expr(d - 1)})`
  }
  const exprs = Array.from({ length: 16 }, (_, i) => expr(6 + (i * 7) % 19))
  const log = Array.from({ length: 40 }, (_, i) => `2024-01-${10 + (i % 20)} user${i}-x${i * 7} GET /api/v1/items/${i * 13} 200 ${i * 3}ms`).join('\n')

  function evaluate (src) {
    let pos = 0
    function parseExpr () {
      let v = parseTerm()
      while (src[pos] === '+' || src[pos] === '-') { const op = src[pos++]; const r = parseTerm(); v = op === '+' ? v + r : v - r }
      return v
    }
    function parseTerm () {
      let v = parseFactor()
      while (src[pos] === '*') { pos++; v = (v * parseFactor()) % 1000003 }
      return v
    }
    function parseFactor () {
      if (src[pos] === '(') { pos++; const v = parseExpr(); pos++; return v }
      let n = 0
      while (src[pos] >= '0' && src[pos] <= '9') n = n * 10 + (src.charCodeAt(pos++) - 48)
      return n
    }
    return parseExpr()
  }
  const fib = (n) => n < 2 ? n : fib(n - 1) + fib(n - 2)
  const walk = (o, depth) => o.children.reduce((s, c) => s + walk(c, depth + 1), o.id % 7 + depth)
  const re = /user(\d+)-x(\d+) (GET|POST) (\S+) (\d{3})/g

  // Functions compiled anew before every window (the same for every kind):
  // they start in the interpreter, as an app's cold code does.
  let pool = []
  let generation = 0
  function freshPool () {
    generation++
    pool = Array.from({ length: 32 }, (_, i) => new Function('x', 'o',
      `/* generation ${generation}, function ${i} */
      let s = ''
      for (let k = 0; k < 12; k++) s += ((x + k * ${i + 1}) % 97).toString(36)
      return s.length + (o.tags ? o.tags.length : 0)`))
  }

  function unit (i) {
    let sink = 0
    sink += evaluate(exprs[i & 15])
    sink += JSON.parse(JSON.stringify(doc)).children.length
    re.lastIndex = 0
    let m
    while ((m = re.exec(log)) !== null) sink += m[2].length
    sink += fib(14)
    sink += walk(doc, 0)
    const parts = []
    for (let k = 0; k < 40; k++) parts.push(`${k}:${(i * k).toString(16)}`)
    sink += parts.join(',').length
    for (let k = 0; k < 4; k++) sink += pool[(i * 4 + k) & 31](i, doc)
    return sink
  }
  return { unit, freshPool }
}

// --- statistics (parent) ---------------------------------------------------------

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b)
  if (!s.length) return null
  const pos = (s.length - 1) * q
  const lo = Math.floor(pos)
  return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (pos - lo)
}

// Median with a bootstrap 95% interval (seeded) and the interquartile range.
function summarize (xs, seed) {
  if (!xs.length) return null
  const rand = mulberry32(seed)
  const meds = []
  for (let b = 0; b < 2000; b++) {
    const sample = Array.from({ length: xs.length }, () => xs[Math.floor(rand() * xs.length)])
    meds.push(median(sample))
  }
  return {
    median: median(xs),
    ci95: [quantile(meds, 0.025), quantile(meds, 0.975)],
    iqr: [quantile(xs, 0.25), quantile(xs, 0.75)]
  }
}

// Per-round ratios of cost per unit of work, kind against base, minus one:
// `f` picks the cost (main-thread CPU ms, wall ms) of a window.
function extraPerUnit (runs, kind, base, f) {
  const byRound = new Map()
  for (const r of runs) {
    if (!byRound.has(r.round)) byRound.set(r.round, {})
    byRound.get(r.round)[r.kind] = r
  }
  return [...byRound.values()].filter((x) => x[kind] && x[base])
    .map((x) => (f(x[base]) / x[base].units) > 0 ? (f(x[kind]) / x[kind].units) / (f(x[base]) / x[base].units) - 1 : null)
    .filter((v) => v !== null)
}

// Runs `file --child JSON(args)` with node flags; the child prints its result
// as one line after MARK.
const MARK = 'KFLAME_BENCH_RESULT '
function runChild (file, nodeFlags, args) {
  const out = execFileSync(process.execPath, [...nodeFlags, file, '--child', JSON.stringify(args)],
    { encoding: 'utf8', maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'inherit'] })
  const m = new RegExp(`^${MARK}(.*)$`, 'm').exec(out)
  if (!m) throw new Error(`child ${path.basename(file)} ${args.mode || ''} gave no result`)
  return JSON.parse(m[1])
}

// The set-up of a windows child: --expose-gc checked, the mixed workload's
// JIT warm before kflame loads, kflame loaded.
function windowsSetup (name) {
  const gc = globalThis.gc
  if (typeof gc !== 'function') throw new Error(`the ${name} child needs --expose-gc`)
  const w = makeMixedWorkload()
  w.freshPool()
  for (let i = 0; i < 2000; i++) w.unit(i)
  const kflame = loadKflame()
  return { gc, w, kflame, addon0: addonMtime() }
}

// The measured part of a window: the workload's units run for windowMs of
// wall time -> { units, wallMs, cpuMs (the main thread's), sink }.
function timedUnits (w, windowMs) {
  let sink = 0
  const c0 = mainCpuNs()
  const t0 = process.hrtime.bigint()
  const end = t0 + BigInt(Math.round(windowMs * 1e6))
  let units = 0
  let t1
  do { sink += w.unit(units++) } while ((t1 = process.hrtime.bigint()) < end)
  const c1 = mainCpuNs()
  return { units, wallMs: Number(t1 - t0) / 1e6, cpuMs: (c1 - c0) / 1e6, sink }
}

// Every kind's window once as a warm-up, not kept (the first profile loads
// the symbol tables; `warmups` rounds of it), then `rounds` rounds of every
// kind once in a seeded random order: the runs, each with its round.
function alternate (kinds, window, { rounds, seed, warmups = 1 }) {
  for (let i = 0; i < warmups; i++) for (const kind of kinds) window(kind)
  const rand = mulberry32(seed)
  const runs = []
  for (let round = 0; round < rounds; round++) {
    for (const kind of shuffle(kinds, rand)) runs.push({ round, ...window(kind) })
  }
  return runs
}

module.exports = {
  MARK,
  runChild,
  windowsSetup,
  timedUnits,
  alternate,
  ROOT, sleepMs, loadKflame, addonMtime, schedNs, mainCpuNs, findThread, collectorCpu, shuffle, makeMixedWorkload, quantile, summarize, extraPerUnit
}

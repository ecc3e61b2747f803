'use strict'

// Native frame names, kflame against `perf record -g` on the same workloads:
// does kflame name the native code where the time goes as perf does?
//
//   node bench/nativenames.js [--quick] [--rounds N] [--seconds S]
//     [--json bench/results/nativenames.json]
//
// Workloads (main thread, S seconds of wall time each, ~999 Hz):
//   memmove  Buffer.copy between 64 MB buffers (glibc's memmove)
//   sha256   crypto.createHash('sha256') over 1 MB buffers (OpenSSL's libcrypto)
//   deflate  zlib.deflateSync of 256 KB of text (node's own zlib)
//   qsort    a sort of typed arrays and of strings (V8's C++ and builtins)
// Each runs in a fresh node process profiled by kflame (in process) and by
// `perf record -F 999 -g` (with --perf-basic-prof), alternating; perf's
// samples are folded as kflame names frames (bench/common.js: perfFrame,
// which also folds an unnamed address into "[object]", as kflame does), and
// only the main thread's samples inside the workload's window count.
//
// For each sample the native leaf: the innermost frame that is neither JS
// (_[j], _[i]) nor kernel (_[k]). Agreement is the overlap of the two
// tools' distributions of native leaves: the sum over names of the smaller
// of the two shares (100% when both give the same names in the same
// proportions). C++ names are compared without return type and parameter
// list, as perf prints them ("std::sort<int*>" for kflame's "void
// std::sort<int*>(int*, int*)"): the style differs, not the function.
// "named" is the share of native leaves that are a symbol,
// not "[object]" or "[unknown]". perf names glibc from libc6-dbg's debug
// file as kflame does; the table says whether that file is there.
//
// Cost of DWARF unwinding (start({ dwarf })): in one process (bench/
// windows.js), ~150 ms windows of the memmove workload, where nearly every
// sample's leaf is in glibc and gets unwound, alternate in a seeded random
// order: unprofiled, and kflame at 99 and 999 Hz with dwarf on and off.
// Extra main-thread CPU per unit of work against the round's unprofiled
// window (median of per-round ratios, bootstrap 95% interval), and the
// collector thread's CPU per sample.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { machineNotes, machineLine, writeResults, option, perfCheck, perfRecordArgv, perfScript, foldPerfScript, foldedToMap, mulberry32, median } = require('./common')
const { mainCpuNs, schedNs, findThread, shuffle, summarize, extraPerUnit, runChild } = require('./windows')

const MARK = 'KFLAME_BENCH_RESULT '
const WORKLOADS = ['memmove', 'sha256', 'deflate', 'qsort']
const TOOLS = ['kflame', 'perf']

// --- the child ---------------------------------------------------------------------

function makeWork (name) {
  if (name === 'memmove') {
    const a = Buffer.alloc(64 << 20, 1)
    const b = Buffer.alloc(64 << 20)
    return () => a.copy(b)
  }
  if (name === 'sha256') {
    const crypto = require('node:crypto')
    const buf = Buffer.alloc(1 << 20, 7)
    return () => crypto.createHash('sha256').update(buf).digest()
  }
  if (name === 'deflate') {
    const zlib = require('node:zlib')
    const text = Buffer.from(Array.from({ length: 8000 }, (_, i) => `line ${i} of some text ${i * 7919 % 1000}\n`).join('').slice(0, 256 << 10))
    return () => zlib.deflateSync(text)
  }
  if (name === 'qsort') {
    return () => {
      const a = new Float64Array(1 << 16)
      for (let i = 0; i < a.length; i++) a[i] = Math.sin(i) * 1e6
      a.sort()
      const s = Array.from({ length: 20000 }, (_, i) => `k${(i * 7919) % 20000}`)
      s.sort()
    }
  }
  throw new Error(`no workload ${name}`)
}

function child (workload, tool, seconds) {
  const kflame = tool === 'kflame' ? require('..') : null
  const work = makeWork(workload)
  work()
  if (kflame) kflame.start({ hz: 999 })
  const t0 = process.hrtime.bigint()
  const end = Date.now() + seconds * 1000
  while (Date.now() < end) work()
  const t1 = process.hrtime.bigint()
  const folded = kflame ? kflame.stop().folded : null
  process.stdout.write(MARK + JSON.stringify({ pid: process.pid, windowNs: [Number(t0), Number(t1)], folded }) + '\n')
}

const COST_KINDS = ['none', 'dwarf-99', 'nodwarf-99', 'dwarf-999', 'nodwarf-999']

function costChild ({ rounds, windowMs, seed }) {
  const kflame = require('..')
  const work = makeWork('memmove')
  const window = (kind) => {
    const [dw, rate] = kind === 'none' ? [null, 0] : kind.split('-')
    let collector = null
    if (dw) {
      kflame.start({ hz: Number(rate), dwarf: dw === 'dwarf' })
      const tid = findThread('kflame-collect')
      collector = tid && `/proc/self/task/${tid}/schedstat`
    }
    const c0 = mainCpuNs()
    const end = process.hrtime.bigint() + BigInt(windowMs * 1e6)
    let units = 0
    do { work(); units++ } while (process.hrtime.bigint() < end)
    const r = { kind, units, cpuMs: (mainCpuNs() - c0) / 1e6 }
    if (dw) {
      r.collectorMs = collector ? schedNs(collector) / 1e6 : null
      const p = kflame.stop()
      r.samples = p.stats.samples
      r.dwarfTried = p.stats.details.dwarfTried
      r.dwarfRecovered = p.stats.details.dwarfRecovered
    }
    return r
  }
  for (const kind of COST_KINDS) window(kind)
  const rand = mulberry32(seed)
  const runs = []
  for (let round = 0; round < rounds; round++) for (const kind of shuffle(COST_KINDS, rand)) runs.push({ round, ...window(kind) })
  return { runs }
}

function costRows (runs, seed) {
  const sum = (xs) => xs.reduce((a, b) => a + b, 0)
  return COST_KINDS.filter((k) => k !== 'none').map((kind, i) => {
    const mine = runs.filter((r) => r.kind === kind && r.collectorMs !== null)
    return {
      kind,
      extraCpu: summarize(extraPerUnit(runs, kind, 'none', (r) => r.cpuMs), seed + i),
      samplesPerWindow: median(mine.map((r) => r.samples)),
      collectorUsPerSample: sum(mine.map((r) => r.collectorMs)) * 1000 / Math.max(1, sum(mine.map((r) => r.samples))),
      recoveredShare: sum(mine.map((r) => r.dwarfRecovered)) / Math.max(1, sum(mine.map((r) => r.samples)))
    }
  })
}

// --- the parent ----------------------------------------------------------------------

function parseResult (stdout) {
  const m = new RegExp(`^${MARK}(.*)$`, 'm').exec(stdout)
  if (!m) throw new Error(`no result from the child: ${stdout.slice(0, 200)}`)
  return JSON.parse(m[1])
}

// Map(stack -> samples) of the main thread.
function trial (workload, tool, seconds) {
  const argv = [__filename, '--child', workload, tool, String(seconds)]
  if (tool === 'kflame') {
    const r = parseResult(execFileSync(process.execPath, argv, { encoding: 'utf8', maxBuffer: 256 << 20 }))
    return mainOnly(foldedToMap(r.folded).stacks)
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-nativenames-'))
  try {
    const data = path.join(dir, 'perf.data')
    const rec = perfRecordArgv(999, data, argv)
    const r = parseResult(execFileSync(rec[0], rec.slice(1), { cwd: dir, encoding: 'utf8', maxBuffer: 256 << 20 }))
    const script = perfScript(data, r.pid)
    if (script.error) throw new Error(script.error)
    return mainOnly(foldPerfScript(script.text, { pid: r.pid, fromNs: r.windowNs[0], toNs: r.windowNs[1] }).stacks)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

function mainOnly (stacks) {
  const out = new Map()
  for (const [stack, n] of stacks) if (stack.startsWith('main;')) out.set(stack, n)
  return out
}

const isNative = (f) => !/_\[[jik]\]$/.test(f)

// A demangled C++ name as perf prints it: no return type, no parameters,
// no trailing const. Other names are left alone.
function cppCore (name) {
  let s = name.replace(/( const| volatile| &| &&)+$/, '')
  if (s.endsWith(')')) {
    let depth = 0
    for (let i = s.length - 1; i >= 0; i--) {
      if (s[i] === ')') depth++
      else if (s[i] === '(' && --depth === 0) { s = s.slice(0, i); break }
    }
  }
  let depth = 0
  for (let i = 0; i < s.length; i++) {
    const c = s[i]
    if (c === '<' || c === '(') depth++
    else if (c === '>' || c === ')') depth--
    else if (c === ' ' && depth === 0 && !s.slice(0, i).endsWith('operator')) return s.slice(i + 1)
  }
  return s
}
const isSymbol = (f) => !/^\[[^\]]*\]$/.test(f) && !/\+0x[0-9a-f]+$/.test(f)

// Map(native leaf -> samples), and the samples with no native frame at all.
function nativeLeaves (stacks) {
  const leaves = new Map()
  let none = 0
  for (const [stack, n] of stacks) {
    const frames = stack.split(';')
    let leaf = null
    for (let i = frames.length - 1; i >= 1 && leaf === null; i--) if (isNative(frames[i])) leaf = frames[i]
    if (leaf === null) none += n
    else leaves.set(cppCore(leaf), (leaves.get(cppCore(leaf)) || 0) + n)
  }
  return { leaves, none }
}

function shares (leaves) {
  const total = [...leaves.values()].reduce((a, b) => a + b, 0)
  return new Map([...leaves].map(([k, v]) => [k, total ? v / total : 0]))
}

function summarizeNames (workload, runs) {
  const pool = (tool) => {
    const m = new Map()
    let none = 0
    for (const r of runs.filter((x) => x.tool === tool)) {
      const { leaves, none: nn } = nativeLeaves(r.stacks)
      for (const [k, v] of leaves) m.set(k, (m.get(k) || 0) + v)
      none += nn
    }
    return { leaves: m, none }
  }
  const k = pool('kflame')
  const p = pool('perf')
  const sk = shares(k.leaves)
  const sp = shares(p.leaves)
  let overlap = 0
  for (const [name, s] of sk) overlap += Math.min(s, sp.get(name) || 0)
  const named = (s) => [...s].filter(([name]) => isSymbol(name)).reduce((a, [, v]) => a + v, 0)
  const top = (s) => [...s].sort((a, b) => b[1] - a[1]).slice(0, 3).map(([name, v]) => ({ name, share: v }))
  const count = (x) => [...x.leaves.values()].reduce((a, b) => a + b, 0) + x.none
  return {
    workload,
    samples: { kflame: count(k), perf: count(p) },
    agreement: overlap,
    named: { kflame: named(sk), perf: named(sp) },
    top: { kflame: top(sk), perf: top(sp) }
  }
}

function formatTables (r) {
  const pct = (x) => `${(x * 100).toFixed(1)}%`
  const tops = (t) => t.map((x) => `${x.name.length > 40 ? x.name.slice(0, 39) + '…' : x.name} ${pct(x.share)}`).join('<br>')
  const out = []
  out.push(`Native leaves of main-thread samples, ${r.rounds} round${r.rounds > 1 ? 's' : ''} of ${r.seconds} s per tool and workload; ` +
    `glibc's debug file (libc6-dbg): ${r.libcDebug ? 'installed' : 'absent'}`)
  out.push('')
  out.push('| workload | samples kflame / perf | agreement of native leaf names | named: kflame | named: perf | top leaves: kflame | top leaves: perf |')
  out.push('| --- | --- | --- | --- | --- | --- | --- |')
  for (const x of r.rows) {
    out.push(`| ${x.workload} | ${x.samples.kflame} / ${x.samples.perf} | ${pct(x.agreement)} | ${pct(x.named.kflame)} | ${pct(x.named.perf)} | ` +
      `${tops(x.top.kflame)} | ${tops(x.top.perf)} |`)
  }
  if (r.cost) {
    const ci = (s) => s ? `${pct(s.median)} [${pct(s.ci95[0])}, ${pct(s.ci95[1])}]` : '-'
    out.push('')
    out.push(`What DWARF unwinding costs: the memmove workload, ${r.costRounds} rounds of ${COST_KINDS.length} alternating ~150 ms windows in one process`)
    out.push('')
    out.push('| kind | extra main-thread CPU [95% interval] | samples/window | samples given frames back | collector µs/sample |')
    out.push('| --- | --- | --- | --- | --- |')
    for (const x of r.cost) {
      const [dw, hz] = x.kind.split('-')
      out.push(`| ${hz} Hz, dwarf ${dw === 'dwarf' ? 'on' : 'off'} | ${ci(x.extraCpu)} | ${x.samplesPerWindow} | ${pct(x.recoveredShare)} | ${x.collectorUsPerSample.toFixed(1)} |`)
    }
  }
  return out
}

const readmeTables = (r) => formatTables(r)

function libcDebugInstalled () {
  try {
    const libc = fs.readFileSync('/proc/self/maps', 'utf8').split('\n').map((l) => l.split(/\s+/)[5]).find((p) => p && /\/libc\.so\.6$/.test(p))
    const id = /Build ID: ([0-9a-f]+)/.exec(execFileSync('readelf', ['-n', libc], { encoding: 'utf8' }))[1]
    return fs.existsSync(`/usr/lib/debug/.build-id/${id.slice(0, 2)}/${id.slice(2)}.debug`)
  } catch { return false }
}

function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child' && args[1].startsWith('{')) {
    process.stdout.write(MARK + JSON.stringify(costChild(JSON.parse(args[1]))) + '\n')
    return
  }
  if (args[0] === '--child') return child(args[1], args[2], Number(args[3]))
  const machine = machineNotes()
  const quick = args.includes('--quick')
  const rounds = Number(option(args, '--rounds')) || (quick ? 1 : 3)
  const seconds = Number(option(args, '--seconds')) || (quick ? 1 : 3)
  const jsonOut = option(args, '--json')
  const perf = perfCheck()
  if (!perf.ok) {
    console.log(`nativenames: skipped, ${perf.why}`)
    return
  }
  const runs = []
  for (let round = 0; round < rounds; round++) {
    for (const workload of WORKLOADS) {
      for (const tool of round % 2 ? [...TOOLS].reverse() : TOOLS) {
        const stacks = trial(workload, tool, seconds)
        runs.push({ round, workload, tool, stacks })
        console.error(`  round ${round + 1}/${rounds} ${workload} ${tool}: ${[...stacks.values()].reduce((a, b) => a + b, 0)} samples`)
      }
    }
  }
  const costRounds = Number(option(args, '--cost-rounds')) || (quick ? 4 : 30)
  console.error(`cost: ${costRounds} rounds × ${COST_KINDS.length} windows ...`)
  const seed = 1
  const cost = runChild(__filename, [], { rounds: costRounds, windowMs: 150, seed })
  const result = {
    quick,
    rounds,
    seconds,
    costRounds,
    cost: costRows(cost.runs, seed),
    libcDebug: libcDebugInstalled(),
    tools: { perf: perf.version },
    rows: WORKLOADS.map((w) => summarizeNames(w, runs.filter((x) => x.workload === w)))
  }
  console.log(`nativenames: ${machineLine(machine)}; ${perf.version}`)
  console.log(formatTables(result).join('\n'))
  if (jsonOut) writeResults(jsonOut, machine, result)
}

module.exports = { formatTables, readmeTables }

if (require.main === module) main()

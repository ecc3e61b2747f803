'use strict'

// Native frame names, kflame against `perf record -g` and `perf record
// --call-graph dwarf` on the same workloads: does kflame name the native
// code where the time goes, and the native callers above it, as perf does?
//
//   node bench/nativenames.js [--quick] [--rounds N] [--seconds S]
//     [--json bench/results/nativenames.json]
//
// Workloads (main thread, S seconds of wall time each, ~999 Hz):
//   memmove  Buffer.copy between 64 MB buffers (glibc's memmove)
//   sha256   crypto.createHash('sha256') over 1 MB buffers (OpenSSL's libcrypto)
//   deflate  zlib.deflateSync of 256 KB of text (node's own zlib)
//   qsort    a sort of typed arrays and of strings (V8's C++ and builtins)
//   nofp     test/fixtures/nofp-addon, built here with -O2 -fomit-frame-pointer:
//            JS -> glibc's qsort with a C comparator -> back into JS (left out,
//            with a note, when there is no C compiler or no node_api.h)
// Each runs in a fresh node process profiled by one of three tools, in an
// order that rotates each round: kflame (in process, its default 16 KiB
// stack copy), `perf record -F 999 -g` (frame pointers) and `perf record
// -F 999 --call-graph dwarf,16384` (the same 16 KiB of stack per sample,
// unwound afterwards by `perf script`), both with --perf-basic-prof. perf's
// samples are folded as kflame names frames (bench/common.js: perfFrame,
// which also folds an unnamed address into "[object]", as kflame does), and
// only the main thread's samples inside the workload's window count.
// `perf script` runs with --no-inline: with DWARF call chains this perf
// otherwise looks up the functions inlined at every address (30 s and more
// per trial here) and adds them as frames, which neither kflame nor perf -g
// shows; for -g chains the output is the same either way.
//
// Metrics, each an overlap of two tools' distributions (the sum over
// distinct values of the smaller of the two shares: 100% when both give the
// same values in the same proportions). Frames are "native" when neither JS
// (_[j], _[i]: JIT code, V8's builtins, the interpreter) nor kernel (_[k]).
// C++ names are compared without return type and parameter list, as perf
// prints them ("std::sort<int*>" for kflame's "void std::sort<int*>(int*,
// int*)"): the style differs, not the function.
//   native leaf     the innermost native frame of each sample (samples with
//                   none left out), names as printed: the first table.
//   callers 1-3     samples whose leaf (innermost non-kernel frame) is
//                   native: the 1st, 2nd, 3rd frame above it, "(JS)" when
//                   the next frame is JS, "(end)" when the chain ends.
//   native run      the same samples: the whole run of native frames from
//                   the leaf out to the first JS frame or the chain's end.
//   native chain    every sample: all its native frames, root to leaf, JS
//                   and kernel frames dropped (an empty chain is a value),
//                   from __libc_start_call_main in (perf -g's root).
// glibc names one function several ways (clone3, __clone3, __GI___clone3)
// and the tools choose differently among them: the chain table counts the
// names of one address as one (from glibc's symbol table, libcAliases),
// and shows the native run with names as printed beside it.
// "kflame, two halves" is the noise floor: kflame's pooled samples split
// at random (seeded) into two halves compared with each other; at half the
// samples it is a little lower than the noise between two full pools.
// "named" is the share of native leaves that are a symbol, not "[object]"
// or "[unknown]". perf names glibc from libc6-dbg's debug file as kflame
// does; the table says whether that file is there.
//
// What each tool's capture lost or cut short: samples lost (kflame's
// stats.lost; perf's PERF_RECORD_LOST and LOST_SAMPLES records, read from
// `perf script -D`), and for the stack copies, kflame's stackCopiesShort
// (samples with an interpreter frame to read past the copy's end; before
// 2026-11-24, samples whose frame chain went on past it) and perf's copies as
// large as asked for (the stack went on past the copy: DWARF unwinding
// stops there), of all the process's samples; and where each tool's
// main-thread chains end: at the thread's root (_start, start_thread,
// clone3 ...), at a JS frame, or elsewhere.
//
// Cost of DWARF unwinding (start({ dwarf })): in one process (bench/
// windows.js), ~150 ms windows of the memmove workload, where nearly every
// sample's leaf is in glibc and gets unwound, alternate in a seeded random
// order: unprofiled, and kflame at 99 and 999 Hz with dwarf on and off.
// Extra main-thread CPU per unit of work against the round's unprofiled
// window (median of per-round ratios, bootstrap 95% interval), and the
// collector thread's CPU per sample.

const { execFileSync, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { machineNotes, machineLine, writeResults, option, perfCheck, perfRecordArgv, perfScript, foldPerfScript, foldedToMap, mulberry32, median } = require('./common')
const { mainCpuNs, collectorCpu, shuffle, summarize, extraPerUnit, runChild } = require('./windows')

const MARK = 'KFLAME_BENCH_RESULT '
const WORKLOADS = ['memmove', 'sha256', 'deflate', 'qsort', 'nofp']
const TOOLS = ['kflame', 'perf', 'perf-dwarf']
const TOOL_NAMES = { kflame: 'kflame', perf: 'perf -g', 'perf-dwarf': 'perf dwarf' }
// kflame's default stackBytes, and perf's copy for --call-graph dwarf: both
// unwind from the same number of bytes.
const STACK_BYTES = 16384
const PAIRS = [['kflame', 'perf'], ['kflame', 'perf-dwarf'], ['perf', 'perf-dwarf']]
const CALLER_DEPTHS = 3

// --- the child ---------------------------------------------------------------------

function makeWork (name, addon) {
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
  if (name === 'nofp') {
    // As test/fixtures/nofp-addon/run.js drives it.
    const nofp = require(addon)
    const nofpCallback = () => {
      let x = 0
      for (let i = 0; i < 2e5; i++) x += Math.sqrt(i)
      return x
    }
    return function nofpDriver () { return nofp.sort(20000, nofpCallback) }
  }
  throw new Error(`no workload ${name}`)
}

function child (workload, tool, seconds, addon) {
  const kflame = tool === 'kflame' ? require('..') : null
  const work = makeWork(workload, addon)
  work()
  if (kflame) kflame.start({ hz: 999, stackBytes: STACK_BYTES })
  const t0 = process.hrtime.bigint()
  const end = Date.now() + seconds * 1000
  while (Date.now() < end) work()
  const t1 = process.hrtime.bigint()
  const out = { pid: process.pid, windowNs: [Number(t0), Number(t1)], folded: null }
  if (kflame) {
    const p = kflame.stop()
    const d = p.stats.details
    out.folded = p.folded
    out.capture = { samples: p.stats.samples, lost: p.stats.lost, copies: d.stackCopies, copyBytes: d.stackCopyBytes, short: d.stackCopiesShort }
  }
  process.stdout.write(MARK + JSON.stringify(out) + '\n')
}

// test/fixtures/nofp-addon built as test/native-names.test.js builds it,
// into `dir`: { addon } or { why }.
function buildNofpAddon (dir) {
  const include = [path.resolve(process.execPath, '..', '..', 'include', 'node'), '/usr/include/node']
    .find((d) => fs.existsSync(path.join(d, 'node_api.h')))
  if (!include) return { why: `no node_api.h for ${process.execPath} (install node's headers)` }
  const addon = path.join(dir, 'nofp.node')
  const r = spawnSync('cc', ['-O2', '-fomit-frame-pointer', '-fPIC', '-shared', `-I${include}`, '-o', addon,
    path.join(__dirname, '..', 'test', 'fixtures', 'nofp-addon', 'nofp.c')], { encoding: 'utf8' })
  if (r.error || r.status !== 0) return { why: `cc failed: ${r.error ? r.error.message : (r.stderr || '').trim().split('\n')[0]}` }
  return { addon }
}

const COST_KINDS = ['none', 'dwarf-99', 'nodwarf-99', 'dwarf-999', 'nodwarf-999']

function costChild ({ rounds, windowMs, seed }) {
  const kflame = require('..')
  const work = makeWork('memmove')
  const window = (kind) => {
    const [dw, rate] = kind === 'none' ? [null, 0] : kind.split('-')
    let collectorMs = null
    if (dw) {
      kflame.start({ hz: Number(rate), dwarf: dw === 'dwarf' })
      collectorMs = collectorCpu()
    }
    const c0 = mainCpuNs()
    const end = process.hrtime.bigint() + BigInt(windowMs * 1e6)
    let units = 0
    do { work(); units++ } while (process.hrtime.bigint() < end)
    const r = { kind, units, cpuMs: (mainCpuNs() - c0) / 1e6 }
    if (dw) {
      r.collectorMs = collectorMs()
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

// { stacks: Map(stack -> samples) of the main thread, capture }.
function trial (workload, tool, seconds, addon) {
  const argv = [__filename, '--child', workload, tool, String(seconds), addon || '']
  if (tool === 'kflame') {
    const r = parseResult(execFileSync(process.execPath, argv, { encoding: 'utf8', maxBuffer: 256 << 20 }))
    return { stacks: mainOnly(foldedToMap(r.folded).stacks), capture: r.capture }
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-nativenames-'))
  try {
    const data = path.join(dir, 'perf.data')
    const rec = perfRecordArgv(999, data, argv, tool === 'perf-dwarf' ? { callGraph: `dwarf,${STACK_BYTES}` } : {})
    const r = parseResult(execFileSync(rec[0], rec.slice(1), { cwd: dir, encoding: 'utf8', maxBuffer: 256 << 20 }))
    const capture = perfCapture(data, r.pid, tool === 'perf-dwarf' ? STACK_BYTES : 0)
    const script = perfScript(data, r.pid, { args: ['--no-inline'] })
    if (script.error) throw new Error(script.error)
    return { stacks: mainOnly(foldPerfScript(script.text, { pid: r.pid, fromNs: r.windowNs[0], toNs: r.windowNs[1] }).stacks), capture }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

// What perf's own capture lost or cut short, from the raw records `perf
// script -D` prints (only the lines needed are kept, by grep: the dump
// holds every stack copy in hex):
//   1234 0x17c8 [0x40f8]: PERF_RECORD_SAMPLE(IP, 0x2): 11144/11144: 0x7f06... period: 1001001 addr: 0
//   ... ustack: size 9480, offset 0xe0
//   1234 0x84dd08 [0x28]: PERF_RECORD_LOST: id:1334496: lost:12
//   0 0x1221118 [0x20]: PERF_RECORD_LOST_SAMPLES: id:18446744073709551615: lost samples :12
// The ustack size is the copy's dyn_size, the bytes the kernel copied: as
// many as asked for means the stack went on past the copy. Counts cover
// every thread of `pid` over the whole run, as kflame's stats do.
function perfCapture (data, pid, stackBytes) {
  const r = spawnSync('sh', ['-c', 'perf script -i "$1" -D --no-inline 2>/dev/null | grep -a -E "PERF_RECORD_(SAMPLE|LOST)|ustack: size"', 'sh', data],
    { encoding: 'utf8', maxBuffer: 1 << 30 })
  if (r.error) throw new Error(`perf script -D: ${r.error.message}`)
  const c = { samples: 0, lost: 0, copies: 0, copyBytes: 0, short: 0 }
  const lostBy = { records: 0, counted: 0 }
  let mine = false
  for (const line of r.stdout.split('\n')) {
    const sample = /PERF_RECORD_SAMPLE\([^)]*\): (\d+)\/\d+:/.exec(line)
    if (sample) {
      mine = Number(sample[1]) === pid
      if (mine) c.samples++
      continue
    }
    const lost = /PERF_RECORD_LOST(_SAMPLES)?:.*lost(?: samples)? ?:(\d+)/.exec(line)
    if (lost) { lostBy[lost[1] ? 'counted' : 'records'] += Number(lost[2]); continue }
    const u = /ustack: size (\d+)/.exec(line)
    if (u && mine && stackBytes) {
      c.copies++
      c.copyBytes += Number(u[1])
      if (Number(u[1]) >= stackBytes) c.short++
    }
  }
  // The kernel's count of lost samples, which perf record writes at the end
  // as LOST_SAMPLES, covers the same losses as the LOST records.
  c.lost = Math.max(lostBy.records, lostBy.counted)
  return c
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
const isKernel = (f) => f.endsWith('_[k]')
// The outermost frames a thread's chain can reach: the main thread's _start
// and the glibc functions above main(), a thread's start_thread and clone3.
const ROOT = /^(_start|__libc_start_call_main|__libc_start_main\S*|start_thread|_*clone3?)$/

// Per sample (Map(stack -> samples) in, Maps of value -> samples out):
//   leaves   the innermost native frame (samples with none: `none`)
//   chains   all native frames, root to leaf, ";"-joined ("" for none)
//   runs     samples whose leaf is native: the native frames from the leaf
//            out to the first JS frame or the chain's end
//   callers  the same samples: the leaf (0), the d-th frame above it, "(JS)"
//            or "(end)"
//   ends     where the chain ends: "root", "JS" or "other"
//   printed  the same as runs, with names as the tool printed them
// Frames are named as perf prints C++ (cppCore). Outside `leaves` and
// `printed`, glibc's aliases are one name (from libcAliases), and the
// chains start at __libc_start_call_main: perf -g stops there (_start
// zeroes the frame pointer and glibc's startup code keeps none), kflame
// goes on to _start from DWARF, and a root more or less is not a naming
// difference.
function analyse (stacks, aliases = new Map()) {
  const add = (m, k, n) => m.set(k, (m.get(k) || 0) + n)
  const out = { leaves: new Map(), none: 0, chains: new Map(), printed: new Map(), runs: new Map(), callers: [], ends: new Map(), samples: 0, nativeLeaf: 0 }
  for (let d = 0; d <= CALLER_DEPTHS; d++) out.callers.push(new Map())
  const canonical = (f) => aliases.get(f) || f
  for (const [stack, n] of stacks) {
    out.samples += n
    const all = stack.split(';').slice(1).filter((f) => !isKernel(f))
    const outer = all[0]
    add(out.ends, outer === undefined ? 'other' : ROOT.test(outer) ? 'root' : isNative(outer) ? 'other' : 'JS', n)
    const printed = all.filter(isNative).map(cppCore)
    if (printed.length) add(out.leaves, printed[printed.length - 1], n)
    else out.none += n
    const frames = all.slice(Math.max(0, all.indexOf('__libc_start_call_main'))).map((f) => isNative(f) ? canonical(cppCore(f)) : f)
    add(out.chains, frames.filter(isNative).join(';'), n)
    if (!frames.length || !isNative(frames[frames.length - 1])) continue
    out.nativeLeaf += n
    let i = frames.length - 1
    while (i >= 0 && isNative(frames[i])) i--
    const run = frames.slice(i + 1)
    add(out.runs, run.join(';'), n)
    add(out.printed, all.slice(all.length - run.length).map(cppCore).join(';'), n)
    for (let d = 0; d <= CALLER_DEPTHS; d++) {
      const at = run.length - 1 - d
      add(out.callers[d], at >= 0 ? run[at] : at === -1 && i >= 0 ? '(JS)' : '(end)', n)
    }
  }
  return out
}

function shares (counts) {
  const total = [...counts.values()].reduce((a, b) => a + b, 0)
  return new Map([...counts].map(([k, v]) => [k, total ? v / total : 0]))
}

// The overlap of two distributions: the sum over values of the smaller share.
function overlap (a, b) {
  const sa = shares(a)
  const sb = shares(b)
  let sum = 0
  for (const [k, v] of sa) sum += Math.min(v, sb.get(k) || 0)
  return sum
}

function agreement (a, b) {
  return {
    leaf: overlap(a.leaves, b.leaves),
    callers: a.callers.map((m, d) => overlap(m, b.callers[d])),
    run: overlap(a.runs, b.runs),
    chain: overlap(a.chains, b.chains),
    printed: overlap(a.printed, b.printed)
  }
}

// Two halves of a pool of samples, each sample to one or the other at random.
function halves (stacks, rand) {
  const x = new Map()
  const y = new Map()
  for (const [stack, n] of stacks) {
    let k = 0
    for (let i = 0; i < n; i++) if (rand() < 0.5) k++
    if (k) x.set(stack, k)
    if (n - k) y.set(stack, n - k)
  }
  return [x, y]
}

function summarizeNames (workload, runs, seed, aliases) {
  const pool = (tool) => {
    const m = new Map()
    for (const r of runs.filter((x) => x.tool === tool)) for (const [k, v] of r.stacks) m.set(k, (m.get(k) || 0) + v)
    return m
  }
  const sum = (xs) => xs.reduce((a, b) => a + b, 0)
  const captureOf = (tool) => {
    const cs = runs.filter((x) => x.tool === tool).map((x) => x.capture).filter(Boolean)
    const total = (k) => sum(cs.map((c) => c[k] || 0))
    return { samples: total('samples'), lost: total('lost'), copies: total('copies'), copyBytes: total('copyBytes'), short: total('short') }
  }
  const stacks = Object.fromEntries(TOOLS.map((t) => [t, pool(t)]))
  const a = Object.fromEntries(TOOLS.map((t) => [t, analyse(stacks[t], aliases)]))
  const [h1, h2] = halves(stacks.kflame, mulberry32(seed))
  const named = (x) => sum([...shares(x.leaves)].filter(([name]) => isSymbol(name)).map(([, v]) => v))
  const top = (x) => [...shares(x.leaves)].sort((p, q) => q[1] - p[1]).slice(0, 3).map(([name, share]) => ({ name, share }))
  const of = (f) => Object.fromEntries(TOOLS.map((t) => [t, f(a[t], t)]))
  return {
    workload,
    samples: of((x) => x.samples),
    nativeLeaf: of((x) => x.samples ? x.nativeLeaf / x.samples : 0),
    named: of(named),
    top: of(top),
    agreement: {
      ...Object.fromEntries(PAIRS.map(([p, q]) => [`${p}/${q}`, agreement(a[p], a[q])])),
      'kflame/kflame': agreement(analyse(h1, aliases), analyse(h2, aliases))
    },
    ends: of((x) => Object.fromEntries(['root', 'JS', 'other'].map((k) => [k, x.samples ? (x.ends.get(k) || 0) / x.samples : 0]))),
    capture: of((x, t) => captureOf(t))
  }
}

function formatTables (r) {
  const pct = (x) => `${(x * 100).toFixed(1)}%`
  const tops = (t) => t.map((x) => `${x.name.length > 40 ? x.name.slice(0, 39) + '…' : x.name} ${pct(x.share)}`).join('<br>')
  const slash = (o, f) => TOOLS.map((t) => f(o[t])).join(' / ')
  const out = []
  out.push(`Native frames of main-thread samples, ${r.rounds} round${r.rounds > 1 ? 's' : ''} of ${r.seconds} s per tool and workload; ` +
    `perf -g is \`perf record -g\`, perf dwarf \`perf record --call-graph dwarf,${r.stackBytes}\` (kflame's stack copy: ${r.stackBytes} bytes); ` +
    `glibc's debug file (libc6-dbg): ${r.libcDebug ? 'installed' : 'absent'}`)
  out.push('')
  out.push('| workload | samples kflame / perf -g / perf dwarf | native leaf agreement: kflame, perf -g | kflame, perf dwarf | perf -g, perf dwarf | named: kflame / perf -g / perf dwarf | top leaves: kflame | top leaves: perf -g |')
  out.push('| --- | --- | --- | --- | --- | --- | --- | --- |')
  for (const x of r.rows) {
    const ag = (k) => pct(x.agreement[k].leaf)
    out.push(`| ${x.workload} | ${slash(x.samples, String)} | ${ag('kflame/perf')} | ${ag('kflame/perf-dwarf')} | ${ag('perf/perf-dwarf')} | ` +
      `${slash(x.named, pct)} | ${tops(x.top.kflame)} | ${tops(x.top.perf)} |`)
  }
  out.push('')
  out.push('Agreement of native frame sequences: the callers of a native leaf and the run of native frames above it up to the first JS frame, ' +
    'over samples whose leaf is native; the whole chain of native frames (JS and kernel frames dropped, from `__libc_start_call_main` in) over all samples; ' +
    'glibc\'s aliases of one address as one name, but in the last column; "kflame, two halves" is the noise floor')
  out.push('')
  const depths = Array.from({ length: CALLER_DEPTHS + 1 }, (_, d) => d ? `caller ${d}` : 'native leaf')
  out.push(`| workload | tools | ${depths.join(' | ')} | native run to the first JS frame | whole native chain | native run, names as printed |`)
  out.push(`| --- | --- | ${depths.map(() => '---').join(' | ')} | --- | --- | --- |`)
  for (const x of r.rows) {
    for (const [p, q] of [...PAIRS, ['kflame', 'kflame']]) {
      const g = x.agreement[`${p}/${q}`]
      const who = p === q ? 'kflame, two halves' : `${TOOL_NAMES[p]}, ${TOOL_NAMES[q]}`
      out.push(`| ${x.workload} | ${who} | ${g.callers.map(pct).join(' | ')} | ${pct(g.run)} | ${pct(g.chain)} | ${pct(g.printed)} |`)
    }
  }
  out.push('')
  out.push('What each capture lost or cut short (all threads of the process), and where main-thread chains end')
  out.push('')
  out.push('| workload | tool | samples lost | stack copies cut short | mean bytes copied | leaf native | chain ends at the root / a JS frame / elsewhere |')
  out.push('| --- | --- | --- | --- | --- | --- | --- |')
  for (const x of r.rows) {
    for (const t of TOOLS) {
      const c = x.capture[t]
      const all = c.samples + c.lost
      const copies = t === 'perf' ? '-' : `${c.short} (${pct(c.copies ? c.short / c.copies : 0)})`
      const mean = t === 'perf' ? '-' : String(Math.round(c.copies ? c.copyBytes / c.copies : 0))
      const e = x.ends[t]
      out.push(`| ${x.workload} | ${TOOL_NAMES[t]} | ${c.lost} (${pct(all ? c.lost / all : 0)}) | ${copies} | ${mean} | ${pct(x.nativeLeaf[t])} | ` +
        `${pct(e.root)} / ${pct(e.JS)} / ${pct(e.other)} |`)
    }
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

// glibc as this process maps it, and its debug file by build-id (null when
// absent).
function libcFiles () {
  try {
    const libc = fs.readFileSync('/proc/self/maps', 'utf8').split('\n').map((l) => l.split(/\s+/)[5]).find((p) => p && /\/libc\.so\.6$/.test(p))
    const id = /Build ID: ([0-9a-f]+)/.exec(execFileSync('readelf', ['-n', libc], { encoding: 'utf8' }))[1]
    const debug = `/usr/lib/debug/.build-id/${id.slice(0, 2)}/${id.slice(2)}.debug`
    return { libc, debug: fs.existsSync(debug) ? debug : null }
  } catch { return { libc: null, debug: null } }
}

// glibc gives one function several names (clone3, __clone3, __GI___clone3;
// __libc_start_main, __libc_start_main_impl, __libc_start_main_alias_2) and
// each tool picks its own among them. Map(name -> the alphabetically first
// name at the same address), from glibc's symbols (its debug file's when
// there is one), for "aliases as one"; empty when readelf cannot tell.
//    4488: 0000000000027280   321 FUNC    LOCAL  DEFAULT   16 __libc_start_main_alias_2
function libcAliases ({ libc, debug }) {
  const byAddr = new Map()
  let text = ''
  try { text = execFileSync('readelf', ['-sW', debug || libc], { encoding: 'utf8', maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'ignore'] }) } catch { return new Map() }
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/)
    if (f.length < 8 || !/^(FUNC|IFUNC)$/.test(f[3]) || /^0+$/.test(f[1])) continue
    const name = f[7].replace(/@.*$/, '')
    if (!byAddr.has(f[1])) byAddr.set(f[1], new Set())
    byAddr.get(f[1]).add(name)
  }
  const out = new Map()
  for (const names of byAddr.values()) {
    if (names.size < 2) continue
    const first = [...names].sort()[0]
    for (const n of names) out.set(n, first)
  }
  return out
}

function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child' && args[1].startsWith('{')) {
    process.stdout.write(MARK + JSON.stringify(costChild(JSON.parse(args[1]))) + '\n')
    return
  }
  if (args[0] === '--child') return child(args[1], args[2], Number(args[3]), args[4])
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
  const notes = []
  const addonDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-nofp-'))
  const runs = []
  let workloads = WORKLOADS
  try {
    const nofp = buildNofpAddon(addonDir)
    if (nofp.why) {
      workloads = WORKLOADS.filter((w) => w !== 'nofp')
      notes.push(`the nofp workload was left out: ${nofp.why}`)
      console.error(`nativenames: ${notes[notes.length - 1]}`)
    }
    for (let round = 0; round < rounds; round++) {
      // Each tool goes first, second and third in turn.
      const order = TOOLS.map((_, i) => TOOLS[(i + round) % TOOLS.length])
      for (const workload of workloads) {
        for (const tool of order) {
          const t = trial(workload, tool, seconds, workload === 'nofp' ? nofp.addon : null)
          runs.push({ round, workload, tool, ...t })
          console.error(`  round ${round + 1}/${rounds} ${workload} ${tool}: ${[...t.stacks.values()].reduce((a, b) => a + b, 0)} samples`)
        }
      }
    }
  } finally {
    fs.rmSync(addonDir, { recursive: true, force: true })
  }
  const costRounds = Number(option(args, '--cost-rounds')) || (quick ? 4 : 30)
  console.error(`cost: ${costRounds} rounds × ${COST_KINDS.length} windows ...`)
  const seed = 1
  const cost = runChild(__filename, [], { rounds: costRounds, windowMs: 150, seed })
  const libc = libcFiles()
  const aliases = libcAliases(libc)
  const result = {
    quick,
    rounds,
    seconds,
    costRounds,
    cost: costRows(cost.runs, seed),
    stackBytes: STACK_BYTES,
    libcDebug: libc.debug !== null,
    tools: { perf: perf.version },
    rows: workloads.map((w, i) => summarizeNames(w, runs.filter((x) => x.workload === w), seed + i, aliases)),
    notes
  }
  console.log(`nativenames: ${machineLine(machine)}; ${perf.version}`)
  console.log(formatTables(result).join('\n'))
  if (jsonOut) writeResults(jsonOut, machine, result)
}

module.exports = { formatTables, readmeTables }

if (require.main === module) main()

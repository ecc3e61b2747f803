'use strict'

// How true kflame's picture of the main thread's JavaScript is, held against
// V8's own CPU profiler (`node --cpu-prof`), on real third-party code: the
// devDependencies acorn, marked and typescript. V8's profiler is the reference
// because it knows what kflame has to infer: every JS frame by its function,
// interpreted or not, and inlined functions as frames of their own (V8 reads
// its inlining positions; kflame walks machine frames and splits inlined
// functions off from V8's line events, as "name file:line:col_[i]" frames).
//
// Workloads, each run on the main thread for --seconds of its CPU time (3.5 s
// by default; measured from /proc/thread-self/schedstat, so a busy machine
// stretches the wall time, not the work):
//   acorn       acorn.parse(typescript.js, { ecmaVersion: 'latest' }): a 9 MB
//               file, deep recursive descent, a big AST (much GC)
//   marked      marked.parse() of a generated ~1.5 MB markdown document
//               (headings, paragraphs with emphasis, links and code spans,
//               nested and task lists, fenced code, tables, quotes)
//   typescript  ts.transpileModule() of a generated ~150 KB TypeScript source
//               (interfaces, generics, enums, classes with accessors and
//               parameter properties, async methods, namespaces) to ES2015
// Every input is generated from a fixed seed: the same on every run.
//
// Each trial is a fresh process; the sides alternate within a round:
//   v8        node --cpu-prof --cpu-prof-interval 1000 (1 ms, ~1000 Hz of
//             wall time); kflame is not loaded. The .cpuprofile covers the
//             whole run: only samples inside the work's window count (V8
//             stamps samples on CLOCK_MONOTONIC, as process.hrtime).
//   kflame    the library loads, then kflame (require, the common case),
//             start({ hz: 999 }), the work, stop(). Library functions that ran
//             while the library loaded, and node's own (bootstrap, module
//             loader), were compiled before kflame turned on
//             --interpreted-frames-native-stack.
//   same      both at once: node --cpu-prof as the v8 side, and kflame as
//             the kflame side, in one process: the code V8 made (what it
//             inlined, when it tiered up), which differs from process to
//             process, is the same for both, so their shares are compared
//             per trial (each profiler's signals and thread cost the other
//             a little; V8's profiler deadlocked at times in its signal handler,
//             which --timeout bounds)
//   warm      kflame loads with the library, the work runs for 1 s of CPU
//             (V8 compiles, optimizes and inlines it), then start(), the
//             work, stop(): a warm server profiled on demand, whose code V8
//             made before kflame armed its hook at start().
//   register  node -r kflame/register (KFLAME_HZ=999, KFLAME_OUT=x.folded):
//             kflame loads before anything else; the work runs inside
//             kflame.label() so its window can be cut out of the whole-run
//             profile (the label frame is dropped again).
//
// What is compared: the main thread's JS functions, keyed
// "name path:line:col" (1-based line and column of the function's start, as
// kflame prints them; V8's 0-based positions + 1, its file:// URLs as paths;
// "(anonymous)" for V8's empty names; RegExp code as "RegExp:/source/").
// A JS frame is a function frame, kflame's inlined "_[i]" frames included:
// builtins, bytecode handlers, kflame's "(interpreted)" (a function it could
// not name), node's C++ callbacks (V8's nodes without URL and line) are not
// functions here. Each kflame side is also read again with its "_[i]" frames
// dropped ("`_[i]` frames dropped" rows): the picture without inlined
// functions, to see what splitting them off buys; and with V8's convention
// (rows so named): V8's profiler expands a frame's inlined functions only
// for its callers' frames, never for the code the sample's pc is in (its
// symbolizer pushes that code's own function as the leaf), so a sample in
// code inlined into F is F's self time in V8's profile. kflame gives it to
// the inlined function, where it ran; the convention drops the `_[i]`
// frames at a stack's leaf end to read kflame as V8 counts.
//   self share of F       samples whose innermost JS function is F / counted
//   inclusive share of F  samples with F anywhere on the stack / counted
// Counted samples (the denominator), on each side, are the window's samples
// of the main thread that ran JS or code called from JS, outside GC:
//   V8      every sample but (idle), (program), (garbage collector), (root)
//   kflame  samples with at least one named JS frame, less those inside V8's
//           collector (a frame of Heap::CollectGarbage,
//           Heap::PerformGarbageCollection, IncrementalMarking's steps,
//           ...): V8 reports a sample taken in GC as (garbage collector)
//           without its JS stack, so kflame's GC time under a JS function
//           would otherwise count for that function's self share and V8's
//           would not count at all.
// So on both sides a function's self share includes the builtins, runtime
// and C++ it calls (V8 charges them to the innermost JS frame; kflame's
// innermost JS frame is the same function). What each side left out is
// reported: V8's (program) is the thread with no JS stack (or one V8 could
// not walk), kflame's "no named JS" its counterpart (chains broken in libc,
// kernel-only stacks). The two GC shares need not agree: V8's sampler ticks
// on wall time and drops ticks when its threads are starved, kflame samples
// the thread's CPU time (so the summary gives samples per ms of thread CPU).
//
// Reported per workload, as markdown tables:
//   - a summary row per side: samples, what was left out, JS frames per
//     counted sample, the share of samples the two sides give to a different
//     innermost function (half the sum of |self share differences| over all
//     functions, median over pairs of rounds; the same between a side's own
//     rounds is the floor that sampling noise and run-to-run variation alone
//     give), the largest |difference| in the top-10 tables, how often kflame
//     names the driver frames (node's module loader and this file, below
//     the work, on every V8 sample), the library function whose inclusive
//     share kflame gets most wrong among all that V8 gives >= 1% (the top
//     10 can be a tie of functions on every stack), counted samples cut at
//     kernel.perf_event_max_stack ("[truncated]": the outermost frames are
//     lost), counted samples with an "(interpreted)" frame, and
//     stats.details.interpretedNamed / interpretedUnnamed / runningAdded
//     (medians per round) where the addon reports them;
//   - the top --top (10) functions by V8's self share (medians over the
//     rounds, min-max), kflame's medians, the difference in points, and the
//     JS caller V8 sees under the function's self samples (where a profiler
//     that does not split inlined frames puts that time);
//   - the top 10 library functions by V8's inclusive share (the driver frames
//     left out: they are on every stack), and the driver frames kflame names
//     on fewer than 95% of samples.
//
//   node bench/truth.js [--quick] [--rounds N] [--seconds S] [--hz N] [--top N]
//     [--workloads acorn,marked,typescript] [--modes v8,kflame,register,same,warm]
//     [--node-flags "--no-turbo-inlining"] [--stack-bytes N] [--timeout S] [--retries N]
//     [--json FILE]
//
// --quick is one round. --node-flags go to node on every side alike (e.g.
// --no-turbo-inlining, to see how much of a disagreement inlining explains).
// --stack-bytes is start()'s stackBytes on the kflame side (the register side
// keeps the default): how deep kflame can read interpreter frames off the
// stack copy to name functions compiled before it loaded. --timeout (180 s)
// bounds each child process; a failed child is retried --retries (1) times
// after 20 s (an addon being rebuilt under the run fails to load for a
// moment), and the results note it, and whether the addon changed.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { fileURLToPath } = require('node:url')

const ROOT = path.join(__dirname, '..')
const LABEL = 'kflame-truth-window'
const KFLAME_LIB = ` ${path.join(ROOT, 'lib')}${path.sep}`
const MODES = ['v8', 'kflame', 'register', 'same', 'warm']
const MODE_NAMES = {
  v8: 'V8 (`--cpu-prof`, 1 ms)',
  kflame: 'kflame, required after the library',
  register: 'kflame, `-r kflame/register`',
  same: 'kflame and V8 in one process',
  warm: 'kflame, started on a warm process'
}
// The warm side's work before start(), in seconds of thread CPU.
const WARM_SECONDS = 1

// --- the libraries and their inputs ------------------------------------------

// A package of this repository's node_modules, or a clear error.
function resolvePkg (spec) {
  try {
    return require.resolve(spec, { paths: [ROOT] })
  } catch {
    const name = spec.split('/')[0]
    const err = new Error(`bench/truth.js: ${name} is not installed in ${path.join(ROOT, 'node_modules')} ` +
      `(a devDependency of kflame): run \`npm install\` in ${ROOT}`)
    err.code = 'TRUTH_MISSING_PACKAGE'
    throw err
  }
}

// The same seeded PRNG as the other benchmarks: inputs are the same on
// every run.
const { mulberry32: rng } = require('./common')

const VOCAB = ('lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore ' +
  'et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris nisi aliquip ex ea ' +
  'commodo consequat duis aute irure in reprehenderit voluptate velit esse cillum eu fugiat nulla pariatur ' +
  'excepteur sint occaecat cupidatat non proident sunt culpa qui officia deserunt mollit anim id est laborum').split(' ')

// A markdown document of about `bytes`, the same every time.
function makeMarkdown (bytes) {
  const rand = rng(0x6d61726b)
  const pick = (xs) => xs[Math.floor(rand() * xs.length)]
  const int = (n) => Math.floor(rand() * n)
  const word = () => pick(VOCAB)
  const inline = () => {
    const r = rand()
    const w = word()
    if (r < 0.07) return `*${w}*`
    if (r < 0.12) return `**${w} ${word()}**`
    if (r < 0.16) return `\`${w}(${int(9)})\``
    if (r < 0.20) return `[${w} ${word()}](https://example.com/${w}/${int(1000)} "${word()}")`
    if (r < 0.21) return `<https://example.org/${w}>`
    if (r < 0.23) return `_${w}_`
    if (r < 0.24) return `~~${w}~~`
    if (r < 0.25) return `${w}&amp;${word()}`
    return w
  }
  const sentence = (n) => {
    const ws = Array.from({ length: n }, inline)
    ws[0] = ws[0][0].toUpperCase() + ws[0].slice(1)
    return ws.join(' ') + '.'
  }
  const paragraph = () => Array.from({ length: 2 + int(5) }, () => sentence(6 + int(14))).join(' ')
  const out = []
  let size = 0
  const push = (s) => { out.push(s); size += s.length + 2 }
  for (let sec = 0; size < bytes; sec++) {
    push(`${'#'.repeat(1 + (sec % 3))} ${sentence(3 + int(5)).slice(0, -1)} ${sec}`)
    for (let p = 1 + int(3); p > 0; p--) push(paragraph())
    const kind = sec % 6
    if (kind === 0 || kind === 3) {
      const items = []
      for (let i = 0; i < 3 + int(6); i++) {
        items.push(`- ${sentence(4 + int(10))}`)
        if (rand() < 0.4) for (let j = 0; j < 1 + int(3); j++) items.push(`  - ${sentence(3 + int(6))}`)
      }
      push(items.join('\n'))
    } else if (kind === 1) {
      push(Array.from({ length: 3 + int(5) }, (_, i) => `${i + 1}. ${sentence(4 + int(8))}`).join('\n'))
      push(Array.from({ length: 2 + int(4) }, () => `- [${rand() < 0.5 ? 'x' : ' '}] ${sentence(3 + int(5))}`).join('\n'))
    } else if (kind === 2) {
      const lines = Array.from({ length: 4 + int(12) }, (_, i) =>
        `${'  '.repeat(i % 3)}const ${word()}${i} = ${word()}(${int(100)}, '${word()}') // ${word()}`)
      push('```js\n' + lines.join('\n') + '\n```')
    } else if (kind === 4) {
      const cols = 3 + int(3)
      const rows = [
        `| ${Array.from({ length: cols }, () => word()).join(' | ')} |`,
        `| ${Array.from({ length: cols }, (_, i) => [':---', ':---:', '---:'][i % 3]).join(' | ')} |`
      ]
      for (let r = 0; r < 4 + int(8); r++) rows.push(`| ${Array.from({ length: cols }, inline).join(' | ')} |`)
      push(rows.join('\n'))
    } else {
      push(`> ${sentence(8 + int(10))}\n> ${sentence(5 + int(10))}\n>\n> > ${sentence(4 + int(6))}`)
      push('---')
    }
  }
  return out.join('\n\n') + '\n'
}

// A TypeScript source of about `bytes`, the same every time.
function makeTypeScript (bytes) {
  const rand = rng(0x7473)
  const int = (n) => Math.floor(rand() * n)
  const out = ['declare function fetchLike(url: string): Promise<string | undefined>;',
    'declare const console: { log(...args: unknown[]): void };']
  let size = 0
  for (let i = 0; size < bytes; i++) {
    const chunk = `
export interface Item${i}<T extends object = {}> { id: number; name: string; tags?: readonly string[]; meta: T; [key: \`x-\${string}\`]: unknown }
export enum Kind${i} { A = ${int(10)}, B, C = "c${i}" }
export type Pair${i}<K, V> = { key: K; value: V } | null;
export type Keys${i}<T> = { [P in keyof T as \`get\${Capitalize<string & P>}\`]: () => T[P] };
export abstract class Base${i} {
  protected constructor(public readonly id: number) {}
  abstract area(): number;
  describe(): string { return \`\${this.constructor.name}#\${this.id}\`; }
}
export class Shape${i}<T = number> extends Base${i} implements Item${i}<{ w: number }> {
  private cache = new Map<string, number>();
  name = "shape-${i}";
  meta = { w: ${int(1000)} };
  #secret = ${int(100)};
  constructor(id: number, private readonly w: number, private h?: number) { super(id); }
  area(): number { return this.w * (this.h ?? 1) + this.#secret; }
  get label(): string { return \`\${this.name}:\${this.area().toFixed(2)}\`; }
  set height(v: number) { this.h = v > 0 ? v : undefined; }
  static create<U>(x: U, ...rest: number[]): Shape${i}<U> { return new Shape${i}<U>(rest.length, rest.reduce((a, b) => a + b, 0)); }
  async load(url: string): Promise<number> {
    const r = await fetchLike(url);
    try { return r?.length ?? 0; } catch (e: unknown) { return -1; } finally { this.cache.clear(); }
  }
  *entries(): Generator<[string, number]> { for (const [k, v] of this.cache) yield [k, v]; }
}
export function map${i}<T, U>(xs: readonly T[], f: (x: T, i: number) => U): U[] {
  const out: U[] = [];
  for (let i = 0; i < xs.length; i++) out.push(f(xs[i], i));
  return out;
}
export namespace NS${i} {
  export const value: number = ${int(100000)};
  export function twice(x: number): number { return x * 2; }
  export namespace Inner { export const list = [1, 2, 3].map((n) => n * value) as const; }
}
const table${i}: Record<string, Kind${i}> = { a: Kind${i}.A, b: Kind${i}.B, ...{ c: Kind${i}.C } };
let [x${i}, y${i} = ${int(50)}, ...rest${i}] = [${int(9)}, ${int(9)}, ${int(9)}, ${int(9)}];
for (const [k, v] of Object.entries(table${i})) { if (v === Kind${i}.A && k !== "z") console.log(k as string, x${i}, y${i}, rest${i}); }
const fn${i} = <T extends { id: number }>(o: T, { deep = false }: { deep?: boolean } = {}): T | undefined => deep ? { ...o } : o;
`
    out.push(chunk)
    size += chunk.length
  }
  return out.join('\n')
}

// Each: load the library (before kflame, in the kflame mode), make the input,
// and one unit of work.
const WORKLOADS = {
  acorn: {
    packages: ['acorn', 'typescript/lib/typescript.js'],
    load: () => require(resolvePkg('acorn')),
    input: () => fs.readFileSync(resolvePkg('typescript/lib/typescript.js'), 'utf8'),
    run: (acorn, src) => acorn.parse(src, { ecmaVersion: 'latest' }).body.length
  },
  marked: {
    packages: ['marked'],
    load: () => require(resolvePkg('marked')),
    input: () => makeMarkdown(1.5e6),
    run: (lib, md) => lib.marked.parse(md).length
  },
  typescript: {
    packages: ['typescript'],
    load: () => require(resolvePkg('typescript')),
    input: () => makeTypeScript(150e3),
    run: (ts, src) => ts.transpileModule(src, {
      fileName: 'generated.ts',
      compilerOptions: { target: ts.ScriptTarget.ES2015, module: ts.ModuleKind.CommonJS }
    }).outputText.length
  }
}

// --- the profiled process (child) -------------------------------------------

const threadCpuNs = () => Number(fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0])
const hrtimeUs = () => Number(process.hrtime.bigint() / 1000n)

// Runs the work until the thread has spent `seconds` of CPU time on it.
function runWork (w, lib, input, seconds) {
  const start = threadCpuNs()
  const budget = seconds * 1e9
  let iterations = 0
  let sink = 0
  do {
    sink += w.run(lib, input)
    iterations++
  } while (threadCpuNs() - start < budget)
  return { iterations, sink, cpuMs: (threadCpuNs() - start) / 1e6 }
}

function child (name, mode, seconds, hz, dir, stackBytes) {
  const w = WORKLOADS[name]
  const lib = w.load()
  const input = w.input()
  let kflame = null
  if (mode === 'kflame' || mode === 'same' || mode === 'warm') {
    kflame = require('..')
    if (mode === 'warm') runWork(w, lib, input, WARM_SECONDS)
    kflame.start(stackBytes ? { hz, stackBytes } : { hz })
  }
  const t0 = hrtimeUs()
  const r = mode === 'register'
    ? require('..').label(LABEL, () => runWork(w, lib, input, seconds))
    : runWork(w, lib, input, seconds)
  const t1 = hrtimeUs()
  let stats = null
  if (kflame) {
    const profile = kflame.stop()
    profile.write(path.join(dir, 'kflame.folded'))
    stats = profile.stats
  }
  fs.writeFileSync(path.join(dir, 'result.json'), JSON.stringify({
    name, mode, pid: process.pid, window: [t0, t1], iterations: r.iterations, cpuMs: r.cpuMs, inputBytes: input.length, stats
  }))
}

// --- one trial (parent) -------------------------------------------------------

// Which build of the addon the kflame sides load: its size and mtime.
const ADDON = path.join(ROOT, 'build', 'Release', 'kflame.node')
function addonId () {
  try {
    const st = fs.statSync(ADDON)
    return `${st.size} bytes, ${st.mtime.toISOString()}`
  } catch { return null }
}

// The environment of a child: no kflame of an outer run (NODE_OPTIONS with
// kflame/register, KFLAME_* variables) leaks into the sides.
function childEnv (extra) {
  const env = { ...process.env }
  for (const k of Object.keys(env)) if (k.startsWith('KFLAME_')) delete env[k]
  if (env.NODE_OPTIONS && /kflame/.test(env.NODE_OPTIONS)) delete env.NODE_OPTIONS
  return { ...env, ...extra }
}

function trial (name, mode, opts) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kflame-truth-${name}-${mode}-`))
  try {
    const argv = [...opts.nodeFlags]
    const extraEnv = {}
    if (mode === 'v8' || mode === 'same') argv.push('--cpu-prof', '--cpu-prof-dir', dir, '--cpu-prof-interval', '1000')
    if (mode === 'register') {
      argv.push('-r', path.join(ROOT, 'register.js'))
      Object.assign(extraEnv, { KFLAME_OUT: path.join(dir, 'register.folded'), KFLAME_HZ: String(opts.hz), KFLAME_QUIET: '1' })
    }
    argv.push(__filename, '--child', name, mode, String(opts.seconds), String(opts.hz), dir, String(opts.stackBytes || 0))
    const r = spawnSync(process.execPath, argv, {
      cwd: dir, env: childEnv(extraEnv), encoding: 'utf8', timeout: opts.timeoutS * 1000, killSignal: 'SIGKILL', maxBuffer: 64 << 20
    })
    const tail = () => (r.stderr || '').trim().split('\n').slice(-5).join('\n')
    if (r.error && r.error.code === 'ETIMEDOUT') throw new Error(`${name}/${mode}: the child ran past --timeout ${opts.timeoutS} s and was killed`)
    if (r.error) throw new Error(`${name}/${mode}: ${r.error.message}`)
    if (r.status !== 0) throw new Error(`${name}/${mode}: the child exited ${r.status ?? r.signal}:\n${tail()}`)
    const res = JSON.parse(fs.readFileSync(path.join(dir, 'result.json'), 'utf8'))
    let side
    let sideOuter = null
    let sideV8 = null
    let v8Beside = null // 'same': V8's profile of the same process
    const cpuprofile = () => {
      const file = fs.readdirSync(dir).find((f) => f.endsWith('.cpuprofile'))
      if (!file) throw new Error(`${name}/${mode}: node --cpu-prof wrote no .cpuprofile in ${dir}`)
      return fromCpuprofile(JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')), res.window)
    }
    if (mode === 'v8') {
      side = cpuprofile()
    } else {
      if (mode === 'same') v8Beside = cpuprofile()
      const file = path.join(dir, mode === 'register' ? 'register.folded' : 'kflame.folded')
      if (!fs.existsSync(file)) throw new Error(`${name}/${mode}: no folded profile written:\n${tail()}`)
      const text = fs.readFileSync(file, 'utf8')
      const label = mode === 'register' ? LABEL : null
      side = fromFolded(text, label)
      sideOuter = fromFolded(text, label, 'none')
      sideV8 = fromFolded(text, label, 'callers')
    }
    return { side, sideOuter, sideV8, v8Beside, iterations: res.iterations, cpuMs: res.cpuMs, inputBytes: res.inputBytes, stats: res.stats }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

// --- reading the two sides into one shape --------------------------------------
//
// Each side becomes { total, excluded: {..}, counted, self: Map(key -> n),
// incl: Map(key -> n), callers: Map(key -> Map(caller -> n)), jsFrames,
// interpretedSamples }: `total` the window's samples of the main thread,
// `callers` the next JS function out from each innermost one, `jsFrames` the
// sum over counted samples of their JS function frames.

function emptySide () {
  return { total: 0, excluded: {}, counted: 0, self: new Map(), incl: new Map(), callers: new Map(), jsFrames: 0, interpretedSamples: 0, truncatedSamples: 0, inlinedSamples: 0 }
}

const bump = (m, k, n) => m.set(k, (m.get(k) || 0) + n)
const exclude = (side, why, n) => { side.excluded[why] = (side.excluded[why] || 0) + n }

// One counted sample (or `n` alike): its JS function keys, outermost first.
function countStack (side, keys, n, interpreted) {
  side.counted += n
  side.jsFrames += n * keys.length
  if (interpreted) side.interpretedSamples += n
  if (!keys.length) return
  const leaf = keys[keys.length - 1]
  bump(side.self, leaf, n)
  for (const k of new Set(keys)) bump(side.incl, k, n)
  if (!side.callers.has(leaf)) side.callers.set(leaf, new Map())
  bump(side.callers.get(leaf), keys.length > 1 ? keys[keys.length - 2] : '(none)', n)
}

const V8_SPECIAL = { '(idle)': 'idle', '(program)': 'program', '(garbage collector)': 'gc', '(root)': 'root' }

// A name as kflame writes frame names (src/util/framename.h): ';' would
// split a folded stack, control characters a line. A RegExp source with a
// tab in it (marked's table rule, 1.8% of V8's samples) would otherwise
// never meet its kflame key.
const asFrameName = (name) => name.replace(/;/g, ':').replace(/[\x00-\x1f\x7f]/g, ' ')

// V8's key of a call frame, or null for what is not a JS function: its own
// nodes and node's C++ callbacks (no URL, no line).
function v8Key (f) {
  if (f.functionName.startsWith('RegExp: ')) return `RegExp:/${asFrameName(f.functionName.slice(8))}/`
  if (!f.url && f.lineNumber < 0) return null
  let file = f.url
  if (file.startsWith('file://')) { try { file = fileURLToPath(file) } catch {} }
  return asFrameName(`${f.functionName || '(anonymous)'} ${file}:${f.lineNumber + 1}:${f.columnNumber + 1}`)
}

function fromCpuprofile (profile, [fromUs, toUs]) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map()
  for (const n of profile.nodes) for (const c of n.children || []) parent.set(c, n.id)
  const counts = new Map()
  let t = profile.startTime
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i]
    if (t >= fromUs && t <= toUs) bump(counts, profile.samples[i], 1)
  }
  const side = emptySide()
  for (const [id, n] of counts) {
    side.total += n
    const node = byId.get(id)
    const special = V8_SPECIAL[node.callFrame.functionName]
    if (special && !node.callFrame.url) { exclude(side, special, n); continue }
    const keys = []
    for (let x = node; x; x = byId.get(parent.get(x.id))) {
      const k = v8Key(x.callFrame)
      if (k) keys.push(k)
    }
    countStack(side, keys.reverse(), n, false)
  }
  return side
}

// kflame's JS function frame "name path:line:col_[j]" (a V8 tier marker
// ~^+* in front when profiled with tiers), or "name path:line:col_[i]" for a
// function V8 inlined into the frame's code (`inlined` false drops those),
// as its key; RegExp code as "RegExp:/source/" (without its flags); else null.
function kflameKey (f, inlined = true) {
  if (!f.endsWith('_[j]') && !(inlined && f.endsWith('_[i]'))) return null
  const s = f.slice(0, -4)
  if (s.startsWith('RegExp:/')) return s.replace(/\/[a-z]*$/, '/') // V8 13's flags: V8's profile has none
  if (/^(Builtin|BytecodeHandler):/.test(s) || s === '(interpreted)' || s === '[jit]') return null
  if (!/ \S*:\d+:\d+$/.test(s)) return null
  return s.replace(/^[~^+*]/, '')
}

// V8's collector on the main thread: what V8 reports as (garbage collector).
const GC_FRAME = /^v8::internal::(Heap::(CollectGarbage|CollectAllGarbage|CollectAllAvailableGarbage|PerformGarbageCollection|Scavenge|MarkCompact|MinorMarkCompact|FinalizeIncrementalMarkingAtomically)|ScavengerCollector::|MarkCompactCollector::|MinorMarkCompactCollector::|IncrementalMarking::(Step|AdvanceOnAllocation|AdvanceAndFinalizeIfComplete|Advance\b))/

// `inlined` false: as if kflame did not split inlined functions off their
// outer code (what it did before it read V8's line events).
// inlined: 'all' (kflame's picture), 'none' (every `_[i]` frame dropped), or
// 'callers' (V8's convention: the functions inlined where the sample's pc
// is, the `_[i]` frames at the stack's leaf end, dropped: V8's profiler
// expands inlining only for its callers' frames, so its leaf is the code's
// own function).
function fromFolded (text, label, inlined = 'all') {
  const side = emptySide()
  for (const line of text.split('\n')) {
    const sp = line.lastIndexOf(' ')
    if (sp <= 0) continue
    const n = Number(line.slice(sp + 1))
    const frames = line.slice(0, sp).split(';')
    if (frames[0] !== 'main') continue
    if (label) {
      if (frames[1] !== label) continue
      frames.splice(1, 1)
    }
    side.total += n
    if (inlined === 'callers') while (frames.length > 1 && frames[frames.length - 1].endsWith('_[i]')) frames.pop()
    const keys = []
    let gc = false
    let interpreted = false
    let inl = false
    for (let i = 1; i < frames.length; i++) {
      const k = kflameKey(frames[i], inlined !== 'none')
      if (k && frames[i].endsWith('_[i]')) inl = true
      // kflame's own JS (label() in the register side) is not the app's.
      if (k) { if (!k.includes(KFLAME_LIB)) keys.push(k) }
      else if (frames[i] === '(interpreted)_[j]') interpreted = true
      else if (GC_FRAME.test(frames[i])) gc = true
    }
    if (!keys.length) { exclude(side, 'noJs', n); continue }
    if (gc) { exclude(side, 'gc', n); continue }
    countStack(side, keys, n, interpreted)
    if (inl) side.inlinedSamples += n
    // The kernel's callchain stops at kernel.perf_event_max_stack frames:
    // the outermost are lost.
    if (frames[1] === '[truncated]') side.truncatedSamples += n
  }
  return side
}

// --- measures ------------------------------------------------------------------

const median = (xs) => {
  const s = xs.filter((x) => x !== null && x !== undefined).sort((a, b) => a - b)
  if (!s.length) return null
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const pct = (n, d) => d ? 100 * n / d : 0

// Per function: its share (%) in every round of a side, medians and spread.
function shareOf (sides, kind, key) {
  const xs = sides.map((s) => pct(s[kind].get(key) || 0, s.counted))
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), rounds: xs }
}

// The driver: node's own JS (bootstrap, module loader) and this file, below
// the library's frames on every stack.
const isDriver = (key) => / node:\S*:\d+:\d+$/.test(key) || key.includes(` ${__filename}:`)
const ALWAYS = 99.5

// Half the sum of |self share differences| over all functions: the share of
// samples the two profiles give to a different innermost function (the total
// variation distance of the two self distributions). Sampling noise alone
// makes it well above 0 when time spreads over many functions: compare it
// with the same measure between two rounds of one side.
function selfDistance (a, b) {
  let d = 0
  for (const [k, n] of a.self) d += Math.abs(n / a.counted - (b.self.get(k) || 0) / b.counted)
  for (const [k, n] of b.self) if (!a.self.has(k)) d += n / b.counted
  return 50 * d
}

// Median distance over round pairs: one side against another, or (b
// omitted) a side's rounds against each other.
function pairDistance (as, bs) {
  const ds = []
  if (bs) for (const a of as) for (const b of bs) ds.push(selfDistance(a, b))
  else for (let i = 0; i < as.length; i++) for (let j = i + 1; j < as.length; j++) ds.push(selfDistance(as[i], as[j]))
  return median(ds)
}

// A side as measured ('kflame'), or read again with kflame's inlined frames
// dropped ('kflame/outer') or only those of the sampled code, as V8's
// profiler does ('kflame/v8'): they share their trials.
const baseMode = (v) => v.split('/')[0]
const VARIANTS = {
  outer: { name: '`_[i]` frames dropped', side: (t) => t.sideOuter },
  v8: { name: 'V8\'s convention (no `_[i]` frame at the leaf)', side: (t) => t.sideV8 }
}
const variantOf = (v) => VARIANTS[v.split('/')[1]]
const modeName = (v) => variantOf(v) ? `${MODE_NAMES[baseMode(v)]}, ${variantOf(v).name}` : MODE_NAMES[v]

function compareWorkload (name, trials, modes, top) {
  const variants = [...modes, ...modes.filter((m) => m !== 'v8').flatMap((m) => Object.keys(VARIANTS).map((x) => `${m}/${x}`))]
  const trialsOf = (v) => trials.filter((t) => t.mode === baseMode(v))
  const by = (v) => trialsOf(v).map((t) => variantOf(v) ? variantOf(v).side(t) : t.side)
  const v8 = by('v8')
  const others = variants.filter((m) => m !== 'v8')
  const keysOf = (sides, kind) => {
    const keys = new Set()
    for (const s of sides) for (const k of s[kind].keys()) keys.add(k)
    return [...keys]
  }
  const rank = (kind, skip) => keysOf(v8, kind)
    .filter((key) => !skip || !skip(key))
    .map((key) => ({ key, v8: shareOf(v8, kind, key) }))
    .sort((a, b) => b.v8.median - a.v8.median || (a.key < b.key ? -1 : 1))
  const withOthers = (kind, rows) => rows.map((r) => {
    const row = { key: r.key, v8: r.v8 }
    for (const m of others) {
      const s = shareOf(by(m), kind, r.key)
      row[m] = s
      row[`${m}Diff`] = s.median - r.v8.median
    }
    return row
  })
  // The caller V8 sees under each top self function (its share of the
  // function's self samples, pooled): where a profiler that does not split
  // inlined frames puts that time.
  const self = withOthers('self', rank('self').slice(0, top)).map((r) => {
    let all = 0
    const callers = new Map()
    for (const s of v8) {
      for (const [c, n] of s.callers.get(r.key) || []) { bump(callers, c, n); all += n }
    }
    const [caller, n] = [...callers].sort((a, b) => b[1] - a[1])[0] || [null, 0]
    return { ...r, v8Caller: caller ? { key: caller, share: pct(n, all) } : null }
  })
  const incl = withOthers('incl', rank('incl', isDriver).slice(0, top))
  // Every library function V8 gives at least 1% inclusive: where the top 10
  // is a tie of functions on every stack (acorn's recursive descent), the
  // one kflame gets most wrong need not be among them.
  const inclAll = withOthers('incl', rank('incl', isDriver).filter((r) => r.v8.median >= 1))
  const driver = withOthers('incl', rank('incl', (k) => !isDriver(k)).filter((r) => r.v8.median >= ALWAYS))

  const sideSummary = (mode) => {
    const ss = by(mode)
    const exc = (why) => median(ss.map((s) => pct(s.excluded[why] || 0, s.total)))
    const maxAbs = (rows) => rows.length ? Math.max(...rows.map((r) => Math.abs(r[`${mode}Diff`]))) : null
    const worstOf = (rows) => {
      const r = rows.reduce((w, r) => !w || Math.abs(r[`${mode}Diff`]) > Math.abs(w[`${mode}Diff`]) ? r : w, null)
      return r && { key: r.key, v8: r.v8.median, side: r[mode].median, diff: r[`${mode}Diff`] }
    }
    const details = (f) => median(trialsOf(mode).map((t) => t.stats && t.stats.details ? t.stats.details[f] ?? null : null))
    return {
      mode,
      rounds: ss.length,
      samplesPerRound: median(ss.map((s) => s.total)),
      countedPerRound: median(ss.map((s) => s.counted)),
      // V8 samples wall time (and drops samples when its threads are
      // starved); kflame the thread's CPU time: samples per ms of the thread's
      // CPU time in the window say which.
      samplesPerCpuMs: median(trialsOf(mode).map((t) => t.side.total / t.cpuMs)),
      iterationsPerRound: median(trialsOf(mode).map((t) => t.iterations)),
      excluded: mode === 'v8'
        ? { program: exc('program'), gc: exc('gc'), idle: exc('idle'), root: exc('root') }
        : { noJs: exc('noJs'), gc: exc('gc') },
      jsFramesPerSample: median(ss.map((s) => s.counted ? s.jsFrames / s.counted : null)),
      interpretedShare: mode === 'v8' ? null : median(ss.map((s) => pct(s.interpretedSamples, s.counted))),
      inlinedShare: mode === 'v8' ? null : median(ss.map((s) => pct(s.inlinedSamples, s.counted))),
      maxAbsDiffSelf: mode === 'v8' ? null : maxAbs(self),
      maxAbsDiffIncl: mode === 'v8' ? null : maxAbs(incl),
      worstIncl: mode === 'v8' ? null : worstOf(inclAll),
      selfDistance: mode === 'v8' ? null : pairDistance(v8, ss),
      selfDistanceRoundToRound: pairDistance(ss),
      truncatedShare: mode === 'v8' ? null : median(ss.map((s) => pct(s.truncatedSamples, s.counted))),
      driver: mode === 'v8' ? null : { frames: driver.length, minShare: driver.length ? Math.min(...driver.map((r) => r[mode].median)) : null, medianShare: median(driver.map((r) => r[mode].median)) },
      // Samples kflame lost (rings overflowed): stats of the kflame side only.
      lostShare: median(trialsOf(mode).filter((t) => t.stats).map((t) => pct(t.stats.lost, t.stats.samples + t.stats.lost))),
      interpretedNamed: details('interpretedNamed'),
      interpretedUnnamed: details('interpretedUnnamed'),
      runningAdded: details('runningAdded'),
      inlinedFrames: details('inlinedFrames')
    }
  }
  return { name, summary: variants.map(sideSummary), self, incl, driver, paired: pairedInProcess(trials, top) }
}

// The 'same' trials: kflame and V8's profiler in one process, so both see
// the code V8 made in that run (what it inlined, when it tiered up), which
// differs from process to process. Per function, the median over trials of
// kflame's share less V8's, for the top functions by V8's share in those
// trials; each reading of kflame's profile: as it is, and by V8's convention.
function pairedInProcess (trials, top) {
  const same = trials.filter((t) => t.mode === 'same' && t.v8Beside)
  if (!same.length) return null
  const share = (side, kind, key) => pct(side[kind].get(key) || 0, side.counted)
  const reading = (kind, pick, skip) => {
    const keys = new Set()
    for (const t of same) for (const k of t.v8Beside[kind].keys()) if (!skip || !skip(k)) keys.add(k)
    const rows = [...keys].map((key) => ({ key, v8: median(same.map((t) => share(t.v8Beside, kind, key))) }))
      .sort((a, b) => b.v8 - a.v8 || (a.key < b.key ? -1 : 1)).slice(0, top)
    for (const r of rows) r.diff = median(same.map((t) => share(pick(t), kind, r.key) - share(t.v8Beside, kind, r.key)))
    const worst = rows.reduce((w, r) => !w || Math.abs(r.diff) > Math.abs(w.diff) ? r : w, null)
    return { maxAbs: worst ? Math.abs(worst.diff) : null, worst, rows }
  }
  const of = (pick) => ({ self: reading('self', pick), incl: reading('incl', pick, isDriver) })
  return { trials: same.length, kflame: of((t) => t.side), v8Convention: of((t) => t.sideV8) }
}

// --- tables ----------------------------------------------------------------------

const f1 = (x) => x === null || x === undefined ? '-' : x.toFixed(1)
const sgn = (x) => x === null || x === undefined ? '-' : `${x >= 0 ? '+' : ''}${x.toFixed(1)}`
const mdEscape = (s) => s.replace(/\|/g, '\\|')

// "pp$8.parseStatement acorn.js:1015" (the column only in the JSON).
function shortKey (key) {
  if (key.startsWith('RegExp:/')) return mdEscape(key.length > 40 ? key.slice(0, 38) + '…/' : key)
  const m = /^(.*) (\S*):(\d+):(\d+)$/.exec(key)
  if (!m) return mdEscape(key)
  const file = m[2].startsWith('node:') ? m[2] : path.basename(m[2])
  return mdEscape(`${m[1]} ${file}:${m[3]}`)
}

const spread = (s) => s.rounds.length > 1 ? `${f1(s.median)} (${f1(s.min)}-${f1(s.max)})` : f1(s.median)

function functionTable (rows, modes, what, caller) {
  const others = modes.filter((m) => m !== 'v8')
  const out = [
    `| ${what} | V8 % | ${others.map((m) => `${modeName(m)} % | diff (pts)`).join(' | ')} |${caller ? ' V8\'s caller under its self samples |' : ''}`,
    `| --- | --- | ${others.map(() => '--- | ---').join(' | ')} |${caller ? ' --- |' : ''}`
  ]
  for (const r of rows) {
    out.push(`| ${shortKey(r.key)} | ${spread(r.v8)} | ${others.map((m) => `${spread(r[m])} | ${sgn(r[`${m}Diff`])}`).join(' | ')} |` +
      (caller ? ` ${r.v8Caller ? `${shortKey(r.v8Caller.key)} (${f1(r.v8Caller.share)}%)` : '-'} |` : ''))
  }
  return out
}

// The markdown tables, shared with bench/table.js.
// summaryOnly: the two summary tables (docs/benchmarks.md's), without the per-function ones.
function formatTables (r, { summaryOnly = false, resultsFile = 'truth.json' } = {}) {
  const out = []
  const others = r.modes.filter((m) => m !== 'v8')
  out.push('| workload | side | samples per round (counted), per ms of thread CPU | left out: V8 (program) / GC / idle; kflame no named JS / GC | JS frames per counted sample | self shares on another function: against V8, round to round | max \\|diff\\| in the top 10: self, inclusive (pts) | worst inclusive, any library function >= 1% in V8: V8 / kflame % |')
  out.push('| --- | --- | --- | --- | --- | --- | --- | --- |')
  for (const w of r.workloads) {
    for (const s of w.summary) {
      const e = s.excluded
      const v8 = s.mode === 'v8'
      const left = v8 ? `${f1(e.program)}% / ${f1(e.gc)}% / ${f1(e.idle)}%` : `${f1(e.noJs)}% / ${f1(e.gc)}%`
      out.push(`| ${w.name} | ${modeName(s.mode)} | ${Math.round(s.samplesPerRound)} (${Math.round(s.countedPerRound)}), ${s.samplesPerCpuMs.toFixed(2)}` +
        `${s.lostShare ? `, ${f1(s.lostShare)}% lost` : ''} | ${left} | ${f1(s.jsFramesPerSample)} | ` +
        `${v8 ? '-' : `${f1(s.selfDistance)}%`}, ${s.selfDistanceRoundToRound === null ? '-' : `${f1(s.selfDistanceRoundToRound)}%`} | ` +
        `${v8 ? '-' : `${f1(s.maxAbsDiffSelf)}, ${f1(s.maxAbsDiffIncl)}`} | ` +
        `${s.worstIncl ? `${shortKey(s.worstIncl.key)}: ${f1(s.worstIncl.v8)} / ${f1(s.worstIncl.side)}` : '-'} |`)
    }
  }
  out.push('')
  out.push(`| workload | side | driver frames on every V8 sample (${r.workloads[0] ? r.workloads[0].driver.length : 0}): kflame's share, min / median | counted samples cut at perf_event_max_stack | with an \`(interpreted)\` frame | with an inlined \`_[i]\` frame | interpretedNamed / interpretedUnnamed / runningAdded / inlinedFrames per round |`)
  out.push('| --- | --- | --- | --- | --- | --- | --- |')
  for (const w of r.workloads) {
    for (const s of w.summary.filter((x) => x.mode !== 'v8' && !variantOf(x.mode))) {
      const d = [s.interpretedNamed, s.interpretedUnnamed, s.runningAdded, s.inlinedFrames]
      out.push(`| ${w.name} | ${modeName(s.mode)} | ${f1(s.driver.minShare)}% / ${f1(s.driver.medianShare)}% | ${f1(s.truncatedShare)}% | ` +
        `${f1(s.interpretedShare)}% | ${f1(s.inlinedShare)}% | ${d.every((x) => x === null) ? '-' : d.map((x) => x ?? '-').join(' / ')} |`)
    }
  }
  const paired = r.workloads.filter((w) => w.paired)
  if (paired.length) {
    const worst = (x) => x.worst ? `${f1(x.maxAbs)} (${shortKey(x.worst.key)}: V8 ${f1(x.worst.v8)}%, ${sgn(x.worst.diff)})` : '-'
    out.push('', 'kflame and V8 in one process (the same code to profile): median over trials of kflame\'s share less V8\'s, top 10 by V8\'s share:', '')
    out.push('| workload | reading of kflame\'s profile | trials | max \\|diff\\|, self (pts; worst) | max \\|diff\\|, inclusive (pts; worst) |')
    out.push('| --- | --- | --- | --- | --- |')
    for (const w of paired) {
      for (const [reading, x] of [['as it is', w.paired.kflame], ['V8\'s convention (no `_[i]` frame at the leaf)', w.paired.v8Convention]]) {
        out.push(`| ${w.name} | ${reading} | ${w.paired.trials} | ${worst(x.self)} | ${worst(x.incl)} |`)
      }
    }
  }
  if (summaryOnly) {
    out.push('', `The top-10 tables per workload and function: \`node bench/table.js\`, or \`bench/results/${resultsFile}\`.`)
    return out
  }
  const rounds = `median of ${r.rounds}${r.rounds > 1 ? ', min-max' : ''}`
  for (const w of r.workloads) {
    out.push('', `*${w.name}*: top ${w.self.length} by V8's self share (${rounds}):`, '')
    out.push(...functionTable(w.self, [...r.modes, ...others.map((m) => `${m}/v8`)], 'function (self)', true))
    out.push('', `*${w.name}*: top ${w.incl.length} by V8's inclusive share, the library's functions (${rounds}):`, '')
    out.push(...functionTable(w.incl, r.modes, 'function (inclusive)', false))
    const low = w.driver.filter((d) => others.some((m) => d[m].median < 95))
    if (low.length) {
      out.push('', `*${w.name}*: driver frames (node's loader, bench/truth.js) on every V8 sample that kflame has on fewer than 95%:`, '')
      out.push(...functionTable(low, r.modes, 'function (inclusive)', false))
    }
  }
  return out
}

// --- main -------------------------------------------------------------------------

function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') {
    child(args[1], args[2], Number(args[3]), Number(args[4]), args[5], Number(args[6]) || 0)
    return
  }
  const { machineNotes, machineLine, writeResults, option } = require('./common')
  const VALUED = ['--rounds', '--seconds', '--hz', '--top', '--timeout', '--stack-bytes', '--retries', '--node-flags', '--workloads', '--modes', '--json']
  for (let i = 0; i < args.length; i++) {
    if (VALUED.includes(args[i]) && i + 1 < args.length) i++
    else if (args[i] !== '--quick') {
      console.error(`bench/truth.js: unknown argument ${args[i]} (flags take their value as the next argument: --node-flags "--no-turbo-inlining")`)
      process.exit(2)
    }
  }
  const quick = args.includes('--quick')
  const opts = {
    rounds: Number(option(args, '--rounds')) || (quick ? 1 : 3),
    seconds: Number(option(args, '--seconds')) || 3.5,
    hz: Number(option(args, '--hz')) || 999,
    top: Number(option(args, '--top')) || 10,
    timeoutS: Number(option(args, '--timeout')) || 180,
    stackBytes: Number(option(args, '--stack-bytes')) || 0,
    retries: option(args, '--retries') === undefined ? 1 : Number(option(args, '--retries')),
    nodeFlags: (option(args, '--node-flags') || '').split(/\s+/).filter(Boolean)
  }
  const names = (option(args, '--workloads') || Object.keys(WORKLOADS).join(',')).split(',')
  const modes = (option(args, '--modes') || MODES.join(',')).split(',')
  for (const n of names) if (!WORKLOADS[n]) { console.error(`bench/truth.js: no workload ${n}; one of ${Object.keys(WORKLOADS).join(', ')}`); process.exit(2) }
  for (const m of modes) if (!MODES.includes(m)) { console.error(`bench/truth.js: no mode ${m}; one of ${MODES.join(', ')}`); process.exit(2) }
  if (!modes.includes('v8') || modes.length < 2) { console.error('bench/truth.js: --modes needs v8 and at least one kflame side'); process.exit(2) }
  try {
    for (const n of names) for (const p of WORKLOADS[n].packages) resolvePkg(p)
  } catch (err) {
    console.error(err.message)
    process.exit(1)
  }
  const machine = machineNotes()
  const versions = Object.fromEntries(['acorn', 'marked', 'typescript'].map((p) => {
    try { return [p, JSON.parse(fs.readFileSync(resolvePkg(`${p}/package.json`), 'utf8')).version] } catch { return [p, null] }
  }))

  const notes = []
  const addonBefore = addonId()
  const trials = []
  for (let round = 0; round < opts.rounds; round++) {
    for (const name of names) {
      // Alternate which side goes first from round to round.
      const order = round % 2 ? [...modes].reverse() : modes
      for (const mode of order) {
        let t
        for (let attempt = 0; ; attempt++) {
          try {
            t = trial(name, mode, opts)
            break
          } catch (err) {
            if (attempt >= opts.retries) {
              console.error(`bench/truth.js: ${err.message}`)
              process.exit(1)
            }
            // An addon being rebuilt under the run fails to load for a moment.
            console.error(`  ${err.message.split('\n').slice(0, 2).join(' ')}\n  retrying in 20 s (--retries ${opts.retries})`)
            notes.push(`${name}/${mode} round ${round + 1} failed once and was retried: ${err.message.split('\n')[0]}`)
            spawnSync('sleep', ['20'])
          }
        }
        trials.push({ name, mode, round, ...t })
        console.error(`  round ${round + 1}/${opts.rounds} ${name} ${mode}: ${t.iterations} iterations, ${Math.round(t.cpuMs)} ms CPU, ` +
          `${t.side.total} main-thread samples, ${t.side.counted} counted`)
      }
    }
  }

  const addonAfter = addonId()
  if (addonBefore !== addonAfter) notes.push(`the addon (${ADDON}) changed during the run: the kflame sides mix two builds`)
  const workloads = names.map((name) => compareWorkload(name, trials.filter((t) => t.name === name), modes, opts.top))
  const result = {
    quick,
    rounds: opts.rounds,
    seconds: opts.seconds,
    hz: opts.hz,
    nodeFlags: opts.nodeFlags,
    stackBytes: opts.stackBytes || null,
    modes,
    versions,
    addon: addonAfter,
    notes,
    inputs: Object.fromEntries(names.map((n) => [n, trials.find((t) => t.name === n).inputBytes])),
    workloads,
    trials: trials.map(({ side, sideOuter, sideV8, v8Beside, ...rest }) => ({
      ...rest, samples: side.total, counted: side.counted, excluded: side.excluded, stats: rest.stats ? { samples: rest.stats.samples, lost: rest.stats.lost, details: rest.stats.details } : null
    }))
  }
  console.log(`truth: ${opts.rounds} round${opts.rounds > 1 ? 's' : ''} of ${opts.seconds} s CPU per side and workload at ${opts.hz} Hz` +
    `${opts.nodeFlags.length ? `, node ${opts.nodeFlags.join(' ')}` : ''}${opts.stackBytes ? `, stackBytes ${opts.stackBytes} on the kflame side` : ''}; acorn ${versions.acorn}, marked ${versions.marked}, typescript ${versions.typescript}; ${machineLine(machine)}`)
  console.log(formatTables(result).join('\n'))
  for (const n of notes) console.log(`\nnote: ${n}`)
  const jsonOut = option(args, '--json')
  if (jsonOut) writeResults(jsonOut, machine, result)
}

const readmeTables = (r, resultsFile) => formatTables(r, { summaryOnly: true, resultsFile })

module.exports = { formatTables, readmeTables }

if (require.main === module) main()

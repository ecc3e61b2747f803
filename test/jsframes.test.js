'use strict'

// JS stacks as V8's own profiler sees them, from the sample's stack copy
// (stackBytes): interpreted functions compiled before kflame loaded are
// named from their BytecodeArray, not "(interpreted)"; the function under a
// frameless bytecode handler or builtin is put back; workers that never
// load kflame get their JS named.

const t = require('tap')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { Worker } = require('node:worker_threads')
const { spawnSync } = require('node:child_process')
const kflame = require('..')
const { parseFolded, total, runFixture } = require('./helpers')

const has = (re) => (s) => s.frames.some((f) => re.test(f))
const INTERP = ['--no-opt', '--no-sparkplug', '--no-maglev']
const onMain = (stacks) => stacks.filter((s) => s.frames[0] === 'main')
const fixture = (name, line, col) => new RegExp(`^[~^+*]?${name} .*early-functions\\.js:${line}:${col}_\\[j\\]$`)

t.test('functions compiled before kflame loaded are named, not (interpreted)', async (t) => {
  const r = runFixture('early-functions.js', INTERP)
  const main = onMain(r.stacks)
  const js = main.filter(has(/_\[j\]$/))
  t.ok(total(js) > 300, `enough samples (${total(js)})`)
  // What may remain: a trampoline sampled in the few instructions before
  // it has built its frame (left as it is rather than guessed).
  const unnamed = total(js, has(/^\(interpreted\)_\[j\]$/))
  t.ok(unnamed <= 0.005 * total(js), `(interpreted) frames in ${unnamed} of ${total(js)} samples`)
  const script = fixture('\\(anonymous\\)', 1, 1)
  t.ok(total(js, has(script)) >= 0.95 * total(js), `the main script's frame in ${total(js, has(script))} of ${total(js)}`)
  const leaf = fixture('leafWork', 8, 19)
  const middle = fixture('middleWork', 9, 21)
  const outer = fixture('outerWork', 10, 20)
  const inLeaf = js.filter(has(leaf))
  t.ok(total(inLeaf) > 0.5 * total(js), `leafWork in ${total(inLeaf)} of ${total(js)}`)
  t.equal(total(inLeaf, (s) => has(middle)(s) && has(outer)(s)), total(inLeaf),
    'every leafWork stack goes through middleWork and outerWork')
  const d = r.stats.details
  t.ok(d.interpretedNamed > 0 && d.stackCopies > 0 && d.v8Layout, `stats: ${d.interpretedNamed} named from the stack`)
  t.ok(d.runningAdded > 0, `${d.runningAdded} running functions put back under a bytecode handler`)
})

t.test('the running function is the leaf-most JS frame', async (t) => {
  // Phase functions (fnA*, fnB*) are called in a loop by runFor; among the
  // samples that stop in JIT code (builtins, handlers, JS) during a phase,
  // the phase function must be the leaf-most JS frame: the rest is runFor's
  // own call sequence. Before the stack copy this was about 40%.
  const r = runFixture('code-reuse.js', ['--expose-gc'])
  const isJs = (f) => f.endsWith('_[j]') && !/^(Builtin:|BytecodeHandler:|RegExp:|\(interpreted\)|\[jit\])/.test(f)
  for (const phase of ['A', 'B']) {
    const inPhase = r.stacks.filter((s) => has(new RegExp(`^phase${phase} `))(s) && !has(/^compile /)(s) &&
      s.frames[s.frames.length - 1].endsWith('_[j]'))
    const own = total(inPhase, (s) => {
      const js = s.frames.filter(isJs)
      return new RegExp(`^fn${phase}\\d+ `).test(js[js.length - 1])
    })
    t.ok(total(inPhase) > 30, `phase ${phase}: ${total(inPhase)} samples in JIT code`)
    t.ok(own >= 0.9 * total(inPhase), `phase ${phase}: its function is leaf-most in ${own} of ${total(inPhase)}`)
  }
  t.ok(r.stats.details.runningAdded > 0)
})

t.test('a loop replaced on the stack before the first start() is named, not [jit]', async (t) => {
  // V8 never reports that OSR code (the hook is armed at start()); its
  // frame keeps the function's BytecodeArray, which names it.
  // Synchronous OSR: a busy machine must not let the replacement finish
  // only after start(), when V8 would report it like any new code.
  const r = runFixture('osr-before-start.js', ['--no-concurrent-osr'], [], { KFLAME_JIT: 'lazy' })
  const js = onMain(r.stacks).filter(has(/_\[j\]$/))
  const spin = total(js, has(/^spinLoop .*osr-before-start\.js:10:19_\[j\]$/))
  const unnamed = total(js, has(/^\[jit\]_\[j\]$/))
  t.ok(total(js) > 200, `enough samples (${total(js)})`)
  t.ok(spin >= 0.95 * total(js), `spinLoop in ${spin} of ${total(js)}`)
  t.ok(unnamed <= 0.01 * total(js), `[jit] frames in ${unnamed} of ${total(js)}`)
  const d = r.stats.details
  t.ok(d.unreportedNamed > 0, `${d.unreportedNamed} frames of unreported code named (${d.unreportedUnnamed} not)`)
})

// Interpreted functions compiled before kflame, recursing deeper than a
// small stack copy reaches: the frames past it stay (interpreted), and the
// profile says so, with the option that reaches them.
const DEEP_EARLY = `
function down (n, m) { if (n === 0) { let s = 0; for (let i = 0; i < m; i++) s = (s + i * 7) % 1000003; return s } return down(n - 1, m) + 1 }
down(5, 10)
const kflame = require('.')
const run = (stackBytes) => {
  kflame.start({ hz: 999, stackBytes })
  const end = performance.now() + 300
  while (performance.now() < end) down(60, 3000)
  const s = kflame.stop().stats
  return { short: s.details.stackCopiesShort, samples: s.samples, warnings: s.warnings }
}
process.stdout.write(JSON.stringify({ small: run(1024), large: run(32768) }))
`

t.test('frames deeper than the stack copy: counted, and a warning names the option', async (t) => {
  const r = spawnSync(process.execPath, [...INTERP, '-e', DEEP_EARLY], { cwd: path.join(__dirname, '..'), encoding: 'utf8' })
  t.equal(r.status, 0, r.stderr)
  const { small, large } = JSON.parse(r.stdout)
  const warned = (x) => x.warnings.find((w) => /deeper than their \d+-byte stack copy/.test(w))
  t.ok(small.short > 0.5 * small.samples, `1 KiB: ${small.short} of ${small.samples} samples short`)
  t.match(warned(small), /stack copy, left \(interpreted\)_\[j\]: start\(\{ stackBytes: 2048 \}\) reaches deeper/)
  t.ok(large.short <= 0.01 * large.samples, `32 KiB: ${large.short} of ${large.samples} short`)
  t.notOk(warned(large), 'no warning when the copy reaches')
})

t.test('stackBytes: 0 reads no stack, and bad values are refused', async (t) => {
  kflame.start({ hz: 999, stackBytes: 0 })
  const end = performance.now() + 50
  while (performance.now() < end) JSON.stringify({ a: [1, 2, 3] })
  const d = kflame.stop().stats.details
  t.equal(d.stackBytes, 0)
  t.equal(d.stackCopies, 0)
  t.equal(d.interpretedNamed + d.runningAdded, 0)
  for (const bad of [-8, 12, 32, 60008, 1.5]) {
    t.throws(() => kflame.start({ stackBytes: bad }), { code: /KFLAME_ERR_(INVALID_ARG|OUT_OF_RANGE)/ }, String(bad))
  }
  t.throws(() => kflame.start({ stackBytes: '8192' }), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.notOk(kflame.isRunning())
})

t.test('a worker that never loads kflame gets its JS named', async (t) => {
  // As a pool's worker: it waits for work, which comes a moment later.
  kflame.start({ hz: 999 })
  await new Promise((resolve, reject) => {
    // poolHot is too big to be inlined (over 460 bytes of bytecode): Maglev
    // reports no source offsets, so a function it inlines (Node 22+) would
    // be its caller's time, and this test is about the hook.
    const body = Array.from({ length: 40 }, (_, k) => `s = (s * 31 + i + ${k}) % 1000003`).join('; ')
    const w = new Worker(`
      const { parentPort } = require('node:worker_threads')
      function poolHot (n) { let s = 0; for (let i = 0; i < n; i++) { ${body} } return s }
      parentPort.once('message', () => {
        const end = Date.now() + 1000
        let x = 0
        while (Date.now() < end) x += poolHot(100000)
        parentPort.close()
      })
      parentPort.postMessage('ready')
    `, { eval: true })
    w.once('message', () => w.postMessage('go'))
    w.on('error', reject)
    w.on('exit', resolve)
  })
  const p = kflame.stop()
  const worker = parseFolded(p.folded).filter((s) => /^worker-thread-\d+$/.test(s.frames[0]))
  const inTask = worker.filter(has(/^\(anonymous\) \[worker eval\]:4:\d+_\[j\]$/))
  const hot = total(inTask, has(/^poolHot \[worker eval\]:3:\d+_\[j\]$/))
  t.ok(total(inTask) > 300, `the worker's task named in ${total(inTask)} of ${total(worker)} samples`)
  t.ok(hot >= 0.95 * total(inTask), `poolHot named in ${hot} of ${total(inTask)}`)
  t.ok(p.stats.details.workersArmed >= 1, `${p.stats.details.workersArmed} worker(s) armed`)
  t.equal(p.stats.details.workersFailed, 0)
})

t.test('require(kflame) in the worker too: armed once, named', async (t) => {
  kflame.start({ hz: 499 })
  await new Promise((resolve, reject) => {
    const w = new Worker(`
      require(${JSON.stringify(path.join(__dirname, '..'))})
      function both () { let s = 0; for (let i = 0; i < 1e5; i++) s += Math.sqrt(i); return s }
      const end = Date.now() + 300
      while (Date.now() < end) both()
    `, { eval: true })
    w.on('error', reject)
    w.on('exit', resolve)
  })
  const stacks = parseFolded(kflame.stop().folded).filter((s) => /^worker-thread-\d+$/.test(s.frames[0]))
  const named = total(stacks, has(/^both \[worker eval\]:\d+:\d+_\[[ij]\]$/))
  t.ok(named > 50, `named in ${named} of ${total(stacks)}`)
})

t.test('inlined functions get frames of their own, marked _[i]', async (t) => {
  const frame = (name, line, col, mark) => new RegExp(`^${name} .*inlining\\.js:${line}:${col}_\\[${mark}\\]$`)
  // V8 reports code's positions (which inlined frames are read from) only as
  // it compiles the code while a hook is armed: the fixture optimizes before
  // its profile, so the hook is armed from load here, as setting up the HTTP
  // endpoints or an earlier start() would arm it (KFLAME_JIT, docs/api.md).
  const r = runFixture('inlining.js', [], [], { KFLAME_JIT: 'load' })
  const main = onMain(r.stacks)
  const inHot = main.filter(has(frame('hot', 9, 14, 'j')))
  const inlined = inHot.filter(has(/_\[i\]$/))
  t.ok(total(inHot) > 300, `hot in ${total(inHot)} samples`)
  t.ok(total(inlined) > 0.3 * total(inHot), `an inlined frame in ${total(inlined)} of them`)
  t.ok(total(inHot, has(frame('square', 7, 17, 'i'))) > 0, 'square named as inlined')
  // Under an inlined frame is the optimized code it is inlined in (hot's,
  // or the script's own loop when V8 optimized it by on-stack replacement
  // with hot inlined), or a function it was inlined in that was inlined
  // too: only the calls the fixture makes (hot -> step -> square).
  const fixtureJs = /^[^ ]+ .*inlining\.js:\d+:\d+_\[j\]$/
  const callers = { square: /^step .*_\[i\]$/, step: /^hot .*_\[i\]$/, hot: /^$/ }
  // (node's own functions inlined into node's own code, say wrappedFn
  // into performance.now, and the loop's CPU-time check from thread-cpu.js
  // are named too: not the fixture's, not checked.)
  const misplaced = main.filter((s) => s.frames.some((f, i) => {
    if (!f.endsWith('_[i]') || / (node:internal\/|.*thread-cpu\.js:)/.test(f)) return false
    const m = /^(square|step|hot) .*inlining\.js:\d+:\d+_\[i\]$/.exec(f)
    return !m || !(fixtureJs.test(s.frames[i - 1]) || callers[m[1]].test(s.frames[i - 1]))
  }))
  if (total(misplaced)) t.comment(misplaced.map((s) => s.frames.slice(-4).join(';')).join('\n'))
  t.equal(total(misplaced), 0, 'each inlined frame is one of the fixture\'s functions, under its JS code or its inlined caller')
  t.ok(r.stats.details.inlinedFrames > 0)
  // Where kflame reads V8's own inlining (V8 11.3, 12.4 and 13.6, Node 20, 22 and 24: v8inline.h),
  // every inlined frame comes from it, and square sits under step, which
  // inlined it, wherever square was inlined into step (the inference
  // could not always see step). Elsewhere V8's line events serve.
  const d = r.stats.details
  if (/^(11\.3|12\.4|13\.6)\./.test(process.versions.v8)) {
    t.ok(d.inliningRead > 0, `inlining read from ${d.inliningRead} optimized code objects`)
    t.equal(d.inliningFailed, 0, 'no code object that could not be read')
    t.equal(d.inlinedExact, d.inlinedFrames, 'every inlined frame from V8\'s ids')
    const squareInlined = inHot.filter(has(frame('square', 7, 17, 'i')))
    const underStep = squareInlined.filter((s) => s.frames.some((f, i) =>
      frame('square', 7, 17, 'i').test(f) && /^step .*_\[[ij]\]$/.test(s.frames[i - 1])))
    t.ok(total(underStep) >= 0.95 * total(squareInlined),
      `square under step in ${total(underStep)} of its ${total(squareInlined)} inlined samples`)
    // With coverage on (as tap and c8 run tests), V8 11 keeps a DebugInfo
    // where the function's Script was: still told apart from another script's.
    const covDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-cov-'))
    const cov = runFixture('inlining.js', [], [], { KFLAME_JIT: 'load', NODE_V8_COVERAGE: covDir })
    fs.rmSync(covDir, { recursive: true, force: true })
    const cd = cov.stats.details
    t.ok(cd.inlinedExact > 0 && cd.inlinedUnnamed < cd.inlinedExact,
      `under coverage: ${cd.inlinedExact} inlined frames from V8's ids, ${cd.inlinedUnnamed} left out`)
  } else {
    t.equal(d.inliningRead, 0, 'this V8\'s inlining is not read: the inference serves')
    t.equal(d.inlinedExact, 0)
  }

  // A hook armed only at start() (the default), after the fixture's code
  // was optimized: V8 reports the code that exists, but not the offsets of
  // the functions it inlined, which are then named by their bytecode (a
  // warm server profiled on demand is this case).
  if (/^(11\.3|12\.4|13\.6)\./.test(process.versions.v8)) {
    const lazy = runFixture('inlining.js', [], [], { KFLAME_JIT: 'lazy' })
    const ld = lazy.stats.details
    const lazyHot = onMain(lazy.stacks).filter(has(frame('hot', 9, 14, 'j')))
    t.ok(ld.inlinedExact > 0 && ld.inlinedExact === ld.inlinedFrames,
      `armed at start(): ${ld.inlinedExact} inlined frames from V8's ids`)
    t.ok(ld.inlinedUnnamed <= 0.01 * ld.inlinedExact, `${ld.inlinedUnnamed} inlined functions left out`)
    t.ok(total(lazyHot, has(frame('step', 8, 15, 'i'))) > 0.3 * total(lazyHot),
      `step inlined in ${total(lazyHot, has(frame('step', 8, 15, 'i')))} of hot's ${total(lazyHot)} samples`)
  }

  const plain = runFixture('inlining.js', ['--no-turbo-inlining', '--no-maglev'])
  t.equal(total(plain.stacks, has(/_\[i\]$/)), 0, 'nothing inlined, no _[i] frame')
  t.ok(total(plain.stacks, has(frame('square', 7, 17, 'j'))) > 100, 'square is a frame of its own')
})

t.test('no worker at the first start(): the inspector waits for one, and a worker made later is named', async (t) => {
  // Bare: tap's NODE_OPTIONS would load the inspector (and a worker) first.
  const r = runFixture('worker-late.js', [], [], {}, { bare: true })
  t.equal(r.inspectorAtStart, false, 'start() loaded no inspector: no worker could exist yet')
  t.equal(r.inspectorAtEnd, true, 'the worker\'s creation brought it in')
  const worker = r.stacks.filter((s) => /^worker-thread-\d+$/.test(s.frames[0]))
  const inTask = worker.filter(has(/^\(anonymous\) \[worker eval\]:\d+:\d+_\[j\]$/))
  const hot = total(inTask, has(/^lateHot \[worker eval\]:2:\d+_\[j\]$/))
  t.ok(total(inTask) > 300, `the worker's script in ${total(inTask)} of ${total(worker)} samples`)
  t.ok(hot >= 0.95 * total(inTask), `lateHot named in ${hot} of ${total(inTask)}`)
  t.equal(r.stats.details.workersArmed, 1)
  t.equal(r.stats.details.workersFailed, 0)
})

t.test('a worker kflame cannot hook: [jit] frames and a warning, never [unknown]', async (t) => {
  const r = runFixture('worker-unhooked.js')
  const worker = r.stacks.filter((s) => /^worker-thread-\d+$/.test(s.frames[0]))
  const leafIs = (re) => (s) => re.test(s.frames[s.frames.length - 1])
  const jit = total(worker, leafIs(/^\[jit\]_\[j\]$/))
  const unknown = total(worker, leafIs(/^\[unknown\]$/))
  t.ok(jit > 200, `the worker's JS is [jit]_[j] in ${jit} of ${total(worker)} samples`)
  t.ok(unknown <= 0.05 * jit, `[unknown] leaves: ${unknown}`)
  t.notOk(r.stacks.some(has(/^unhooked /)), 'nothing named without the hook')
  t.match(r.stats.warnings.join('\n'), /1 worker thread\(s\) could not get kflame's JIT hook \(test: no inspector\)/)
})

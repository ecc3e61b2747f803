'use strict'
// Native frames named as perf names them: glibc's functions from Debian's
// libc6-dbg (a separate debug file found by build-id), and, where no symbol
// covers an address, one "[object]" frame instead of an address each.
const t = require('tap')
const fs = require('node:fs')
const { runFixture, total, rootSummary } = require('./helpers')

// libc's debug file, where perf finds it: /usr/lib/debug/.build-id/xx/rest.debug.
function libcDebugFile () {
  const libc = fs.readFileSync('/proc/self/maps', 'utf8').split('\n')
    .map((l) => l.split(/\s+/)[5]).find((p) => p && /\/libc\.so\.6$/.test(p))
  const { execFileSync } = require('node:child_process')
  const id = /Build ID: ([0-9a-f]+)/.exec(execFileSync('readelf', ['-n', libc], { encoding: 'utf8' }))[1]
  return `/usr/lib/debug/.build-id/${id.slice(0, 2)}/${id.slice(2)}.debug`
}

const leafOf = (s) => s.frames[s.frames.length - 1]

t.test('memmove named from libc6-dbg; thread roots over start_thread', async (t) => {
  const debugFile = libcDebugFile()
  if (!fs.existsSync(debugFile)) throw new Error(`${debugFile} is missing: install libc6-dbg (apt-get install libc6-dbg)`)
  const { stacks, stats } = runFixture('memmove.js')
  const main = stacks.filter((s) => s.frames[0] === 'main')
  const memmove = total(main, (s) => /^__memmove_/.test(leafOf(s)))
  // (Node 24 spends a quarter of the loop outside memmove.)
  t.ok(memmove > total(main) * 0.5, `leaf __memmove_* in ${memmove} of ${total(main)} main-thread samples`)
  t.equal(total(main, (s) => leafOf(s) === '[libc.so.6]'), 0, 'no glibc code left unnamed')
  t.equal(total(stacks, (s) => s.frames.some((f) => /^libc\.so\.6\+0x/.test(f))), 0, 'no libc.so.6+0x... frame')
  const others = stacks.filter((s) => s.frames[0] !== 'main' && s.frames.length > 2)
  t.ok(others.some((s) => s.frames[1] === 'start_thread'), `start_thread under thread roots (${rootSummary(stacks)})`)
  t.ok(stats.details.nativeFromDebug > 0, `nativeFromDebug ${stats.details.nativeFromDebug}`)
})

// memmove keeps no frame pointer: the frame-pointer walk goes from it to
// the JS function above its caller (the builtin or C++ that called it).
// DWARF call-frame information puts the caller back.
t.test('the caller of memmove put back from DWARF call-frame information', async (t) => {
  const parentIsJs = (stacks) => {
    const memmove = stacks.filter((s) => s.frames[0] === 'main' && /^__memmove_/.test(leafOf(s)))
    const js = total(memmove, (s) => / \S+:\d+:\d+_\[j\]$/.test(s.frames[s.frames.length - 2]))
    return { js, all: total(memmove) }
  }
  const on = runFixture('memmove.js')
  const off = runFixture('memmove.js', [], [], { KFLAME_TEST_DWARF: '0' })
  const a = parentIsJs(on.stacks)
  const b = parentIsJs(off.stacks)
  t.ok(a.all > 100 && a.js < a.all * 0.05, `with DWARF: memmove's parent is a JS function in ${a.js} of ${a.all} samples`)
  t.ok(b.js > b.all * 0.5, `without: in ${b.js} of ${b.all} (the caller skipped)`)
  const d = on.stats.details
  t.ok(d.dwarfRecovered > a.all * 0.9, `dwarfRecovered ${d.dwarfRecovered} of ${d.dwarfTried} tried, ${d.dwarfBroke} broke`)
  t.equal(off.stats.details.dwarfTried, 0)
})

t.test('without the debug file: [libc.so.6], one frame for all its unnamed code', async (t) => {
  const { stacks, stats } = runFixture('memmove.js', [], [], { KFLAME_DEBUG_DIRS: '' })
  const main = stacks.filter((s) => s.frames[0] === 'main')
  const folded = total(main, (s) => leafOf(s) === '[libc.so.6]')
  t.ok(folded > total(main) * 0.5, `leaf [libc.so.6] in ${folded} of ${total(main)} main-thread samples`)
  t.equal(total(stacks, (s) => s.frames.some((f) => /\+0x[0-9a-f]+$/.test(f))), 0, 'no object+0x... frame')
  t.ok(stats.details.nativeFolded > 0, `nativeFolded ${stats.details.nativeFolded}`)
  // The leaf's distinct addresses are one line per stack, not one per address.
  const leafLines = main.filter((s) => leafOf(s) === '[libc.so.6]').length
  t.ok(leafLines < 20, `${leafLines} distinct main-thread stacks end in [libc.so.6]`)
})

// An addon built with -O2 -fomit-frame-pointer: JS -> sort() -> glibc's qsort
// -> a C comparator, and sort() -> back into JS. No frame pointer anywhere
// between V8's frames and the leaf: the frame-pointer walk alone loses the
// callers and the thread's root.
function buildNofpAddon (t) {
  const path = require('node:path')
  const os = require('node:os')
  const { execFileSync } = require('node:child_process')
  const include = [path.resolve(process.execPath, '..', '..', 'include', 'node'), '/usr/include/node']
    .find((d) => fs.existsSync(path.join(d, 'node_api.h')))
  if (!include) throw new Error(`no node_api.h for ${process.execPath}: install node's headers`)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-nofp-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const out = path.join(dir, 'nofp.node')
  execFileSync('cc', ['-O2', '-fomit-frame-pointer', '-fPIC', '-shared', `-I${include}`, '-o', out,
    path.join(__dirname, 'fixtures', 'nofp-addon', 'nofp.c')])
  return out
}

function nofpFigures (stacks) {
  const main = stacks.filter((s) => s.frames[0] === 'main')
  const all = total(main)
  const inSort = main.filter((s) => s.frames.some((f) => /^(nofp_compare|nofp_fill_and_sort|msort_with_tmp|__qsort_r)/.test(f)))
  return {
    root: total(main, (s) => s.frames.includes('node::Start(int, char**)')) / all,
    unknown: total(main, (s) => s.frames.includes('[unknown]')) / all,
    caller: total(inSort, (s) => s.frames.some((f) => /^nofpDriver /.test(f))) / total(inSort),
    sortSamples: total(inSort)
  }
}

for (const mode of ['perf', 'timer']) {
  t.test(`an addon without frame pointers (${mode} mode): callers and the root from DWARF`, async (t) => {
    const addon = buildNofpAddon(t)
    const pct = (x) => `${(x * 100).toFixed(1)}%`
    // A chain rebuilt from DWARF ends where the stack copy does. Spawned
    // from tap, the script runs from inside the event loop (under
    // uv__io_poll), deeper than the default 16 KiB copy reaches (as `node
    // app.js` from a shell it is not): 32 KiB reaches the thread's root.
    const plain = { NODE_OPTIONS: '', STACK_BYTES: '32768' }
    const on = nofpFigures(runFixture('nofp-addon/run.js', [], [addon, 'on', mode], plain).stacks)
    const off = nofpFigures(runFixture('nofp-addon/run.js', [], [addon, 'off', mode], plain).stacks)
    const says = `with DWARF: root ${pct(on.root)}, JS caller of the sort ${pct(on.caller)}, [unknown] ${pct(on.unknown)}; ` +
      `without: ${pct(off.root)}, ${pct(off.caller)}, ${pct(off.unknown)}`
    t.ok(on.sortSamples > 200, `${on.sortSamples} samples in the sort`)
    // Timer mode loses a few more: a thread's samples from before its stack
    // is located, and again each time the main thread's stack grows deeper
    // than the collector has seen it, hold only the leaf (99.2-100% here
    // with both cores busy, 2026-11-27; 93-94% before a leaf holding 0 in
    // rbp, in glibc's sort, stopped passing for a whole chain).
    const goal = mode === 'perf' ? 0.99 : 0.97
    t.ok(on.root >= goal, `thread root: ${says}`)
    t.ok(on.caller >= goal, `caller: ${says}`)
    t.ok(on.unknown < 0.005, `[unknown]: ${says}`)
    t.ok(off.caller < 0.5, `without DWARF the callers are lost: ${says}`)
  })
}

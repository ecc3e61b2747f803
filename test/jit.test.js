'use strict'

// JS frames: named from V8's code events, in every tier, correct in time
// when V8 reuses code addresses, and written out as a perf map.

const t = require('tap')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { Worker } = require('node:worker_threads')
const kflame = require('..')
const { parseFolded, total, runFixture, spin } = require('./helpers')

const has = (re) => (s) => s.frames.some((f) => re.test(f))
const WORK = 'js-split-work.js'
const frameOf = (fn, line, col) => new RegExp(`^[~^+*]?${fn} .*${WORK}:${line}:${col}_\\[j\\]$`)
const ALPHA = frameOf('alpha', 14, 16)
const BETA = frameOf('beta', 15, 15)

// Share of alpha among alpha + beta samples, against the CPU-time truth.
function checkSplit (t, r) {
  const alpha = total(r.stacks, has(ALPHA))
  const beta = total(r.stacks, has(BETA))
  const share = 100 * alpha / (alpha + beta)
  const truth = 100 * r.truth.alpha / (r.truth.alpha + r.truth.beta)
  t.ok(alpha + beta > 300, `enough samples (${alpha + beta})`)
  t.ok(Math.abs(share - truth) <= 3, `alpha ${share.toFixed(1)}% vs truth ${truth.toFixed(1)}%`)
}

t.test('optimized code: names with file:line:col and a known split', async (t) => {
  const r = runFixture('js-split.js')
  checkSplit(t, r)
  t.ok(r.stacks.some(has(/^spinUntil .*js-split-work\.js:6:20_\[j\]$/)), 'the callee is named too')
  t.notOk(r.stacks.some(has(/^[~^+*]alpha/)), 'tier markers merged by default')
  t.ok(r.stats.details.jitFrames > 0)
})

t.test('interpreted code (--no-opt --no-sparkplug --no-maglev)', async (t) => {
  const r = runFixture('js-split.js', ['--no-opt', '--no-sparkplug', '--no-maglev'], ['--tiers'])
  checkSplit(t, r)
  t.ok(r.stacks.some(has(/^~alpha /)), 'interpreted frames carry ~ with tiers: true')
  t.notOk(r.stacks.some(has(/^[*^+]alpha /)), 'and no other tier')
})

t.test('baseline code (--always-sparkplug --no-opt --no-maglev)', async (t) => {
  const r = runFixture('js-split.js', ['--always-sparkplug', '--no-opt', '--no-maglev'], ['--tiers'])
  checkSplit(t, r)
  t.ok(r.stacks.some(has(/^\^alpha /)), 'baseline frames carry ^ with tiers: true')
})

t.test('code addresses reused: no sample named after dead code', async (t) => {
  const r = runFixture('code-reuse.js', ['--expose-gc', '--compact-on-every-full-gc'])
  const d = r.stats.details
  t.ok(d.codeEvicted > 0, `V8 reused code addresses (${d.codeEvicted} entries evicted, ${d.codeMoved} moved)`)
  const inA = r.stacks.filter(has(/^phaseA /))
  const inB = r.stacks.filter(has(/^phaseB /))
  t.equal(total(inB, has(/^fnA\d+ /)), 0, 'no phase-B sample named after a phase-A function')
  t.equal(total(inA, has(/^fnB\d+ /)), 0, 'no phase-A sample named after a phase-B function')
  t.ok(total(inB, has(/^fnB\d+ :1:\d+_\[j\]$/)) > 0, 'phase B functions are named')
  const share = 100 * total(inA) / (total(inA) + total(inB))
  const truth = 100 * r.truth.phaseA / (r.truth.phaseA + r.truth.phaseB)
  t.ok(Math.abs(share - truth) <= 4, `phase A ${share.toFixed(1)}% vs truth ${truth.toFixed(1)}%`)
})

t.test('perf map: written while profiling and at stop, sorted, no overlaps', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-map-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'perf.map')
  const r = runFixture('code-reuse.js', ['--expose-gc'], [file])
  t.equal(r.stats.details.perfMap, file)
  t.ok(r.stats.details.perfMapWrites >= 1, 'refreshed while profiling')
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean)
  t.equal(lines.length, r.stats.details.perfMapLines)
  let prevEnd = 0
  let sorted = true
  for (const line of lines) {
    const m = /^([0-9a-f]+) ([0-9a-f]+) (.+)$/.exec(line)
    if (!m) { t.fail(`bad line: ${line}`); break }
    const start = parseInt(m[1], 16)
    if (start < prevEnd) sorted = false
    prevEnd = start + parseInt(m[2], 16)
  }
  t.ok(sorted, 'ascending, no overlapping ranges')
  t.ok(lines.some((l) => / [~^+*]?fnB\d+ :1:\d+$/.test(l)), 'live functions are in it')
  t.notOk(fs.readdirSync(dir).some((f) => f.endsWith('.tmp')), 'no temporary file left')
})

// The perf map's warning says why a write failed: the errno's name and the
// advice, for the refreshes while profiling as for the write at stop.
t.test('perf map writes that fail: the warning names the errno and the fix', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-map-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'later', 'perf.map') // its directory comes only before stop()
  kflame.start({ hz: 99, perfMap: file })
  // past the collector's once-a-second refresh, with new code to write
  const end = Date.now() + 1300
  for (let i = 0; Date.now() < end; i++) new Function('x', `return x + ${i}`)(i) // eslint-disable-line no-new-func
  fs.mkdirSync(path.dirname(file))
  const p = kflame.stop()
  t.ok(p.stats.details.perfMapErrors > 0, 'a refresh failed')
  t.ok(p.stats.details.perfMapLines > 0, 'the write at stop worked')
  t.match(p.stats.warnings.join('\n'),
    /perf map could not be written to .*perf\.map \d+ time\(s\) while profiling \(ENOENT\): cannot write the perf map \(No such file or directory\)\. Fix: /)

  const blocked = path.join(dir, 'a-file')
  fs.writeFileSync(blocked, '')
  kflame.start({ hz: 99, perfMap: path.join(blocked, 'perf.map') })
  const q = kflame.stop()
  t.ok(q.stats.details.perfMapLines < 0, 'the write at stop failed')
  t.match(q.stats.warnings.join('\n'), /perf map could not be written to .* at stop \(ENOTDIR\): cannot write the perf map \(Not a directory\)/)
})

t.test('writePerfMap(path) and its errors', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-map-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'out.map')
  const { lines } = kflame.writePerfMap(file)
  t.ok(lines > 100, `${lines} lines`)
  t.match(fs.readFileSync(file, 'utf8'), /Builtin:/)
  t.throws(() => kflame.writePerfMap(path.join(dir, 'missing', 'x.map')), { code: 'KFLAME_ERR_PERF_MAP' })
  t.throws(() => kflame.writePerfMap(''), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => kflame.start({ perfMap: 3 }), { code: 'KFLAME_ERR_INVALID_ARG' })
})

t.test('worker threads that load kflame get their JS frames named', async (t) => {
  kflame.start({ hz: 999 })
  await new Promise((resolve, reject) => {
    const w = new Worker(`
      require(${JSON.stringify(path.join(__dirname, '..'))})
      function workerHot () { let x = 0; for (let i = 0; i < 1e5; i++) x += Math.sqrt(i); return x }
      const end = Date.now() + 300
      while (Date.now() < end) workerHot()
    `, { eval: true })
    w.on('error', reject)
    w.on('exit', resolve)
  })
  const stacks = parseFolded(kflame.stop().folded)
  const worker = stacks.filter((s) => /^worker-thread-\d+$/.test(s.frames[0]))
  t.ok(total(worker, has(/^workerHot \[worker eval\]:\d+:\d+_\[j\]$/)) > 50,
    `worker JS frames named (${total(worker, has(/^workerHot /))} of ${total(worker)})`)
})

t.test('RegExp code is named by its source, and its flags where V8 reports them', async (t) => {
  const re = /x(abc|def)+y/g
  kflame.start({ hz: 999 })
  let n = 0
  const end = Date.now() + 400
  for (let i = 0; Date.now() < end; i++) n += ('zz' + 'xabcdef'.repeat(50) + 'y' + i).replace(re, 'q').length
  const stacks = parseFolded(kflame.stop().folded)
  t.ok(n > 0)
  // V8 13 (Node 24) names RegExp code "RegExp.> src: '...' flags: 'g'";
  // before, "RegExp:..." without the flags.
  const flags = Number(process.versions.v8.split('.')[0]) >= 13 ? 'g' : ''
  const named = total(stacks, has(new RegExp(`^RegExp:/x\\(abc\\|def\\)\\+y/${flags}_\\[j\\]$`)))
  t.ok(named > 20, `the regexp's own frame in ${named} samples`)
  t.equal(total(stacks, has(/^RegExp\.>/)), 0, 'no frame keeps V8 13\'s raw name')
})

// RegExp code V8 compiled before the hook was armed (at the first start())
// is reported without its source: kflame names it from the expression its
// frame was called with, read in V8's heap, as V8 names code compiled later
// (flags too from V8 13 on). One source of each string kind: one-byte
// ASCII, one-byte Latin-1, two-byte with a surrogate pair.
const REGEXPS_BEFORE = [['x(abc|def)+y', 'g', 'abc'], ['x(\u00e9bc|d\u00e9f)+y', 'gi', '\u00e9bc'],
  ['x(a\u2192c|d\ud83d\ude00f)+y', 'gu', 'a\u2192c']]
const REGEXP_BEFORE = `
const kflame = require('.')
const res = ${JSON.stringify(REGEXPS_BEFORE)}.map(([source, flags, unit]) => [new RegExp(source, flags), 'zz' + 'x' + unit.repeat(50) + 'y'])
const run = (ms) => { let n = 0; const end = Date.now() + ms; for (let i = 0; Date.now() < end; i++) for (const [re, s] of res) n += (s + i).replace(re, 'q').length; return n }
run(300)
kflame.start({ hz: 999 })
run(600)
const p = kflame.stop()
process.stdout.write(JSON.stringify({ folded: p.folded, details: p.stats.details }))
`

t.test('RegExp code compiled before the first start(): named by its expression', async (t) => {
  const r = spawnSync(process.execPath, ['-e', REGEXP_BEFORE], {
    cwd: path.join(__dirname, '..'), env: { ...process.env, KFLAME_JIT: 'lazy' }, encoding: 'utf8', maxBuffer: 64 << 20
  })
  t.equal(r.status, 0, r.stderr)
  const { folded, details } = JSON.parse(r.stdout)
  const stacks = parseFolded(folded)
  const withFlags = Number(process.versions.v8.split('.')[0]) >= 13
  let named = 0
  for (const [source, flags] of REGEXPS_BEFORE) {
    const frame = `RegExp:/${source}/${withFlags ? flags : ''}_[j]`
    const n = total(stacks, (s) => s.frames.includes(frame))
    t.ok(n > 10, `${frame} in ${n} samples`)
    named += n
  }
  const unnamed = total(stacks, has(/^RegExp:\(compiled before start\)_\[j\]$/))
  t.ok(unnamed <= 0.02 * named, `left unnamed in ${unnamed} samples, named in ${named}`)
  t.ok(details.regexpNamed >= named, `stats: ${details.regexpNamed} named, ${details.regexpUnnamed} not`)
  t.equal(total(stacks, has(/Regular expression code/)), 0, 'V8\'s description is not shown as a source')
})

// Whether V8's hook feeds this isolate's code map: { load, started } after
// the addon loads and after a start().
const ARMED_PROBE = `
const binding = require('./lib/binding')
const kflame = require('.')
const load = binding.jitArmed()
kflame.start({ hz: 99 })
kflame.stop()
console.log(JSON.stringify({ load, started: binding.jitArmed() }))
`

t.test('KFLAME_JIT arms V8\'s code-event hook at the first start() (lazy, the default), at load, or never (off)', async (t) => {
  const armed = (mode) => {
    const env = { ...process.env }
    if (mode) env.KFLAME_JIT = mode
    else delete env.KFLAME_JIT
    const r = spawnSync(process.execPath, ['-e', ARMED_PROBE], { cwd: path.join(__dirname, '..'), env, encoding: 'utf8' })
    if (r.status !== 0) throw new Error(r.stderr)
    return JSON.parse(r.stdout)
  }
  t.same(armed(undefined), { load: false, started: true }, 'default: armed by the first start()')
  t.same(armed('lazy'), { load: false, started: true }, 'lazy: the same')
  t.same(armed('load'), { load: true, started: true }, 'load: armed at load')
  t.same(armed('off'), { load: false, started: false }, 'off: never armed, so compiling code costs nothing of kflame\'s')
  const mount = spawnSync(process.execPath, ['-e', `
    const binding = require('./lib/binding')
    require('.').http()
    console.log(JSON.stringify({ mounted: binding.jitArmed() }))`], { cwd: path.join(__dirname, '..'), encoding: 'utf8' })
  t.same(JSON.parse(mount.stdout), { mounted: true }, 'default: armed when the HTTP endpoints are set up, before any /start')
})

// KFLAME_JIT=profile: the hook only while a profile runs. Code compiled
// between two profiles, while nothing of kflame's was on, is still named in
// the second: its start() has V8 report the code that exists again. Run
// where perf_event_open is refused (test/c/noperf), so that a start() can
// fail after arming (mode 'perf'); the profiles use the timer sampler.
const PROFILE_ONLY = `
const kflame = require('.')
const binding = require('./lib/binding')
const out = { before: binding.jitArmed() }
function early (n) { let x = 0; for (let i = 0; i < n; i++) x += i % 7; return x }
kflame.start({ hz: 999 })
out.during = binding.jitArmed()
let end = Date.now() + 300
while (Date.now() < end) early(1e5)
const first = kflame.stop()
out.after = binding.jitArmed()
const late = eval('(function lateCompiled (n) { let x = 0; for (let i = 0; i < n; i++) x += i % 5; return x })')
for (let i = 0; i < 200; i++) late(1e5)
kflame.start({ hz: 999 })
end = Date.now() + 300
while (Date.now() < end) late(1e5)
const second = kflame.stop()
out.again = binding.jitArmed()
try { kflame.start({ hz: 999, mode: 'perf' }) } catch (err) { out.refused = err.code }
out.afterRefused = binding.jitArmed()
const perfMap = require('node:path').join(require('node:os').tmpdir(), 'kflame-profile-only-' + process.pid + '.map')
out.perfMapLines = kflame.writePerfMap(perfMap).lines
require('node:fs').unlinkSync(perfMap)
out.afterPerfMap = binding.jitArmed()
console.log(JSON.stringify({ ...out, first: first.folded, second: second.folded, secondArmMs: second.stats.details.startMs.jit }))
`

t.test('KFLAME_JIT=profile: the hook only while a profile runs, and code compiled between profiles named', async (t) => {
  const noperf = path.join(__dirname, 'c', 'build', 'noperf')
  if (!fs.existsSync(noperf)) throw new Error(`${noperf} is missing: run make -C test/c shim`)
  const r = spawnSync(noperf, ['EPERM', process.execPath, '-e', PROFILE_ONLY], {
    cwd: path.join(__dirname, '..'), env: { ...process.env, KFLAME_JIT: 'profile' }, encoding: 'utf8', maxBuffer: 64 << 20
  })
  t.equal(r.status, 0, r.stderr)
  const out = JSON.parse(r.stdout)
  t.same({ before: out.before, during: out.during, after: out.after, again: out.again },
    { before: false, during: true, after: false, again: false }, 'armed by each start(), disarmed by each stop()')
  t.equal(out.refused, 'KFLAME_ERR_PERF_DENIED')
  t.equal(out.afterRefused, false, 'a start() refused after arming leaves it off')
  t.ok(out.perfMapLines > 0, `writePerfMap() arms for the map (${out.perfMapLines} lines)`)
  t.equal(out.afterPerfMap, false, 'and leaves it off')
  t.ok(out.secondArmMs > 0, `the second start() had V8 report the code that exists again (${out.secondArmMs} ms)`)
  const first = parseFolded(out.first)
  const second = parseFolded(out.second)
  t.ok(total(first, (s) => s.frames.some((f) => f.startsWith('early '))) > total(first) * 0.5, 'early named in the first profile')
  t.ok(total(second, (s) => s.frames.some((f) => f.startsWith('lateCompiled '))) > total(second) * 0.5,
    'lateCompiled, compiled while nothing was armed, named in the second')
})

t.test('lazy arming: KFLAME_JIT=lazy arms at the first start()', async (t) => {
  const r = runFixture('js-split.js', [], [], { KFLAME_JIT: 'lazy' })
  checkSplit(t, r)
})

t.test('jit: false leaves JS frames unnamed', async (t) => {
  kflame.start({ hz: 999, jit: false })
  spin(100, () => JSON.stringify({ a: [1, 2, 3] }))
  const p = kflame.stop()
  t.equal(p.stats.details.jitFrames, 0)
  t.ok(parseFolded(p.folded).some(has(/^\[jit\]_\[j\]$/)))
})

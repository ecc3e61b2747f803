'use strict'

// Source maps: JS frames of code compiled by tsc, bundled by esbuild, or
// with an inline map are named after the TypeScript source (file, line,
// function) at stop(); frames of a file without a map keep their names;
// a broken map is counted and leaves its frames alone.

const t = require('tap')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync, execFileSync } = require('node:child_process')
const { applySourceMaps, parseJsFrame, SourceMapper } = require('../lib/sourcemaps')
const { parseFolded, total } = require('./helpers')

const FIX = path.join(__dirname, 'fixtures', 'sourcemaps')
const TS = path.join(FIX, 'work.ts')
const BIN = path.join(__dirname, '..', 'node_modules', '.bin')

// Built once per run into a private directory: tsc (CommonJS, separate
// .map), esbuild (minified bundle, separate .map), esbuild (inline map).
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-sm-'))
t.teardown(() => fs.rmSync(out, { recursive: true, force: true }))
execFileSync(path.join(BIN, 'tsc'), ['--sourceMap', '--target', 'es2020', '--module', 'commonjs',
  '--outDir', path.join(out, 'tsc'), TS])
execFileSync(path.join(BIN, 'esbuild'), [TS, '--bundle', '--minify', '--sourcemap', '--platform=node',
  `--outfile=${path.join(out, 'esbuild', 'bundle.js')}`], { stdio: 'pipe' })
execFileSync(path.join(BIN, 'esbuild'), [TS, '--bundle', '--sourcemap=inline', '--platform=node',
  `--outfile=${path.join(out, 'inline', 'bundle.js')}`], { stdio: 'pipe' })

function profile (mod, option = 'true', env = {}, flags = []) {
  const r = spawnSync(process.execPath, [...flags, path.join(FIX, 'run.js'), mod, option], {
    encoding: 'utf8', env: { ...process.env, ...env }, maxBuffer: 64 << 20
  })
  if (r.status !== 0) throw new Error(`run.js failed (${r.status}): ${r.stderr}`)
  return JSON.parse(r.stdout)
}

// JS frames of the stacks, as { name, file, line }.
function jsFrames (folded) {
  const frames = new Map()
  for (const s of parseFolded(folded)) {
    for (const f of s.frames) {
      const p = parseJsFrame(f)
      if (p) frames.set(f, p)
    }
  }
  return [...frames.values()]
}

// tsc keeps names; esbuild's minified bundle renames them, its map
// names them back.
for (const [label, mod] of [
  ['tsc', path.join(out, 'tsc', 'work.js')],
  ['esbuild minified', path.join(out, 'esbuild', 'bundle.js')],
  ['esbuild inline map', path.join(out, 'inline', 'bundle.js')]
]) {
  t.test(`${label}: frames name the .ts file, line and function`, async (t) => {
    const { folded, stats } = profile(mod)
    const frames = jsFrames(folded)
    const ts = frames.filter((f) => f.file === TS)
    const spin = ts.find((f) => f.name.replace(/^[~^+*]/, '') === 'spinTyped')
    t.ok(spin, `spinTyped named in work.ts: ${frames.map((f) => `${f.name} ${f.file}:${f.line}`).join(', ')}`)
    if (spin) t.equal(spin.line, 5, 'at its line in work.ts')
    const method = ts.find((f) => f.name.replace(/^[~^+*]/, '') === 'spinInMethod')
    t.ok(method, 'spinInMethod named in work.ts')
    if (method) t.equal(method.line, 18)
    // Frames left in the compiled file are only code its map does not
    // cover (esbuild's runtime helpers, such as its exports' getters, when a
    // sample lands there), each counted as unmapped.
    const left = frames.filter((f) => f.file === mod)
    t.ok(left.length <= stats.details.sourceMaps.unmapped,
      `frames left in the compiled file are counted as unmapped: ${left.map((f) => `${f.name}:${f.line}`).join(', ') || 'none'}`)
    t.notOk(left.some((f) => /spin/.test(f.name)), 'no spinning function left in the compiled file')
    // The plain file has no map: its frame keeps its JS name.
    t.ok(frames.some((f) => f.name.replace(/^[~^+*]/, '') === 'spinPlain' && f.file === path.join(FIX, 'plain.js')),
      'a frame without a map keeps its JS name')
    const sm = stats.details.sourceMaps
    t.ok(sm.mapped >= 2, `frames mapped: ${JSON.stringify(sm)}`)
    t.ok(sm.missing >= 1, 'files without a map are counted')
    t.equal(sm.broken, 0)
    // The time under the .ts functions is the time they spun: no sample lost.
    const stacks = parseFolded(folded)
    t.equal(total(stacks), stats.samples, 'mapping keeps every sample')
  })
}

t.test('off unless asked, or node runs with --enable-source-maps, or KFLAME_SOURCE_MAPS=1', async (t) => {
  const mod = path.join(out, 'tsc', 'work.js')
  const off = profile(mod, 'default', { KFLAME_SOURCE_MAPS: '', NODE_OPTIONS: '' })
  t.equal(off.stats.details.sourceMaps, null)
  t.ok(jsFrames(off.folded).some((f) => f.file === mod), 'frames stay in the compiled file')
  const flag = profile(mod, 'default', { KFLAME_SOURCE_MAPS: '' }, ['--enable-source-maps'])
  t.ok(jsFrames(flag.folded).some((f) => f.file === TS), '--enable-source-maps turns it on (findSourceMap)')
  const env = profile(mod, 'default', { KFLAME_SOURCE_MAPS: '1' })
  t.ok(jsFrames(env.folded).some((f) => f.file === TS), 'KFLAME_SOURCE_MAPS=1 turns it on')
})

t.test('a broken map leaves its frames and is counted', async (t) => {
  const dir = path.join(out, 'broken')
  fs.mkdirSync(dir)
  const file = path.join(dir, 'a.js')
  fs.writeFileSync(file, 'function f () {}\n//# sourceMappingURL=a.js.map\n')
  fs.writeFileSync(`${file}.map`, '{"version":3,"mappings":')
  const frame = `f ${file}:1:11_[j]`
  const r = applySourceMaps(`main;${frame} 3\n`, null)
  t.equal(r.folded, `main;${frame} 3\n`)
  t.equal(r.stats.broken, 1)
  t.equal(r.stats.unmapped, 1)
})

t.test('frames are parsed by position, not by a backtracking pattern', async (t) => {
  t.same(parseJsFrame('get x /a/b.js:3:7_[j]'), { name: 'get x', file: '/a/b.js', line: 3, col: 7, suffix: '_[j]' })
  t.same(parseJsFrame('~sq /a/b.js:1:2_[i]').name, '~sq')
  t.equal(parseJsFrame('node::Start(int, char**)'), null)
  t.equal(parseJsFrame('(anonymous) node:internal/main:1:1_[j]'), null, 'node internals have no map')
  t.equal(parseJsFrame('Builtin:JSEntry_[j]'), null)
  const long = 'x '.repeat(200000) + '/a.js:1:1_[j]'
  const t0 = process.hrtime.bigint()
  parseJsFrame(long)
  t.ok(Number(process.hrtime.bigint() - t0) / 1e6 < 200, 'a long hostile name parses in linear time')
})

t.test('lines that map alike merge; samples follow their lines', async (t) => {
  const mapper = new SourceMapper()
  const folded = 'main;a /nomap/x.js:1:1_[j] 2\nmain;b /nomap/x.js:2:1_[j] 5\n'
  const samples = { line: new Uint32Array([1, 0, 1]), time: new Float64Array(3), tid: new Uint32Array(3) }
  const r = applySourceMaps(folded, samples, mapper)
  t.equal(r.folded, folded, 'no map: unchanged')
  t.same([...r.samples.line], [1, 0, 1])
  t.equal(r.stats.missing, 1, 'the file is looked at once')
})

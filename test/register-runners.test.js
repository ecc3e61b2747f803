'use strict'

// kflame/register by its package name (-r and --import), every output
// format, and under test runners: node --test (one profile per test file,
// merged by the CLI) and mocha.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const zlib = require('node:zlib')
const { Profile: PprofProfile } = require('pprof-format')
const { parseFolded, total } = require('./helpers')
const { REPO, REGISTER, APP, tmpdir, run, runApp, cli, read } = require('./fixtures/spawn-helpers')

const BURN = 'kflameFixtureBurn'
const FAST = { KFLAME_HZ: '499' }

// A project directory whose node_modules/kflame is this repository, so
// `kflame/register` resolves as it does for a user.
function project (t) {
  const dir = tmpdir(t)
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.symlinkSync(REPO, path.join(dir, 'node_modules', 'kflame'), 'dir')
  return dir
}

t.test('every format parses and holds the app\'s function', async (t) => {
  const dir = tmpdir(t)
  const checks = {
    'out.folded': (text) => {
      const stacks = parseFolded(text)
      t.ok(stacks.length > 0 && stacks.every((s) => s.count > 0 && s.frames.length > 0), 'folded lines')
      t.ok(stacks.some((s) => s.frames.some((f) => f.startsWith(BURN))))
    },
    'out.cpuprofile': (text) => {
      const p = JSON.parse(text)
      t.ok(Array.isArray(p.nodes) && Array.isArray(p.samples) && Array.isArray(p.timeDeltas))
      t.ok(p.nodes.some((n) => n.callFrame.functionName === BURN), 'a node of the function')
    },
    'out.json': (text) => {
      const trace = JSON.parse(text)
      t.ok(Array.isArray(trace.traceEvents))
      t.ok(trace.traceEvents.some((e) => typeof e.name === 'string' && e.name.includes(BURN)), 'an event of the function')
    },
    'out.pb.gz': (buf) => {
      const p = PprofProfile.decode(zlib.gunzipSync(buf))
      t.ok(p.sample.length > 0, 'samples')
      t.ok(p.stringTable.strings.some((s) => s.includes(BURN)), 'the function in the string table')
    }
  }
  for (const [name, check] of Object.entries(checks)) {
    const r = runApp(['--burn', '250'], { cwd: dir, env: { ...FAST, KFLAME_OUT: name } })
    t.equal(r.status, 0, r.stderr)
    check(name.endsWith('.gz') ? fs.readFileSync(path.join(dir, name)) : read(path.join(dir, name)))
  }
  const r = runApp(['--burn', '100'], { cwd: dir, env: { KFLAME_OUT: 'dir/', KFLAME_FORMAT: 'pprof' } })
  t.equal(r.status, 0, r.stderr)
  t.same(fs.readdirSync(path.join(dir, 'dir')), [`kflame-${r.pid}.pb.gz`], 'KFLAME_FORMAT in a directory')
})

t.test('by package name: node -r kflame/register and node --import kflame/register', async (t) => {
  const dir = project(t)
  for (const flag of ['-r', '--import']) {
    const r = run([flag, 'kflame/register', APP, '--burn', '300'], { cwd: dir, env: { ...FAST, KFLAME_OUT: 'out-%p.folded' } })
    t.equal(r.status, 0, `${flag}: ${r.stderr}`)
    t.match(read(path.join(dir, `out-${r.pid}.folded`)), BURN, `${flag} profiles the app`)
  }
  // Loaded twice (by name and by path, two module instances): one profile.
  const r = run(['-r', 'kflame/register', '--import', REGISTER, APP, '--burn', '100'], {
    cwd: dir, env: { KFLAME_OUT: 'twice.folded' }
  })
  t.equal(r.status, 0, r.stderr)
  t.equal(r.stderr.match(/written to/g).length, 1, 'written once')
})

t.test('node --test --require register.js: one profile per test file, merged by kflame merge', async (t) => {
  const dir = tmpdir(t)
  const out = path.join(dir, 'profiles') + '/'
  const tests = path.join(__dirname, 'fixtures', 'register-tests')
  const r = run(['--test', '--require', REGISTER, path.join(tests, 'alpha.test.js'), path.join(tests, 'beta.test.js')], {
    cwd: dir, env: { ...FAST, KFLAME_OUT: out }
  })
  t.equal(r.status, 0, r.stdout + r.stderr)
  const files = fs.readdirSync(out)
  t.equal(files.length, 2, `one per test file, none for the runner: ${files}`)
  const texts = files.map((f) => read(path.join(out, f))).join('')
  t.match(texts, 'kflameAlphaBurn')
  t.match(texts, 'kflameBetaBurn')

  const svg = path.join(dir, 'tests.svg')
  const m = cli(['merge', out, '-o', svg])
  t.equal(m.status, 0, m.stderr)
  t.match(m.stderr, /^kflame: \d+ samples from 2 files written to .*tests\.svg\n$/)
  const text = read(svg)
  t.match(text, 'kflameAlphaBurn', 'the merged flame graph has both files\' functions')
  t.match(text, 'kflameBetaBurn')

  // Each test's name is a frame between the thread's root and its stacks;
  // a subtest's under its parent's; a describe()d test carries its suite.
  const folded = path.join(dir, 'tests.folded')
  t.equal(cli(['merge', out, '-o', folded]).status, 0)
  const stacks = parseFolded(read(folded))
  const under = (labels, fn) => total(stacks, (s) => s.frames[0] === 'main' &&
    labels.every((l, i) => s.frames[i + 1] === l) && s.frames.some((f) => f.startsWith(fn)))
  t.ok(under(['alpha burns'], 'kflameAlphaBurn') > 20, 'the test\'s own samples under its name')
  t.ok(under(['alpha burns', 'alpha subtest'], 'kflameAlphaBurn') > 20, 'the subtest under its parent')
  t.ok(under(['beta suite > burns'], 'kflameBetaBurn') > 40, 'a suite\'s test with its suite path')
  t.equal(total(stacks, (s) => s.frames.some((f) => f.startsWith('kflameAlphaBurn')) &&
    s.frames[1] !== 'alpha burns'), 0, 'no burn sample outside its test')
})

t.test('tap --node-arg=--require=register.js: samples under the tap test names', async (t) => {
  const dir = project(t)
  fs.symlinkSync(path.join(REPO, 'node_modules', 'tap'), path.join(dir, 'node_modules', 'tap'), 'dir')
  fs.symlinkSync(path.join(REPO, 'node_modules', '@tapjs'), path.join(dir, 'node_modules', '@tapjs'), 'dir')
  fs.writeFileSync(path.join(dir, 'package.json'), '{"name":"kflame-tap-fixture","private":true}\n')
  fs.copyFileSync(path.join(__dirname, 'fixtures', 'register-tap.js'), path.join(dir, 'delta.test.js'))
  const tapBin = path.join(REPO, 'node_modules', 'tap', require('tap/package.json').bin.tap)
  const r = run([tapBin, '--disable-coverage', `--node-arg=--require=${REGISTER}`, 'delta.test.js'], {
    cwd: dir, env: { ...FAST, KFLAME_OUT: path.join(dir, 'profiles') + '/' }
  })
  t.equal(r.status, 0, r.stdout + r.stderr)
  const files = fs.readdirSync(path.join(dir, 'profiles'))
  t.equal(files.length, 1, `the test file's process: ${files}`)
  const stacks = parseFolded(read(path.join(dir, 'profiles', files[0])))
  const under = (labels) => total(stacks, (s) => labels.every((l, i) => s.frames[i + 1] === l) &&
    s.frames.some((f) => f.startsWith('kflameDeltaBurn')))
  const seconds = [...new Set(stacks.filter((s) => s.frames.some((f) => f.startsWith('kflameDeltaBurn'))).map((s) => s.frames[1]))]
  t.ok(under(['delta top']) > 20, `the top test (frames under the roots of burn samples: ${seconds.join(' | ')})`)
  t.ok(under(['delta top', 'delta sub']) > 20, 'the subtest under it')
})

t.test('mocha --require register.js', async (t) => {
  const dir = tmpdir(t)
  const mocha = require.resolve('mocha/bin/mocha.js')
  const r = run([mocha, '--require', REGISTER, path.join(__dirname, 'fixtures', 'register-mocha', 'gamma.spec.js')], {
    cwd: dir, env: { ...FAST, KFLAME_OUT: 'mocha.svg' }
  })
  t.equal(r.status, 0, r.stdout + r.stderr)
  t.match(r.stdout, /1 passing/)
  t.match(r.stderr, /kflame: \d+ samples .* written to mocha\.svg/)
  t.match(read(path.join(dir, 'mocha.svg')), 'kflameMochaBurn')
  t.match(read(path.join(dir, 'mocha.svg')), 'gamma &gt; burns', 'the test\'s title path is a frame')
})

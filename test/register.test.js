'use strict'

// kflame/register: the whole run of a process profiled and written when it
// ends, however it ends. Real profiles of child node processes; signals in
// test/register-signals.test.js, formats and test runners in
// test/register-runners.test.js.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { resolveOutput, readConfig, isTestOrchestrator, withPidPattern, summary } = require('../lib/register')
const { parseFolded, SHIM } = require('./helpers')
const { REGISTER, tmpdir, run, runApp, read } = require('./fixtures/spawn-helpers')

const BURN = 'kflameFixtureBurn'
const FAST = { KFLAME_HZ: '499' } // enough samples from a short burn

t.test('resolveOutput: files, directories, %p and what children inherit', async (t) => {
  const dir = tmpdir(t)
  const at = { pid: 42, cwd: dir }
  t.same(resolveOutput({}, at), {
    file: path.join(dir, 'kflame-42.svg'), format: 'svg', childOut: path.join(dir, 'kflame-%p.svg')
  }, 'unset: kflame-<pid>.svg here, children beside it')
  t.same(resolveOutput({ KFLAME_FORMAT: 'cpuprofile' }, at).file, path.join(dir, 'kflame-42.cpuprofile'))
  t.same(resolveOutput({ KFLAME_OUT: 'out.svg' }, at), {
    file: path.join(dir, 'out.svg'), format: 'svg', childOut: path.join(dir, 'out.%p.svg')
  }, 'a file: children get <name>.%p<ext>')
  t.same(resolveOutput({ KFLAME_OUT: '/x/y.pb.gz' }, at), { file: '/x/y.pb.gz', format: 'pprof', childOut: '/x/y.%p.pb.gz' })
  t.same(resolveOutput({ KFLAME_OUT: 'p-%p.json' }, at), {
    file: path.join(dir, 'p-42.json'), format: 'trace', childOut: path.join(dir, 'p-%p.json')
  }, '%p: the pid, kept for children')
  t.equal(resolveOutput({ KFLAME_OUT: 'a.TXT' }, at).format, 'folded')
  t.equal(resolveOutput({ KFLAME_OUT: 'a.cpuprofile', KFLAME_FORMAT: 'svg' }, at).format, 'cpuprofile',
    'the extension of a file wins over KFLAME_FORMAT')
  t.same(resolveOutput({ KFLAME_OUT: 'profiles/' }, at), {
    file: path.join(dir, 'profiles', 'kflame-42.folded'), format: 'folded', childOut: path.join(dir, 'profiles') + '/'
  }, 'a trailing /: a directory, folded by default')
  fs.mkdirSync(path.join(dir, 'exists'))
  t.same(resolveOutput({ KFLAME_OUT: 'exists', KFLAME_FORMAT: 'pprof' }, at), {
    file: path.join(dir, 'exists', 'kflame-42.pb.gz'), format: 'pprof', childOut: path.join(dir, 'exists') + '/'
  }, 'an existing directory, KFLAME_FORMAT picks the format')
  t.same(resolveOutput({ KFLAME_OUT: '', KFLAME_FORMAT: '' }, at).file, path.join(dir, 'kflame-42.svg'), 'empty is unset')
  t.equal(withPidPattern('/a/b.c/out.svg'), '/a/b.c/out.%p.svg')
  t.same(resolveOutput({ KFLAME_FORMAT: 'trace' }, at).file, path.join(dir, 'kflame-42.trace.json'),
    'trace events: .trace.json, as the HTTP endpoints name them (one table, lib/output.js)')
  t.same(resolveOutput({ KFLAME_OUT: 'run.trace.json' }, at), {
    file: path.join(dir, 'run.trace.json'), format: 'trace', childOut: path.join(dir, 'run.%p.trace.json')
  })

  t.throws(() => resolveOutput({ KFLAME_OUT: 'out.png' }, at), { code: 'KFLAME_ERR_CONFIG', message: /KFLAME_OUT.*\.svg.*\// })
  t.throws(() => resolveOutput({ KFLAME_OUT: 'noext' }, at), { code: 'KFLAME_ERR_CONFIG' })
  t.throws(() => resolveOutput({ KFLAME_FORMAT: 'png' }, at), { code: 'KFLAME_ERR_CONFIG', message: /KFLAME_FORMAT.*svg\|html\|folded/ })
  t.throws(() => readConfig({ KFLAME_HZ: '12abc' }, at), { code: 'KFLAME_ERR_CONFIG', message: /KFLAME_HZ/ })
  t.throws(() => readConfig({ KFLAME_HZ: '0' }, at), { code: 'KFLAME_ERR_CONFIG', message: /KFLAME_HZ=0 .*from 1 to/ })
  t.equal(readConfig({}, at).hz, 99)
  t.equal(readConfig({ KFLAME_HZ: ' 250 ', KFLAME_QUIET: '1' }, at).hz, 250)
  t.equal(readConfig({ KFLAME_QUIET: '1' }, at).quiet, true)
})

t.test('node --test\'s orchestrator is not profiled, its children are', async (t) => {
  t.equal(isTestOrchestrator(['--test', '--require', 'x'], {}), true)
  t.equal(isTestOrchestrator(['--require', 'x'], { NODE_TEST_CONTEXT: 'child-v8' }), false)
  t.equal(isTestOrchestrator(['--test'], {}), true)
  t.equal(isTestOrchestrator(['--test', '--test-isolation=none'], {}), false, 'tests run in it')
  t.equal(isTestOrchestrator(['--require', 'x'], {}), false)
})

t.test('summary line', async (t) => {
  t.equal(summary({ samples: 10, threads: 1, lost: 0 }, 'a.svg'), '10 samples (1 thread) written to a.svg')
  t.equal(summary({ samples: 10, threads: 3, lost: 2 }, 'a.svg'), '10 samples (3 threads, 2 lost) written to a.svg')
})

t.test('default: kflame-<pid>.svg in the cwd, the exit code passes through', async (t) => {
  const dir = tmpdir(t)
  const r = runApp(['--burn', '400', '--exit', '3'], { cwd: dir, env: FAST })
  t.equal(r.status, 3, r.stderr)
  const file = path.join(dir, `kflame-${r.pid}.svg`)
  t.ok(fs.existsSync(file), 'written')
  t.match(read(file), BURN, 'the app\'s function is in the flame graph')
  t.match(read(file), /<title>node [^<]*register-app\.js --burn 400 --exit 3<\/title>|>node [^<]*register-app\.js/,
    'titled with the command')
  t.match(r.stderr, new RegExp(`^kflame: \\d+ samples \\(\\d+ threads?\\) written to kflame-${r.pid}\\.svg\\n$`),
    'one line on stderr')
})

t.test('process.exit(5) mid-run still writes', async (t) => {
  const dir = tmpdir(t)
  const r = runApp(['--burn', '300', '--process-exit', '5'], { cwd: dir, env: { ...FAST, KFLAME_OUT: 'out.folded' } })
  t.equal(r.status, 5, r.stderr)
  const stacks = parseFolded(read(path.join(dir, 'out.folded')))
  t.ok(stacks.some((s) => s.frames.some((f) => f.startsWith(BURN))), 'the app\'s function is in the profile')
  t.ok(stacks.every((s) => s.count > 0))
})

t.test('an uncaught exception writes, and the exit code stays 1', async (t) => {
  const dir = tmpdir(t)
  const r = runApp(['--burn', '300', '--throw'], { cwd: dir, env: { ...FAST, KFLAME_OUT: 'out.folded' } })
  t.equal(r.status, 1)
  t.match(r.stderr, /kflame fixture: uncaught/, 'node reported the error')
  t.match(r.stderr, /kflame: \d+ samples .* written to out\.folded/)
  t.match(read(path.join(dir, 'out.folded')), BURN)
})

t.test('KFLAME_OUT=dir/: one file per process, named by pid; children inherit it', async (t) => {
  const dir = tmpdir(t)
  const out = path.join(dir, 'profiles') + '/'
  // Through NODE_OPTIONS, as a child node inherits it.
  const r = run([path.join(__dirname, 'fixtures', 'register-app.js'), '--burn', '300', '--child'], {
    cwd: dir, env: { ...FAST, KFLAME_OUT: out, NODE_OPTIONS: `--require=${REGISTER}` }
  })
  t.equal(r.status, 0, r.stderr)
  t.equal(r.stdout.trim(), out, 'the child sees the directory')
  const files = fs.readdirSync(out).sort()
  t.equal(files.length, 2, `two profiles: ${files}`)
  for (const f of files) t.match(f, /^kflame-\d+\.folded$/)
  t.ok(files.includes(`kflame-${r.pid}.folded`), 'the parent\'s has its pid')
  const child = files.find((f) => f !== `kflame-${r.pid}.folded`)
  t.match(read(path.join(out, child)), 'kflameChildBurn', 'the child\'s has the child\'s function')
  t.match(read(path.join(out, `kflame-${r.pid}.folded`)), BURN)
})

t.test('KFLAME_OUT=file: a child writes <name>.<pid><ext>, not over its parent', async (t) => {
  const dir = tmpdir(t)
  const r = run([path.join(__dirname, 'fixtures', 'register-app.js'), '--burn', '300', '--child'], {
    cwd: dir, env: { ...FAST, KFLAME_OUT: 'out.svg', NODE_OPTIONS: `--require=${REGISTER}` }
  })
  t.equal(r.status, 0, r.stderr)
  t.equal(r.stdout.trim(), path.join(dir, 'out.%p.svg'), 'absolute, with %p, for descendants')
  const files = fs.readdirSync(dir).sort()
  t.equal(files.length, 2, `${files}`)
  t.ok(files.includes('out.svg'))
  const child = files.find((f) => f !== 'out.svg')
  t.match(child, /^out\.\d+\.svg$/)
  t.match(read(path.join(dir, child)), 'kflameChildBurn')
  t.match(read(path.join(dir, 'out.svg')), BURN)
})

t.test('%p, KFLAME_QUIET, and a directory that does not exist yet', async (t) => {
  const dir = tmpdir(t)
  const r = runApp(['--burn', '200'], { cwd: dir, env: { KFLAME_OUT: 'new/dir/p-%p.folded', KFLAME_QUIET: '1' } })
  t.equal(r.status, 0, r.stderr)
  t.equal(r.stderr, '', 'quiet')
  t.ok(fs.existsSync(path.join(dir, 'new', 'dir', `p-${r.pid}.folded`)))
  t.same(fs.readdirSync(path.join(dir, 'new', 'dir')), [`p-${r.pid}.folded`], 'no temporary file left')
})

t.test('a misconfigured environment: one line naming the variable, exit 2, the app does not run', async (t) => {
  const dir = tmpdir(t)
  const cases = [
    [{ KFLAME_HZ: 'fast' }, /^kflame: KFLAME_HZ="fast" is not a whole number: .*KFLAME_HZ=99/],
    [{ KFLAME_HZ: '99999999' }, /^kflame: KFLAME_HZ=99999999 is out of range: .*from 1 to \d+/],
    [{ KFLAME_OUT: 'profile.png' }, /^kflame: KFLAME_OUT="profile.png" .*end it with \.svg/],
    [{ KFLAME_FORMAT: 'flame' }, /^kflame: KFLAME_FORMAT="flame" .*svg\|html\|folded\|cpuprofile\|trace\|pprof/]
  ]
  for (const [env, message] of cases) {
    const r = run(['-r', REGISTER, '-e', 'console.log("app ran")'], { cwd: dir, env })
    t.equal(r.status, 2, JSON.stringify(env))
    t.match(r.stderr, message)
    t.equal(r.stderr.trim().split('\n').length, 1, 'one line')
    t.equal(r.stdout, '', 'the app did not run')
  }
  t.same(fs.readdirSync(dir), [], 'nothing written')
})

t.test('perf refused: the timer sampler profiles the app, and says so in one line', { skip: !fs.existsSync(SHIM) && 'no test/c/build/faultshim.so (make -C test/c shim)' }, async (t) => {
  const dir = tmpdir(t)
  const r = run(['-r', REGISTER, '-e', 'console.log("app ran"); process.exitCode = 4'], {
    cwd: dir, env: { LD_PRELOAD: SHIM, KFLAME_FAULT_PERF: 'EACCES', KFLAME_OUT: 'out.folded', KFLAME_QUIET: '1' }
  })
  t.equal(r.status, 4, 'the app\'s exit code')
  t.equal(r.stdout, 'app ran\n')
  t.match(r.stderr, /^kflame: perf_event_open was refused \(KFLAME_ERR_PERF_PARANOID\), so kflame sampled with per-thread CPU-time timers.*perf_event_paranoid/)
  t.equal(r.stderr.trim().split('\n').length, 1, 'one line, also when quiet')
  t.same(fs.readdirSync(dir), ['out.folded'])
})

t.test('perf refused with KFLAME_MODE=perf: one warning, the app runs unprofiled', { skip: !fs.existsSync(SHIM) && 'no test/c/build/faultshim.so (make -C test/c shim)' }, async (t) => {
  const dir = tmpdir(t)
  const r = run(['-r', REGISTER, '-e', 'console.log("app ran"); process.exitCode = 4'], {
    cwd: dir, env: { LD_PRELOAD: SHIM, KFLAME_FAULT_PERF: 'EACCES', KFLAME_MODE: 'perf' }
  })
  t.equal(r.status, 4, 'the app\'s exit code')
  t.equal(r.stdout, 'app ran\n')
  t.match(r.stderr, /^kflame: not profiling this process \(pid \d+\): .*perf_event_paranoid/)
  t.equal(r.stderr.trim().split('\n').length, 1, 'one line')
  t.same(fs.readdirSync(dir), [], 'nothing written')
})

t.test('a worker thread\'s JS frames are named (register loads kflame in it)', async (t) => {
  const dir = tmpdir(t)
  const r = run(['-r', REGISTER, path.join(__dirname, 'fixtures', 'register-worker.js')], {
    cwd: dir, env: { ...FAST, KFLAME_OUT: 'out.folded' }
  })
  t.equal(r.status, 0, r.stderr)
  t.equal(r.stderr.match(/written to/g).length, 1, 'one profile for the process')
  t.same(fs.readdirSync(dir), ['out.folded'])
  t.match(read(path.join(dir, 'out.folded')), /kflameWorkerBurn \[worker eval\]/)
})

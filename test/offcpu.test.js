'use strict'

// Off-CPU profiles: a fixture that waits in known places (fs.readSync on an
// empty FIFO, Atomics.wait in a worker, a thread pool saturated by
// crypto.pbkdf2) must show each wait under its JS function with the share
// of wall time it was timed at, within 5 points, with the kernel function
// it slept in; idle waits marked (idle); both mode accounts for every
// thread's wall time; the timer sampler refuses off-CPU.

const t = require('tap')
const { runFixture, total, kernelAllowed, cpuWideAllowed, SHIM } = require('./helpers')
const kflame = require('..')
const fs = require('node:fs')

const HZ = 199
// Where the switch-in tracepoint's id is read (src/sample/switchin.c).
const tracefs = ['/sys/kernel/tracing', '/sys/kernel/debug/tracing']
  .some((d) => fs.existsSync(`${d}/events/sched/sched_switch/id`))
const POINTS = 5

function has (stack, re) {
  return stack.frames.some((f) => re.test(f))
}

// Share of one thread's wall time (durationMs at HZ) that `count` samples stand for.
function share (count, stats) {
  return 100 * count / (stats.durationMs / 1000 * HZ)
}

// The fixture's two long waits, each in one switch-out sample: a run
// where either is missing is run again (twice at most), and what its
// counters and its main thread's heaviest stacks said goes in the log.
// (Seen in CI, per-thread events only, in each mode, never here in 250
// runs under load, with a slow first start() or pinned to one CPU: a
// 500 ms wait that began right after start() had no samples, and nothing
// was counted lost; the log below is what would tell why.)
function runWaits (t, what, env) {
  const run = () => runFixture('offcpu.js', [], [what], { UV_THREADPOOL_SIZE: '2', ...env })
  const found = ({ stacks }) => [/^readPipe /, /^waitInWorker /].every((re) =>
    stacks.some((s) => s.frames[1] === '[off-cpu]' && has(s, re)))
  let r = run()
  for (let again = 0; again < 2 && !found(r); again++) {
    const d = r.stats.details
    const offByThread = {}
    for (const s of r.stacks) {
      if (s.frames[1] === '[off-cpu]') offByThread[s.frames[0]] = (offByThread[s.frames[0]] || 0) + s.count
    }
    const heaviest = r.stacks.filter((s) => s.frames[0] === 'main' || /^worker/.test(s.frames[0]))
      .sort((a, b) => b.count - a.count).slice(0, 8).map((s) => `${s.count} ${s.frames.join(';').slice(0, 300)}`)
    t.comment(`a long wait is missing: ${JSON.stringify({
      switchSamples: d.switchSamples, switchPaired: d.switchPaired, switchUnpaired: d.switchUnpaired,
      offCpuMs: d.offCpuMs, lost: r.stats.lost, corrupt: d.corrupt, duplicates: d.duplicates,
      foreign: d.foreign, startMs: d.startMs, truth: r.truth, durationMs: r.stats.durationMs, offByThread, heaviest
    })}; running it again`)
    r = run()
  }
  return r
}

if (!kernelAllowed()) {
  t.test('without kernel context off-CPU is refused with advice', async (t) => {
    t.throws(() => kflame.start({ what: 'offcpu', mode: 'perf' }), { code: 'KFLAME_ERR_OFFCPU_PARANOID' })
    t.notOk(kflame.isRunning())
  })
} else {
  // Switch events per CPU with the BPF filter where allowed (perfScope
  // 'auto'), else per thread; the profile must be the same.
  const scopes = cpuWideAllowed() ? ['auto', 'threads'] : ['threads']
  for (const [what, scope] of ['both', 'offcpu'].flatMap((w) => scopes.map((s) => [w, s]))) {
    t.test(`what: '${what}', perfScope '${scope}': waits under their JS functions at their timed share`, async (t) => {
      const { stacks, stats, truth } = runWaits(t, what, { KFLAME_PERF_SCOPE: scope })
      t.equal(stats.what, what)
      t.equal(stats.details.perfScope, scope === 'auto' ? 'cpus' : 'threads')
      t.equal(stats.details.foreign, 0, 'nothing of another process')
      t.equal(stats.details.switchIns, scope === 'auto' && tracefs ? 'tracepoint' : 'records', 'switch-ins stamped by the tracepoint where it can be')
      const off = stacks.filter((s) => s.frames[1] === '[off-cpu]')
      const pipe = off.filter((s) => has(s, /^readPipe .*offcpu\.js:/))
      const pipeShare = share(total(pipe), stats)
      const pipeTruth = 100 * truth.pipeMs / stats.durationMs
      t.ok(Math.abs(pipeShare - pipeTruth) <= POINTS,
        `readPipe off CPU ${pipeShare.toFixed(1)}% of wall time, timed ${pipeTruth.toFixed(1)}%`)
      t.ok(pipe.every((s) => s.frames[0] === 'main'), 'on the main thread')
      t.ok(pipe.some((s) => has(s, /pipe_read_\[k\]$/)), 'in the kernel\'s pipe_read')

      const atomics = off.filter((s) => has(s, /^waitInWorker /))
      const atomicsShare = share(total(atomics), stats)
      const atomicsTruth = 100 * truth.workerMs / stats.durationMs
      t.ok(Math.abs(atomicsShare - atomicsTruth) <= POINTS,
        `waitInWorker off CPU ${atomicsShare.toFixed(1)}% of its thread's wall time, timed ${atomicsTruth.toFixed(1)}%`)
      t.ok(atomics.some((s) => has(s, /^futex_wait_\[k\]$/)), 'in the kernel\'s futex_wait')
      t.ok(atomics.length > 0 && atomics.every((s) => s.frames[0] !== 'main'), 'on the worker\'s thread')

      // The pool: two threads kept busy by eight jobs for poolMs, running
      // or waiting for a CPU (preempted) under PBKDF2; waiting for work is idle.
      const pool = stacks.filter((s) => /^libuv-worker-/.test(s.frames[0]))
      const derive = pool.filter((s) => has(s, /^PKCS5_PBKDF2_HMAC$/) && (what === 'both' || s.frames[1] === '[off-cpu]'))
      if (what === 'both') {
        const deriveShare = share(total(derive), stats) / 2
        const deriveTruth = 100 * truth.poolMs / stats.durationMs
        t.ok(Math.abs(deriveShare - deriveTruth) <= POINTS,
          `pool threads in PBKDF2 ${deriveShare.toFixed(1)}% of their wall time, the jobs took ${deriveTruth.toFixed(1)}%`)
      }
      const poolIdle = pool.filter((s) => s.frames[1] === '(idle)')
      t.ok(poolIdle.length > 0 && poolIdle.every((s) => has(s, /^uv_cond_wait$/)), 'waiting for work is (idle)')
      t.ok(stacks.some((s) => s.frames[0] === 'main' && s.frames[1] === '(idle)' && has(s, /^uv__io_poll$/)),
        'the event loop waiting for the pool is (idle)')
      if (what === 'offcpu') {
        t.ok(stacks.every((s) => s.frames[1] === '[off-cpu]' || s.frames[1] === '(idle)'), 'no CPU samples')
      } else {
        // Every moment of the main thread is a sample: running, waiting or idle
        // (it ran from start() on, so no wait began before the profile).
        const mainShare = share(total(stacks.filter((s) => s.frames[0] === 'main')), stats)
        t.ok(Math.abs(mainShare - 100) <= POINTS, `the main thread's samples cover ${mainShare.toFixed(1)}% of the wall time`)
      }
      const d = stats.details
      t.ok(d.switchSamples > 0 && d.switchPaired > 0, `switches: ${d.switchSamples} sampled, ${d.switchPaired} paired`)
      t.equal(d.maxSwitchRate, 0)
      t.ok(Math.abs(d.offCpuSamples - total(off) - total(stacks.filter((s) => s.frames[1] === '(idle)'))) <= 0,
        'offCpuSamples counts the [off-cpu] and (idle) samples')
    })
  }
}

// A bound samples one switch in many and weighs it as many: a worker napping
// 50 µs thousands of times a second is off CPU for most of its wall time
// (its schedstat says how much), and its few sampled naps must add up to
// about that. Each sampled nap also carries the kernel's own time taking
// the sample (~25 µs here, before the thread is switched out), so naps this
// short come out long: 1.1-1.2x with the tracepoint's bound, 1.1-1.6x with
// perf's frequency mode per thread.
for (const scope of cpuWideAllowed() ? ['auto', 'threads'] : ['threads']) {
  t.test(`maxSwitchRate 100, perfScope '${scope}': few switches sampled, weighed as all of them`, { skip: !kernelAllowed() && 'off-CPU needs kernel context' }, async (t) => {
    const { stacks, stats, truth } = runFixture('offcpu-often.js', [], ['100'], { KFLAME_PERF_SCOPE: scope })
    const d = stats.details
    t.equal(d.maxSwitchRate, 100)
    t.equal(d.switchIns, scope === 'auto' && tracefs ? 'tracepoint' : 'records')
    t.ok(d.switchSamples * 10 < truth.naps, `${d.switchSamples} switches sampled of the worker's ${truth.naps} naps and the rest`)
    const napShare = share(total(stacks.filter((s) => s.frames[1] === '[off-cpu]' && has(s, /^napOften /))), stats)
    const offShare = 100 * truth.offCpuMs / stats.durationMs
    const [lo, hi] = scope === 'auto' && tracefs ? [0.8, 1.4] : [0.5, 2]
    t.ok(napShare >= offShare * lo && napShare <= offShare * hi,
      `napOften off CPU ${napShare.toFixed(1)}% of wall time, its thread was off CPU ${offShare.toFixed(1)}%`)
  })
}

t.test('off-CPU with the BPF filter refused: per-thread events instead, the reason kept', { skip: !cpuWideAllowed() && 'needs CAP_SYS_ADMIN or CAP_BPF+CAP_PERFMON' }, async (t) => {
  const { stacks, stats } = runWaits(t, 'offcpu', { LD_PRELOAD: SHIM, KFLAME_FAULT_BPF: 'EPERM' })
  t.equal(stats.details.perfScope, 'threads')
  t.match(stats.details.perfScopeError, /not permitted/i)
  t.ok(stacks.some((s) => s.frames[1] === '[off-cpu]' && has(s, /^readPipe /)), 'the waits are still there')
})

t.test('off-CPU per CPU with the tracepoint refused: switch records instead, the reason kept', { skip: !(cpuWideAllowed() && tracefs) && 'needs CPU-wide events and tracefs' }, async (t) => {
  const { stacks, stats } = runWaits(t, 'offcpu', { LD_PRELOAD: SHIM, KFLAME_FAULT_PERF_TRACEPOINT: 'EACCES' })
  t.equal(stats.details.perfScope, 'cpus')
  t.equal(stats.details.switchIns, 'records')
  t.match(stats.details.switchInsError, /permission denied/i)
  t.ok(stacks.some((s) => s.frames[1] === '[off-cpu]' && has(s, /^readPipe /)), 'the waits are still there')
  t.ok(stats.details.switchPaired > 0, 'paired by the records')
})

t.test('the timer sampler cannot take off-CPU profiles', async (t) => {
  t.throws(() => kflame.start({ what: 'offcpu', mode: 'timer' }), { code: 'KFLAME_ERR_OFFCPU_TIMER' })
  t.throws(() => kflame.start({ what: 'sideways' }), { code: 'KFLAME_ERR_OUT_OF_RANGE' })
  t.throws(() => kflame.start({ maxSwitchRate: -1 }), { code: 'KFLAME_ERR_OUT_OF_RANGE' })
  t.throws(() => kflame.start({ maxSwitchRate: 1.5 }), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.notOk(kflame.isRunning())
})

t.test('pprof says which time a sample is: cpu or off_cpu nanoseconds', async (t) => {
  const zlib = require('node:zlib')
  const { Profile: PprofProfile } = require('pprof-format')
  const folded = 'main;[off-cpu];wait /a.js:1:1_[j];futex_wait_[k] 3\nmain;(idle);uv__io_poll 4\nmain;run /a.js:2:2_[j] 2\n'
  const p = PprofProfile.decode(zlib.gunzipSync(kflame.fromFolded(folded, { hz: 100 }).pprof()))
  const str = (i) => p.stringTable.strings[Number(i)]
  t.same(p.sampleType.map((v) => `${str(v.type)}/${str(v.unit)}`), ['samples/count', 'cpu/nanoseconds', 'off_cpu/nanoseconds'])
  const byLeaf = new Map()
  const fnName = new Map(p.function.map((f) => [Number(f.id), str(f.systemName)]))
  for (const s of p.sample) byLeaf.set(fnName.get(Number(s.locationId[0])), s.value.map(Number))
  t.same(byLeaf.get('futex_wait_[k]'), [3, 0, 30000000])
  t.same(byLeaf.get('uv__io_poll'), [4, 0, 40000000])
  t.same(byLeaf.get('run /a.js:2:2_[j]'), [2, 20000000, 0])
  const cpuOnly = PprofProfile.decode(zlib.gunzipSync(kflame.fromFolded('main;run 2\n', { hz: 100 }).pprof()))
  t.equal(cpuOnly.sampleType.length, 2, 'CPU profiles keep two sample types')
})

// Every way in: the HTTP endpoints, kflame/register and the kflame command.
const path = require('node:path')
const os = require('node:os')
const { spawnSync } = require('node:child_process')
const { request, close } = require('./fixtures/http-client')
const SLEEPER = 'const c = new Int32Array(new SharedArrayBuffer(4)); function napInScript () { Atomics.wait(c, 0, 0, 300) } napInScript()'

t.test('/start?what=offcpu&maxSwitchRate=50, /start?what=both&sourceMaps=1, and bad values refused', { skip: !kernelAllowed() && 'off-CPU needs kernel context' }, async (t) => {
  const server = await kflame.listen({ port: 0 })
  t.teardown(() => close(server))
  const { port } = server.address()
  let r = await request(port, 'POST', '/start?what=sideways')
  t.equal(r.status, 400)
  t.equal(r.json().code, 'KFLAME_ERR_HTTP_BAD_PARAM')
  r = await request(port, 'POST', '/start?sourceMaps=maybe')
  t.equal(r.status, 400)
  for (const rate of ['-1', '1.5', '0x10', '99999999']) {
    r = await request(port, 'POST', `/start?what=offcpu&maxSwitchRate=${rate}`)
    t.equal(r.status, 400, `maxSwitchRate=${rate}`)
    t.match(r.json().error, /maxSwitchRate must be an integer from 0 \(every switch\) to/)
  }
  r = await request(port, 'POST', '/start?what=offcpu&mode=timer')
  t.equal(r.status, 400)
  t.equal(r.json().code, 'KFLAME_ERR_OFFCPU_TIMER')
  r = await request(port, 'POST', '/start?what=offcpu&maxSwitchRate=50')
  t.equal(r.status, 200)
  r = await request(port, 'GET', '/status')
  t.equal(r.json().maxSwitchRate, 50, 'the bound reaches the session')
  r = await request(port, 'POST', '/stop?format=folded')
  t.equal(r.status, 200)
  r = await request(port, 'POST', '/start?what=both&sourceMaps=1')
  t.equal(r.status, 200)
  await new Promise((resolve) => setTimeout(resolve, 300))
  r = await request(port, 'POST', '/stop?format=folded')
  t.equal(r.status, 200)
  t.match(r.text, /^main;\(idle\);/m, 'the event loop waiting for the request is (idle)')
})

t.test('kflame/register (KFLAME_WHAT, KFLAME_MAX_SWITCH_RATE) and kflame --what, --max-switch-rate', { skip: !kernelAllowed() && 'off-CPU needs kernel context' }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-offcpu-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const out = path.join(dir, 'reg.folded')
  const napped = /^main;\[off-cpu\];.*napInScript /m
  const offCpuLines = (folded, keep) => folded.split('\n').filter(keep)
    .map((l) => l.slice(0, 100) + ' ... ' + l.slice(-300)).join('\n')
  // Spawns the sleeper until the profile written to `file` has the nap.
  // The nap's switch-out has gone missing in about 1 of 40 CI runs (the
  // same flake as runWaits' above, root cause not found; once in the CLI's
  // run, on Node 24): a run without it is logged and run again, at most
  // twice. -> { r, folded } of the last run.
  const untilNapped = (argv, env, file) => {
    let r, folded
    for (let attempt = 0; attempt < 3; attempt++) {
      // Without the test runner's NODE_OPTIONS (its loader's thread runs the script).
      r = spawnSync(process.execPath, argv, { env: { ...process.env, NODE_OPTIONS: '', ...env }, encoding: 'utf8' })
      if (r.status !== 0) break
      folded = fs.readFileSync(file, 'utf8')
      if (napped.test(folded)) break
      t.comment(`attempt ${attempt + 1}: no napInScript off-CPU sample; main's off-CPU stacks:\n` + offCpuLines(folded, (l) => l.startsWith('main;[off-cpu]')))
    }
    return { r, folded }
  }
  const viaRegister = untilNapped(['-r', path.join(__dirname, '..', 'register.js'), '-e', SLEEPER],
    { KFLAME_WHAT: 'offcpu', KFLAME_OUT: out, KFLAME_QUIET: '1' }, out)
  t.equal(viaRegister.r.status, 0, viaRegister.r.stderr)
  t.match(viaRegister.folded, napped, offCpuLines(viaRegister.folded, (l) => l.includes('off-cpu')))
  let r = spawnSync(process.execPath, ['-r', path.join(__dirname, '..', 'register.js'), '-e', '1'], {
    env: { ...process.env, KFLAME_WHAT: 'often', KFLAME_OUT: out }, encoding: 'utf8'
  })
  t.equal(r.status, 2)
  t.match(r.stderr, /KFLAME_WHAT="often"/)
  // The bound reaches the session, from the environment and from the flag.
  const status = `console.log(JSON.stringify(require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'session.js'))}).status()))`
  r = spawnSync(process.execPath, ['-r', path.join(__dirname, '..', 'register.js'), '-e', status], {
    env: { ...process.env, NODE_OPTIONS: '', KFLAME_WHAT: 'offcpu', KFLAME_MAX_SWITCH_RATE: '50', KFLAME_OUT: out, KFLAME_QUIET: '1' }, encoding: 'utf8'
  })
  t.equal(r.status, 0, r.stderr)
  t.match(JSON.parse(r.stdout), { owner: 'register', what: 'offcpu', maxSwitchRate: 50 })
  r = spawnSync(process.execPath, ['-r', path.join(__dirname, '..', 'register.js'), '-e', '1'], {
    env: { ...process.env, KFLAME_MAX_SWITCH_RATE: 'some', KFLAME_OUT: out }, encoding: 'utf8'
  })
  t.equal(r.status, 2)
  t.match(r.stderr, /KFLAME_MAX_SWITCH_RATE="some" is not a whole number/)
  r = spawnSync(process.execPath, [path.join(__dirname, '..', 'bin', 'kflame.js'), '--what', 'offcpu', '--max-switch-rate', '70',
    '-o', path.join(dir, 'rate.folded'), process.execPath, '-e', status], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } })
  t.equal(r.status, 0, r.stderr)
  t.match(JSON.parse(r.stdout), { what: 'offcpu', maxSwitchRate: 70 })
  r = spawnSync(process.execPath, [path.join(__dirname, '..', 'bin', 'kflame.js'), '--max-switch-rate', 'lots', process.execPath, '-e', '1'], { encoding: 'utf8' })
  t.equal(r.status, 2)
  t.match(r.stderr, /--max-switch-rate must be a whole number/)
  const cliOut = path.join(dir, 'cli.folded')
  const viaCli = untilNapped([path.join(__dirname, '..', 'bin', 'kflame.js'), '--what', 'both', '--source-maps',
    '-o', cliOut, process.execPath, '-e', SLEEPER], {}, cliOut)
  t.equal(viaCli.r.status, 0, viaCli.r.stderr)
  t.match(viaCli.folded, napped)
})

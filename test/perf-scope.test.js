'use strict'
// Where the perf events are opened (src/sample/sampler.c, pidfilter.c): one
// per CPU with a BPF filter that keeps this process's samples, where the
// kernel allows it (root), else one per thread and CPU. Both must give the
// same profile: every thread (the pool, a worker started mid-profile), its
// JS named, kernel frames where allowed, and nothing of another process.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { parseFolded, total, checkEveryThread, kernelAllowed, cpuWideAllowed, SHIM } = require('./helpers')

const FIXTURE = path.join(__dirname, 'fixtures', 'perf-scope.js')

const wide = cpuWideAllowed()

function run (scope, env = {}) {
  const r = spawnSync(process.execPath, [FIXTURE, ...(scope ? [scope] : [])], {
    encoding: 'utf8', env: { ...process.env, ...env }, maxBuffer: 64 << 20
  })
  if (r.status !== 0) throw new Error(`perf-scope.js failed (${r.status}): ${r.stderr}`)
  const out = JSON.parse(r.stdout)
  return { ...out, stacks: parseFolded(out.folded) }
}

function checkProfile (t, { stats, stacks, folded, fds }) {
  t.equal(stats.mode, 'perf')
  t.equal(stats.lost, 0, 'nothing lost')
  t.equal(fds, 0, 'five start/stop cycles leave no fd open')
  const main = checkEveryThread(t, stacks, 'scopeHot', 0.3)
  t.notOk(folded.includes('forkedChildHot'), 'the fork()ed child, spinning meanwhile, is not in the profile')
  t.equal(stats.details.foreign, 0, 'no other process\'s sample reached the collector')
  if (stats.kernel) {
    const syscalls = total(main, (s) => s.frames.some((f) => f.startsWith('scopeSyscalls ')))
    const kernel = total(main, (s) => s.frames.some((f) => f.startsWith('scopeSyscalls ')) &&
      s.frames.some((f) => f.endsWith('_[k]')))
    t.ok(kernel > syscalls * 0.3, `kernel frames under the system calls: ${kernel} of ${syscalls}`)
  }
}

t.test('perfScope auto: CPU-wide events where allowed, else per thread', async (t) => {
  const out = run()
  checkProfile(t, out)
  const d = out.stats.details
  if (wide) {
    t.equal(d.perfScope, 'cpus', `CAP_SYS_ADMIN or CAP_BPF+CAP_PERFMON: one event per CPU (${d.perfScopeError})`)
    t.equal(d.attachedThreads, 0, 'no thread attached')
    t.equal(d.perfScopeError, null)
    t.equal(out.stats.kernel, kernelAllowed())
  } else {
    t.equal(d.perfScope, 'threads', 'without the capabilities: per thread')
    t.match(d.perfScopeError, /not permitted|denied/i, 'the BPF filter or the CPU-wide event was refused, and why is kept')
  }
})

t.test('perfScope threads: per-thread events, the same profile', async (t) => {
  const out = run('threads')
  checkProfile(t, out)
  t.equal(out.stats.details.perfScope, 'threads')
  t.ok(out.stats.details.attachedThreads >= 4, `threads attached: ${out.stats.details.attachedThreads}`)
  t.equal(out.stats.details.perfScopeError, null, 'not tried')
})

t.test('KFLAME_PERF_SCOPE reaches kflame/register', async (t) => {
  const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'kflame-scope-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const bad = spawnSync(process.execPath, ['-r', path.join(__dirname, '..', 'register.js'), '-e', '1'], {
    cwd: dir, encoding: 'utf8', env: { ...process.env, KFLAME_PERF_SCOPE: 'cpu' }
  })
  t.equal(bad.status, 2, 'a wrong value stops the process before the app runs')
  t.match(bad.stderr, /KFLAME_PERF_SCOPE="cpu" is not where kflame opens perf events: set it to auto, threads/)
})

t.test('start() refuses a perfScope it does not know', async (t) => {
  const kflame = require('..')
  t.throws(() => kflame.start({ perfScope: 'cpus' }), { code: 'KFLAME_ERR_OUT_OF_RANGE', message: /perfScope must be one of auto, threads, got "cpus"/ })
  t.throws(() => kflame.start({ perfScope: 1 }), { code: 'KFLAME_ERR_INVALID_ARG' })
})

// The fallbacks, walked for real: the shim makes the kernel say no.
const refusals = [
  ['the BPF program refused', { KFLAME_FAULT_BPF: 'EPERM' }, /not permitted/i],
  ['the BPF program rejected (an older kernel without the helper)', { KFLAME_FAULT_BPF: 'EINVAL' }, /invalid argument/i],
  ['the CPU-wide event refused', { KFLAME_FAULT_PERF_CPU_WIDE: 'EACCES' }, /permission denied/i]
]
for (const [what, env, why] of refusals) {
  t.test(`${what}: per-thread events instead, the reason kept`, { skip: !wide && 'needs CAP_SYS_ADMIN or CAP_BPF+CAP_PERFMON: without them the BPF load is refused anyway' }, async (t) => {
    const out = run(undefined, { LD_PRELOAD: SHIM, ...env })
    checkProfile(t, out)
    t.equal(out.stats.details.perfScope, 'threads')
    t.match(out.stats.details.perfScopeError, why)
    t.equal(out.stats.warnings.length, 0, 'no warning: per-thread events are the usual way')
  })
}

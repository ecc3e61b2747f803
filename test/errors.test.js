'use strict'

// perf_event_open and the ring mmap refused for real, through an LD_PRELOAD
// shim (test/c/faultshim.c) in a child node: with mode 'perf' each refusal
// must become an Error with a stable code and a message naming the fix, and
// leave no fd; with mode 'auto' (the default) the timer sampler takes over,
// with a warning that says why.

const t = require('tap')
const fs = require('node:fs')
const { runWithFaults, SHIM } = require('./helpers')

const probe = `
const fs = require('fs')
const kflame = require('.')
const fds = () => fs.readdirSync('/proc/self/fd').length
const before = fds()
let out = {}
try {
  kflame.start({ hz: 99, mode: process.env.PROBE_MODE || 'perf' })
  const p = kflame.stop()
  out = { started: true, mode: p.stats.mode, warnings: p.stats.warnings, ringPages: p.stats.details.ringPages, samples: p.stats.samples }
} catch (err) {
  out = { name: err.name, code: err.code, message: err.message, running: kflame.isRunning() }
}
out.leakedFds = fds() - before
console.log(JSON.stringify(out))
`

t.before(() => {
  if (!fs.existsSync(SHIM)) throw new Error(`${SHIM} is missing: run \`make -C test/c shim\``)
})

const refusals = [
  ['EACCES', 'KFLAME_ERR_PERF_PARANOID', /perf_event_paranoid.*CAP_PERFMON/],
  ['EPERM', 'KFLAME_ERR_PERF_DENIED', /seccomp.*--cap-add PERFMON/],
  ['ENOSYS', 'KFLAME_ERR_PERF_UNSUPPORTED', /CONFIG_PERF_EVENTS/],
  ['EMFILE', 'KFLAME_ERR_FD_LIMIT', /ulimit -n/]
]

for (const [errno, code, advice] of refusals) {
  t.test(`perf_event_open ${errno} -> ${code}`, async (t) => {
    const r = runWithFaults(probe, { KFLAME_FAULT_PERF: errno })
    t.equal(r.name, 'Error')
    t.equal(r.code, code)
    t.match(r.message, advice)
    t.equal(r.running, false)
    t.equal(r.leakedFds, 0, 'no fd left open')
  })
  t.test(`perf_event_open ${errno}, mode auto -> the timer sampler, with a warning`, async (t) => {
    const r = runWithFaults(probe, { KFLAME_FAULT_PERF: errno, PROBE_MODE: 'auto' })
    t.equal(r.started, true, r.message)
    t.equal(r.mode, 'timer')
    t.match(r.warnings[0], new RegExp(`refused \\(${code}\\).*timer.*To get perf mode back: .*${advice.source}`))
    t.equal(r.leakedFds, 0, 'no fd left open')
  })
}

t.test('a refusal half-way through the threads closes what was opened', async (t) => {
  const r = runWithFaults(probe, { KFLAME_FAULT_PERF: 'EMFILE', KFLAME_FAULT_PERF_AFTER: '5' })
  t.equal(r.code, 'KFLAME_ERR_FD_LIMIT')
  t.equal(r.leakedFds, 0)
})

t.test('a refusal half-way through the CPUs closes what was opened', async (t) => {
  // The second CPU's event fails: the first is closed, per-thread events
  // are tried and refused too. (Where the BPF filter is refused, per-thread
  // events are refused at their second open the same way.)
  const r = runWithFaults(probe, { KFLAME_FAULT_PERF: 'EMFILE', KFLAME_FAULT_PERF_AFTER: '1', KFLAME_PERF_SCOPE: 'auto' })
  t.equal(r.code, 'KFLAME_ERR_FD_LIMIT')
  t.equal(r.leakedFds, 0)
})

t.test('no locked memory for any ring -> KFLAME_ERR_MLOCK; auto: timers, which lock none', async (t) => {
  const r = runWithFaults(probe, { KFLAME_FAULT_MLOCK_PAGES: '0' })
  t.equal(r.code, 'KFLAME_ERR_MLOCK')
  t.match(r.message, /perf_event_mlock_kb.*ulimit -l/)
  t.equal(r.leakedFds, 0)
  const auto = runWithFaults(probe, { KFLAME_FAULT_MLOCK_PAGES: '0', PROBE_MODE: 'auto' })
  t.equal(auto.mode, 'timer')
  t.match(auto.warnings[0], /KFLAME_ERR_MLOCK/)
  t.equal(auto.leakedFds, 0)
})

t.test('a small locked-memory budget shrinks the rings with a warning', async (t) => {
  const r = runWithFaults(probe, { KFLAME_FAULT_MLOCK_PAGES: '4' })
  t.equal(r.started, true)
  t.equal(r.ringPages, 4)
  t.match(r.warnings.join('\n'), /cut from 64 to 4 pages.*ulimit -l/)
  t.equal(r.leakedFds, 0)
})

// The kernel's locked-memory budget is shared by the rings of all CPUs: the
// rings shrink together, never the first one taking the whole budget.
t.test('rings shrink together to fit a shared locked-memory budget', async (t) => {
  const cpus = fs.readFileSync('/sys/devices/system/cpu/online', 'utf8')
  const budgetScript = probe
    .replace("kflame.start({ hz: 99, mode: process.env.PROBE_MODE || 'perf' })", `kflame.start({ hz: 99, ringPages: 256, mode: 'perf' })
  const sizes = fs.readFileSync('/proc/self/maps', 'utf8').split('\\n')
    .filter((l) => l.includes('perf_event')).map((l) => { const [a, b] = l.split(' ')[0].split('-'); return (parseInt(b, 16) - parseInt(a, 16)) / 4096 })`)
    .replace('samples: p.stats.samples }', 'samples: p.stats.samples, sizes }')
  // Room for 129 pages per CPU, as perf_event_mlock_kb's default 516 KiB.
  const ncpus = cpus.trim().split(',').reduce((n, r) => { const [a, b = a] = r.split('-').map(Number); return n + b - a + 1 }, 0)
  const r = runWithFaults(budgetScript, { KFLAME_FAULT_MLOCK_BUDGET: String(129 * ncpus) })
  t.equal(r.started, true, r.message)
  t.equal(r.ringPages, 128, 'the largest power of two that fits on every CPU')
  t.same(r.sizes, new Array(ncpus).fill(129), 'every CPU\'s ring has the same size')
  t.match(r.warnings.join('\n'), /cut from 256 to 128 pages/)
  t.equal(r.leakedFds, 0)
})

// Out of descriptors before perf_event_open is reached (reading the CPU
// list, listing the threads): the same code and advice as from perf.
t.test('no free descriptor at all -> KFLAME_ERR_FD_LIMIT, and a start() once fds are back works', async (t) => {
  const { spawnSync } = require('node:child_process')
  const script = `
    const fs = require('fs')
    const kflame = require('.')
    const held = []
    try { for (;;) held.push(fs.openSync('/dev/null', 'r')) } catch (err) { if (err.code !== 'EMFILE') throw err }
    const out = {}
    try { kflame.start() } catch (err) { out.code = err.code; out.message = err.message }
    out.running = kflame.isRunning()
    for (const fd of held) fs.closeSync(fd)
    kflame.start(); out.samples = kflame.stop().stats.samples
    console.log(JSON.stringify(out))`
  const r = spawnSync('sh', ['-c', 'ulimit -n 256 && exec "$0" -e "$1"', process.execPath, script], {
    cwd: require('node:path').join(__dirname, '..'), encoding: 'utf8'
  })
  t.equal(r.status, 0, r.stderr)
  const out = JSON.parse(r.stdout)
  t.equal(out.code, 'KFLAME_ERR_FD_LIMIT', out.message)
  t.match(out.message, /ulimit -n/)
  t.equal(out.running, false)
  t.type(out.samples, 'number', 'a later start() works')
})

// stop() that fails once the session is closed (out of memory copying the
// perf map path, through the shim) still ends the label log: labels must
// not go on recording (up to 4M entries) with no profile to put them in.
t.test('stop() failing after the session closed: labels stop recording, a new profile starts', async (t) => {
  const os = require('node:os')
  const path = require('node:path')
  const map = path.join(os.tmpdir(), `kflame-fault-${process.pid}-${Date.now()}.map`)
  t.teardown(() => fs.rmSync(map, { force: true }))
  const r = runWithFaults(`
    const kflame = require('.')
    const binding = require('./lib/binding')
    kflame.start({ hz: 99, perfMap: ${JSON.stringify(map)} })
    const out = {}
    kflame.label('open-at-stop', () => {
      try { kflame.stop() } catch (err) { out.code = err.code }
    })
    out.running = binding.running()
    out.recording = binding.labelsRecording ? binding.labelsRecording[0] : 0
    out.handle = binding.labelOpen('after-the-failed-stop')
    kflame.start({ hz: 99 })
    out.nextHandle = binding.labelOpen('in-the-next-profile')
    kflame.stop()
    console.log(JSON.stringify(out))`,
  // the first copy is start()'s, the second stop()'s
  { KFLAME_FAULT_STRDUP: map, KFLAME_FAULT_STRDUP_AFTER: '1' })
  t.equal(r.code, 'KFLAME_ERR_SYSTEM', 'stop() failed for want of memory')
  t.equal(r.running, false)
  t.equal(r.recording, 0, 'the label log is not recording')
  t.equal(r.handle, -1, 'a label opened now is not recorded')
  t.ok(r.nextHandle >= 0, 'the next profile records labels again')
})

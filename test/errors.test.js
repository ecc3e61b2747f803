'use strict'

// perf_event_open and the ring mmap refused for real, through an LD_PRELOAD
// shim (test/c/faultshim.c) in a child node: each refusal must become an
// Error with a stable code and a message naming the fix, and leave no fd.

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
  kflame.start({ hz: 99 })
  const p = kflame.stop()
  out = { started: true, warnings: p.stats.warnings, ringPages: p.stats.details.ringPages, samples: p.stats.samples }
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
}

t.test('a refusal half-way through the threads closes what was opened', async (t) => {
  const r = runWithFaults(probe, { KFLAME_FAULT_PERF: 'EMFILE', KFLAME_FAULT_PERF_AFTER: '5' })
  t.equal(r.code, 'KFLAME_ERR_FD_LIMIT')
  t.equal(r.leakedFds, 0)
})

t.test('no locked memory for any ring -> KFLAME_ERR_MLOCK', async (t) => {
  const r = runWithFaults(probe, { KFLAME_FAULT_MLOCK_PAGES: '0' })
  t.equal(r.code, 'KFLAME_ERR_MLOCK')
  t.match(r.message, /perf_event_mlock_kb.*ulimit -l/)
  t.equal(r.leakedFds, 0)
})

t.test('a small locked-memory budget shrinks the rings with a warning', async (t) => {
  const r = runWithFaults(probe, { KFLAME_FAULT_MLOCK_PAGES: '4' })
  t.equal(r.started, true)
  t.equal(r.ringPages, 4)
  t.match(r.warnings.join('\n'), /cut from 16 to 4 pages.*ulimit -l/)
  t.equal(r.leakedFds, 0)
})

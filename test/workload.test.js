'use strict'

// Real profiles of workloads whose cost split is known.

const t = require('tap')
const crypto = require('node:crypto')
const fs = require('node:fs')
const { Worker } = require('node:worker_threads')
const kflame = require('..')
const { parseFolded, total, rootSummary, kernelAllowed, spin } = require('./helpers')

const has = (re) => (s) => s.frames.some((f) => re.test(f))

t.test('CPU shares match a known split on the main thread', async (t) => {
  const input = crypto.randomBytes(1 << 16)
  let pbkdf2Ms = 0
  let hashMs = 0
  kflame.start({ hz: 999 })
  // Interleave short phases (2:1) so drift in either cannot bias the split;
  // the truth is the wall time of each phase on this busy thread. Both are
  // pure user-space CPU (no allocation-heavy work whose page faults an
  // unprivileged, user-only profile could not see). Long pbkdf2 calls:
  // short ones spend ~3% in malloc/free, whose frames (glibc keeps no frame
  // pointer) lose the PKCS5 caller and made the share read 2-3 points low,
  // failing the 3-point bound in about a quarter of runs.
  for (let i = 0; i < 40; i++) {
    let t0 = performance.now()
    spin(20, () => crypto.pbkdf2Sync('p', 's', 20000, 32, 'sha256'))
    pbkdf2Ms += performance.now() - t0
    t0 = performance.now()
    spin(10, () => crypto.createHash('sha256').update(input).digest())
    hashMs += performance.now() - t0
  }
  const p = kflame.stop()
  const main = parseFolded(p.folded).filter((s) => s.frames[0] === 'main')
  const a = total(main, has(/^PKCS5_PBKDF2_HMAC$/))
  const b = total(main, (s) => !has(/^PKCS5_PBKDF2_HMAC$/)(s) && has(/^node::crypto::Hash::HashUpdate\(/)(s))
  const truth = pbkdf2Ms / (pbkdf2Ms + hashMs)
  const measured = a / (a + b)
  t.ok(a + b > 600, `enough samples (${a + b})`)
  t.ok(Math.abs(measured - truth) < 0.03,
    `pbkdf2 share ${(measured * 100).toFixed(1)}% vs truth ${(truth * 100).toFixed(1)}%`)
  // Of all main-thread samples, these two phases are nearly all of them.
  const share = (a + b) / total(main)
  t.ok(share > 0.75, `the phases account for the main thread (${(share * 100).toFixed(1)}%)`)
})

t.test('thread-pool work is under libuv-worker roots with native frames', async (t) => {
  kflame.start({ hz: 999 })
  await Promise.all([1, 2, 3, 4].map(() => new Promise((resolve, reject) =>
    crypto.pbkdf2('a', 'b', 200000, 32, 'sha256', (err) => err ? reject(err) : resolve()))))
  const p = kflame.stop()
  const stacks = parseFolded(p.folded)
  const pool = stacks.filter((s) => /^libuv-worker-\d+$/.test(s.frames[0]))
  const roots = new Set(pool.map((s) => s.frames[0]))
  t.ok(roots.size >= 2, `work spread over pool threads (${[...roots]})`)
  const derive = total(pool, has(/^PKCS5_PBKDF2_HMAC$/))
  t.ok(derive > 0.8 * total(pool), 'the pool did pbkdf2')
  t.ok(pool.some(has(/^node::crypto::PBKDF2Traits::DeriveBits\(/)), 'demangled node C++ frames')
  t.equal(total(stacks.filter((s) => s.frames[0] === 'main'), has(/^PKCS5_PBKDF2_HMAC$/)), 0,
    'none of it on the main thread')
  t.ok(p.stats.threads >= 3)
})

t.test('a thread started while profiling is sampled', async (t) => {
  kflame.start({ hz: 999 })
  await new Promise((resolve, reject) => {
    const w = new Worker('const e = Date.now() + 300; let x = 0; while (Date.now() < e) x += Math.random()', { eval: true })
    w.on('error', reject)
    w.on('exit', resolve)
  })
  const p = kflame.stop()
  const stacks = parseFolded(p.folded)
  const worker = stacks.filter((s) => /^worker-thread-\d+$/.test(s.frames[0]))
  // 300 ms of CPU at 999 Hz: ~300 samples; thread start-up costs some too.
  t.ok(total(worker) > 200, `worker thread samples: ${total(worker)} (by root: ${rootSummary(stacks)})`)
  t.equal(p.stats.details.duplicates, 0)
})

t.test('system calls show kernel frames exactly when allowed', async (t) => {
  const fd = fs.openSync('/dev/null', 'w')
  const one = Buffer.alloc(1)
  kflame.start({ hz: 999 })
  spin(300, () => fs.writeSync(fd, one))
  const p = kflame.stop()
  fs.closeSync(fd)
  const main = parseFolded(p.folded).filter((s) => s.frames[0] === 'main')
  const kernel = total(main, has(/_\[k\]$/))
  if (kernelAllowed()) {
    t.equal(p.stats.kernel, true)
    t.ok(kernel > 0.2 * total(main), `kernel frames in ${kernel} of ${total(main)} samples`)
    t.ok(main.some(has(/^(ksys_write|vfs_write|__x64_sys_write)_\[k\]$/)), 'the write path is named')
    t.ok(main.some((s) => {
      const i = s.frames.findIndex((f) => f.endsWith('_[k]'))
      return i > 1 && s.frames.slice(i).every((f) => f.endsWith('_[k]'))
    }), 'kernel frames sit below the user frames')
  } else {
    t.equal(p.stats.kernel, false)
    t.equal(kernel, 0, 'no kernel frames')
    t.match(p.stats.warnings.join('\n'), /perf_event_paranoid/)
    t.ok(total(main) > 0, 'user-space samples are still taken')
  }
})

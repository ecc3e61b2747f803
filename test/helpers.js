'use strict'

// Shared by the tap tests: reading folded text and knowing what this machine
// allows, so a test can expect kernel frames exactly when they are possible.

const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

function parseFolded (text) {
  return text.split('\n').filter(Boolean).map((line) => {
    const i = line.lastIndexOf(' ')
    return { frames: line.slice(0, i).split(';'), count: Number(line.slice(i + 1)) }
  })
}

function total (stacks, predicate = () => true) {
  return stacks.filter(predicate).reduce((n, s) => n + s.count, 0)
}

// "main=12 libuv-worker=40 ...": samples per root with tids dropped, for
// assertion messages.
function rootSummary (stacks) {
  const byRoot = new Map()
  for (const s of stacks) {
    const root = s.frames[0].replace(/-\d+$/, '')
    byRoot.set(root, (byRoot.get(root) || 0) + s.count)
  }
  return [...byRoot].map(([root, n]) => `${root}=${n}`).join(' ')
}

function paranoid () {
  return Number(fs.readFileSync('/proc/sys/kernel/perf_event_paranoid', 'utf8'))
}

// Kernel frames need root (CAP_PERFMON) or perf_event_paranoid <= 1.
function kernelAllowed () {
  return process.getuid() === 0 || paranoid() <= 1
}

const SHIM = path.join(__dirname, 'c', 'build', 'faultshim.so')

// Runs a script in a child node with the fault-injection shim preloaded.
function runWithFaults (script, env) {
  const r = spawnSync(process.execPath, ['-e', script], {
    // KFLAME_PERF_WARM=off: the thread that holds a perf event from load
    // (src/sample/perfwarm.h) would open it at a moment of its own, one of
    // the opens the shim counts, and an fd the probe may count as leaked.
    // KFLAME_PERF_SCOPE=threads: the probes count opens per thread and CPU;
    // test/perf-scope.test.js walks the CPU-wide events' refusals.
    env: { ...process.env, LD_PRELOAD: SHIM, KFLAME_PERF_WARM: 'off', KFLAME_PERF_SCOPE: 'threads', ...env },
    encoding: 'utf8',
    cwd: path.join(__dirname, '..')
  })
  if (r.status !== 0) throw new Error(`child failed (${r.status}): ${r.stderr}`)
  return JSON.parse(r.stdout)
}

// Runs a fixture of test/fixtures in a child node with V8 flags; the
// fixture prints { folded, stats, truth } as JSON. `bare`: without the test
// runner's NODE_OPTIONS, which tap sets again on every child node it sees
// spawned (its --import loads the inspector and runs loader hooks on a
// worker of their own), so the child goes through env -u.
function runFixture (name, nodeFlags = [], args = [], env = {}, { bare = false } = {}) {
  const argv = [...nodeFlags, path.join(__dirname, 'fixtures', name), ...args]
  const r = spawnSync(bare ? 'env' : process.execPath, bare ? ['-u', 'NODE_OPTIONS', process.execPath, ...argv] : argv, {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    maxBuffer: 64 << 20
  })
  if (r.status !== 0) throw new Error(`${name} failed (${r.status}): ${r.stderr}`)
  const out = JSON.parse(r.stdout)
  return { ...out, stacks: parseFolded(out.folded) }
}

// CPU-wide perf events with the BPF filter (perfScope 'auto' as root) need
// CAP_SYS_ADMIN, or CAP_BPF with CAP_PERFMON (root has them unless a
// container took them away).
function cpuWideAllowed () {
  const eff = BigInt('0x' + /^CapEff:\s*([0-9a-f]+)/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1])
  const has = (bit) => (eff >> BigInt(bit)) & 1n
  return has(21) === 1n || (has(38) === 1n && has(39) === 1n)
}

function openFds () {
  return fs.readdirSync('/proc/self/fd').length
}

function threadCount () {
  return fs.readdirSync('/proc/self/task').length
}

// Busy-waits on the calling thread for `ms` of wall time, calling `work`.
function spin (ms, work) {
  const end = performance.now() + ms
  while (performance.now() < end) work()
}

// The checks of the threads workload (fixtures/threads-workload.js): the
// main thread's `hot` function named in more than `share` of its samples,
// pbkdf2 under the pool's roots, the worker started mid-profile named.
function checkEveryThread (t, stacks, hot, share) {
  const summary = rootSummary(stacks)
  const main = stacks.filter((s) => s.frames[0] === 'main')
  const named = total(main, (s) => s.frames.some((f) => f.startsWith(`${hot} `)))
  t.ok(named > total(main) * share, `main thread: the app's JS function named (${named} of ${total(main)})`)
  const pool = stacks.filter((s) => /^libuv-worker-\d+$/.test(s.frames[0]))
  const crypto = total(pool, (s) => s.frames.some((f) => /PBKDF2|sha512|SHA512/.test(f)))
  t.ok(crypto > 20, `crypto.pbkdf2 under libuv-worker roots: ${crypto} (by root: ${summary})`)
  const worker = stacks.filter((s) => /^worker-thread-\d+$/.test(s.frames[0]))
  const workerHot = total(worker, (s) => s.frames.some((f) => f.startsWith('workerHot ')))
  t.ok(workerHot > 30, `the worker started mid-profile is sampled, its JS named: ${workerHot} (by root: ${summary})`)
  return main
}

module.exports = { checkEveryThread, parseFolded, total, rootSummary, kernelAllowed, cpuWideAllowed, paranoid, runWithFaults, runFixture, SHIM, openFds, threadCount, spin }

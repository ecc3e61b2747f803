'use strict'

// `kflame COMMAND...` ends as COMMAND ended: signals sent to kflame reach
// the command, kflame dies of the signal the command died of, exit codes
// pass through even when nothing was profiled.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { CLI, APP, tmpdir, cli, startUntil, read } = require('./fixtures/spawn-helpers')

const BURN = 'kflameFixtureBurn'
const node = process.execPath

t.test('SIGTERM to kflame reaches the command; kflame writes and dies of SIGTERM', async (t) => {
  const dir = tmpdir(t)
  const { child, result } = await startUntil([CLI, '-o', 'sig.svg', node, APP, '--wait-signal'], {
    cwd: dir, env: { KFLAME_HZ: '499' }
  })
  child.kill('SIGTERM')
  const r = await result
  t.equal(r.signal, 'SIGTERM', `code ${r.code} stderr ${r.stderr}`)
  t.match(r.stderr, /written to sig\.svg/)
  t.match(read(path.join(dir, 'sig.svg')), BURN)
})

t.test('a command with its own SIGTERM handler that exits 0: kflame exits 0', async (t) => {
  const dir = tmpdir(t)
  const { child, result } = await startUntil([CLI, '-o', 'own.folded', node, APP, '--own-handler'], { cwd: dir })
  child.kill('SIGTERM')
  const r = await result
  t.equal(r.code, 0, r.stderr)
  t.equal(r.signal, null)
  t.match(r.stdout, 'own handler')
  t.match(read(path.join(dir, 'own.folded')), BURN)
})

t.test('not node: no profile, said so, the exit code still passes', async (t) => {
  const dir = tmpdir(t)
  const r = cli(['-o', 'x.svg', '--', '/bin/sh', '-c', 'exit 4'], { cwd: dir })
  t.equal(r.status, 4)
  t.match(r.stderr, /^kflame: no profile was written: .*\n$/)
  t.same(fs.readdirSync(dir), [])
  const missing = cli(['no-such-command-kflame'], { cwd: dir })
  t.equal(missing.status, 127)
  t.match(missing.stderr, /^kflame: cannot run no-such-command-kflame: command not found\n$/)
})

t.test('a command killed by a signal: kflame dies of it too', async (t) => {
  const dir = tmpdir(t)
  const r = cli(['-o', 'x.svg', node, '-e', 'process.kill(process.pid, "SIGKILL")'], { cwd: dir })
  t.equal(r.signal, 'SIGKILL')
})

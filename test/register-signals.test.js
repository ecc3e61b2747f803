'use strict'

// kflame/register and signals: an app without a handler still dies of the
// signal (after the profile is written); an app with its own handler keeps
// its behaviour; signal-exit (tap, nyc, execa...) and kflame do not wait for
// each other.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { REGISTER, APP, tmpdir, startUntil, read } = require('./fixtures/spawn-helpers')

const BURN = 'kflameFixtureBurn'

for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  t.test(`${sig} to an app without a handler: written, and the process dies of ${sig}`, async (t) => {
    const dir = tmpdir(t)
    const { child, result } = await startUntil(['-r', REGISTER, APP, '--wait-signal'], {
      cwd: dir, env: { KFLAME_OUT: 'out.folded', KFLAME_HZ: '499' }
    })
    child.kill(sig)
    const r = await result
    t.equal(r.signal, sig, `died of the signal (code ${r.code}, stderr ${r.stderr})`)
    t.equal(r.code, null)
    t.match(r.stderr, /kflame: \d+ samples .* written to out\.folded/)
    t.match(read(path.join(dir, 'out.folded')), BURN)
  })
}

t.test('an app with its own SIGTERM handler keeps its behaviour (exit 0), and the profile is written', async (t) => {
  const dir = tmpdir(t)
  const { child, result } = await startUntil(['-r', REGISTER, APP, '--own-handler'], {
    cwd: dir, env: { KFLAME_OUT: 'out.folded', KFLAME_HZ: '499' }
  })
  child.kill('SIGTERM')
  const r = await result
  t.equal(r.code, 0, r.stderr)
  t.equal(r.signal, null)
  t.match(r.stdout, 'own handler')
  t.match(r.stderr, /written to out\.folded/)
  t.equal(r.stderr.match(/written to/g).length, 1, 'written once')
  t.match(read(path.join(dir, 'out.folded')), BURN)
})

t.test('an app with a handler that does not exit keeps running', async (t) => {
  const dir = tmpdir(t)
  const script = `
    process.on('SIGTERM', () => { console.log('ignored'); setTimeout(() => process.exit(6), 100) })
    setInterval(() => {}, 1000)
    console.log('ready')`
  const { child, result } = await startUntil(['-r', REGISTER, '-e', script], { cwd: dir, env: { KFLAME_OUT: 'out.folded' } })
  child.kill('SIGTERM')
  const r = await result
  t.equal(r.code, 6, 'the app decided when to end')
  t.match(r.stdout, 'ignored')
  t.ok(fs.existsSync(path.join(dir, 'out.folded')), 'written at exit')
})

let signalExit = null
try { signalExit = require.resolve('signal-exit') } catch {}

t.test('with signal-exit loaded: both run, the process dies of SIGTERM', { skip: !signalExit && 'signal-exit is not installed' }, async (t) => {
  const dir = tmpdir(t)
  const script = `
    const { onExit } = require(${JSON.stringify(signalExit)})
    onExit((code, signal) => { require('fs').writeSync(1, 'onExit ' + signal + '\\n') })
    setInterval(() => {}, 1000)
    console.log('ready')`
  const { child, result } = await startUntil(['-r', REGISTER, '-e', script], { cwd: dir, env: { KFLAME_OUT: 'out.folded' } })
  child.kill('SIGTERM')
  const r = await result
  t.equal(r.signal, 'SIGTERM', `code ${r.code}, stderr ${r.stderr}`)
  t.match(r.stdout, 'onExit SIGTERM', 'signal-exit\'s handler ran')
  t.ok(fs.existsSync(path.join(dir, 'out.folded')), 'the profile was written')
})

// Node runs a signal listener only when the event loop turns; a signal that
// comes during the last synchronous stretch is never dispatched. Without
// kflame the process dies of it at once; with kflame/register it must still
// die of it (after the profile is written), not exit 0.
t.test('SIGTERM during a synchronous stretch that ends the script: written, and the process dies of SIGTERM', async (t) => {
  const dir = tmpdir(t)
  const script = `
    function ${BURN} (ms) { let x = 0; const end = Date.now() + ms; while (Date.now() < end) x += Math.sqrt(x + 1); return x }
    require('fs').writeSync(1, 'ready\\n')
    ${BURN}(1500)`
  const { child, result } = await startUntil(['-r', REGISTER, '-e', script], {
    cwd: dir, env: { KFLAME_OUT: 'out.folded', KFLAME_HZ: '499' }
  })
  setTimeout(() => child.kill('SIGTERM'), 300)
  const r = await result
  t.equal(r.signal, 'SIGTERM', `died of the signal (code ${r.code}, stderr ${r.stderr})`)
  t.equal(r.code, null)
  t.match(r.stderr, /written to out\.folded/)
  t.match(read(path.join(dir, 'out.folded')), BURN)
})

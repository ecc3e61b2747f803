'use strict'

// kflame.label(): samples taken while fn runs carry its name as a frame
// under the thread's root, sync, nested, async and on worker threads.

const t = require('tap')
const path = require('node:path')
const { Worker } = require('node:worker_threads')
const kflame = require('..')
const { parseFolded, total, rootSummary, spin } = require('./helpers')

const burn = (ms) => { let x = 0; spin(ms, () => { x += Math.sqrt(x + 1) }); return x }

// Samples whose frames right after the root are exactly `labels`.
function underLabels (stacks, root, labels) {
  return total(stacks, (s) => root.test(s.frames[0]) &&
    labels.every((l, i) => s.frames[i + 1] === l) &&
    !['outer', 'inner', 'async', 'failing', 'in-worker'].includes(s.frames[labels.length + 1]))
}

t.test('outside a profile, label() just calls fn', async (t) => {
  t.equal(kflame.label('idle', () => 42), 42)
  t.equal(await kflame.label('idle', async () => 7), 7)
  t.throws(() => kflame.label('idle', () => { throw new Error('boom') }), /boom/)
})

t.test('bad arguments are TypeErrors with a code', async (t) => {
  for (const [name, fn] of [['', () => {}], [null, () => {}], ['x', 'not a function'], ['x', undefined]]) {
    t.throws(() => kflame.label(name, fn), { name: 'TypeError', code: 'KFLAME_ERR_INVALID_ARG' })
  }
})

t.test('sync and nested labels split the samples by time', async (t) => {
  kflame.start({ hz: 999 })
  burn(150)
  kflame.label('outer', () => {
    burn(200)
    t.equal(kflame.label('inner', () => { burn(200); return 'value' }), 'value')
  })
  t.throws(() => kflame.label('failing', () => { burn(100); throw new Error('inside') }), /inside/)
  burn(150)
  const p = kflame.stop()
  const stacks = parseFolded(p.folded)
  const main = /^main$/
  const summary = `by root: ${rootSummary(stacks)}`
  const outer = underLabels(stacks, main, ['outer'])
  const inner = underLabels(stacks, main, ['outer', 'inner'])
  const failing = underLabels(stacks, main, ['failing'])
  const none = underLabels(stacks, main, [])
  // ~200 each at 999 Hz of CPU time; wide bounds for a loaded machine.
  t.ok(outer > 100, `outer alone: ${outer} (${summary})`)
  t.ok(inner > 100, `outer;inner: ${inner}`)
  t.ok(failing > 40, `a throwing fn is labelled until it throws: ${failing}`)
  t.ok(none > 150, `unlabelled before and after: ${none}`)
  t.notOk(stacks.some((s) => s.frames[1] === 'inner'), 'inner only ever under outer')
  t.ok(stacks.some((s) => s.frames[0] === 'main' && s.frames[1] === 'outer' &&
    s.frames.some((f) => /^burn .*labels\.test\.js/.test(f))), 'the JS frames follow the label')
  t.equal(total(stacks), p.stats.samples, 'no sample lost or doubled by labelling')
  t.equal(p.stats.details.labels, 3)
  t.equal(p.stats.details.labelsDropped, 0)
})

t.test('an async label lasts until its promise settles', async (t) => {
  kflame.start({ hz: 999 })
  const value = await kflame.label('async', async () => {
    await new Promise((resolve) => setTimeout(resolve, 20))
    burn(250)
    return 'done'
  })
  t.equal(value, 'done')
  await t.rejects(kflame.label('async', async () => { throw new Error('rejected') }), /rejected/)
  burn(100)
  const stacks = parseFolded(kflame.stop().folded)
  const labelled = underLabels(stacks, /^main$/, ['async'])
  t.ok(labelled > 120, `samples after the await are labelled: ${labelled}`)
  t.ok(underLabels(stacks, /^main$/, []) > 40, 'after it settled, no label')
})

t.test('samples line up with the relabelled folded lines in every export', async (t) => {
  kflame.start({ hz: 999 })
  kflame.label('outer', () => burn(150))
  burn(100)
  const p = kflame.stop()
  const lines = p.folded.trim().split('\n')
  t.equal(p.samples.line.length, p.stats.samples)
  const counts = new Array(lines.length).fill(0)
  for (const line of p.samples.line) counts[line]++
  t.same(counts, lines.map((l) => Number(l.slice(l.lastIndexOf(' ') + 1))), 'samples.line counts match each line')
  const cpuprofile = p.cpuprofile()
  t.equal(cpuprofile.samples.length, p.stats.samples)
  t.ok(cpuprofile.nodes.some((n) => n.callFrame.functionName === 'outer'), 'the label is a node of the cpuprofile')
})

t.test('a label that outlives its profile closes nothing in the next one', async (t) => {
  let release
  kflame.start({ hz: 999 })
  const pending = kflame.label('async', () => new Promise((resolve) => { release = resolve }))
  burn(50)
  const first = parseFolded(kflame.stop().folded)
  t.ok(underLabels(first, /^main$/, ['async']) > 10, 'open at stop: labelled until the stop')
  kflame.start({ hz: 999 })
  release()
  await pending
  burn(150)
  const second = parseFolded(kflame.stop().folded)
  t.equal(underLabels(second, /^main$/, ['async']), 0, 'not in the next profile')
})

t.test('labels on a worker thread go under that thread', async (t) => {
  kflame.start({ hz: 999 })
  const worker = new Worker(`
    const kflame = require(${JSON.stringify(path.join(__dirname, '..'))})
    const end = Date.now() + 400
    let x = 0
    kflame.label('in-worker', () => { while (Date.now() < end) x += Math.sqrt(x + 1) })
  `, { eval: true })
  await new Promise((resolve, reject) => worker.on('exit', resolve).on('error', reject))
  const stacks = parseFolded(kflame.stop().folded)
  const labelled = underLabels(stacks, /^worker-thread-\d+$/, ['in-worker'])
  t.ok(labelled > 100, `worker samples under its label: ${labelled} (by root: ${rootSummary(stacks)})`)
  t.equal(underLabels(stacks, /^main$/, ['in-worker']), 0, 'not on the main thread')
})

t.test('a result whose then getter throws: the error reaches the caller and the label closes', async (t) => {
  kflame.start({ hz: 999 })
  const hostile = {}
  Object.defineProperty(hostile, 'then', { get () { throw new Error('then getter') } })
  t.throws(() => kflame.label('hostile', () => { burn(50); return hostile }), /then getter/)
  const thrower = { then () { throw new Error('then call') } }
  await t.rejects(kflame.label('thrower', () => thrower), /then call/)
  burn(200)
  const p = kflame.stop()
  const stacks = parseFolded(p.folded)
  const main = /^main$/
  const after = total(stacks, (s) => main.test(s.frames[0]) && !['hostile', 'thrower'].includes(s.frames[1]))
  const labelled = total(stacks, (s) => main.test(s.frames[0]) && ['hostile', 'thrower'].includes(s.frames[1]))
  t.ok(after > 100, `samples after the labels carry none: ${after}`)
  t.ok(labelled < 100, `only the hostile label's own stretch is labelled: ${labelled}`)
})

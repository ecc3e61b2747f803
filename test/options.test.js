'use strict'

const t = require('tap')
const fs = require('node:fs')
const kflame = require('..')

const maxRate = Number(fs.readFileSync('/proc/sys/kernel/perf_event_max_sample_rate', 'utf8'))

t.test('bad options are refused with a code, and nothing starts', async (t) => {
  const cases = [
    [null, TypeError, 'KFLAME_ERR_INVALID_ARG'],
    ['99', TypeError, 'KFLAME_ERR_INVALID_ARG'],
    [[], TypeError, 'KFLAME_ERR_INVALID_ARG'],
    [{ hz: '99' }, TypeError, 'KFLAME_ERR_INVALID_ARG'],
    [{ hz: 99.5 }, TypeError, 'KFLAME_ERR_INVALID_ARG'],
    [{ hz: NaN }, TypeError, 'KFLAME_ERR_INVALID_ARG'],
    [{ hz: 0 }, RangeError, 'KFLAME_ERR_OUT_OF_RANGE'],
    [{ hz: -5 }, RangeError, 'KFLAME_ERR_OUT_OF_RANGE'],
    [{ hz: maxRate + 1 }, RangeError, 'KFLAME_ERR_OUT_OF_RANGE'],
    [{ event: 'cycles' }, RangeError, 'KFLAME_ERR_OUT_OF_RANGE'],
    [{ event: 1 }, TypeError, 'KFLAME_ERR_INVALID_ARG'],
    [{ kernel: 'yes' }, TypeError, 'KFLAME_ERR_INVALID_ARG'],
    [{ ringPages: 3 }, RangeError, 'KFLAME_ERR_OUT_OF_RANGE'],
    [{ ringPages: 8192 }, RangeError, 'KFLAME_ERR_OUT_OF_RANGE'],
    [{ hzz: 99 }, TypeError, 'KFLAME_ERR_UNKNOWN_OPTION']
  ]
  for (const [options, Ctor, code] of cases) {
    let thrown = null
    try { kflame.start(options) } catch (err) { thrown = err }
    t.ok(thrown instanceof Ctor, `${JSON.stringify(options)} throws ${Ctor.name}`)
    t.equal(thrown?.code, code, `${JSON.stringify(options)} -> ${code}`)
    t.equal(kflame.isRunning(), false)
  }
})

t.test('the hz bound names the sysctl', async (t) => {
  t.throws(() => kflame.start({ hz: maxRate + 1 }), /perf_event_max_sample_rate/)
})

t.test('valid options at their edges are taken', async (t) => {
  for (const options of [{ hz: 1 }, { hz: maxRate }, { event: 'task-clock' }, { kernel: false }, { ringPages: 1 }, { hz: undefined }]) {
    kflame.start(options)
    const profile = kflame.stop()
    t.type(profile.folded, 'string', JSON.stringify(options))
  }
})

t.test('event and kernel options are honoured', async (t) => {
  kflame.start({ event: 'task-clock', kernel: false })
  const p = kflame.stop()
  t.equal(p.stats.event, 'task-clock')
  t.equal(p.stats.kernel, false)
  t.notMatch(p.folded, /_\[k\]/)
})

'use strict'

// Continuous profiles, run for real for several windows: the windows tile
// the time (per-sample times, no gap, no overlap), files rotate, and the
// windows pushed to a local receiver that speaks Pyroscope's ingest API
// decode as pprof with their labels; a receiver that stalls or refuses costs
// bounded memory and counted drops, never an unhandled rejection.

const t = require('tap')
const fs = require('node:fs')
const http = require('node:http')
const os = require('node:os')
const path = require('node:path')
const zlib = require('node:zlib')
const { Profile: PprofProfile } = require('pprof-format')
const kflame = require('..')
const binding = require('../lib/binding')

process.on('unhandledRejection', (err) => t.fail(`unhandled rejection: ${err && err.message}`))

// Keeps the main thread busy in slices, so timers still fire, until `ms` pass.
function busy (ms) {
  return new Promise((resolve) => {
    const end = Date.now() + ms
    let x = 0
    const slice = () => {
      const until = Date.now() + 20
      while (Date.now() < until) x += Math.sqrt(x + 1)
      if (Date.now() < end) setImmediate(slice)
      else resolve(x)
    }
    slice()
  })
}

t.test('windows tile the time: every sample in its window, no gap, no overlap', async (t) => {
  const windows = []
  const c = kflame.continuous({ every: 1, hz: 499, timeline: true, to: (profile, info) => { windows.push({ profile, info }) } })
  await busy(3600)
  const stats = await c.stop()
  t.ok(windows.length >= 4, `${windows.length} windows`)
  t.equal(stats.windows, windows.length)
  t.equal(stats.delivered, windows.length)
  let total = 0
  for (let i = 0; i < windows.length; i++) {
    const { profile } = windows[i]
    const start = profile.timing.startUs
    const end = start + profile.stats.durationMs * 1000
    const { time, line } = profile.samples
    t.equal(time.length, profile.stats.samples, `window ${i}: the timeline holds every sample`)
    let outside = 0
    for (const us of time) if (us < start || us >= end) outside++
    t.equal(outside, 0, `window ${i}: ${time.length} samples inside [${start}, ${end})`)
    // The folded text counts what the timeline holds.
    const counts = profile.folded.split('\n').filter(Boolean).map((l) => Number(l.slice(l.lastIndexOf(' ') + 1)))
    const byLine = new Array(counts.length).fill(0)
    for (const l of line) byLine[l]++
    t.same(byLine, counts, `window ${i}: folded counts match the samples`)
    if (i > 0) {
      const prev = windows[i - 1].profile
      const prevEnd = prev.timing.startUs + prev.stats.durationMs * 1000
      t.ok(Math.abs(prevEnd - start) < 0.01, `window ${i} begins where window ${i - 1} ended (${prevEnd} / ${start})`)
    }
    total += profile.stats.samples
  }
  t.ok(total > 500, `${total} samples in all`)
  t.equal(stats.samples, total)
  t.notOk(kflame.isRunning(), 'stop() ends the profile')
})

t.test('files rotate: the newest `keep` are kept, others this process wrote removed', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-cont-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const other = path.join(dir, 'not-ours.folded')
  fs.writeFileSync(other, 'a;b 1\n')
  const seen = []
  const c = kflame.continuous({ every: 1, hz: 199, to: dir, keep: 2, format: 'folded' })
  c.on('window', (info) => seen.push(info.file))
  await busy(3300)
  await c.stop()
  t.ok(seen.length >= 3, `${seen.length} windows written`)
  const files = fs.readdirSync(dir).sort()
  t.ok(files.includes('not-ours.folded'), 'a file kflame did not write is left alone')
  const ours = files.filter((f) => f.startsWith(`kflame-${process.pid}-`))
  t.same(ours, seen.slice(-2).map((f) => path.basename(f)).sort(), 'the last two windows are kept')
  for (const f of ours) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8')
    t.match(text, /^main;.* \d+$/m, `${f} is folded text`)
  }
})

// A receiver of Pyroscope's ingest API (POST /ingest?name=&from=&until=&
// sampleRate=&spyName=, multipart/form-data with the gzipped pprof in the
// "profile" part), as Grafana documents it for its server.
function receiver (handler) {
  const pushes = []
  const server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      const push = { url: new URL(req.url, 'http://x'), type: req.headers['content-type'], body: Buffer.concat(chunks), headers: req.headers }
      pushes.push(push)
      handler(req, res, push)
    })
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, pushes, url: `http://127.0.0.1:${server.address().port}` })))
}

function profilePart (push) {
  const boundary = /boundary=(\S+)/.exec(push.type)[1]
  const text = push.body.toString('latin1')
  const start = text.indexOf('\r\n\r\n', text.indexOf('name="profile"')) + 4
  const end = text.indexOf(`\r\n--${boundary}--`)
  return push.body.subarray(start, end)
}

t.test('windows pushed to Pyroscope decode as pprof and carry the labels', async (t) => {
  const { server, pushes, url } = await receiver((req, res) => res.end('ok'))
  t.teardown(() => server.close())
  const c = kflame.continuous({ every: 1, hz: 299, to: url, app: 'kflame-test', labels: { env: 'ci', region: 'here' }, headers: { 'X-Scope-OrgID': 'tenant1' } })
  await busy(2300)
  const stats = await c.stop()
  t.ok(pushes.length >= 2, `${pushes.length} pushes`)
  t.equal(stats.delivered, pushes.length)
  t.equal(stats.failed, 0)
  let samples = 0
  for (const push of pushes) {
    t.equal(push.url.pathname, '/ingest')
    const name = push.url.searchParams.get('name')
    t.match(name, new RegExp(`^kflame-test\\.cpu\\{host=[^,]+,pid=${process.pid},env=ci,region=here\\}$`), name)
    const from = Number(push.url.searchParams.get('from'))
    const until = Number(push.url.searchParams.get('until'))
    t.ok(Number.isInteger(from) && until > from && Math.abs(from - Date.now() / 1000) < 60, `from ${from} until ${until}`)
    t.equal(push.url.searchParams.get('sampleRate'), '299')
    t.equal(push.headers['x-scope-orgid'], 'tenant1')
    t.match(push.type, /^multipart\/form-data; boundary=/)
    const pprof = PprofProfile.decode(zlib.gunzipSync(profilePart(push)))
    const strings = pprof.stringTable.strings
    t.ok(pprof.sample.length > 0, 'the pprof has samples')
    const threadKey = strings.indexOf('thread')
    t.ok(pprof.sample.every((s) => s.label.some((l) => Number(l.key) === threadKey)), 'every sample carries its thread')
    t.ok(strings.includes('main'), 'the main thread is named')
    for (const s of pprof.sample) samples += Number(s.value[0])
  }
  t.equal(samples, stats.samples, 'every sample of every window was pushed')
})

t.test('a receiver that stalls: bounded queue, counted drops, no blocked loop', async (t) => {
  const held = []
  const { server, url } = await receiver((req, res) => held.push(res)) // never answers
  t.teardown(() => { for (const res of held) res.destroy(); server.close() })
  const c = kflame.continuous({ every: 1, hz: 99, to: url, queue: 1, timeoutMs: 2500 })
  const dropped = []
  c.on('dropped', (info) => dropped.push(info))
  const failed = []
  c.on('failed', (err) => failed.push(err))
  // The event loop keeps its pace while windows pile up.
  let maxGap = 0
  let last = Date.now()
  const tick = setInterval(() => { const now = Date.now(); maxGap = Math.max(maxGap, now - last); last = now }, 10)
  await busy(4300)
  clearInterval(tick)
  const stats = await c.stop()
  t.ok(stats.windows >= 4, `${stats.windows} windows made`)
  t.ok(stats.dropped >= 1 && stats.dropped === dropped.length, `${stats.dropped} dropped and counted`)
  t.ok(stats.failed >= 1 && failed.every((e) => /did not answer within 2500 ms/.test(e.message)), `${stats.failed} timed out: ${failed.map((e) => e.message)[0]}`)
  t.equal(stats.delivered, 0)
  t.ok(stats.dropped + stats.failed <= stats.windows, 'no window counted twice')
  t.ok(maxGap < 500, `the event loop never waited long (${maxGap} ms)`)
})

t.test('a receiver that refuses: failures counted with the reason', async (t) => {
  const { server, url } = await receiver((req, res) => { res.statusCode = 503; res.end('ingester unavailable') })
  t.teardown(() => server.close())
  const c = kflame.continuous({ every: 1, hz: 99, to: url })
  await busy(1500)
  const stats = await c.stop()
  t.ok(stats.failed >= 1)
  t.equal(stats.delivered, 0)
  t.match(stats.lastError, /answered 503: ingester unavailable/)
})

t.test('bad options are refused before anything starts', async (t) => {
  const cases = [
    [{ every: 0, to: '/tmp' }, 'KFLAME_ERR_OUT_OF_RANGE', /every must be from 1/],
    [{ every: 5 }, 'KFLAME_ERR_INVALID_ARG', /to must be a directory/],
    [{ to: 'ftp://x' }, 'KFLAME_ERR_INVALID_ARG', /only http:\/\/ and https:\/\//],
    [{ to: 'http://127.0.0.1:1/?x=1' }, 'KFLAME_ERR_INVALID_ARG', /no query/],
    [{ to: '/tmp', labels: { 'bad name': 'x' } }, 'KFLAME_ERR_INVALID_ARG', /label name/],
    [{ to: '/tmp', labels: { env: 'a,b' } }, 'KFLAME_ERR_INVALID_ARG', /without spaces/],
    [{ to: '/tmp', hzz: 9 }, 'KFLAME_ERR_UNKNOWN_OPTION', /unknown option "hzz"/],
    [{ to: '/tmp', keep: 0 }, 'KFLAME_ERR_OUT_OF_RANGE', /keep must be/],
    [{ to: '/tmp', headers: { 'X-A': 'a\r\nb' } }, 'KFLAME_ERR_INVALID_ARG', /one-line/]
  ]
  for (const [options, code, message] of cases) {
    t.throws(() => kflame.continuous(options), { code, message }, JSON.stringify(options))
  }
  t.notOk(kflame.isRunning())
  t.notOk(binding.running())
})

'use strict'

// The HTTP endpoints on node:http and listen(): who is served, what is
// refused and with which code, one profile at a time, the self-stop after
// maxDuration, the timed /profile, and every format over the wire. The
// frameworks (express, fastify) and real workloads are in
// http-frameworks.test.js.

const t = require('tap')
const http = require('node:http')
const zlib = require('node:zlib')
const { Profile: PprofProfile } = require('pprof-format')
const kflame = require('..')
const { request, requestAndLeave, listenOn, close, burnForKflameTest } = require('./fixtures/http-client')

const TOKEN = 'a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6'

// A node:http server with kflame's handler. The X-Test-Peer header fakes
// the peer's address, to see what a non-loopback client would get.
async function serverWith (options, t) {
  const handler = kflame.http(options)
  const server = http.createServer((req, res) => {
    const peer = req.headers['x-test-peer']
    if (peer) Object.defineProperty(req.socket, 'remoteAddress', { value: peer })
    handler(req, res)
  })
  const port = await listenOn(server)
  t.teardown(() => close(server))
  return port
}

// Every error is JSON { error, code }.
function isError (t, r, status, code, what) {
  t.equal(r.status, status, `${what}: status ${status} (${r.text.trim()})`)
  t.match(r.headers['content-type'], /^application\/json/, `${what}: JSON`)
  const body = r.json()
  t.equal(body.code, code, `${what}: code ${code}`)
  t.type(body.error, 'string')
  t.ok(body.error.length > 20, `${what}: the message says why`)
}

t.afterEach(() => {
  // A failed test must not leave a profile to the next.
  if (kflame.isRunning()) kflame.stop()
})

t.test('options are checked when the handler is made', async (t) => {
  t.throws(() => kflame.http({ token: '' }), { code: 'KFLAME_ERR_INVALID_ARG', name: 'TypeError' })
  t.throws(() => kflame.http({ token: 'has space' }), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => kflame.http({ token: 42 }), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => kflame.http({ prefix: 'kflame' }), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => kflame.http({ prefix: '/a?b' }), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => kflame.http({ prefix: '/a//b' }), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => kflame.http({ maxDuration: 50 }), { code: 'KFLAME_ERR_OUT_OF_RANGE', name: 'RangeError' })
  t.throws(() => kflame.http({ maxDuration: 1.5 }), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => kflame.http({ maxHz: 0 }), { code: 'KFLAME_ERR_OUT_OF_RANGE' })
  t.throws(() => kflame.http({ tokne: TOKEN }), { code: 'KFLAME_ERR_UNKNOWN_OPTION', message: /tokne/ })
  t.throws(() => kflame.http('/kflame'), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.type(kflame.http(), 'function')
  t.type(kflame.http({ prefix: '/debug/kflame/', token: TOKEN, maxDuration: 1000, maxHz: 99 }), 'function')

  await t.rejects(kflame.listen({}), { code: 'KFLAME_ERR_INVALID_ARG', message: /port/ })
  await t.rejects(kflame.listen({ port: 70000 }), { code: 'KFLAME_ERR_OUT_OF_RANGE' })
  await t.rejects(kflame.listen({ port: 0, prot: 1 }), { code: 'KFLAME_ERR_UNKNOWN_OPTION' })
  for (const host of ['0.0.0.0', '::', '10.1.2.3', 'example.com']) {
    await t.rejects(kflame.listen({ port: 0, host }), { code: 'KFLAME_ERR_HTTP_INSECURE', message: /token/ },
      `no token on ${host}`)
  }
  // With a token, any interface will do.
  const server = await kflame.listen({ port: 0, host: '0.0.0.0', token: TOKEN })
  t.equal(server.address().address, '0.0.0.0')
  await close(server)
  // A port in use is the server's own error.
  const first = await kflame.listen({ port: 0 })
  await t.rejects(kflame.listen({ port: first.address().port }), { code: 'EADDRINUSE' })
  await close(first)
})

t.test('with a token: Bearer in constant time, never in the query', async (t) => {
  const server = await kflame.listen({ port: 0, token: TOKEN, prefix: '/kflame' })
  t.teardown(() => close(server))
  const { port } = server.address()
  const status = (headers, path = '/kflame/status') => request(port, 'GET', path, { headers })

  let r = await status({})
  isError(t, r, 401, 'KFLAME_ERR_HTTP_UNAUTHORIZED', 'no header')
  t.match(r.headers['www-authenticate'], /^Bearer/)
  r = await status({ Authorization: 'Bearer short' })
  isError(t, r, 401, 'KFLAME_ERR_HTTP_UNAUTHORIZED', 'a wrong token of another length')
  t.match(r.headers['www-authenticate'], /^Bearer/)
  r = await status({ Authorization: `Bearer ${TOKEN.slice(0, -1)}x` })
  isError(t, r, 401, 'KFLAME_ERR_HTTP_UNAUTHORIZED', 'a wrong token of the same length')
  r = await status({ Authorization: `Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}` })
  isError(t, r, 401, 'KFLAME_ERR_HTTP_UNAUTHORIZED', 'another scheme')
  r = await status({ Authorization: TOKEN })
  isError(t, r, 401, 'KFLAME_ERR_HTTP_UNAUTHORIZED', 'no scheme')

  r = await status({ Authorization: `Bearer ${TOKEN}` })
  t.equal(r.status, 200, 'the right token')
  t.same(r.json().running, false)
  r = await status({ Authorization: `bearer ${TOKEN}` })
  t.equal(r.status, 200, 'the scheme is case-insensitive')
  r = await status({ Authorization: `Bearer ${TOKEN}`, Host: 'profiling.example.com' })
  t.equal(r.status, 200, 'with a token, any Host')

  for (const name of ['token', 'access_token', 'TOKEN', 'api_key']) {
    r = await status({}, `/kflame/status?${name}=${TOKEN}`)
    isError(t, r, 400, 'KFLAME_ERR_HTTP_TOKEN_IN_QUERY', `${name} in the query`)
    r = await status({ Authorization: `Bearer ${TOKEN}` }, `/kflame/start?${name}=${TOKEN}`)
    isError(t, r, 400, 'KFLAME_ERR_HTTP_TOKEN_IN_QUERY', `${name} in the query, with the header too`)
  }
  t.equal(kflame.isRunning(), false, 'no refused request started anything')
})

t.test('without a token: loopback peers naming a loopback Host', async (t) => {
  const port = await serverWith({ prefix: '/kflame' }, t)
  const status = (headers) => request(port, 'GET', '/kflame/status', { headers })

  t.equal((await status({})).status, 200, 'a loopback peer')
  for (const host of ['localhost', 'LocalHost:8080', '127.0.0.1', '127.1.2.3:1', '[::1]', '[::1]:9999', `127.0.0.1:${port}`]) {
    t.equal((await status({ Host: host })).status, 200, `Host ${host}`)
  }
  for (const host of ['evil.example', 'evil.example:80', 'localhost.evil.example', '127.0.0.1.nip.io', '10.0.0.1', '[::2]', '[fe80::1]:80']) {
    isError(t, await status({ Host: host }), 403, 'KFLAME_ERR_HTTP_FORBIDDEN', `Host ${host}`)
  }
  for (const peer of ['::1', '::ffff:127.0.0.1', '127.0.0.5']) {
    t.equal((await status({ 'X-Test-Peer': peer })).status, 200, `peer ${peer}`)
  }
  for (const peer of ['10.0.0.1', '::ffff:10.0.0.1', '192.168.1.1', 'fe80::1']) {
    isError(t, await status({ 'X-Test-Peer': peer }), 403, 'KFLAME_ERR_HTTP_FORBIDDEN', `peer ${peer}`)
  }
  // A page of another site, in a browser on this machine.
  isError(t, await status({ Origin: 'https://evil.example' }), 403, 'KFLAME_ERR_HTTP_FORBIDDEN', 'a foreign Origin')
  isError(t, await status({ 'Sec-Fetch-Site': 'cross-site' }), 403, 'KFLAME_ERR_HTTP_FORBIDDEN', 'Sec-Fetch-Site: cross-site')
  t.equal((await status({ Origin: 'http://localhost:3000', 'Sec-Fetch-Site': 'same-site' })).status, 200, 'a local page')

  const r = await request(port, 'POST', '/kflame/start', { headers: { Host: 'evil.example' } })
  isError(t, r, 403, 'KFLAME_ERR_HTTP_FORBIDDEN', 'start from a rebound name')
  t.equal(kflame.isRunning(), false, 'a refused start starts nothing')
})

t.test('one profile at a time: 409', async (t) => {
  const port = await serverWith({}, t)
  let r = await request(port, 'POST', '/stop')
  isError(t, r, 409, 'KFLAME_ERR_NOT_RUNNING', 'stop when idle')

  r = await request(port, 'POST', '/start?hz=199')
  t.equal(r.status, 200)
  const started = r.json()
  t.equal(started.started, true)
  t.equal(started.hz, 199)
  t.equal(started.maxDuration, 300000, 'ms, 5 minutes by default')
  t.equal(kflame.isRunning(), true)

  r = await request(port, 'POST', '/start')
  isError(t, r, 409, 'KFLAME_ERR_RUNNING', 'a second start')
  t.match(r.json().error, /\/stop/, 'says how to stop it')
  isError(t, await request(port, 'GET', '/profile?seconds=1'), 409, 'KFLAME_ERR_RUNNING', '/profile while one runs')
  t.throws(() => kflame.start(), { code: 'KFLAME_ERR_RUNNING' }, 'the library sees the same profile')

  r = await request(port, 'GET', '/status')
  t.match(r.json(), { running: true, owner: 'http', hz: 199 })

  r = await request(port, 'POST', '/stop?format=folded')
  t.equal(r.status, 200)
  t.equal(kflame.isRunning(), false)
  isError(t, await request(port, 'POST', '/stop'), 409, 'KFLAME_ERR_NOT_RUNNING', 'a second stop')

  // A profile the application started is not the endpoints' to stop.
  kflame.start()
  r = await request(port, 'POST', '/stop')
  isError(t, r, 409, 'KFLAME_ERR_HTTP_NOT_OWNER', 'stop of the application\'s profile')
  t.match(r.json().error, /kflame\.start\(\)/)
  r = await request(port, 'POST', '/start')
  isError(t, r, 409, 'KFLAME_ERR_RUNNING', 'start over the application\'s profile')
  t.match(r.json().error, /application/)
  t.match((await request(port, 'GET', '/status')).json(), { running: true, owner: 'application' })
  t.equal(kflame.isRunning(), true, 'still running')
  kflame.stop()

  // The application may stop the endpoints' profile: the endpoints notice.
  t.equal((await request(port, 'POST', '/start')).status, 200)
  kflame.stop()
  isError(t, await request(port, 'POST', '/stop'), 409, 'KFLAME_ERR_NOT_RUNNING', 'stopped behind our back')
  t.equal((await request(port, 'POST', '/start')).status, 200, 'and start again')
  t.equal((await request(port, 'POST', '/stop')).status, 200)
})

t.test('bad parameters: 400 with a code, nothing started', async (t) => {
  const port = await serverWith({ maxDuration: 10000 }, t)
  const cases = [
    ['/start?hz=abc', 'hz=abc'],
    ['/start?hz=', 'hz empty'],
    ['/start?hz=0', 'hz=0'],
    ['/start?hz=1000', 'hz over maxHz (999)'],
    ['/start?hz=99.5', 'hz not an integer'],
    ['/start?hz=-5', 'hz negative'],
    ['/start?hz=99&hz=199', 'hz twice'],
    ['/start?hx=99', 'a typo'],
    ['/start?format=svg', 'a parameter of another endpoint'],
    ['/profile?seconds=11', 'seconds over maxDuration'],
    ['/profile?seconds=0', 'seconds=0'],
    ['/profile?seconds=1e3', 'seconds in exponent form'],
    ['/profile?seconds=1&format=gif', 'an unknown format'],
    ['/stop?format=SVG', 'formats are lower case'],
    ['/status?verbose=1', 'status takes none']
  ]
  for (const [path, what] of cases) {
    isError(t, await request(port, 'GET', path), 400, 'KFLAME_ERR_HTTP_BAD_PARAM', what)
  }
  t.match((await request(port, 'GET', '/start?hz=1000')).json().error, /1 to 999/, 'the bound is in the message')
  t.match((await request(port, 'GET', '/profile?seconds=11')).json().error, /0\.1 to 10/, 'the bound is in the message')
  t.equal(kflame.isRunning(), false)
  // maxHz may go past the kernel's limit: then start()'s own error and code.
  const kernelMax = Number(require('node:fs').readFileSync('/proc/sys/kernel/perf_event_max_sample_rate', 'utf8'))
  if (kernelMax < 100000) {
    const port2 = await serverWith({ maxHz: 100000 }, t)
    isError(t, await request(port2, 'GET', `/start?hz=${kernelMax + 1}`), 400, 'KFLAME_ERR_OUT_OF_RANGE', 'hz over the kernel\'s limit')
  }
})

t.test('405 with Allow; outside the prefix: next(), or 404', async (t) => {
  const port = await serverWith({ prefix: '/kflame' }, t)
  for (const method of ['PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS']) {
    const r = await request(port, method, '/kflame/start')
    t.equal(r.status, 405, `${method} /start`)
    t.equal(r.headers.allow, 'GET, POST')
    if (method !== 'HEAD') t.equal(r.json().code, 'KFLAME_ERR_HTTP_METHOD')
  }
  const r = await request(port, 'POST', '/kflame/status')
  isError(t, r, 405, 'KFLAME_ERR_HTTP_METHOD', 'POST /status')
  t.equal(r.headers.allow, 'GET')
  t.equal(kflame.isRunning(), false)

  // No next (plain node:http): a JSON 404 naming the endpoints.
  for (const path of ['/', '/start', '/kflame', '/kflame/', '/kflame/start/', '/kflame/other', '/kflamex/start', '/KFLAME/start']) {
    const r = await request(port, 'GET', path)
    isError(t, r, 404, 'KFLAME_ERR_HTTP_NOT_FOUND', `GET ${path}`)
  }
  t.match((await request(port, 'GET', '/nope')).json().error, /\/kflame\/start/)

  // With next: everything else is the application's. Routing looks at the
  // path only, and the query is not read before the path matched.
  const handler = kflame.http({ prefix: '/kflame' })
  const seen = []
  const next = (req, res) => () => { seen.push(req.url); res.end('app') }
  const server = http.createServer((req, res) => handler(req, res, next(req, res)))
  const port2 = await listenOn(server)
  t.teardown(() => close(server))
  t.equal((await request(port2, 'GET', '/api/items?token=abc')).text, 'app')
  t.equal((await request(port2, 'GET', '/kflame/other?hz=5')).text, 'app')
  t.equal((await request(port2, 'GET', '/kflame/status?x=/kflame/start')).status, 400, 'the query does not route')
  t.same(seen, ['/api/items?token=abc', '/kflame/other?hz=5'])
})

t.test('maxDuration: a forgotten profile stops itself and waits for /stop', async (t) => {
  const port = await serverWith({ maxDuration: 300 }, t)
  let r = await request(port, 'POST', '/start?hz=499')
  t.equal(r.status, 200)
  t.equal(r.json().maxDuration, 300)
  burnForKflameTest(150)
  // The timer is unref'd and fires on time while the loop is idle.
  const deadline = Date.now() + 10000
  while (kflame.isRunning() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(kflame.isRunning(), false, 'stopped itself')
  r = await request(port, 'GET', '/status')
  t.match(r.json(), { running: false, owner: null, uncollected: { samples: Number } })

  r = await request(port, 'POST', '/start')
  isError(t, r, 409, 'KFLAME_ERR_HTTP_UNCOLLECTED', 'start while a result waits')
  t.match(r.json().error, /\/stop/)

  r = await request(port, 'POST', '/stop?format=folded')
  t.equal(r.status, 200, 'the kept result')
  t.ok(r.headers['x-kflame-auto-stopped'], 'marked as stopped by maxDuration')
  t.ok(Date.parse(r.headers['x-kflame-auto-stopped']) > 0, 'with the time it stopped')
  t.match(r.text, /burnForKflameTest/, 'the work before the stop')
  const duration = Number(r.headers['x-kflame-duration-ms'])
  t.ok(duration >= 250 && duration < 5000, `lasted about maxDuration (${duration} ms)`)

  isError(t, await request(port, 'POST', '/stop'), 409, 'KFLAME_ERR_NOT_RUNNING', 'collected once')

  // A stopped profile's timer does not fire into the next one.
  t.equal((await request(port, 'POST', '/start')).status, 200)
  t.equal((await request(port, 'POST', '/stop')).status, 200)
  t.equal((await request(port, 'POST', '/start')).status, 200)
  r = await request(port, 'POST', '/stop?format=svg')
  t.equal(r.status, 200)
  t.notOk(r.headers['x-kflame-auto-stopped'])

  // The SVG of a self-stopped profile says so.
  t.equal((await request(port, 'POST', '/start')).status, 200)
  while (kflame.isRunning()) await new Promise((resolve) => setTimeout(resolve, 50))
  r = await request(port, 'POST', '/stop')
  t.match(r.text, /stopped after maxDuration/)
})

t.test('/profile?seconds=1 waits on a timer; the event loop runs on', async (t) => {
  const port = await serverWith({}, t)
  const t0 = performance.now()
  const pending = request(port, 'GET', '/profile?seconds=1&hz=199&format=folded')
  // While it profiles, other requests are answered at once.
  await new Promise((resolve) => setTimeout(resolve, 200))
  const t1 = performance.now()
  const s = await request(port, 'GET', '/status')
  const statusMs = performance.now() - t1
  t.match(s.json(), { running: true, owner: 'http-profile', hz: 199 })
  t.ok(statusMs < 900, `answered during the profile (${statusMs.toFixed(0)} ms)`)
  isError(t, await request(port, 'POST', '/stop'), 409, 'KFLAME_ERR_HTTP_NOT_OWNER', '/stop of a timed profile')
  burnForKflameTest(300)

  const r = await pending
  const ms = performance.now() - t0
  t.equal(r.status, 200, r.status === 200 ? 'profiled' : r.text)
  t.match(r.headers['content-type'], 'text/plain; charset=utf-8')
  t.ok(ms >= 990, `took the second (${ms.toFixed(0)} ms)`)
  t.ok(Number(r.headers['x-kflame-duration-ms']) >= 990)
  t.equal(r.headers['x-kflame-hz'], '199')
  t.match(r.text, /burnForKflameTest/)
  t.equal(kflame.isRunning(), false)
  t.comment(`/profile?seconds=1: ${r.headers['server-timing']}, ${r.headers['x-kflame-samples']} samples`)
})

t.test('/profile: a client that leaves ends the profile, which is dropped', async (t) => {
  const port = await serverWith({}, t)
  const outcome = await requestAndLeave(port, '/profile?seconds=20', 300)
  t.equal(outcome, 'left')
  // The server sees the close on its next turn of the loop.
  const deadline = Date.now() + 5000
  while (kflame.isRunning() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal(kflame.isRunning(), false, 'stopped early')
  t.match((await request(port, 'GET', '/status')).json(), { running: false, owner: null, uncollected: null })
  isError(t, await request(port, 'POST', '/stop'), 409, 'KFLAME_ERR_NOT_RUNNING', 'nothing was kept')
  t.equal((await request(port, 'POST', '/start')).status, 200, 'free for the next')
  t.equal((await request(port, 'POST', '/stop')).status, 200)
})

t.test('every format: its type and file name, and it parses', async (t) => {
  const port = await serverWith({ prefix: '/kflame' }, t)
  const expected = {
    svg: ['image/svg+xml; charset=utf-8', 'svg'],
    folded: ['text/plain; charset=utf-8', 'folded'],
    cpuprofile: ['application/json; charset=utf-8', 'cpuprofile'],
    trace: ['application/json; charset=utf-8', 'trace.json'],
    pprof: ['application/octet-stream', 'pb.gz']
  }
  const got = {}
  for (const [format, [type, ext]] of Object.entries(expected)) {
    t.equal((await request(port, 'POST', '/kflame/start?hz=499')).status, 200)
    burnForKflameTest(150)
    // The default format is svg.
    const r = await request(port, 'POST', format === 'svg' ? '/kflame/stop' : `/kflame/stop?format=${format}`)
    t.equal(r.status, 200, format)
    t.equal(r.headers['content-type'], type, `${format}: Content-Type`)
    const name = new RegExp(`^(inline|attachment); filename="kflame-${process.pid}-\\d{8}T\\d{6}Z\\.${ext.replace('.', '\\.')}"$`)
    t.match(r.headers['content-disposition'], name, `${format}: file name`)
    t.equal(Number(r.headers['content-length']), r.body.length)
    t.equal(r.headers['cache-control'], 'no-store')
    t.ok(Number(r.headers['x-kflame-samples']) > 0, `${format}: samples`)
    t.match(r.headers['server-timing'], /^stop;dur=[\d.]+, render;dur=[\d.]+$/)
    got[format] = r.body
  }
  t.match(got.svg.toString(), /^<\?xml/)
  t.match(got.svg.toString(), /burnForKflameTest/)
  t.match(got.folded.toString(), /burnForKflameTest [^ ]+:\d+:\d+_\[j\] \d+/)
  const cpu = JSON.parse(got.cpuprofile)
  t.ok(Array.isArray(cpu.nodes) && cpu.nodes.length > 1, 'cpuprofile nodes')
  t.ok(cpu.nodes.some((n) => n.callFrame.functionName === 'burnForKflameTest'), 'cpuprofile names the function')
  t.equal(cpu.samples.length, cpu.timeDeltas.length)
  const trace = JSON.parse(got.trace)
  t.ok(Array.isArray(trace.traceEvents) && trace.traceEvents.some((e) => e.ph === 'X'), 'trace events')
  const pprof = PprofProfile.decode(zlib.gunzipSync(got.pprof))
  t.ok(pprof.sample.length > 0, 'pprof samples')
  t.ok(pprof.stringTable.strings.some((s) => s === 'burnForKflameTest' || s.startsWith('burnForKflameTest ')),
    'pprof names the function')
})

'use strict'

// The endpoints inside express and fastify, and real profiles over HTTP: a
// route of the same server burns CPU in burnForKflameTest while the
// endpoints profile it, and the result names that function.

const t = require('tap')
const http = require('node:http')
const express = require('express')
const Fastify = require('fastify')
const { XMLValidator } = require('fast-xml-parser')
const kflame = require('..')
const { request, listenOn, close, burnForKflameTest } = require('./fixtures/http-client')

const TOKEN = 'f00dfacef00dfacef00dfacef00dface'

t.afterEach(() => {
  if (kflame.isRunning()) kflame.stop()
})

t.test('express: app.use(), next() for the rest, mounted or prefixed', async (t) => {
  const app = express()
  app.use(kflame.http({ prefix: '/kflame' }))
  app.use('/admin/kflame', kflame.http())
  app.get('/hello', (req, res) => res.send('hello'))
  app.get('/burn', (req, res) => res.json({ x: burnForKflameTest(Number(req.query.ms)) }))
  const server = http.createServer(app)
  const port = await listenOn(server)
  t.teardown(() => close(server))

  t.equal((await request(port, 'GET', '/hello')).text, 'hello', 'the application\'s routes')
  const other = await request(port, 'GET', '/kflame/other')
  t.equal(other.status, 404, 'unknown paths under the prefix go to express')
  t.match(other.headers['content-type'], /html/, 'express\'s own 404')
  t.equal((await request(port, 'GET', '/kflame/status')).status, 200, 'prefix option')
  t.equal((await request(port, 'GET', '/admin/kflame/status')).status, 200, 'mount path')
  t.equal((await request(port, 'PUT', '/admin/kflame/stop')).status, 405)
  const r = await request(port, 'GET', '/kflame/status', { headers: { Host: 'evil.example' } })
  t.equal(r.status, 403)
  t.equal(r.json().code, 'KFLAME_ERR_HTTP_FORBIDDEN')

  t.equal((await request(port, 'POST', '/kflame/start?hz=499')).status, 200)
  t.equal((await request(port, 'GET', '/burn?ms=1200')).status, 200)
  // Started under one mount, stopped under the other: one profiler.
  const stopped = await request(port, 'POST', '/admin/kflame/stop?format=folded')
  t.equal(stopped.status, 200)
  const burn = stopped.text.split('\n').filter((l) => l.includes('burnForKflameTest'))
  const samples = burn.reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)
  t.ok(samples > 50, `the burning route is in the profile (${samples} samples of ${stopped.headers['x-kflame-samples']})`)
  t.ok(burn.some((l) => /;burnForKflameTest [^;]*http-client\.js:\d+:\d+_\[j\]/.test(l)), 'named with its file and line')
})

t.test('fastify: a plugin under its prefix, with a token', async (t) => {
  const app = Fastify()
  await app.register(kflame.fastify, { prefix: '/kflame', token: TOKEN })
  app.get('/burn', async (request) => ({ x: burnForKflameTest(Number(request.query.ms)) }))
  app.get('/hello', async () => 'hello')
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  const port = app.server.address().port
  const auth = { Authorization: `Bearer ${TOKEN}` }

  t.equal((await request(port, 'GET', '/hello')).text, 'hello')
  let r = await request(port, 'GET', '/kflame/status')
  t.equal(r.status, 401)
  t.equal(r.json().code, 'KFLAME_ERR_HTTP_UNAUTHORIZED')
  t.match(r.headers['www-authenticate'], /^Bearer/)
  r = await request(port, 'GET', `/kflame/status?token=${TOKEN}`)
  t.equal(r.json().code, 'KFLAME_ERR_HTTP_TOKEN_IN_QUERY')
  t.equal((await request(port, 'GET', '/kflame/status', { headers: auth })).status, 200)
  t.equal((await request(port, 'GET', '/status', { headers: auth })).status, 404, 'only under the prefix')
  t.equal((await request(port, 'GET', '/kflame/other', { headers: auth })).status, 404, 'fastify\'s 404 for the rest')
  r = await request(port, 'DELETE', '/kflame/start', { headers: auth })
  t.equal(r.status, 405)
  t.equal(r.headers.allow, 'GET, POST')
  t.equal(r.json().code, 'KFLAME_ERR_HTTP_METHOD')

  // A POST with a JSON type and no body: fastify's parsers are off here.
  r = await request(port, 'POST', '/kflame/start?hz=499', { headers: { ...auth, 'Content-Type': 'application/json' } })
  t.equal(r.status, 200, r.text)
  t.equal((await request(port, 'GET', '/burn?ms=1200')).status, 200)
  const t0 = performance.now()
  r = await request(port, 'POST', '/kflame/stop', { headers: auth })
  const ms = performance.now() - t0
  t.equal(r.status, 200)
  t.equal(r.headers['content-type'], 'image/svg+xml; charset=utf-8')
  t.equal(XMLValidator.validate(r.text), true, 'valid XML')
  t.match(r.text, /burnForKflameTest/)
  t.comment(`fastify /stop (svg, ~1.2 s at 499 Hz): ${ms.toFixed(1)} ms for the request; ${r.headers['server-timing']}`)
})

t.test('fastify: options are checked when registered', async (t) => {
  const app = Fastify()
  app.register(kflame.fastify, { prefix: '/kflame', token: '' })
  await t.rejects(app.ready(), { code: 'KFLAME_ERR_INVALID_ARG' })
  const app2 = Fastify()
  app2.register(kflame.fastify, { prefix: '/kflame', maxDuraton: 5 })
  await t.rejects(app2.ready(), { code: 'KFLAME_ERR_UNKNOWN_OPTION' })
})

t.test('node:http: /profile while a route burns, and the cost of /stop', async (t) => {
  const handler = kflame.http({ prefix: '/kflame' })
  const server = http.createServer((req, res) => {
    if (req.url.startsWith('/burn')) return res.end(String(burnForKflameTest(Number(req.url.split('=')[1]))))
    handler(req, res)
  })
  const port = await listenOn(server)
  t.teardown(() => close(server))

  // The timed profile, with the burning request sent after it began.
  const pending = request(port, 'GET', '/kflame/profile?seconds=1.5&hz=499&format=folded')
  await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal((await request(port, 'GET', '/burn?ms=1000')).status, 200)
  const r = await pending
  t.equal(r.status, 200, r.text.slice(0, 200))
  t.match(r.text, /burnForKflameTest/)

  // A ~2 s profile at 99 Hz: what /stop costs the event loop (stop + render),
  // for each format. Logged, not asserted: the machine is shared.
  for (const format of ['svg', 'folded', 'pprof']) {
    t.equal((await request(port, 'POST', '/kflame/start')).status, 200)
    t.equal((await request(port, 'GET', '/burn?ms=2000')).status, 200)
    const t0 = performance.now()
    const s = await request(port, 'POST', `/kflame/stop?format=${format}`)
    const ms = performance.now() - t0
    t.equal(s.status, 200)
    if (format === 'svg') {
      t.equal(XMLValidator.validate(s.text), true, 'valid XML')
      t.match(s.text, /burnForKflameTest/)
    }
    t.comment(`/stop?format=${format} after ${s.headers['x-kflame-duration-ms']} ms at 99 Hz ` +
      `(${s.headers['x-kflame-samples']} samples, ${s.body.length} bytes): ${ms.toFixed(1)} ms for the request; ` +
      `${s.headers['server-timing']}`)
  }
})

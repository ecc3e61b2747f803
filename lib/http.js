'use strict'

// Profiling a running server over HTTP: `/start`, `/stop`, a timed
// `/profile` (as Go's /debug/pprof/profile) and `/status`, as a handler for
// node:http, express and connect, as a fastify plugin, and as a dedicated
// admin server (listen()).
//
// It runs in production, so it is safe by default: with a token, every
// request needs `Authorization: Bearer <token>`; without one, only loopback
// peers naming a loopback Host are served. One profile runs at a time per
// process, and one left running stops itself after maxDuration.
//
// lib/index.js requires this module while it is still being built, so the
// kflame API is only looked up inside functions (api()).

const crypto = require('node:crypto')
const nodeHttp = require('node:http')
const net = require('node:net')
const { kflameError, invalid, outOfRange } = require('./errors')
const { MODES, WHATS } = require('./options')
const output = require('./output')

function api () {
  return require('./index')
}

const HANDLER_DEFAULTS = Object.freeze({
  prefix: '',
  token: undefined,
  maxDuration: 5 * 60 * 1000, // ms
  maxHz: 999
})

const LISTEN_DEFAULTS = Object.freeze({
  ...HANDLER_DEFAULTS,
  port: undefined,
  host: '127.0.0.1',
  unref: true
})

// Bounds of the options above. An hour caps what one forgotten profile can
// hold in memory (99 Hz × threads × 3600 s of samples).
const MAX_DURATION_RANGE = [100, 60 * 60 * 1000]
const MAX_HZ_RANGE = [1, 100000]
const DEFAULT_HZ = 99
const DEFAULT_SECONDS = 30 // /profile, as Go's pprof

// The endpoints, below the prefix, and the methods each takes. GET is there
// so a browser or `curl URL` can drive it; the CSRF that allows is answered
// by the token, or by the Origin checks of loopback mode.
const ENDPOINTS = {
  '/start': { methods: ['GET', 'POST'], params: ['hz', 'mode', 'what', 'sourceMaps'] },
  '/stop': { methods: ['GET', 'POST'], params: ['format'] },
  '/profile': { methods: ['GET', 'POST'], params: ['seconds', 'hz', 'format', 'mode', 'what', 'sourceMaps'] },
  '/status': { methods: ['GET'], params: [] }
}

// Query parameters that look like credentials: refused outright, so a token
// is never used from a URL, which proxies and access logs keep.
const TOKEN_PARAMS = new Set(['token', 'access_token', 'accesstoken', 'auth', 'authorization', 'bearer',
  'key', 'api_key', 'apikey', 'secret', 'password'])

// --- the state: one profiler per process, so one state for every handler ---

const state = {
  // The profile the endpoints started: { via: 'start' | 'profile', hz,
  // startedAt, maxDuration, timer, prefix }.
  session: null,
  // A profile stopped by its maxDuration, kept for the next /stop:
  // { profile, session, stoppedAt }.
  kept: null
}

// The session, unless application code stopped it behind our back with
// kflame.stop() (that caller got the profile; nothing is left for us).
function liveSession () {
  const s = state.session
  if (s && !api().isRunning()) {
    clearTimeout(s.timer)
    state.session = null
  }
  return state.session
}

function endSession (session) {
  clearTimeout(session.timer)
  if (state.session === session) state.session = null
}

function autoStop (session) {
  if (state.session !== session) return
  state.session = null
  if (!api().isRunning()) return
  try {
    state.kept = { profile: api().stop(), session, stoppedAt: Date.now() }
  } catch {
    // stop() only throws when nothing runs, which was just checked: nothing
    // is lost by leaving the result empty.
  }
}

// --- options ---

function takeOptions (fn, options, defaults, ignored = []) {
  if (options === undefined) options = {}
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalid(`${fn}(options): options must be an object`)
  }
  const o = { ...defaults }
  for (const [name, value] of Object.entries(options)) {
    if (ignored.includes(name)) continue
    if (!Object.hasOwn(defaults, name)) {
      throw kflameError(TypeError, 'KFLAME_ERR_UNKNOWN_OPTION',
        `${fn}(options): unknown option "${name}"; known: ${Object.keys(defaults).join(', ')}`)
    }
    if (value !== undefined) o[name] = value
  }
  return o
}

function checkPrefix (fn, prefix) {
  if (typeof prefix !== 'string') throw invalid(`${fn}(options): prefix must be a string such as '/kflame'`)
  if (prefix === '' || prefix === '/') return ''
  if (!/^(\/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)+\/?$/.test(prefix)) {
    throw invalid(`${fn}(options): prefix must be a URL path such as '/kflame' (starting with '/', ` +
      `no query, no empty segment), got ${JSON.stringify(prefix)}`)
  }
  return prefix.endsWith('/') ? prefix.slice(0, -1) : prefix
}

function checkIntegerOption (fn, name, value, [min, max], unit = '') {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw invalid(`${fn}(options): ${name} must be an integer${unit}`)
  }
  if (value < min || value > max) {
    throw outOfRange(`${fn}(options): ${name} must be from ${min} to ${max}${unit}, got ${value}`)
  }
}

// -> the handler's settings, with the token's digest ready for comparing.
function checkHandlerOptions (fn, o) {
  const config = {
    prefix: checkPrefix(fn, o.prefix),
    tokenDigest: null,
    maxDuration: o.maxDuration,
    maxHz: o.maxHz
  }
  if (o.token !== undefined) {
    // Visible ASCII only: it has to travel in an Authorization header.
    if (typeof o.token !== 'string' || !/^[\x21-\x7e]{1,4096}$/.test(o.token)) {
      throw invalid(`${fn}(options): token must be a non-empty string of visible ASCII characters ` +
        "(no spaces), e.g. require('node:crypto').randomBytes(32).toString('hex')")
    }
    config.tokenDigest = digest(o.token)
  }
  checkIntegerOption(fn, 'maxDuration', o.maxDuration, MAX_DURATION_RANGE, ' (milliseconds)')
  checkIntegerOption(fn, 'maxHz', o.maxHz, MAX_HZ_RANGE)
  return config
}

// --- addresses ---

const loopback = new net.BlockList()
loopback.addSubnet('127.0.0.0', 8, 'ipv4')
loopback.addAddress('::1', 'ipv6')

// 127.0.0.0/8, ::1, and IPv4-mapped 127.x (::ffff:127.0.0.1).
function isLoopbackAddress (address) {
  const family = net.isIP(address)
  if (family === 0) return false
  return loopback.check(address, family === 6 ? 'ipv6' : 'ipv4')
}

// A Host header (or its Origin's host): localhost, 127.x.x.x or [::1],
// with any port.
function isLoopbackHost (host) {
  const m = /^(?:\[([0-9a-f:.]+)\]|([^:[\]]+))(?::\d{1,5})?$/i.exec(host)
  if (!m) return false
  if (m[1] !== undefined) return net.isIPv6(m[1]) && isLoopbackAddress(m[1])
  const name = m[2].toLowerCase()
  return name === 'localhost' || (net.isIPv4(name) && isLoopbackAddress(name))
}

// What listen() may bind without a token.
function isLoopbackBind (host) {
  return host === 'localhost' || isLoopbackAddress(host)
}

// --- requests and responses ---

function digest (text) {
  return crypto.createHash('sha256').update(text).digest()
}

// Equal digests of any two strings take the same time to compare, whatever
// their lengths, so a wrong token says nothing of the right one.
function tokenMatches (config, header) {
  const m = /^Bearer +([\x21-\x7e]+) *$/i.exec(header || '')
  if (!m) return false
  return crypto.timingSafeEqual(digest(m[1]), config.tokenDigest)
}

const COMMON_HEADERS = {
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff'
}

function send (res, status, headers, body) {
  if (res.headersSent || res.destroyed) return
  res.writeHead(status, { ...COMMON_HEADERS, ...headers, 'Content-Length': Buffer.byteLength(body) })
  res.end(body)
}

function sendJson (res, status, value, headers) {
  send(res, status, { 'Content-Type': 'application/json; charset=utf-8', ...headers }, JSON.stringify(value) + '\n')
}

function sendError (res, status, code, message, headers) {
  sendJson(res, status, { error: message, code }, headers)
}

// A coded error to answer with: thrown by the checks below, caught in serve().
class HttpError extends Error {
  constructor (status, code, message, headers) {
    super(message)
    this.status = status
    this.code = code
    this.headers = headers
  }
}

function splitUrl (url) {
  const i = url.indexOf('?')
  return i < 0 ? { path: url, query: '' } : { path: url.slice(0, i), query: url.slice(i + 1) }
}

// Who may ask. A token decides alone; without one, the peer must be this
// machine and the Host a loopback name (a page whose DNS name was rebound to
// 127.0.0.1 still sends its own name as Host), and a browser must not be
// sending the request on behalf of another site.
function checkAccess (config, req, params) {
  for (const name of params.keys()) {
    if (TOKEN_PARAMS.has(name.toLowerCase())) {
      throw new HttpError(400, 'KFLAME_ERR_HTTP_TOKEN_IN_QUERY',
        `the query parameter "${name}" looks like a credential; URLs end up in logs, so a token is only ` +
        'taken from the header: send "Authorization: Bearer <token>" instead')
    }
  }
  if (config.tokenDigest) {
    if (!tokenMatches(config, req.headers.authorization)) {
      throw new HttpError(401, 'KFLAME_ERR_HTTP_UNAUTHORIZED',
        'missing or wrong token: send the token configured in kflame as "Authorization: Bearer <token>"',
        { 'WWW-Authenticate': 'Bearer realm="kflame"' })
    }
    return
  }
  const peer = req.socket && req.socket.remoteAddress
  if (!peer || !isLoopbackAddress(peer)) {
    throw new HttpError(403, 'KFLAME_ERR_HTTP_FORBIDDEN',
      `no token is configured, so only this machine's loopback peers are served, not ${peer || 'an unknown peer'}: ` +
      'set the token option to serve other hosts')
  }
  const host = req.headers.host
  if (host !== undefined && !isLoopbackHost(host)) {
    throw new HttpError(403, 'KFLAME_ERR_HTTP_FORBIDDEN',
      `no token is configured, so the Host header must be localhost, 127.x.x.x or [::1], not ${JSON.stringify(host)} ` +
      '(a guard against DNS rebinding): use a loopback address, or set the token option')
  }
  const origin = req.headers.origin
  const site = req.headers['sec-fetch-site']
  // Origin "null" (sandboxed frames, file: pages) is no loopback page either.
  if ((origin !== undefined && !isLoopbackHost(originHost(origin))) || site === 'cross-site') {
    throw new HttpError(403, 'KFLAME_ERR_HTTP_FORBIDDEN',
      'no token is configured and this request comes from a page of another site: ' +
      'open the endpoint directly (curl, the address bar), or set the token option')
  }
}

function originHost (origin) {
  try {
    return new URL(origin).host
  } catch {
    return ''
  }
}

function badParam (message) {
  return new HttpError(400, 'KFLAME_ERR_HTTP_BAD_PARAM', message)
}

// The query of one endpoint: known names only, each once, within bounds.
// -> { hz, mode, seconds, format }
function checkParams (config, endpoint, params) {
  const known = ENDPOINTS[endpoint].params
  const seen = new Set()
  for (const name of params.keys()) {
    if (!known.includes(name)) {
      throw badParam(`unknown query parameter "${name}" for ${endpoint}; ` +
        (known.length ? `known: ${known.join(', ')}` : 'it takes none'))
    }
    if (seen.has(name)) throw badParam(`query parameter "${name}" is given more than once`)
    seen.add(name)
  }
  const p = { hz: DEFAULT_HZ, mode: 'auto', seconds: Math.min(DEFAULT_SECONDS, config.maxDuration / 1000), format: 'svg', what: 'cpu', sourceMaps: undefined }
  if (params.has('what')) {
    const text = params.get('what')
    if (!WHATS.includes(text)) {
      throw badParam(`what must be one of ${WHATS.join(', ')} (CPU time, off-CPU time, both), got ${JSON.stringify(text)}`)
    }
    p.what = text
  }
  if (params.has('sourceMaps')) {
    const text = params.get('sourceMaps')
    if (text !== 'true' && text !== 'false' && text !== '1' && text !== '0') {
      throw badParam(`sourceMaps must be true, false, 1 or 0, got ${JSON.stringify(text)}`)
    }
    p.sourceMaps = text === 'true' || text === '1'
  }
  if (params.has('mode')) {
    const text = params.get('mode')
    if (!MODES.includes(text)) {
      throw badParam(`mode must be one of ${MODES.join(', ')} (the sampler), got ${JSON.stringify(text)}`)
    }
    p.mode = text
  }
  if (params.has('hz')) {
    const text = params.get('hz')
    if (!/^\d{1,6}$/.test(text) || Number(text) < 1 || Number(text) > config.maxHz) {
      throw badParam(`hz must be an integer from 1 to ${config.maxHz} (samples per second), got ${JSON.stringify(text)}`)
    }
    p.hz = Number(text)
  }
  if (params.has('seconds')) {
    const text = params.get('seconds')
    const max = config.maxDuration / 1000
    if (!/^\d{1,7}(\.\d{1,3})?$/.test(text) || Number(text) < 0.1 || Number(text) > max) {
      throw badParam(`seconds must be a number from 0.1 to ${max} (maxDuration), got ${JSON.stringify(text)}`)
    }
    p.seconds = Number(text)
  }
  if (params.has('format')) {
    const text = params.get('format')
    if (!output.isFormat(text)) {
      throw badParam(`format must be one of ${Object.keys(output.FORMATS).join(', ')}, got ${JSON.stringify(text)}`)
    }
    p.format = text
  }
  return p
}

// Answers one request to one of the ENDPOINTS; `query` is the raw query
// string.
function serve (config, endpoint, req, res, query) {
  try {
    const params = new URLSearchParams(query)
    checkAccess(config, req, params)
    const { methods } = ENDPOINTS[endpoint]
    if (!methods.includes(req.method)) {
      throw new HttpError(405, 'KFLAME_ERR_HTTP_METHOD',
        `${config.prefix}${endpoint} takes ${methods.join(' or ')}, not ${req.method}`, { Allow: methods.join(', ') })
    }
    const p = checkParams(config, endpoint, params)
    if (endpoint === '/start') startEndpoint(config, res, p)
    else if (endpoint === '/stop') stopEndpoint(config, res, p)
    else if (endpoint === '/profile') profileEndpoint(config, res, p)
    else statusEndpoint(config, res)
  } catch (err) {
    if (err instanceof HttpError) return sendError(res, err.status, err.code, err.message, err.headers)
    sendError(res, 500, err.code || 'KFLAME_ERR_HTTP_INTERNAL', `kflame failed: ${err.message}`)
  }
}

function describe (session) {
  const since = new Date(session.startedAt).toISOString()
  return session.via === 'profile'
    ? `a ${session.seconds} s profile requested from ${session.prefix}/profile at ${since} is collecting`
    : `a profile started from ${session.prefix}/start at ${since} is running`
}

// Refuses to start when anything holds the profiler.
function checkIdle (config) {
  if (state.kept) {
    throw new HttpError(409, 'KFLAME_ERR_HTTP_UNCOLLECTED',
      `a profile started at ${new Date(state.kept.session.startedAt).toISOString()} stopped itself after ` +
      `maxDuration and waits to be collected: ${state.kept.session.prefix}/stop returns it, then start again`)
  }
  const session = liveSession()
  if (session) {
    throw new HttpError(409, 'KFLAME_ERR_RUNNING', `${describe(session)}; ` +
      (session.via === 'profile' ? 'wait for it to end' : `stop it with ${session.prefix}/stop`) + ', then start again')
  }
  if (api().isRunning()) {
    throw new HttpError(409, 'KFLAME_ERR_RUNNING',
      'a profile started by the application (kflame.start()) is running; one profile runs at a time per ' +
      'process: start again after the application stops it')
  }
}

// kflame.start()'s own errors, with a status: bad options are the client's
// fault, a host that refuses perf events is a server that cannot do this.
function startError (err) {
  const code = err.code || 'KFLAME_ERR_HTTP_INTERNAL'
  let status = 500
  if (code === 'KFLAME_ERR_RUNNING') status = 409
  else if (code === 'KFLAME_ERR_OUT_OF_RANGE' || code === 'KFLAME_ERR_INVALID_ARG' || code === 'KFLAME_ERR_OFFCPU_TIMER') status = 400
  else if (code.startsWith('KFLAME_ERR_PERF_') || ['KFLAME_ERR_MLOCK', 'KFLAME_ERR_FD_LIMIT', 'KFLAME_ERR_TIMER', 'KFLAME_ERR_NO_SIGNAL', 'KFLAME_ERR_OFFCPU_PARANOID'].includes(code)) status = 503
  return new HttpError(status, code, err.message)
}

function begin (config, via, p) {
  checkIdle(config)
  try {
    api().start({ hz: p.hz, mode: p.mode, what: p.what, sourceMaps: p.sourceMaps })
  } catch (err) {
    throw startError(err)
  }
  const session = {
    via,
    hz: p.hz,
    seconds: p.seconds,
    startedAt: Date.now(),
    maxDuration: config.maxDuration,
    prefix: config.prefix,
    timer: null
  }
  state.session = session
  return session
}

function startEndpoint (config, res, p) {
  const session = begin(config, 'start', p)
  // unref: a profile left running must not keep the process alive.
  session.timer = setTimeout(autoStop, config.maxDuration, session).unref()
  sendJson(res, 200, {
    started: true,
    hz: session.hz,
    maxDuration: config.maxDuration,
    startedAt: new Date(session.startedAt).toISOString(),
    autoStopAt: new Date(session.startedAt + config.maxDuration).toISOString()
  })
}

function stopEndpoint (config, res, p) {
  if (state.kept) {
    const { profile, session, stoppedAt } = state.kept
    state.kept = null
    return sendProfile(res, profile, p.format, session, { stopMs: 0, autoStoppedAt: stoppedAt })
  }
  const session = liveSession()
  if (session && session.via === 'profile') {
    throw new HttpError(409, 'KFLAME_ERR_HTTP_NOT_OWNER',
      `${describe(session)}; its result goes to that request, which ends it: wait for it`)
  }
  if (session) {
    endSession(session)
    const t0 = performance.now()
    const profile = api().stop()
    return sendProfile(res, profile, p.format, session, { stopMs: performance.now() - t0 })
  }
  if (api().isRunning()) {
    throw new HttpError(409, 'KFLAME_ERR_HTTP_NOT_OWNER',
      'the running profile was started by the application (kflame.start()), not over HTTP; ' +
      'it is left to the application to stop')
  }
  throw new HttpError(409, 'KFLAME_ERR_NOT_RUNNING', `no profile is running: start one with ${config.prefix}/start`)
}

// Profiles for `seconds`, waiting on a timer (the event loop runs on), then
// answers with the result. A client that leaves ends it early; the result
// is dropped.
function profileEndpoint (config, res, p) {
  const session = begin(config, 'profile', p)
  const onClose = () => {
    if (state.session !== session) return
    endSession(session)
    if (api().isRunning()) api().stop()
  }
  res.once('close', onClose)
  session.timer = setTimeout(() => {
    res.removeListener('close', onClose)
    if (state.session !== session || !api().isRunning()) {
      endSession(session)
      // The application stopped it with kflame.stop(): nothing to return.
      return sendError(res, 409, 'KFLAME_ERR_NOT_RUNNING',
        'the profile was stopped by the application (kflame.stop()) before its time was up')
    }
    endSession(session)
    try {
      const t0 = performance.now()
      const profile = api().stop()
      sendProfile(res, profile, p.format, session, { stopMs: performance.now() - t0 })
    } catch (err) {
      sendError(res, 500, err.code || 'KFLAME_ERR_HTTP_INTERNAL', `kflame failed: ${err.message}`)
    }
  }, p.seconds * 1000).unref()
}

function statusEndpoint (config, res) {
  const session = liveSession()
  const iso = (ms) => new Date(ms).toISOString()
  let owner = null
  if (session) owner = session.via === 'profile' ? 'http-profile' : 'http'
  else if (api().isRunning()) owner = 'application'
  sendJson(res, 200, {
    running: api().isRunning(),
    owner,
    hz: session ? session.hz : null,
    startedAt: session ? iso(session.startedAt) : null,
    autoStopAt: session && session.via === 'start' ? iso(session.startedAt + session.maxDuration) : null,
    uncollected: state.kept
      ? { startedAt: iso(state.kept.session.startedAt), stoppedAt: iso(state.kept.stoppedAt), samples: state.kept.profile.stats.samples }
      : null,
    maxDuration: config.maxDuration,
    maxHz: config.maxHz
  })
}

// kflame-<pid>-20250102T030405Z.svg, from the profile's start.
function fileName (session, ext) {
  const time = new Date(session.startedAt).toISOString().replace(/[-:]|\.\d+/g, '')
  return `kflame-${process.pid}-${time}${ext}`
}

function sendProfile (res, profile, format, session, { stopMs, autoStoppedAt }) {
  const f = output.FORMATS[format]
  const t0 = performance.now()
  const graphOptions = autoStoppedAt ? { title: `Flame Graph (stopped after maxDuration, ${session.maxDuration / 1000} s)` } : undefined
  const body = output.renderProfile(profile, format, graphOptions)
  const renderMs = performance.now() - t0
  const s = profile.stats
  const headers = {
    'Content-Type': f.type,
    'Content-Disposition': `${f.disposition}; filename="${fileName(session, f.ext)}"`,
    // Both show in the browser's network panel; the test reads them.
    'Server-Timing': `stop;dur=${stopMs.toFixed(1)}, render;dur=${renderMs.toFixed(1)}`,
    'X-Kflame-Samples': String(s.samples),
    'X-Kflame-Lost': String(s.lost),
    'X-Kflame-Duration-Ms': String(Math.round(s.durationMs)),
    'X-Kflame-Hz': String(s.hz),
    'X-Kflame-Mode': String(s.mode),
    'X-Kflame-Warnings': String(s.warnings.length)
  }
  // The flame graphs run their own inline script on this origin: they may
  // do that and nothing else (no requests, no other scripts), whatever a
  // frame name holds.
  if (format === 'svg' || format === 'html') {
    headers['Content-Security-Policy'] = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"
  }
  if (autoStoppedAt) headers['X-Kflame-Auto-Stopped'] = new Date(autoStoppedAt).toISOString()
  send(res, 200, headers, body)
}

// --- the three ways in ---

/**
 * A request handler `(req, res, next)` for node:http, express and connect.
 * Requests whose path is not one of the endpoints under `prefix` go to
 * next(), or get a JSON 404 when there is none.
 */
function http (options) {
  return createHandler(checkHandlerOptions('http', takeOptions('http', options, HANDLER_DEFAULTS)))
}

function createHandler (config) {
  return function kflameHandler (req, res, next) {
    // req.url: express and connect strip their mount path from it.
    const { path, query } = splitUrl(req.url || '')
    const endpoint = path.startsWith(config.prefix) ? path.slice(config.prefix.length) : null
    if (endpoint === null || !Object.hasOwn(ENDPOINTS, endpoint)) {
      if (typeof next === 'function') return next()
      return sendError(res, 404, 'KFLAME_ERR_HTTP_NOT_FOUND',
        `no such endpoint: kflame serves ${Object.keys(ENDPOINTS).map((e) => config.prefix + e).join(', ')}`)
    }
    serve(config, endpoint, req, res, query)
  }
}

/**
 * A dedicated admin server with the handler. -> Promise<http.Server>,
 * listening. Without a token it binds loopback only.
 */
async function listen (options) {
  const o = takeOptions('listen', options, LISTEN_DEFAULTS)
  const handler = createHandler(checkHandlerOptions('listen', o))
  if (o.port === undefined) throw invalid('listen(options): port is required (0 picks a free one)')
  checkIntegerOption('listen', 'port', o.port, [0, 65535])
  if (typeof o.host !== 'string' || o.host === '') throw invalid('listen(options): host must be a non-empty string')
  if (typeof o.unref !== 'boolean') throw invalid('listen(options): unref must be a boolean')
  if (o.token === undefined && !isLoopbackBind(o.host)) {
    throw kflameError(Error, 'KFLAME_ERR_HTTP_INSECURE',
      `listen(options): refusing to serve profiles on ${o.host} without a token: anyone who reaches it could ` +
      'profile this process; set the token option, or listen on 127.0.0.1')
  }
  const server = nodeHttp.createServer(handler)
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen({ port: o.port, host: o.host }, () => {
      server.removeListener('error', reject)
      resolve()
    })
  })
  // Like the inspector's port, the admin server alone does not keep the
  // process alive.
  if (o.unref) server.unref()
  return server
}

/**
 * A fastify plugin: fastify.register(kflame.fastify, { prefix: '/kflame',
 * token }). Fastify applies the prefix to the routes registered here.
 */
async function fastify (instance, options) {
  // fastify consumes these register() options itself.
  const o = takeOptions('fastify', options, HANDLER_DEFAULTS, ['prefix', 'logLevel', 'logSerializers'])
  const config = checkHandlerOptions('fastify', o)
  // For messages only: fastify routes, and its prefix may hold parameters.
  config.prefix = instance.prefix || ''
  // The endpoints read no body: without this, a POST with an empty JSON body
  // or an unknown type would be refused by fastify (400, 415) before them.
  instance.removeAllContentTypeParsers()
  instance.addContentTypeParser('*', (req, payload, done) => done(null))
  for (const endpoint of Object.keys(ENDPOINTS)) {
    // Every method reaches the handler, which answers 405 with Allow.
    instance.all(endpoint, (request, reply) => {
      reply.hijack()
      serve(config, endpoint, request.raw, reply.raw, splitUrl(request.raw.url || '').query)
    })
  }
}
fastify[Symbol.for('fastify.display-name')] = 'kflame'
fastify[Symbol.for('plugin-meta')] = { name: 'kflame' }

module.exports = { http, listen, fastify }

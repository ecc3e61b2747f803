'use strict'

// The endpoints, below the handler's prefix: `/start`, `/stop`, a timed
// `/profile` (as Go's /debug/pprof/profile) and `/status`. Reads the query,
// checks who asks (./access), drives the endpoints' profile (./state) and
// answers in the format asked for (lib/output.js).

const { fromText, DEFAULTS } = require('../options')
const output = require('../output')
const session = require('../session')
const { checkAccess } = require('./access')
const state = require('./state')
const { HttpError, send, sendJson, sendError } = require('./reply')

const DEFAULT_HZ = 99
const DEFAULT_SECONDS = 30 // /profile, as Go's pprof

// The endpoints and the methods each takes. GET is there so a browser or
// `curl URL` can drive it; the CSRF that allows is answered by the token,
// or by the Origin checks of loopback mode.
const ENDPOINTS = {
  '/start': { methods: ['GET', 'POST'], params: ['hz', 'mode', 'what', 'maxSwitchRate', 'sourceMaps'] },
  '/stop': { methods: ['GET', 'POST'], params: ['format'] },
  '/profile': { methods: ['GET', 'POST'], params: ['seconds', 'hz', 'format', 'mode', 'what', 'maxSwitchRate', 'sourceMaps'] },
  '/status': { methods: ['GET'], params: [] }
}

// How the query words a start option that does not read (options.fromText).
const PARAM_MEANS = {
  hz: (config) => `an integer from 1 to ${config.maxHz} (samples per second)`,
  mode: (config, read) => `one of ${read.choices.join(', ')} (the sampler)`,
  what: (config, read) => `one of ${read.choices.join(', ')} (CPU time, off-CPU time, both)`,
  maxSwitchRate: (config, read) => `an integer from 0 (every switch) to ${read.max ?? 'kernel.perf_event_max_sample_rate'} (off-CPU stacks per second at most)`,
  sourceMaps: () => 'true, false, 1 or 0'
}

function badParam (message) {
  return new HttpError(400, 'KFLAME_ERR_HTTP_BAD_PARAM', message)
}

// The query of one endpoint: known names only, each once, within bounds.
// -> { hz, mode, what, maxSwitchRate, sourceMaps, seconds, format }
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
  const p = { hz: DEFAULT_HZ, mode: 'auto', seconds: Math.min(DEFAULT_SECONDS, config.maxDuration / 1000), format: 'svg', what: 'cpu', maxSwitchRate: DEFAULTS.maxSwitchRate, sourceMaps: undefined }
  for (const name of Object.keys(PARAM_MEANS)) {
    if (!params.has(name)) continue
    const text = params.get(name)
    const read = fromText(name, text, name === 'hz' ? { max: config.maxHz } : {})
    if (read.fail) throw badParam(`${name} must be ${PARAM_MEANS[name](config, read)}, got ${JSON.stringify(text)}`)
    p[name] = read.value
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
    else if (endpoint === '/stop') stopEndpoint(config, res, p)?.catch((err) => fail(res, err))
    else if (endpoint === '/profile') profileEndpoint(config, res, p)
    else statusEndpoint(config, res)
  } catch (err) {
    fail(res, err)
  }
}

function fail (res, err) {
  if (err instanceof HttpError) return sendError(res, err.status, err.code, err.message, err.headers)
  sendError(res, 500, err.code || 'KFLAME_ERR_HTTP_INTERNAL', `kflame failed: ${err.message}`)
}

function startEndpoint (config, res, p) {
  const own = state.begin(config, 'start', p)
  state.stopAfter(own, config.maxDuration)
  sendJson(res, 200, {
    started: true,
    hz: own.hz,
    maxDuration: config.maxDuration,
    startedAt: new Date(own.startedAt).toISOString(),
    autoStopAt: new Date(own.startedAt + config.maxDuration).toISOString()
  })
}

// -> a Promise when the answer comes once the profile is named, else nothing.
function stopEndpoint (config, res, p) {
  const kept = state.takeKept()
  if (kept) {
    sendProfile(res, kept.profile, p.format, kept.own, { stopMs: 0, autoStoppedAt: kept.stoppedAt })
    return
  }
  const own = state.live()
  if (own && own.via === 'profile') {
    throw new HttpError(409, 'KFLAME_ERR_HTTP_NOT_OWNER',
      `${state.describe(own)}; its result goes to that request, which ends it: wait for it`)
  }
  if (own) {
    // Named on libuv's pool: the server goes on answering meanwhile.
    const t0 = performance.now()
    return state.finishAsync(own)
      .then((profile) => sendProfile(res, profile, p.format, own, { stopMs: performance.now() - t0 }))
  }
  const running = session.status()
  if (running) {
    throw new HttpError(409, 'KFLAME_ERR_HTTP_NOT_OWNER',
      state.ownerOf(running) === 'application'
        ? 'the running profile was started by the application (kflame.start()), not over HTTP; ' +
          'it is left to the application to stop'
        : `${state.foreign(running)} is running; the endpoints of that thread stop it`)
  }
  throw new HttpError(409, 'KFLAME_ERR_NOT_RUNNING', `no profile is running: start one with ${config.prefix}/start`)
}

// Profiles for `seconds`, waiting on a timer (the event loop runs on), then
// answers with the result. A client that leaves ends it early; the result
// is dropped.
function profileEndpoint (config, res, p) {
  const own = state.begin(config, 'profile', p)
  const onClose = () => {
    if (state.live() !== own) return
    try {
      state.finish(own, { keep: false })
    } catch {
      // Nobody is left to tell: the client went away.
    }
  }
  res.once('close', onClose)
  own.timer = setTimeout(() => {
    res.removeListener('close', onClose)
    try {
      if (state.live() !== own) {
        // The application stopped it with kflame.stop(): nothing to return.
        throw new HttpError(409, 'KFLAME_ERR_NOT_RUNNING',
          'the profile was stopped by the application (kflame.stop()) before its time was up')
      }
      const t0 = performance.now()
      const profile = state.finish(own)
      sendProfile(res, profile, p.format, own, { stopMs: performance.now() - t0 })
    } catch (err) {
      if (err instanceof HttpError) return sendError(res, err.status, err.code, err.message)
      sendError(res, 500, err.code || 'KFLAME_ERR_HTTP_INTERNAL', `kflame failed: ${err.message}`)
    }
  }, p.seconds * 1000).unref()
}

// What runs, whichever thread started it (C's session status), and what
// waits to be collected here.
function statusEndpoint (config, res) {
  const running = session.status()
  const owner = state.ownerOf(running)
  const own = state.live()
  const kept = state.peekKept()
  const iso = (ms) => new Date(ms).toISOString()
  sendJson(res, 200, {
    running: running !== null,
    owner,
    hz: running ? running.hz : null,
    mode: running ? running.mode : null,
    what: running ? running.what : null,
    maxSwitchRate: running ? running.maxSwitchRate : null,
    event: running ? running.event : null,
    startedAt: own ? iso(own.startedAt) : running ? iso(running.wallStartMs) : null,
    autoStopAt: own && own.via === 'start' ? iso(own.startedAt + own.maxDuration) : null,
    uncollected: kept
      ? { startedAt: iso(kept.own.startedAt), stoppedAt: iso(kept.stoppedAt), samples: kept.profile.stats.samples }
      : null,
    maxDuration: config.maxDuration,
    maxHz: config.maxHz
  })
}

// kflame-<pid>-20250102T030405Z.svg, from the profile's start.
function fileName (own, ext) {
  const time = new Date(own.startedAt).toISOString().replace(/[-:]|\.\d+/g, '')
  return `kflame-${process.pid}-${time}${ext}`
}

function sendProfile (res, profile, format, own, { stopMs, autoStoppedAt }) {
  const f = output.FORMATS[format]
  const t0 = performance.now()
  const graphOptions = autoStoppedAt ? { title: `Flame Graph (stopped after maxDuration, ${own.maxDuration / 1000} s)` } : undefined
  const body = output.renderProfile(profile, format, graphOptions)
  const renderMs = performance.now() - t0
  const s = profile.stats
  const headers = {
    'Content-Type': f.type,
    'Content-Disposition': `${f.disposition}; filename="${fileName(own, f.ext)}"`,
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

module.exports = { ENDPOINTS, serve }

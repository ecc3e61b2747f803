'use strict'

// The three ways in to the endpoints (./endpoints): a request handler for
// node:http, express and connect; a dedicated admin server (listen()); a
// fastify plugin. Each checks its options and routes requests under its
// prefix to serve().

const nodeHttp = require('node:http')
const { kflameError, invalid } = require('../errors')
const { takeOptions, checkInteger } = require('../options')
const { tokenDigest, isLoopbackBind } = require('./access')
const { ENDPOINTS, serve } = require('./endpoints')
const { sendError } = require('./reply')

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

function checkPrefix (fn, prefix) {
  if (typeof prefix !== 'string') throw invalid(`${fn}(options): prefix must be a string such as '/kflame'`)
  if (prefix === '' || prefix === '/') return ''
  if (!/^(\/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)+\/?$/.test(prefix)) {
    throw invalid(`${fn}(options): prefix must be a URL path such as '/kflame' (starting with '/', ` +
      `no query, no empty segment), got ${JSON.stringify(prefix)}`)
  }
  return prefix.endsWith('/') ? prefix.slice(0, -1) : prefix
}

// -> the handler's settings, with the token's digest ready for comparing.
function checkHandlerOptions (fn, o) {
  const config = {
    prefix: checkPrefix(fn, o.prefix),
    tokenDigest: o.token === undefined ? null : tokenDigest(fn, o.token),
    maxDuration: o.maxDuration,
    maxHz: o.maxHz
  }
  checkInteger(fn, 'maxDuration', o.maxDuration, MAX_DURATION_RANGE, ' (milliseconds)')
  checkInteger(fn, 'maxHz', o.maxHz, MAX_HZ_RANGE)
  // Profiles will be asked for: V8's side of JS names from now on, so that
  // code V8 optimizes before the first /start is reported with its inlining.
  require('../session').armJit()
  return config
}

function splitUrl (url) {
  const i = url.indexOf('?')
  return i < 0 ? { path: url, query: '' } : { path: url.slice(0, i), query: url.slice(i + 1) }
}

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
  checkInteger('listen', 'port', o.port, [0, 65535])
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

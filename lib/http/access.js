'use strict'

// Who may ask the HTTP endpoints. It runs in production, so it is safe by
// default: with a token, every request needs `Authorization: Bearer
// <token>`; without one, only loopback peers naming a loopback Host are
// served, and never on behalf of another site's page.

const crypto = require('node:crypto')
const net = require('node:net')
const { invalid } = require('../errors')
const { HttpError } = require('./reply')

// Query parameters that look like credentials: refused outright, so a token
// is never used from a URL, which proxies and access logs keep.
const TOKEN_PARAMS = new Set(['token', 'access_token', 'accesstoken', 'auth', 'authorization', 'bearer',
  'key', 'api_key', 'apikey', 'secret', 'password'])

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

function digest (text) {
  return crypto.createHash('sha256').update(text).digest()
}

// The token option, checked -> its digest, ready for comparing.
function tokenDigest (fn, token) {
  // Visible ASCII only: it has to travel in an Authorization header.
  if (typeof token !== 'string' || !/^[\x21-\x7e]{1,4096}$/.test(token)) {
    throw invalid(`${fn}(options): token must be a non-empty string of visible ASCII characters ` +
      "(no spaces), e.g. require('node:crypto').randomBytes(32).toString('hex')")
  }
  return digest(token)
}

// Equal digests of any two strings take the same time to compare, whatever
// their lengths, so a wrong token says nothing of the right one.
function tokenMatches (config, header) {
  const m = /^Bearer +([\x21-\x7e]+) *$/i.exec(header || '')
  if (!m) return false
  return crypto.timingSafeEqual(digest(m[1]), config.tokenDigest)
}

function originHost (origin) {
  try {
    return new URL(origin).host
  } catch {
    return ''
  }
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

module.exports = { checkAccess, tokenDigest, isLoopbackBind }

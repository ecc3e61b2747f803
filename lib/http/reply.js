'use strict'

// Answers of the HTTP endpoints: JSON or a body, with the headers every
// answer carries, and the coded error the checks throw.

const COMMON_HEADERS = {
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff'
}

// A coded error to answer with: thrown by the checks, answered by
// endpoints.serve().
class HttpError extends Error {
  constructor (status, code, message, headers) {
    super(message)
    this.status = status
    this.code = code
    this.headers = headers
  }
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

module.exports = { HttpError, send, sendJson, sendError }

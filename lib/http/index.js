'use strict'

// Profiling a running server over HTTP: `/start`, `/stop`, a timed
// `/profile` and `/status`, for node:http, express, connect and fastify,
// or as a dedicated admin server.
//
//   adapters   the three ways in, their options, routing under the prefix
//   endpoints  the query, the four endpoints, the answer's format
//   state      the endpoints' profile on the process's session (lib/session.js)
//   access     token, loopback peer and Host, other sites' pages
//   reply      JSON and bodies, the coded HttpError

module.exports = require('./adapters')

'use strict'

// Profiles the whole run of a node process and writes the result when it
// ends:
//   node -r kflame/register app.js
//   node --import kflame/register app.js
//   NODE_OPTIONS=--require=kflame/register npm test
// Configured by KFLAME_OUT, KFLAME_FORMAT, KFLAME_HZ, KFLAME_QUIET (see
// lib/register.js and the README).

const profiling = require('./lib/register').install()

// Under a test runner, each test's samples carry its name as a frame:
// node:test and tap are hooked here; mocha finds `mochaHooks` below.
if (profiling) {
  const testlabels = require('./lib/testlabels')
  testlabels.install()
  module.exports.mochaHooks = testlabels.mochaHooks
}

'use strict'

// Loads the native addon, with an error that says what to do when it is not
// there: kflame is Linux-only and must be built for this Node version.

const path = require('node:path')
const { kflameError } = require('./errors')

function load () {
  if (process.platform !== 'linux') {
    throw kflameError(Error, 'KFLAME_ERR_PLATFORM',
      `kflame profiles with Linux perf_events and does not run on ${process.platform}`)
  }
  const root = path.join(__dirname, '..', 'build')
  const tried = []
  for (const kind of ['Release', 'Debug']) {
    const file = path.join(root, kind, 'kflame.node')
    try {
      const addon = require(file)
      // where it came from, for isolates that load it by path (workers.js)
      Object.defineProperty(addon, 'file', { value: file })
      return addon
    } catch (err) {
      if (err.code !== 'MODULE_NOT_FOUND') throw err
      tried.push(file)
    }
  }
  throw kflameError(Error, 'KFLAME_ERR_NOT_BUILT',
    `kflame's native addon is not built (looked for ${tried.join(', ')}): ` +
    'run `npm rebuild kflame` (needs libelf-dev, make and a C compiler)')
}

module.exports = load()

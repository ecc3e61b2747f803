'use strict'

// What the CLI's commands share around output: checking an output name
// before any work is done, writing a Profile (lib/output.js) with a failure
// that is a message rather than a stack, and one-line notes on stderr.

const output = require('../output')
const { kflameError } = require('../errors')
const { usageError } = require('./args')
const { checkPath, writeFailure } = require('../safefile')

// A failure at run time (exit code 1), as opposed to a usage error (2).
function failure (message) {
  return kflameError(Error, 'KFLAME_ERR_CLI', message)
}

// -> the format `file`'s extension picks; a usage error for any other name,
// found before a long run rather than after it.
function checkOutputPath (file) {
  try {
    checkPath(file, '-o')
  } catch (err) {
    throw usageError(err.message)
  }
  const format = output.formatOfPath(file)
  if (format === null) throw usageError(`cannot tell the output format of "${file}": end it with ${output.EXTENSION_LIST}`)
  return format
}

function writeOutput (profile, file, svgOptions) {
  try {
    return output.writeProfile(profile, file, checkOutputPath(file), svgOptions)
  } catch (err) {
    if (err.code === 'KFLAME_ERR_USAGE') throw err
    throw failure(writeFailure(file, err))
  }
}

module.exports = { failure, checkOutputPath, writeOutput, stderrLine: output.stderrLine }

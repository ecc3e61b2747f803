'use strict'

// Errors thrown by kflame carry a stable `code`; the message says how to fix
// the problem. Argument errors are TypeError/RangeError, the rest Error.

function kflameError (Ctor, code, message) {
  const err = new Ctor(message)
  err.code = code
  return err
}

// An argument of the wrong type or form: a TypeError, KFLAME_ERR_INVALID_ARG.
function invalid (message) {
  return kflameError(TypeError, 'KFLAME_ERR_INVALID_ARG', message)
}

// An argument of the right type outside its bounds: a RangeError,
// KFLAME_ERR_OUT_OF_RANGE.
function outOfRange (message) {
  return kflameError(RangeError, 'KFLAME_ERR_OUT_OF_RANGE', message)
}

module.exports = { kflameError, invalid, outOfRange }

'use strict'

// Errors thrown by kflame carry a stable `code`; the message says how to fix
// the problem. Argument errors are TypeError/RangeError, the rest Error.

function kflameError (Ctor, code, message) {
  const err = new Ctor(message)
  err.code = code
  return err
}

module.exports = { kflameError }

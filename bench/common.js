'use strict'

// What the benchmarks share.

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }

// V8's CPU profiler in-process, at its default 1 ms interval: the peer the
// benchmarks hold kflame against. Returns the connected session.
function startInspectorProfiler () {
  const session = new (require('node:inspector').Session)()
  session.connect()
  session.post('Profiler.enable')
  session.post('Profiler.start')
  return session
}

module.exports = { median, startInspectorProfiler }

'use strict'

// Arms V8's code-event hook in worker threads that never load kflame
// themselves (a pool library's workers, say), so their JS frames are named.
//
// Node-API offers no hook into another isolate, and calling into a worker's
// isolate from outside is unsafe once it may be gone. The inspector is the
// public way in: this isolate's session enables the NodeWorker domain, which
// attaches to each worker (existing ones and those created later), and asks
// the worker to evaluate `process.dlopen` of kflame's addon. The addon's
// init then runs on the worker's own thread, arms its isolate, and disarms
// it when the worker's environment is torn down, as when a worker requires
// kflame itself. The inspector runs the evaluation in the worker between
// two pieces of its JS (by interrupt when it is busy). The session then
// detaches: nothing stays attached to the worker.
//
// Where this cannot be done (node built without the inspector, a worker
// that refuses the addon), that worker's JS frames show as [jit] and
// status() says why. Only this isolate's direct workers are armed; a
// worker's own workers are armed if that worker loads kflame.

const binding = require('./binding')

const ARM = `(() => {
  const m = { exports: {} }
  process.dlopen(m, ${JSON.stringify(binding.file)})
  m.exports.arm()
  return m.exports.jitArmed()
})()`

const state = { session: null, armed: 0, failed: 0, lastError: null }

function fail (reason) {
  state.failed++
  state.lastError = reason
}

function onAttached (session, { params }) {
  const { sessionId } = params
  const message = JSON.stringify({
    id: 1, method: 'Runtime.evaluate', params: { expression: ARM, returnByValue: true }
  })
  session.post('NodeWorker.sendMessageToWorker', { sessionId, message }, (err) => {
    if (err) fail(`the inspector could not reach the worker: ${err.message}`)
  })
}

function onMessage (session, { params }) {
  let reply
  try { reply = JSON.parse(params.message) } catch { return }
  if (reply.id !== 1) return
  const result = reply.result || {}
  if (reply.error || result.exceptionDetails) {
    const details = result.exceptionDetails
    fail((reply.error && reply.error.message) ||
      (details && details.exception && details.exception.description) || 'the addon did not load')
  } else if (result.result && result.result.value === true) {
    state.armed++
  } else {
    fail('the addon loaded but V8 has no isolate to arm')
  }
  session.post('NodeWorker.detach', { sessionId: params.sessionId }, () => {})
}

// Whether this isolate may have a worker. None can before node's Worker
// class is loaded (internal/worker, listed in process.moduleLoadList), and
// from kflame's load on, process's 'worker' event tells of each new one.
// Until then the inspector is not loaded (2 ms at the first start()) and no
// session is connected: most apps have no worker.
const WORKER_CLASS = 'NativeModule internal/worker'
let workerSeen = !Array.isArray(process.moduleLoadList) || process.moduleLoadList.includes(WORKER_CLASS)
let wanted = false
process.on('worker', () => {
  workerSeen = true
  if (wanted) connect()
})

// Arms this isolate's workers from now on: those that exist now (once per
// isolate) and those created later. Never throws: a failure is kept for
// status().
function armWorkers () {
  wanted = true
  if (workerSeen) connect()
}

function connect () {
  if (state.session) return
  let inspector
  try {
    inspector = require('node:inspector')
    state.session = new inspector.Session()
    state.session.connect()
  } catch (err) {
    state.session = false
    fail(`node's inspector is not available (${err.code || err.message}): workers cannot be hooked`)
    return
  }
  const session = state.session
  session.on('NodeWorker.attachedToWorker', (m) => onAttached(session, m))
  session.on('NodeWorker.receivedMessageFromWorker', (m) => onMessage(session, m))
  session.post('NodeWorker.enable', { waitForDebuggerOnStart: false }, (err) => {
    if (err) fail(`the inspector refused to attach to workers: ${err.message}`)
  })
}

// Workers armed, and those that could not be, with the last reason.
function status () {
  return { armed: state.armed, failed: state.failed, lastError: state.lastError }
}

module.exports = { armWorkers, status }

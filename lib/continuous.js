'use strict'

// Continuous profiling: one profile without end, handed over in windows of
// `every` seconds. The C collector cuts at a time and puts each sample in the
// window its time falls in (kf_profiler_cut), so windows tile the time: none
// overlaps the next, no sample falls between them. Each window goes to
// `to`: rotating files in a directory, a Grafana Pyroscope server (its HTTP
// ingest API, pprof), or a function.
//
// A slow or absent backend costs bounded memory: at most `queue` windows
// wait, older ones are dropped and counted; the event loop never waits for
// a delivery, and no delivery failure becomes an unhandled rejection (they
// are counted in stats and emitted as 'failed').

const { EventEmitter } = require('node:events')
const fs = require('node:fs')
const http = require('node:http')
const https = require('node:https')
const os = require('node:os')
const path = require('node:path')
const { kflameError, invalid, outOfRange } = require('./errors')
const { checkStartOptions } = require('./options')
const output = require('./output')
const { checkPath, ensureDir } = require('./safefile')
const session = require('./session')

const DEFAULTS = Object.freeze({
  every: 60, // seconds a window lasts
  keep: 10, // files kept in a directory
  format: 'pprof', // of the files
  app: null, // Pyroscope application name (default: node.<script name>)
  labels: {}, // Pyroscope labels besides host and pid
  headers: {}, // sent with each push (Authorization, X-Scope-OrgID)
  queue: 4, // windows waiting for a slow backend at most
  timeoutMs: 10000 // of one push
})
// A cut's window is made once the rings have given up every sample stamped
// before the cut (the collector drains at least every 100 ms).
const TAKE_AFTER_MS = 200
const TAKE_TRIES = 20
const LABEL_NAME = /^[A-Za-z_][A-Za-z0-9_.]{0,63}$/
const LABEL_VALUE = /^[^{},=\s]{1,200}$/

function checkLabels (labels, what) {
  if (labels === null || typeof labels !== 'object' || Array.isArray(labels)) {
    throw invalid(`${what} must be an object of name: value`)
  }
  for (const [k, v] of Object.entries(labels)) {
    if (!LABEL_NAME.test(k)) throw invalid(`${what}: label name ${JSON.stringify(k)} must match ${LABEL_NAME}`)
    if (typeof v !== 'string' || !LABEL_VALUE.test(v)) {
      throw invalid(`${what}: label ${k}=${JSON.stringify(v)}: a value is 1-200 characters without spaces, ',', '=', '{' or '}'`)
    }
  }
}

// Splits continuous() options into its own and start()'s, both checked
// (startOptions as checkStartOptions() returns them).
function checkOptions (options = {}) {
  if (options === null || typeof options !== 'object') throw invalid('continuous(options): options must be an object')
  const own = { ...DEFAULTS }
  const start = {}
  for (const [k, v] of Object.entries(options)) {
    if (k === 'to') own.to = v
    else if (Object.hasOwn(DEFAULTS, k)) { if (v !== undefined) own[k] = v } else start[k] = v
  }
  const startOptions = checkStartOptions(start)
  if (typeof own.every !== 'number' || !(own.every >= 1 && own.every <= 86400)) {
    throw outOfRange(`continuous(options): every must be from 1 to 86400 seconds, got ${own.every}`)
  }
  if (!Number.isInteger(own.keep) || own.keep < 1 || own.keep > 100000) {
    throw outOfRange(`continuous(options): keep must be an integer from 1 to 100000, got ${own.keep}`)
  }
  if (!Number.isInteger(own.queue) || own.queue < 1 || own.queue > 1000) {
    throw outOfRange(`continuous(options): queue must be an integer from 1 to 1000, got ${own.queue}`)
  }
  if (!Number.isInteger(own.timeoutMs) || own.timeoutMs < 100 || own.timeoutMs > 600000) {
    throw outOfRange(`continuous(options): timeoutMs must be from 100 to 600000, got ${own.timeoutMs}`)
  }
  if (!output.isFormat(own.format)) {
    throw outOfRange(`continuous(options): format must be one of ${output.FORMAT_LIST}, got ${JSON.stringify(own.format)}`)
  }
  checkLabels(own.labels, 'continuous(options).labels')
  if (own.headers === null || typeof own.headers !== 'object') throw invalid('continuous(options).headers must be an object')
  for (const [k, v] of Object.entries(own.headers)) {
    if (typeof v !== 'string' || /[\r\n]/.test(v) || !/^[A-Za-z0-9-]+$/.test(k)) {
      throw invalid(`continuous(options).headers: ${JSON.stringify(k)} must be a header name with a one-line string value`)
    }
  }
  if (own.app !== null && (typeof own.app !== 'string' || !/^[A-Za-z0-9_.-]{1,100}$/.test(own.app))) {
    throw invalid('continuous(options).app must be 1-100 letters, digits, _ . or -')
  }
  own.sink = sinkOf(own.to)
  return { own, startOptions }
}

// `to`: a directory, an http(s) URL of a Pyroscope server, or a function.
function sinkOf (to) {
  if (typeof to === 'function') return { kind: 'function', fn: to }
  if (typeof to !== 'string' || to === '') {
    throw invalid('continuous(options).to must be a directory, an http(s):// URL of a Pyroscope server, or a function')
  }
  if (/^https?:\/\//.test(to)) {
    let url
    try {
      url = new URL(to)
    } catch {
      throw invalid(`continuous(options).to: ${JSON.stringify(to)} is not a valid URL`)
    }
    if (url.search || url.hash) throw invalid('continuous(options).to: the Pyroscope URL takes no query or fragment')
    return { kind: 'pyroscope', url }
  }
  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(to)) {
    throw invalid(`continuous(options).to: ${JSON.stringify(to)}: only http:// and https:// (a Pyroscope server) are pushed to`)
  }
  checkPath(to, 'continuous(options).to')
  return { kind: 'dir', dir: path.resolve(to) }
}

// "node.server" for /srv/app/server.js.
function defaultApp () {
  const script = process.argv[1] ? path.basename(process.argv[1]).replace(/\.[cm]?js$/, '') : 'eval'
  return `node.${script.replace(/[^A-Za-z0-9_.-]/g, '_') || 'app'}`
}

// Pyroscope's `name`: app.cpu{label=value,...}.
function pyroscopeName (app, labels) {
  const all = { host: os.hostname().replace(/[^A-Za-z0-9_.-]/g, '_') || 'host', pid: String(process.pid), ...labels }
  return `${app}.cpu{${Object.entries(all).map(([k, v]) => `${k}=${v}`).join(',')}}`
}

// multipart/form-data with one part, "profile": the gzipped pprof, as
// Pyroscope's own Node client sends it.
function multipart (pprof) {
  const boundary = `kflame${require('node:crypto').randomBytes(12).toString('hex')}`
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="profile"; filename="profile.pprof"\r\n` +
    'Content-Type: application/octet-stream\r\n\r\n')
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
  return { body: Buffer.concat([head, pprof, tail]), type: `multipart/form-data; boundary=${boundary}` }
}

class Continuous extends EventEmitter {
  #own
  #id // the session's (lib/session.js): only that profile is cut and stopped
  #timer = null
  #pending = null // a cut whose window is not taken yet
  #queue = [] // pushes waiting (Pyroscope)
  #pushing = 0
  #files = [] // written by this process, oldest first
  #seq = 0
  #stopped = false
  #lost = false // the profile was stopped behind our back
  #whenStopped = null

  constructor (own, id) {
    super()
    this.#own = own
    this.#id = id
    this.app = own.app || defaultApp()
    /** windows: made; delivered; dropped (queue full); failed (write or push); lastError */
    this.stats = { windows: 0, delivered: 0, dropped: 0, failed: 0, lastError: null, samples: 0, lost: 0 }
  }

  _begin () {
    this.#timer = setInterval(() => this.#cut(), this.#own.every * 1000)
    this.#timer.unref() // a profiler never keeps a process alive
  }

  #cut () {
    if (this.#pending || this.#stopped) return // the last window is still being made
    let cut
    try {
      cut = session.cut(this.#id)
    } catch (err) {
      // kflame.stop() (here or on another thread) ended the profile: there
      // is nothing left to cut, and a profile started since is not ours.
      this.#end()
      this.#lost = true
      this.#fail(err, null)
      return
    }
    if (cut) this.#pending = this.#take(0)
  }

  // No more windows: stopped, or the profile ended behind our back.
  #end () {
    this.#stopped = true
    clearInterval(this.#timer)
  }

  // Takes the window the last cut made, a few tries apart.
  #take (tries) {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        let window = null
        try {
          window = session.takeWindow(tries + 1 >= TAKE_TRIES ? 1000 : 0)
        } catch (err) {
          this.#fail(err, null)
        }
        if (window === null && tries + 1 < TAKE_TRIES && session.owns(this.#id)) {
          resolve(this.#take(tries + 1))
          return
        }
        this.#pending = null
        if (window) this.#deliver(window)
        resolve()
      }, tries === 0 ? TAKE_AFTER_MS : 100)
      t.unref()
    })
  }

  #info (profile) {
    const s = profile.stats
    const startMs = profile.timing.wallStart
    return {
      seq: this.#seq++,
      startMs,
      endMs: startMs + s.durationMs,
      samples: s.samples,
      lost: s.lost,
      profileBytes: s.details.profileBytes // what the window held in C
    }
  }

  #fail (err, info) {
    this.stats.failed++
    this.stats.lastError = err && err.message ? err.message : String(err)
    if (this.listenerCount('failed') > 0) this.emit('failed', err, info)
  }

  #deliver (profile) {
    const info = this.#info(profile)
    this.stats.windows++
    this.stats.samples += info.samples
    this.stats.lost += info.lost
    const sink = this.#own.sink
    try {
      if (sink.kind === 'dir') this.#writeFile(profile, info)
      else if (sink.kind === 'pyroscope') this.#enqueue(profile, info)
      else this.#call(sink.fn, profile, info)
    } catch (err) {
      this.#fail(err, info)
    }
  }

  #delivered (info) {
    this.stats.delivered++
    if (this.listenerCount('window') > 0) this.emit('window', info)
  }

  #writeFile (profile, info) {
    const { dir, format } = { dir: this.#own.sink.dir, format: this.#own.format }
    ensureDir(dir)
    const stamp = new Date(info.startMs).toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')
    const file = path.join(dir, `kflame-${process.pid}-${stamp}-${info.seq}${output.extensionOfFormat(format)}`)
    output.writeProfile(profile, file, format)
    info.file = file
    this.#files.push(file)
    // Only files this process wrote, and only regular ones, are removed.
    while (this.#files.length > this.#own.keep) {
      const old = this.#files.shift()
      try {
        if (fs.lstatSync(old).isFile()) fs.unlinkSync(old)
      } catch {}
    }
    this.#delivered(info)
  }

  #call (fn, profile, info) {
    const r = fn(profile, info)
    if (r && typeof r.then === 'function') {
      r.then(() => this.#delivered(info), (err) => this.#fail(err, info))
    } else {
      this.#delivered(info)
    }
  }

  #enqueue (profile, info) {
    const url = new URL('ingest', this.#own.sink.url.href.endsWith('/') ? this.#own.sink.url : this.#own.sink.url.href + '/')
    url.searchParams.set('name', pyroscopeName(this.app, this.#own.labels))
    url.searchParams.set('from', String(Math.floor(info.startMs / 1000)))
    url.searchParams.set('until', String(Math.max(Math.ceil(info.endMs / 1000), Math.floor(info.startMs / 1000) + 1)))
    url.searchParams.set('sampleRate', String(profile.stats.hz))
    url.searchParams.set('spyName', 'kflame')
    this.#queue.push({ url, pprof: profile.pprof(), info })
    while (this.#queue.length > this.#own.queue) {
      const dropped = this.#queue.shift()
      this.stats.dropped++
      if (this.listenerCount('dropped') > 0) this.emit('dropped', dropped.info)
    }
    this.#pump()
  }

  // One push at a time: a backend that is slow gets no pile of requests.
  #pump () {
    if (this.#pushing || this.#queue.length === 0) return
    const job = this.#queue.shift()
    this.#pushing = 1
    this.#push(job).then(() => this.#delivered(job.info), (err) => this.#fail(err, job.info)).finally(() => {
      this.#pushing = 0
      this.#pump()
      if (this.#queue.length === 0 && this.#drained) this.#drained()
    })
  }

  #push ({ url, pprof }) {
    const { body, type } = multipart(pprof)
    const lib = url.protocol === 'https:' ? https : http
    return new Promise((resolve, reject) => {
      const req = lib.request(url, {
        method: 'POST',
        headers: { ...this.#own.headers, 'Content-Type': type, 'Content-Length': body.length },
        timeout: this.#own.timeoutMs
      }, (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (c) => { if (text.length < 500) text += c })
        res.on('end', () => {
          if (res.statusCode >= 200 && res.statusCode < 300) resolve()
          else reject(new Error(`Pyroscope at ${url.origin} answered ${res.statusCode}: ${text.trim().slice(0, 200)}`))
        })
        res.on('error', reject)
      })
      req.on('timeout', () => req.destroy(new Error(`Pyroscope at ${url.origin} did not answer within ${this.#own.timeoutMs} ms`)))
      req.on('error', (err) => reject(new Error(`cannot push to Pyroscope at ${url.origin}: ${err.message}`)))
      req.end(body)
    })
  }

  #drained = null

  /**
   * Ends the profile at once, for process 'exit' where nothing asynchronous
   * runs: the last window (a cut in flight included) is written to a
   * directory or handed to the function; a push cannot be made, and the
   * windows that could not go are counted in dropped. Returns the stats.
   */
  stopSync () {
    if (this.#whenStopped) return this.stats
    this.#end()
    this.#whenStopped = Promise.resolve(this.stats)
    if (this.#lost) return this.stats
    try {
      // A window cut and not taken is part of it.
      const last = session.stop({ id: this.#id, sourceMaps: false })
      if (this.#own.sink.kind === 'pyroscope') {
        this.stats.windows++
        this.stats.dropped += 1 + this.#queue.length
        this.#queue.length = 0
      } else {
        this.#deliver(last)
      }
    } catch (err) {
      this.#fail(err, null)
    }
    return this.stats
  }

  /**
   * Ends the profile: the last window is delivered like the others. Resolves
   * with the stats once every delivery ended (or `timeoutMs` passed).
   */
  stop () {
    if (this.#whenStopped) return this.#whenStopped
    this.#end()
    this.#whenStopped = (async () => {
      if (this.#pending) await this.#pending
      if (!this.#lost) {
        try {
          // Named on libuv's pool: the event loop goes on meanwhile.
          this.#deliver(await session.stopAsync({ id: this.#id, sourceMaps: false }))
        } catch (err) {
          this.#fail(err, null)
        }
      }
      if (this.#queue.length > 0 || this.#pushing) {
        await new Promise((resolve) => {
          const t = setTimeout(resolve, this.#own.timeoutMs)
          this.#drained = () => { clearTimeout(t); resolve() }
        })
      }
      return this.stats
    })()
    return this.#whenStopped
  }
}

/**
 * continuous({ every, to, keep, format, app, labels, headers, queue,
 *   timeoutMs, ...start options }) -> Continuous
 */
function continuous (options) {
  const { own, startOptions } = checkOptions(options)
  const running = session.status()
  if (running && running.owner === 'continuous') {
    throw kflameError(Error, 'KFLAME_ERR_RUNNING', 'a continuous profile is running already: stop() it first')
  }
  const id = session.start(startOptions, { owner: 'continuous', checked: true })
  const c = new Continuous(own, id)
  c._begin()
  return c
}

module.exports = { continuous, checkOptions, pyroscopeName, DEFAULTS }

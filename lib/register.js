'use strict'

// What `node -r kflame/register app.js` does: profile the whole run of the
// main thread's process and write the result when the process ends, however
// it ends, without changing how it ends (exit code, signal).
//
// Configured by the environment (read once, at load):
//   KFLAME_HZ      samples per second (default 99)
//   KFLAME_MODE    auto|perf|timer: the sampler (default auto: perf events,
//                  else per-thread CPU-time timers where perf is refused)
//   KFLAME_PERF_SCOPE  auto|threads: perf events per CPU, filtered to this
//                  process in the kernel where allowed (root), else per
//                  thread (default auto); threads: always per thread
//   KFLAME_WHAT    cpu|offcpu|both: CPU time, off-CPU time or both (default
//                  cpu; off-CPU needs perf events with kernel context)
//   KFLAME_MAX_SWITCH_RATE  off-CPU stacks per second at most, per thread
//                  (per CPU with CPU-wide events); 0, the default: every
//                  context switch (start()'s maxSwitchRate)
//   KFLAME_SOURCE_MAPS=1  JS frames named after their source maps (also
//                  the default under node --enable-source-maps)
//   KFLAME_OUT     a file (its extension picks the format) or a directory
//                  (exists, or ends with '/': <dir>/kflame-<pid>.<ext>);
//                  %p expands to the pid; default ./kflame-<pid>.svg
//   KFLAME_FORMAT  svg|html|folded|cpuprofile|trace|pprof: the format in a
//                  directory (default folded) and of the default file name
//   KFLAME_QUIET=1 no summary line on stderr
//   KFLAME_CONTINUOUS=S  profile without end in windows of S seconds
//                  (lib/continuous.js), each to KFLAME_PYROSCOPE or else to
//                  the directory KFLAME_OUT (default ./kflame-profiles/),
//                  KFLAME_KEEP files kept (default 10)
//   KFLAME_PYROSCOPE=URL  push the windows to a Pyroscope server, as
//                  KFLAME_APP (default node.<script>) with KFLAME_LABELS
//                  ("env=prod,region=eu") besides host and pid
// A misconfiguration stops the process with exit code 2 before the app runs;
// perf refused: the timer sampler profiles instead (one line says so); with
// KFLAME_MODE=perf the refusal only warns and the app runs unprofiled.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { isMainThread } = require('node:worker_threads')
const { kflameError } = require('./errors')
const { fromText, DEFAULTS } = require('./options')
const output = require('./output')
const { checkPath, writeFailure } = require('./safefile')
const { stderrLine } = output

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP']
// Per isolate: a second copy of this module (kflame/register through a
// symlink and ./register.js by path, or -r and --import together) must not
// start a second profile.
const LOADED = Symbol.for('kflame.register.loaded')

function configError (message) {
  return kflameError(Error, 'KFLAME_ERR_CONFIG', message)
}

// Unset and empty are the same: `KFLAME_HZ= node ...` means the default.
function envValue (env, name) {
  const v = env[name]
  return v === undefined || v === '' ? undefined : v
}

// KFLAME_HZ and KFLAME_MAX_SWITCH_RATE: a whole number within their start
// option's range; what to set it to, and what unset means.
const NUMBER_VARS = {
  hz: ['KFLAME_HZ', `the samples per second, e.g. KFLAME_HZ=${DEFAULTS.hz} (the default)`, `(default ${DEFAULTS.hz})`],
  maxSwitchRate: ['KFLAME_MAX_SWITCH_RATE', 'the off-CPU stacks per second at most, e.g. 200, or to 0', '(every context switch)']
}

function parseNumber (name, value) {
  if (value === undefined) return DEFAULTS[name]
  const [variable, example, unset] = NUMBER_VARS[name]
  const read = fromText(name, value.trim())
  if (read.fail === 'form') {
    throw configError(`${variable}=${JSON.stringify(value)} is not a whole number: set it to ${example}, or unset it ${unset}`)
  }
  if (read.fail) {
    throw configError(`${variable}=${value} is out of range: ${name} must be from ${read.min} to ${read.max} ` +
      `(kernel.perf_event_max_sample_rate); set it in that range or unset it ${unset}`)
  }
  return read.value
}

// KFLAME_MODE, KFLAME_PERF_SCOPE and KFLAME_WHAT: one of their start option's choices.
const CHOICE_VARS = {
  mode: ['KFLAME_MODE', 'is not a sampler kflame knows'],
  perfScope: ['KFLAME_PERF_SCOPE', 'is not where kflame opens perf events'],
  what: ['KFLAME_WHAT', 'is not something kflame samples']
}

function parseChoice (name, value) {
  if (value === undefined) return DEFAULTS[name]
  const read = fromText(name, value)
  if (read.fail) {
    const [variable, says] = CHOICE_VARS[name]
    throw configError(`${variable}=${JSON.stringify(value)} ${says}: ` +
      `set it to ${read.choices.join(', ')} (default ${DEFAULTS[name] ?? read.choices[0]}), or unset it`)
  }
  return read.value
}

function parseSourceMaps (value) {
  if (value === undefined || value === '0' || value === '1') return
  throw configError(`KFLAME_SOURCE_MAPS=${JSON.stringify(value)}: set it to 1 (map JS frames through their ` +
    'source maps) or 0, or unset it (on under node --enable-source-maps)')
}

function parseFormat (value) {
  if (value === undefined) return undefined
  if (!output.isFormat(value)) {
    throw configError(`KFLAME_FORMAT=${JSON.stringify(value)} is not a format kflame writes: ` +
      `set it to one of ${output.FORMAT_LIST}, or unset it`)
  }
  return value
}

function isDirectory (p) {
  try {
    return fs.statSync(p).isDirectory()
  } catch {
    return false
  }
}

// 'out.svg' -> 'out.%p.svg', 'a/b.pb.gz' -> 'a/b.%p.pb.gz'.
function withPidPattern (file) {
  const ext = output.extensionOf(file)
  return `${file.slice(0, file.length - ext.length)}.%p${ext}`
}

/**
 * Where this process writes and what its descendants are told, from the
 * environment. -> { file, format, childOut }
 *   file      absolute path this process writes
 *   format    one of output.FORMATS
 *   childOut  the KFLAME_OUT for child processes: absolute (a child may
 *             run elsewhere), and with %p when it names a file, so a child
 *             never overwrites its parent's profile
 * Throws KFLAME_ERR_CONFIG naming the variable and the fix.
 */
function resolveOutput (env, { pid = process.pid, cwd = process.cwd() } = {}) {
  const format = parseFormat(envValue(env, 'KFLAME_FORMAT'))
  const value = envValue(env, 'KFLAME_OUT')
  if (value !== undefined) {
    try {
      checkPath(value, 'KFLAME_OUT')
    } catch (err) {
      throw configError(err.message)
    }
  }
  if (value === undefined) {
    const ext = output.extensionOfFormat(format || 'svg')
    return {
      file: path.join(cwd, `kflame-${pid}${ext}`),
      format: format || 'svg',
      childOut: path.join(cwd, `kflame-%p${ext}`)
    }
  }
  const expanded = value.replaceAll('%p', String(pid))
  if (value.endsWith('/') || isDirectory(path.resolve(cwd, expanded))) {
    // A directory collects one profile per process, to be merged: folded
    // unless asked otherwise.
    const fmt = format || 'folded'
    return {
      file: path.join(path.resolve(cwd, expanded), `kflame-${pid}${output.extensionOfFormat(fmt)}`),
      format: fmt,
      childOut: path.resolve(cwd, value) + '/'
    }
  }
  // A file: its extension decides (KFLAME_FORMAT is only for directories, so
  // one inherited from a `kflame` run does not fight a file name).
  const fileFormat = output.formatOfPath(expanded)
  if (fileFormat === null) {
    throw configError(`KFLAME_OUT=${JSON.stringify(value)} does not end with an extension kflame writes: ` +
      `end it with ${output.EXTENSION_LIST}, or with / for a directory`)
  }
  const absolute = path.resolve(cwd, value)
  return {
    file: path.resolve(cwd, expanded),
    format: fileFormat,
    childOut: value.includes('%p') ? absolute : withPidPattern(absolute)
  }
}

function parseLabels (value) {
  const labels = {}
  if (value === undefined) return labels
  for (const pair of value.split(',')) {
    const eq = pair.indexOf('=')
    if (eq <= 0) {
      throw configError(`KFLAME_LABELS=${JSON.stringify(value)}: ${JSON.stringify(pair)} is not name=value; ` +
        'write them as KFLAME_LABELS=env=prod,region=eu')
    }
    labels[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim()
  }
  return labels
}

// KFLAME_CONTINUOUS and what goes with it: continuous() options, or null.
function readContinuous (env, { cwd = process.cwd() } = {}) {
  const every = envValue(env, 'KFLAME_CONTINUOUS')
  if (every === undefined) return null
  if (!/^\s*\d+\s*$/.test(every) || Number(every) < 1 || Number(every) > 86400) {
    throw configError(`KFLAME_CONTINUOUS=${JSON.stringify(every)} is not a number of seconds from 1 to 86400: ` +
      'set it to the length of a window, e.g. KFLAME_CONTINUOUS=60, or unset it')
  }
  const keep = envValue(env, 'KFLAME_KEEP')
  if (keep !== undefined && !/^\s*[1-9]\d{0,4}\s*$/.test(keep)) {
    throw configError(`KFLAME_KEEP=${JSON.stringify(keep)} is not a number of files from 1 to 99999; unset it for 10`)
  }
  const pyroscope = envValue(env, 'KFLAME_PYROSCOPE')
  const out = envValue(env, 'KFLAME_OUT')
  if (pyroscope === undefined && out !== undefined && !out.endsWith('/') && !isDirectory(path.resolve(cwd, out))) {
    throw configError(`KFLAME_OUT=${JSON.stringify(out)} must be a directory with KFLAME_CONTINUOUS ` +
      '(windows are files in it): end it with /, or set KFLAME_PYROSCOPE to push them to a server')
  }
  const options = {
    every: Number(every),
    to: pyroscope !== undefined ? pyroscope : path.resolve(cwd, (out || 'kflame-profiles/').replaceAll('%p', String(process.pid))),
    format: parseFormat(envValue(env, 'KFLAME_FORMAT')) || 'folded',
    labels: parseLabels(envValue(env, 'KFLAME_LABELS'))
  }
  if (keep !== undefined) options.keep = Number(keep)
  const app = envValue(env, 'KFLAME_APP')
  if (app !== undefined) options.app = app
  try {
    require('./continuous').checkOptions(options)
  } catch (err) {
    throw configError(`KFLAME_CONTINUOUS: ${err.message.replace(/^continuous\(options\)(\.| )/, '')}`)
  }
  return options
}

// The whole configuration, or a KFLAME_ERR_CONFIG.
function readConfig (env, where = {}) {
  const hz = parseNumber('hz', envValue(env, 'KFLAME_HZ'))
  const mode = parseChoice('mode', envValue(env, 'KFLAME_MODE'))
  const what = parseChoice('what', envValue(env, 'KFLAME_WHAT'))
  const perfScope = parseChoice('perfScope', envValue(env, 'KFLAME_PERF_SCOPE')) || 'auto'
  if (what !== 'cpu' && mode === 'timer') {
    throw configError(`KFLAME_WHAT=${what} needs perf events, and KFLAME_MODE=timer counts CPU time only: ` +
      'unset one of them')
  }
  const maxSwitchRate = parseNumber('maxSwitchRate', envValue(env, 'KFLAME_MAX_SWITCH_RATE'))
  parseSourceMaps(envValue(env, 'KFLAME_SOURCE_MAPS'))
  const continuous = readContinuous(env, where)
  const out = continuous ? { file: null, format: continuous.format, childOut: env.KFLAME_OUT } : resolveOutput(env, where)
  const quiet = /^(1|true|yes)$/i.test(env.KFLAME_QUIET || '')
  return { hz, mode, perfScope, what, maxSwitchRate, quiet, continuous, ...out }
}

// `node --test` spawns one child per test file (with our --require, and
// NODE_TEST_CONTEXT set) and only waits for them: its own profile would be
// noise in a merge. With test isolation off the tests run in it: profile it.
function isTestOrchestrator (execArgv = process.execArgv, env = process.env) {
  if (!execArgv.includes('--test') || env.NODE_TEST_CONTEXT) return false
  return !execArgv.some((a) => /^--(experimental-)?test-isolation=none$/.test(a))
}

// The kflame CLI with kflame/register in the user's NODE_OPTIONS: the CLI
// only waits for its child; the children are profiled.
function isOwnCli (argv = process.argv) {
  try {
    return argv[1] !== undefined && fs.realpathSync(argv[1]) === path.join(__dirname, '..', 'bin', 'kflame.js')
  } catch {
    return false
  }
}

// Listeners of signal-exit (used by tap, nyc, foreground-child, execa...).
// They kill the process themselves when theirs are the only listeners left,
// and hold back when there are others, as ours: so they are not "the app's
// own handler", or each would wait for the other and the signal be lost.
function signalExitListeners () {
  let n = 0
  const v4 = globalThis[Symbol.for('signal-exit emitter')]
  if (v4 && typeof v4.count === 'number') n += v4.count
  const v3 = process.__signal_exit_emitter__
  if (v3 && typeof v3.count === 'number') n += v3.count
  return n
}

// "node app.js --port 80", shortened: the flame graph's title.
function titleOf (argv = process.argv) {
  const script = argv[1] ? path.relative(process.cwd(), argv[1]) || argv[1] : '[eval]'
  return output.commandTitle(['node', script, ...argv.slice(2)])
}

function displayPath (file, cwd) {
  const rel = path.relative(cwd, file)
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file
}

function summary (stats, shown) {
  const threads = stats.threads === 1 ? '1 thread' : `${stats.threads} threads`
  const lost = stats.lost ? `, ${stats.lost} lost` : ''
  return `${stats.samples} samples (${threads}${lost}) written to ${shown}`
}

/**
 * Sets up the profile of this process. Returns true when a profile runs
 * (main thread, configured, perf allowed), false otherwise. Exits with code
 * 2 on a misconfigured environment.
 */
function install ({ env = process.env } = {}) {
  if (globalThis[LOADED]) return false
  globalThis[LOADED] = true

  if (!isMainThread) {
    // Loading kflame arms V8's code-event hook on this isolate, so the
    // worker's JS frames get names in the main thread's profile.
    try { require('./index') } catch {}
    return false
  }
  if (isOwnCli()) return false

  const cwd = process.cwd()
  let config
  try {
    config = readConfig(env, { pid: process.pid, cwd })
  } catch (err) {
    if (err.code !== 'KFLAME_ERR_CONFIG') throw err
    stderrLine(err.message)
    // Running the app misconfigured would lose the profile the user asked for.
    process.exit(2)
  }
  if (config.childOut !== undefined) env.KFLAME_OUT = config.childOut

  if (isTestOrchestrator()) return false
  if (config.continuous) return installContinuous(config)

  let id
  try {
    // The whole API loads, as the app's own require would; the start arms
    // V8's code-event hook and workers'.
    require('./index')
    id = require('./session').start({ hz: config.hz, mode: config.mode, perfScope: config.perfScope, what: config.what, maxSwitchRate: config.maxSwitchRate }, { owner: 'register' })
  } catch (err) {
    // Never break the app: no sampler allowed, or no addon for this node.
    stderrLine(`not profiling this process (pid ${process.pid}): ${err.message}`)
    return false
  }

  const title = titleOf()
  let written = false
  function finish () {
    if (written) return
    written = true
    let profile
    try {
      profile = require('./session').stop({ id })
    } catch (err) {
      // The app stopped "our" profile itself (it shares the session), and
      // one it started since is its own.
      stderrLine(`nothing written to ${config.file}: ${err.message}`)
      return
    }
    try {
      output.writeProfile(profile, config.file, config.format, { title })
    } catch (err) {
      stderrLine(writeFailure(config.file, err))
      return
    }
    // Sampled with timers because perf was refused: said even when quiet, as
    // a refusal in mode 'perf' is (the profile has no kernel frames).
    if (profile.stats.details.perfRefused) stderrLine(profile.stats.warnings[0])
    if (!config.quiet) stderrLine(summary(profile.stats, displayPath(config.file, cwd)))
  }

  const binding = require('./binding') // loaded with ./index just above
  const dispatched = new Set() // signals our listener saw
  const othersListen = (sig) => process.listenerCount(sig) - 1 - signalExitListeners() > 0

  // Normal end, process.exit() anywhere, an uncaught exception (node emits
  // 'exit' with code 1): the exit code is node's business, not touched here.
  // But a signal that came while JS ran and was never dispatched (the loop
  // ran dry first) would end the process with 0: it dies of it instead, as
  // it would have without kflame's listener.
  process.on('exit', () => {
    finish()
    const sig = signalName(binding.signalArrived())
    if (sig && SIGNALS.includes(sig) && !dispatched.has(sig) && !othersListen(sig)) {
      binding.dieOfSignal(os.constants.signals[sig])
    }
  })

  for (const sig of SIGNALS) {
    const onSignal = () => {
      dispatched.add(sig)
      // Others than us (and signal-exit) listen: the app decides whether
      // this signal ends the process; if it does, 'exit' writes.
      if (othersListen(sig)) return
      finish()
      // Without our listener node restores the default action: the
      // re-raised signal kills the process, and the parent sees it.
      process.removeListener(sig, onSignal)
      process.kill(process.pid, sig)
    }
    process.on(sig, onSignal)
    // After process.on: the C watch chains to the handler libuv installed.
    try { binding.watchSignal(os.constants.signals[sig]) } catch {}
  }
  return true
}

// KFLAME_CONTINUOUS: windows go out as the app runs; at exit the last one
// is written (a directory) or counted as not pushed (a server: nothing
// asynchronous runs in 'exit').
function installContinuous (config) {
  let c
  try {
    c = require('./index').continuous({ ...config.continuous, hz: config.hz, mode: config.mode, perfScope: config.perfScope, what: config.what, maxSwitchRate: config.maxSwitchRate })
  } catch (err) {
    stderrLine(`not profiling this process (pid ${process.pid}): ${err.message}`)
    return false
  }
  if (!config.quiet) {
    const where = typeof config.continuous.to === 'string' ? config.continuous.to : 'a function'
    stderrLine(`profiling continuously in windows of ${config.continuous.every} s to ${where}`)
  }
  c.on('failed', (err) => { if (!config.quiet) stderrLine(`a window was not delivered: ${err.message}`) })
  process.on('exit', () => {
    const stats = c.stopSync()
    if (!config.quiet) {
      stderrLine(`${stats.windows} windows, ${stats.samples} samples: ${stats.delivered} delivered` +
        (stats.dropped ? `, ${stats.dropped} not pushed (queue full, or at exit)` : '') +
        (stats.failed ? `, ${stats.failed} failed (${stats.lastError})` : ''))
    }
  })
  return true
}

function signalName (signo) {
  if (!signo) return null
  return Object.keys(os.constants.signals).find((name) => os.constants.signals[name] === signo) || null
}

module.exports = {
  install,
  readConfig,
  readContinuous,
  resolveOutput,
  parseFormat,
  withPidPattern,
  isTestOrchestrator,
  isOwnCli,
  titleOf,
  summary,
  SIGNALS
}

'use strict'

// `kflame [-o OUT] [--hz N] [--] COMMAND ARGS...`: runs COMMAND with every
// node process in it profiled by register.js (through NODE_OPTIONS), each
// writing folded stacks into a fresh temporary directory; when COMMAND ends,
// merges them into OUT and ends as COMMAND ended (exit code, or signal).

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { parse, usageError } = require('./args')
const { checkOutputPath, writeOutput, stderrLine } = require('./io')
const { listInputs, mergeFiles, badLinesWarning, plural } = require('./merge')
const help = require('./help')
const { commandTitle } = require('../output')
const { fromText } = require('../options')

const REGISTER = path.join(__dirname, '..', '..', 'register.js')
const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT']

const SPEC = {
  output: { type: 'string', short: 'o' },
  hz: { type: 'string' },
  mode: { type: 'string' },
  what: { type: 'string' },
  'max-switch-rate': { type: 'string' },
  'source-maps': { type: 'boolean' },
  title: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' }
}

// NODE_OPTIONS splits on spaces except inside double quotes, where a
// backslash escapes the next character (node's ParseNodeOptionsEnvVar).
function quoteNodeOption (value) {
  return /[\s"\\]/.test(value) ? `"${value.replace(/[\\"]/g, '\\$&')}"` : value
}

// The user's NODE_OPTIONS, kept, with register.js required and V8 told
// from the first line to give interpreted functions trampolines of their
// own (node's bootstrap and the app's first modules too), so no frame of
// theirs is left "(interpreted)" however deep the stack.
function nodeOptionsWith (existing, register = REGISTER) {
  const ours = `--interpreted-frames-native-stack --require=${quoteNodeOption(register)}`
  return existing && existing.trim() !== '' ? `${existing} ${ours}` : ours
}

// --hz, --mode, --what, --max-switch-rate: start options as text
// (lib/options.js reads them).
function checkFlag (name, value, flag = name) {
  const read = fromText(name, value)
  if (read.fail === 'form') throw usageError(`--${flag} must be a whole number of ${name === 'hz' ? 'samples' : 'off-CPU stacks'} per second, got "${value}"`)
  if (read.fail === 'range') {
    throw usageError(`--${flag} must be from ${read.min} to ${read.max} (kernel.perf_event_max_sample_rate), got ${value}`)
  }
  if (read.fail) throw usageError(`--${flag} must be one of ${read.choices.join(', ')}, got "${value}"`)
  return read.value
}

// Whether `name` is a file the PATH search could have meant. execvp says
// EACCES, not ENOENT, when some PATH directory is unreadable (root's dirs
// in PATH of another user), even if the command is nowhere.
function existsOnPath (name) {
  if (name.includes('/')) return fs.existsSync(name)
  return (process.env.PATH || '').split(':').some((d) => {
    try {
      return fs.statSync(path.join(d || '.', name)).isFile()
    } catch {
      return false
    }
  })
}

// Ends this process the way the child ended: dies of the same signal
// (our listeners removed, so the default action applies), else its exit code.
function endLike (code, signal) {
  if (signal) {
    process.kill(process.pid, signal)
    // Reached only when the signal's default is not to die (SIGPIPE is
    // ignored by node): the shell's convention.
    setTimeout(() => process.exit(128 + (os.constants.signals[signal] || 0)), 100)
    return
  }
  process.exitCode = code
}

async function run (argv) {
  const { values, positionals: command } = parse(argv, SPEC, { stopAtPositional: true })
  if (values.help) {
    process.stdout.write(help.RUN)
    return 0
  }
  if (values.version) {
    process.stdout.write(`${require('../../package.json').version}\n`)
    return 0
  }
  if (command.length === 0) throw usageError('no command to run')
  const hz = values.hz === undefined ? 99 : checkFlag('hz', values.hz)
  if (values.output !== undefined) checkOutputPath(values.output)

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-'))
  const env = {
    ...process.env,
    NODE_OPTIONS: nodeOptionsWith(process.env.NODE_OPTIONS),
    KFLAME_OUT: dir + '/',
    KFLAME_FORMAT: 'folded',
    KFLAME_HZ: String(hz), // always: an inherited one was not checked here
    KFLAME_MODE: values.mode === undefined ? (process.env.KFLAME_MODE || '') : checkFlag('mode', values.mode),
    KFLAME_WHAT: values.what === undefined ? (process.env.KFLAME_WHAT || '') : checkFlag('what', values.what),
    KFLAME_MAX_SWITCH_RATE: values['max-switch-rate'] === undefined
      ? (process.env.KFLAME_MAX_SWITCH_RATE || '')
      : String(checkFlag('maxSwitchRate', values['max-switch-rate'], 'max-switch-rate')),
    KFLAME_SOURCE_MAPS: values['source-maps'] ? '1' : (process.env.KFLAME_SOURCE_MAPS || ''),
    KFLAME_QUIET: '1'
  }

  let result
  try {
    result = await runChild(command, env)
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true })
    // A shell's codes: 127 not found, 126 found but not runnable.
    const notFound = err.code === 'ENOENT' || !existsOnPath(command[0])
    const reason = notFound ? 'command not found' : err.code === 'EACCES' ? 'permission denied' : err.message
    stderrLine(`cannot run ${command[0]}: ${reason}`)
    return notFound ? 127 : 126
  }

  try {
    collect(dir, values.output || `kflame-${result.pid}.svg`, {
      hz,
      title: values.title !== undefined ? values.title : commandTitle(command)
    })
  } catch (err) {
    // The command's outcome matters more than the profile's: report, then
    // still end as it ended.
    stderrLine(err.message)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
    result.signals.remove()
  }
  // A signal that came after the command ended (during the merge) is not
  // swallowed either.
  endLike(result.code, result.signal || result.signals.late)
  return undefined
}

// Spawns the command with the terminal. Signals to this process go to the
// command while it runs; after it ended, the first one is kept for the end
// (our listeners stay until then, so a second Ctrl-C cannot cut the merge
// short). -> { pid, code, signal, signals: { late, remove() } }
function runChild (command, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(command[0], command.slice(1), { stdio: 'inherit', env })
    const signals = { late: null, handlers: {} }
    for (const sig of FORWARDED) {
      signals.handlers[sig] = () => {
        if (child.exitCode === null && child.signalCode === null) {
          try { child.kill(sig) } catch {}
        } else {
          signals.late ||= sig
        }
      }
      process.on(sig, signals.handlers[sig])
    }
    signals.remove = () => { for (const sig of FORWARDED) process.removeListener(sig, signals.handlers[sig]) }
    child.on('error', (err) => {
      // Only a failed spawn ends the run; after one, 'exit' does.
      if (child.pid !== undefined) return
      signals.remove()
      reject(err)
    })
    child.on('exit', (code, signal) => resolve({ pid: child.pid, code, signal, signals }))
  })
}

// Merges the folded files in `dir` into `out`, with one line on stderr.
function collect (dir, out, { hz, title }) {
  const names = fs.readdirSync(dir).filter((n) => n.endsWith('.folded') && !n.startsWith('.'))
  if (names.length === 0) {
    stderrLine('no profile was written: the command started no node process that loaded kflame, ' +
      'or none could be sampled (see any warning above)')
    return
  }
  const m = mergeFiles(listInputs([dir]))
  const warning = badLinesWarning(m)
  if (warning) stderrLine(warning)
  const { fromFolded } = require('../folded')
  const profile = fromFolded(m.folded, { hz })
  const processes = plural(names.length, 'process', 'processes')
  const subtitle = `${m.samples} samples at ${hz} Hz from ${processes}`
  writeOutput(profile, out, { title, subtitle })
  stderrLine(`${m.samples} samples from ${processes} written to ${out}`)
}

module.exports = { run, nodeOptionsWith, quoteNodeOption, REGISTER, SPEC }

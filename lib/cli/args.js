'use strict'

// Command-line parsing for every kflame subcommand, with one set of rules
// and messages. Not node:util parseArgs: the run mode must stop at the
// command (`kflame -o x.svg node --inspect app.js`: --inspect is node's),
// which parseArgs cannot do on Node 20.
//
// spec: { name: { type: 'string' | 'boolean', short?: 'o', multiple?: true } }
// Accepted: --name value, --name=value, -o value, -ovalue, --flag, -h,
// `--` (everything after it is positional), `-` (a positional: stdin).

const { kflameError } = require('../errors')

function usageError (message) {
  return kflameError(Error, 'KFLAME_ERR_USAGE', message)
}

function parse (argv, spec, { stopAtPositional = false } = {}) {
  const values = {}
  const positionals = []
  const byShort = new Map()
  for (const [name, o] of Object.entries(spec)) if (o.short) byShort.set(o.short, name)

  function set (name, value) {
    if (spec[name].multiple) (values[name] ||= []).push(value)
    else values[name] = value
  }

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1))
      break
    }
    if (arg === '-' || !arg.startsWith('-')) {
      if (stopAtPositional) {
        positionals.push(...argv.slice(i))
        break
      }
      positionals.push(arg)
      continue
    }
    let name, inline, shown
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=')
      name = arg.slice(2, eq < 0 ? undefined : eq)
      inline = eq < 0 ? undefined : arg.slice(eq + 1)
      shown = `--${name}`
      if (!Object.hasOwn(spec, name)) throw usageError(`unknown option ${shown}`)
    } else {
      shown = arg.slice(0, 2)
      name = byShort.get(arg[1])
      if (name === undefined) throw usageError(`unknown option ${shown}`)
      if (arg.length > 2) inline = arg.slice(arg[2] === '=' ? 3 : 2)
    }
    if (spec[name].type === 'boolean') {
      if (inline !== undefined) throw usageError(`${shown} takes no value`)
      set(name, true)
      continue
    }
    if (inline === undefined) {
      // `-o --hz 99` is a forgotten value, not a file named "--hz"; a value
      // that starts with '-' can still be given as --name=-value.
      const next = argv[i + 1]
      if (next === undefined || (next.startsWith('-') && next !== '-')) throw usageError(`${shown} needs a value`)
      inline = next
      i++
    }
    set(name, inline)
  }
  return { values, positionals }
}

// "99" -> 99; anything but a positive whole number is a usage error.
function positiveInteger (value, shown) {
  if (!/^\d+$/.test(value) || Number(value) < 1) throw usageError(`${shown} must be a positive whole number, got "${value}"`)
  return Number(value)
}

module.exports = { parse, usageError, positiveInteger }

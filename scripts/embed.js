#!/usr/bin/env node
'use strict'

// Turns a source file into C, at build time, so the file stays a real
// .js/.css/.json that can be read, linted and tested, and C includes it:
//
//   node scripts/embed.js OUTDIR INPUT...
//
// writes OUTDIR/<input's name>.h for each input:
//   .js    the bytes as one C string literal
//   .css   its lines joined (a rule per line in the file, one line in the
//          SVG), as one C string literal
//   .json  each array of strings as `#define KF_<KEY> "a", "b", ...`, a C
//          initializer list (keys starting with "//" are comments)
//
// Run by binding.gyp (an action), test/c/Makefile and test/fuzz/Makefile.

const fs = require('node:fs')
const path = require('node:path')
const { writeFileSafe } = require('../lib/safefile')

// A C string literal, one per source line so the header diffs well.
function literal (text) {
  if (text === '') return '""'
  return text.split(/(?<=\n)/).map((line) => '"' + line.replace(/[\\"\n\t\r?]|[^\x20-\x7e]/g, (c) => {
    const known = { '\\': '\\\\', '"': '\\"', '\n': '\\n', '\t': '\\t', '\r': '\\r', '?': '\\?' }
    if (known[c]) return known[c]
    // non-ASCII as UTF-8 octal escapes (three digits: never run into the next character)
    return [...Buffer.from(c)].map((b) => '\\' + b.toString(8).padStart(3, '0')).join('')
  }) + '"').join('\n')
}

function macroName (key) {
  return 'KF_' + key.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()
}

function embed (input) {
  const text = fs.readFileSync(input, 'utf8')
  switch (path.extname(input)) {
    case '.js': return literal(text) + '\n'
    case '.css': return literal(text.replace(/\n/g, '')) + '\n'
    case '.json': {
      const lists = JSON.parse(text)
      return Object.entries(lists).filter(([key]) => !key.startsWith('//')).map(([key, list]) => {
        if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) {
          throw new Error(`${input}: "${key}" must be an array of strings`)
        }
        return `#define ${macroName(key)} ${list.map(literal).join(', ')}\n`
      }).join('')
    }
    default: throw new Error(`embed: no rule for ${input} (.js, .css or .json)`)
  }
}

if (require.main === module) {
  const [outdir, ...inputs] = process.argv.slice(2)
  if (!outdir || inputs.length === 0) {
    console.error('usage: node scripts/embed.js OUTDIR INPUT...')
    process.exit(2)
  }
  fs.mkdirSync(outdir, { recursive: true })
  for (const input of inputs) {
    const header = `/* Generated from ${path.basename(input)} by scripts/embed.js: edit that file. */\n` + embed(input)
    writeFileSafe(path.join(outdir, path.basename(input) + '.h'), header)
  }
}

module.exports = { embed }

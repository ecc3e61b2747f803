'use strict'

// `kflame merge FILE|DIR... [-o OUT]`, and the merging the run mode does
// with the folded files its processes wrote.

const fs = require('node:fs')
const path = require('node:path')
const { parse, usageError, positiveInteger } = require('./args')
const { checkOutputPath, writeOutput, stderrLine } = require('./io')
const help = require('./help')
const { parseText, formatText } = require('../foldedtext')

const SPEC = {
  output: { type: 'string', short: 'o' },
  title: { type: 'string' },
  hz: { type: 'string' },
  help: { type: 'boolean', short: 'h' }
}

// FILE|DIR arguments -> the files to read; a DIR gives its *.folded files,
// sorted (a merge does not depend on the order, its warnings do).
function listInputs (args) {
  const files = []
  for (const arg of args) {
    let st
    try {
      st = fs.statSync(arg)
    } catch {
      throw usageError(`cannot read ${arg}: no such file or directory`)
    }
    if (!st.isDirectory()) {
      files.push(arg)
      continue
    }
    const found = fs.readdirSync(arg).filter((n) => n.endsWith('.folded') && !n.startsWith('.')).sort()
    if (found.length === 0) throw usageError(`no .folded files in ${arg}`)
    files.push(...found.map((n) => path.join(arg, n)))
  }
  return files
}

/**
 * Adds up folded files. -> { folded, samples, stacks, lines, badLines,
 * badFiles: [[file, badLines]] }. `folded` is sorted, one line per stack.
 */
function mergeFiles (files) {
  const merged = new Map()
  let lines = 0
  let badLines = 0
  const badFiles = []
  let samples = 0
  for (const file of files) {
    const parsed = parseText(fs.readFileSync(file, 'utf8'), { total: samples })
    samples = parsed.total
    lines += parsed.lines
    badLines += parsed.badLines
    if (parsed.badLines) badFiles.push([file, parsed.badLines])
    for (const [stack, count] of parsed.stacks) merged.set(stack, (merged.get(stack) || 0) + count)
  }
  const { keys, folded } = formatText(merged)
  return { folded, samples, stacks: keys.length, lines, badLines, badFiles }
}

// One line about skipped lines, naming the first files that had them.
function badLinesWarning (m) {
  if (m.badLines === 0) return null
  const named = m.badFiles.slice(0, 3).map(([f, n]) => `${f}: ${n}`).join(', ')
  const more = m.badFiles.length > 3 ? `, ${m.badFiles.length - 3} more files` : ''
  return `skipped ${m.badLines} of ${m.lines} lines that are not "frames COUNT" (${named}${more})`
}

async function merge (argv) {
  const { values, positionals } = parse(argv, SPEC)
  if (values.help) {
    process.stdout.write(help.MERGE)
    return 0
  }
  if (positionals.length === 0) throw usageError('merge needs folded files or directories')
  const hz = values.hz === undefined ? 99 : positiveInteger(values.hz, '--hz')
  if (values.output !== undefined) checkOutputPath(values.output)
  const files = listInputs(positionals)

  const m = mergeFiles(files)
  const warning = badLinesWarning(m)
  if (warning) stderrLine(warning)
  if (values.output === undefined) {
    process.stdout.write(m.folded)
    return 0
  }
  if (m.samples === 0) {
    stderrLine(`nothing to write: no stacks in ${files.length === 1 ? files[0] : `${files.length} files`}`)
    return 1
  }
  const { fromFolded } = require('../folded')
  const profile = fromFolded(m.folded, { hz })
  const subtitle = `${m.samples} samples from ${plural(files.length, 'file')}`
  writeOutput(profile, values.output, { title: values.title, subtitle })
  stderrLine(`${subtitle} written to ${values.output}`)
  return 0
}

function plural (n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`
}

module.exports = { merge, mergeFiles, listInputs, badLinesWarning, plural, SPEC }

'use strict'

// `kflame svg [FILE|-] [-o out.svg]`: folded stacks -> SVG flame graph.

const fs = require('node:fs')
const path = require('node:path')
const { parse, usageError, positiveInteger } = require('./args')
const { failure, stderrLine } = require('./io')
const output = require('../output')
const help = require('./help')

const SPEC = {
  output: { type: 'string', short: 'o' },
  title: { type: 'string' },
  subtitle: { type: 'string' },
  width: { type: 'string' },
  minwidth: { type: 'string' },
  inverted: { type: 'boolean' },
  reverse: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' }
}

async function readStdin () {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  return Buffer.concat(chunks).toString('utf8')
}

function svgOptions (values) {
  const o = { title: values.title, subtitle: values.subtitle, inverted: !!values.inverted, reverse: !!values.reverse }
  if (values.width !== undefined) o.width = positiveInteger(values.width, '--width')
  if (values.minwidth !== undefined) {
    const m = values.minwidth
    if (!/^\d+(\.\d+)?%?$/.test(m)) throw usageError(`--minwidth must be pixels or a percentage such as 0.5%, got "${m}"`)
    o.minwidth = m.endsWith('%') ? m : Number(m)
  }
  try {
    require('../svg').checkSvgOptions(o)
  } catch (err) {
    throw usageError(err.message.replace(/^svg\(options\): /, ''))
  }
  return o
}

async function svg (argv) {
  const { values, positionals } = parse(argv, SPEC)
  if (values.help) {
    process.stdout.write(help.SVG)
    return 0
  }
  if (positionals.length > 1) throw usageError(`svg takes one input file, got ${positionals.length}`)
  const input = positionals[0] === undefined || positionals[0] === '-' ? null : positionals[0]
  const out = values.output
  if (out !== undefined) {
    const format = output.formatOfPath(out)
    // Any name may hold an SVG (flame.html, /dev/stdout), but not one that
    // promises another format.
    if (format !== null && format !== 'svg') {
      throw usageError(`svg writes SVG, not ${format} ("${out}"): use kflame merge ${input || 'FILE'} -o ${out}`)
    }
  }
  if (input !== null && !fs.existsSync(input)) throw usageError(`cannot read ${input}: no such file or directory`)
  if (input === null && process.stdin.isTTY) throw usageError('svg needs folded stacks: a file, or piped on standard input')
  const options = svgOptions(values)
  const { renderSvg, renderSvgFile } = require('../svg')

  let stats
  if (input !== null && out !== undefined) {
    // File to file, all in C: a big folded file never becomes a JS string.
    // Through a temporary file, so a failed render leaves no half SVG.
    const tmp = path.join(path.dirname(out), `.${path.basename(out)}.${process.pid}.tmp`)
    try {
      fs.mkdirSync(path.dirname(out), { recursive: true })
      stats = renderSvgFile(input, tmp, options)
      fs.renameSync(tmp, out)
    } catch (err) {
      try { fs.unlinkSync(tmp) } catch {}
      throw failure(err.message)
    }
  } else {
    const text = input === null ? await readStdin() : fs.readFileSync(input, 'utf8')
    const r = renderSvg(text, options)
    stats = r.stats
    if (out === undefined) {
      process.stdout.write(r.svg)
    } else {
      try {
        output.writeFileAtomic(out, r.svg)
      } catch (err) {
        throw failure(`cannot write ${out}: ${err.message}`)
      }
    }
  }
  if (stats.badLines) stderrLine(`skipped ${stats.badLines} of ${stats.lines} lines that are not "frames COUNT"`)
  if (stats.samples === 0) stderrLine(`no stacks in ${input || 'the input'}: the flame graph is empty`)
  if (out !== undefined) stderrLine(`${stats.samples} samples written to ${out}`)
  return 0
}

module.exports = { svg, svgOptions, SPEC }

'use strict'

// `kflame svg [FILE|-] [-o out.svg]`: folded stacks -> SVG flame graph.

const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { parse, usageError, positiveInteger } = require('./args')
const { failure, stderrLine } = require('./io')
const output = require('../output')
const { writeFileSafe, checkPath, ensureDir, writeFailure } = require('../safefile')
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

async function readStream (stream, head = []) {
  const chunks = [...head]
  for await (const chunk of stream) chunks.push(chunk)
  return Buffer.concat(chunks).toString('utf8')
}

// A file, or a pipe or FIFO (`kflame svg <(cmd)`), read as the C side reads
// one (src/util/readfile.c): opened without blocking, so a FIFO nobody writes
// reads as empty instead of hanging in open(2).
async function readInput (file) {
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
  let fifo = false
  try {
    fifo = fs.fstatSync(fd).isFIFO()
  } finally {
    if (!fifo) fs.closeSync(fd)
  }
  if (!fifo) return fs.readFileSync(file, 'utf8')
  // One read first: 0 bytes means no writer and nothing written (EOF). Else
  // a writer is (or was) there, and the event loop reads the rest: epoll
  // reports the FIFO's end once a writer has come and gone, never before.
  const first = Buffer.alloc(64 * 1024)
  let n
  try {
    n = fs.readSync(fd, first)
  } catch (err) {
    if (err.code !== 'EAGAIN') {
      fs.closeSync(fd)
      throw err
    }
    n = -1
  }
  if (n === 0) {
    fs.closeSync(fd)
    return ''
  }
  return readStream(new net.Socket({ fd, readable: true, writable: false }), n > 0 ? [first.subarray(0, n)] : [])
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
    try {
      checkPath(out, '-o')
    } catch (err) {
      throw usageError(err.message)
    }
    const format = output.formatOfPath(out)
    // Any name may hold an SVG (flame.html), but not one that promises
    // another format. (Not /dev/stdout: a link is never written through;
    // without -o the SVG goes to standard output.)
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
    // The C side writes as lib/safefile.js does (src/util/safefile.h): a failed
    // render leaves no half SVG, a link at `out` is refused. The input may
    // be a pipe (`kflame svg <(cmd) -o x.svg`).
    try {
      ensureDir(path.dirname(out))
      stats = renderSvgFile(input, out, options)
    } catch (err) {
      throw failure(err.message)
    }
  } else {
    let text
    try {
      text = input === null ? await readStream(process.stdin) : await readInput(input)
    } catch (err) {
      throw failure(`cannot read ${input || 'standard input'}: ${err.message}`)
    }
    const r = renderSvg(text, options)
    stats = r.stats
    if (out === undefined) {
      process.stdout.write(r.svg)
    } else {
      try {
        writeFileSafe(out, r.svg)
      } catch (err) {
        throw failure(writeFailure(out, err))
      }
    }
  }
  if (stats.badLines) stderrLine(`skipped ${stats.badLines} of ${stats.lines} lines that are not "frames COUNT"`)
  if (stats.samples === 0) stderrLine(`no stacks in ${input || 'the input'}: the flame graph is empty`)
  if (out !== undefined) stderrLine(`${stats.samples} samples written to ${out}`)
  return 0
}

module.exports = { svg, svgOptions, SPEC }

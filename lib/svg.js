'use strict'

// Flame graph options, checked before they reach the C renderer.

const binding = require('./binding')
const { kflameError, invalid, outOfRange } = require('./errors')
const { checkPath } = require('./safefile')

const DEFAULTS = Object.freeze({
  title: undefined,
  subtitle: undefined,
  width: 1200,
  minwidth: 0.1,
  inverted: false,
  reverse: false,
  // Off-CPU stacks marked "(idle)" (the event loop polling, pool threads
  // waiting for work) are left out unless true.
  idle: false,
  // Labels of the app's own JS files are shown relative to this directory
  // (src/render/framelabel.h); undefined: process.cwd() when rendered.
  cwd: undefined
})

function checkSvgOptions (options) {
  if (options === undefined) options = {}
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalid('svg(options): options must be an object')
  }
  for (const name of Object.keys(options)) {
    if (!Object.hasOwn(DEFAULTS, name)) {
      throw kflameError(TypeError, 'KFLAME_ERR_UNKNOWN_OPTION',
        `svg(options): unknown option "${name}"; known: ${Object.keys(DEFAULTS).join(', ')}`)
    }
  }
  const o = { ...DEFAULTS }
  for (const [k, v] of Object.entries(options)) if (v !== undefined) o[k] = v
  for (const name of ['title', 'subtitle']) {
    if (o[name] !== undefined && typeof o[name] !== 'string') throw invalid(`svg(options): ${name} must be a string`)
    if (o[name] !== undefined && Buffer.byteLength(o[name]) > 1000) {
      throw outOfRange(`svg(options): ${name} is longer than 1000 bytes`)
    }
  }
  if (!Number.isInteger(o.width) || o.width < 100 || o.width > 100000) {
    throw outOfRange('svg(options): width must be an integer from 100 to 100000 (pixels)')
  }
  // minwidth: pixels, or "N%" of the whole width (as flamegraph.pl).
  let minwidth = o.minwidth
  if (typeof minwidth === 'string' && /^\d+(\.\d+)?%$/.test(minwidth)) {
    minwidth = parseFloat(minwidth) / 100 * (o.width - 20)
  }
  if (typeof minwidth !== 'number' || !(minwidth >= 0) || minwidth > o.width) {
    throw invalid('svg(options): minwidth must be pixels (a number >= 0) or a percentage such as "0.5%"')
  }
  if (o.cwd === undefined) o.cwd = process.cwd()
  if (typeof o.cwd !== 'string' || Buffer.byteLength(o.cwd) > 4000 || o.cwd.includes('\0')) {
    throw invalid('svg(options): cwd must be a directory path (a string of at most 4000 bytes)')
  }
  for (const name of ['inverted', 'reverse', 'idle']) {
    if (typeof o[name] !== 'boolean') throw invalid(`svg(options): ${name} must be a boolean`)
  }
  // Unset titles stay out: the C side's defaults apply.
  const checked = { ...o, minwidth }
  for (const k of Object.keys(checked)) if (checked[k] === undefined) delete checked[k]
  return checked
}

// folded text -> { svg, stats: { lines, badLines, samples, frames, drawn,
// mergedFrames, mergedSamples } }
function renderSvg (folded, options) {
  if (typeof folded !== 'string') throw invalid('renderSvg(folded): folded must be a string')
  const o = checkSvgOptions(options)
  return binding.renderSvg(folded, o)
}

// File to file, all in C: a big folded file never becomes a JS string.
// The input may be a pipe or FIFO (read to its end; one with no writer
// reads as empty); the output is written as lib/safefile.js writes
// (src/util/safefile.h): never through a link or into a device, FIFO or
// directory at outPath (KFLAME_ERR_UNSAFE_PATH). -> the same stats as
// renderSvg.
function renderSvgFile (inPath, outPath, options) {
  checkPath(inPath, 'renderSvgFile(inPath, outPath): inPath')
  checkPath(outPath, 'renderSvgFile(inPath, outPath): outPath')
  const o = checkSvgOptions(options)
  return binding.renderSvgFile(inPath, outPath, o)
}

module.exports = { renderSvg, renderSvgFile, checkSvgOptions }

'use strict'

// Folded text from anywhere (kflame, perf + stackcollapse-perf.pl, 0x, ...)
// into a Profile. Lines that are not "frame;frame;... COUNT" are skipped and
// counted, never fatal.

const { kflameError } = require('./errors')
const { parseFoldedLine } = require('./exports')
const { Profile } = require('./profile')

// -> { stacks: Map(text -> count), lines, badLines, total }. A zero count is
// a bad line too, as for the C renderer: it could only draw nothing. So is a
// count that would take the total (starting at `total`, for a merge) past
// Number.MAX_SAFE_INTEGER, the C renderer's KF_FLAMETREE_MAX_TOTAL: every
// sum stays exact.
function parseFoldedText (text, total = 0) {
  const stacks = new Map()
  let lines = 0
  let badLines = 0
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue
    lines++
    // trimEnd, not replace(/\s+$/): the regex retries at every space of a
    // run that is not at the end, quadratic in the run's length.
    const parsed = parseFoldedLine(line.trimEnd())
    if (!parsed || parsed.count === 0 || parsed.count > Number.MAX_SAFE_INTEGER - total) {
      badLines++
      continue
    }
    total += parsed.count
    const key = parsed.frames.join(';')
    stacks.set(key, (stacks.get(key) || 0) + parsed.count)
  }
  return { stacks, lines, badLines, total }
}

// Map(stack text -> count) -> { keys (sorted), folded }: kflame's folded
// output order, one line per stack.
function foldedOf (stacks) {
  const keys = [...stacks.keys()].sort()
  return { keys, folded: keys.map((k) => `${k} ${stacks.get(k)}\n`).join('') }
}

function fromFolded (text, options = {}) {
  if (typeof text !== 'string') {
    throw kflameError(TypeError, 'KFLAME_ERR_INVALID_ARG', 'fromFolded(text): text must be a string')
  }
  const { hz = null } = options
  if (hz !== null && !(Number.isInteger(hz) && hz > 0)) {
    throw kflameError(TypeError, 'KFLAME_ERR_INVALID_ARG', 'fromFolded(text, { hz }): hz must be a positive integer')
  }
  const { stacks, lines, badLines, total: samples } = parseFoldedText(text)
  const { keys, folded } = foldedOf(stacks)
  const roots = new Set()
  for (const k of keys) roots.add(k.split(';', 1)[0])
  const warnings = badLines ? [`${badLines} of ${lines} lines were not "frames COUNT" and were skipped`] : []
  const stats = {
    samples,
    lost: 0,
    threads: roots.size,
    durationMs: null,
    hz,
    event: null,
    kernel: keys.some((k) => /_\[k\](;|$)/.test(k)),
    warnings,
    details: { lines, badLines }
  }
  return new Profile(folded, stats, null)
}

module.exports = { fromFolded, parseFoldedText, foldedOf }

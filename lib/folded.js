'use strict'

// Folded text from anywhere (kflame, perf + stackcollapse-perf.pl, 0x, ...)
// into a Profile. Lines that are not "frame;frame;... COUNT" are skipped and
// counted, never fatal (lib/foldedtext.js reads them).

const { invalid } = require('./errors')
const { parseText, formatText } = require('./foldedtext')
const { Profile } = require('./profile')

function fromFolded (text, options = {}) {
  if (typeof text !== 'string') {
    throw invalid('fromFolded(text): text must be a string')
  }
  const { hz = null } = options
  if (hz !== null && !(Number.isInteger(hz) && hz > 0)) {
    throw invalid('fromFolded(text, { hz }): hz must be a positive integer')
  }
  const { stacks, lines, badLines, total: samples } = parseText(text)
  const { keys, folded } = formatText(stacks)
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

module.exports = { fromFolded }

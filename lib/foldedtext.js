'use strict'

// FlameGraph's folded text ("collapsed stacks"), read and written in one
// place for every JS caller (fromFolded, kflame merge, the exports, labels):
//
//   main;node::Start(int, char**);fib /app/fib.js:3:10_[j] 42
//
// one stack per line, root first, frames joined by ';', then a space and the
// count. Frame names may hold spaces but never ';' nor a line break. The
// rules are the C renderer's (src/render/flametree.c split_count) and the C
// folder's (src/util/framename.h kf_fold_sanitize), so a text reads the same in C
// and in JS. Everything here is linear in its input: no regular expression
// that can backtrack over a run of spaces. Pure; called on any JS thread.

// A count is 1 to 18 digits (leading zeros too) and at most 2^53 - 1, as in
// C. Number() of a larger value never rounds down to a safe integer, so the
// test is exact.
const MAX_DIGITS = 18

// src/util/framename.h kf_fold_sanitize: ';' (the frame separator) becomes ':', and
// control characters (C0 and DEL, whose UTF-8 bytes are the same) become a
// space, so a name can never split a frame or a line. test/foldedtext.test.js
// checks this against the C rule on the same names.
const CONTROL = /[\x00-\x1f\x7f]/g

function sanitizeFrame (name) {
  return name.replaceAll(';', ':').replace(CONTROL, ' ')
}

// The line without what C ignores at its end: spaces and a '\r' (CRLF).
function trimLine (line) {
  let n = line.length
  while (n > 0 && (line.charCodeAt(n - 1) === 32 || line.charCodeAt(n - 1) === 13)) n--
  return n === line.length ? line : line.slice(0, n)
}

function isDigits (text) {
  if (text.length === 0 || text.length > MAX_DIGITS) return false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 48 || c > 57) return false
  }
  return true
}

// "frames COUNT" -> { stack, count } with the stack (the text before the
// count) as it is, or null without a count of 1-18 digits up to 2^53 - 1.
// For kflame's own text (src/render/folded.c), whose stacks are what C folded.
function splitCount (line) {
  const text = trimLine(line)
  const space = text.lastIndexOf(' ')
  if (space <= 0) return null
  const digits = text.slice(space + 1)
  if (!isDigits(digits)) return null
  const count = Number(digits)
  if (!Number.isSafeInteger(count)) return null
  return { stack: text.slice(0, space), count }
}

// "frames COUNT" -> { stack, count }, or null when it is not a stack line:
// no count (splitCount), or an empty frame, as the C renderer reads it.
function splitLine (line) {
  const s = splitCount(line)
  if (s === null) return null
  const { stack } = s
  if (stack.charCodeAt(0) === 59 || stack.charCodeAt(stack.length - 1) === 59 || stack.includes(';;')) return null
  return s
}

// "frames COUNT" -> { frames, count }, or null (see splitLine).
function parseLine (line) {
  const s = splitLine(line)
  return s === null ? null : { frames: s.stack.split(';'), count: s.count }
}

/**
 * A whole text -> { stacks: Map(stack -> count), lines, badLines, total }.
 * Blank lines are skipped; a line that does not parse is a bad line, and so
 * is one whose count would take the total (starting at `total`, for a merge)
 * past Number.MAX_SAFE_INTEGER, C's KF_FLAMETREE_MAX_TOTAL: every sum stays
 * exact. A zero count is a bad line too (the C renderer could only draw
 * nothing), unless keepZero. Equal stacks add up; the Map keeps the order in
 * which stacks first appear.
 */
function parseText (text, { total = 0, keepZero = false } = {}) {
  const stacks = new Map()
  let lines = 0
  let badLines = 0
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue
    lines++
    const s = splitLine(line)
    if (s === null || (s.count === 0 && !keepZero) || s.count > Number.MAX_SAFE_INTEGER - total) {
      badLines++
      continue
    }
    total += s.count
    stacks.set(s.stack, (stacks.get(s.stack) || 0) + s.count)
  }
  return { stacks, lines, badLines, total }
}

// One line of text, for a stack (frames joined, or their array) and a count.
function formatLine (stack, count) {
  return `${Array.isArray(stack) ? stack.join(';') : stack} ${count}\n`
}

// Map(stack -> count) -> { keys (sorted), folded }: kflame's output order,
// one line per stack.
function formatText (stacks) {
  const keys = [...stacks.keys()].sort()
  return { keys, folded: keys.map((k) => formatLine(k, stacks.get(k))).join('') }
}

module.exports = { sanitizeFrame, splitCount, splitLine, parseLine, parseText, formatLine, formatText }

'use strict'

// `kflame resolve (--map FILE | --pid N) [FILE...]`: names JIT addresses in
// any text with a perf map, the way resolve-jit-symbols did for DTrace's
// ustack() output. Streams line by line.
//
// Choices: an address inside an entry becomes NAME+0xOFFSET (NAME at the
// entry's start), so a return address, which points inside its function,
// still says how far in; where entries overlap (a --perf-basic-prof map
// keeps every compile, and V8 reuses memory) the later line wins, as it does
// for perf itself.

const fs = require('node:fs')
const { once } = require('node:events')
const { parse, usageError, positiveInteger } = require('./args')
const { stderrLine } = require('./io')
const { plural } = require('./merge')
const help = require('./help')

const SPEC = {
  map: { type: 'string' },
  pid: { type: 'string' },
  'no-bare': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' }
}

// The name is taken whole and trimmed after: `(.*?)\s*$` retried the tail
// at every character of a run of spaces inside a name (quadratic).
const MAP_LINE = /^(?:0x)?([0-9a-fA-F]{1,16})\s+(?:0x)?([0-9a-fA-F]{1,16})\s+(.*)$/s
// Hex words standing alone: not part of a longer word, number or name.
const ADDRESS = /(?<![0-9A-Za-z_$])(0[xX][0-9a-fA-F]{1,16}|[0-9a-fA-F]{8,16})(?![0-9A-Za-z_$])/g
const ADDRESS_0X = /(?<![0-9A-Za-z_$])(0[xX][0-9a-fA-F]{1,16})(?![0-9A-Za-z_$])/g

// A binary max-heap of entries by line number: the entry of the latest
// line among those covering a point.
class LatestFirst {
  constructor () { this.a = [] }
  get size () { return this.a.length }
  top () { return this.a[0] }
  push (e) {
    const a = this.a
    a.push(e)
    for (let i = a.length - 1; i > 0;) {
      const p = (i - 1) >> 1
      if (a[p].line >= a[i].line) break
      swap(a, p, i)
      i = p
    }
  }

  pop () {
    const a = this.a
    const last = a.pop()
    if (a.length === 0) return
    a[0] = last
    for (let i = 0; ;) {
      const l = 2 * i + 1
      const r = l + 1
      let m = i
      if (l < a.length && a[l].line > a[m].line) m = l
      if (r < a.length && a[r].line > a[m].line) m = r
      if (m === i) break
      swap(a, m, i)
      i = m
    }
  }
}

function swap (a, i, j) {
  const t = a[i]
  a[i] = a[j]
  a[j] = t
}

/**
 * Perf map text -> { lookup(address) -> { name, offset } | null, entries,
 * badLines }. Lines that are not "START SIZE NAME" (hex, 0x optional) are
 * skipped and counted; so are entries beyond 2^53 (not user space).
 */
function parseMap (text) {
  const entries = []
  let badLines = 0
  let n = 0
  for (const line of text.split('\n')) {
    n++
    if (line.trim() === '') continue
    const m = MAP_LINE.exec(line)
    const start = m && parseInt(m[1], 16)
    const size = m && parseInt(m[2], 16)
    const name = m && m[3].trimEnd()
    if (!m || name === '' || size === 0 || !Number.isSafeInteger(start + size)) {
      badLines++
      continue
    }
    entries.push({ start, end: start + size, name, line: n })
  }
  entries.sort((a, b) => a.start - b.start || a.line - b.line)
  const segments = flatten(entries)
  const starts = new Float64Array(segments.map((s) => s.start))

  function lookup (address) {
    // The last segment starting at or before the address.
    let lo = 0
    let hi = starts.length - 1
    let found = -1
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      if (starts[mid] <= address) {
        found = mid
        lo = mid + 1
      } else {
        hi = mid - 1
      }
    }
    if (found < 0 || address >= segments[found].end) return null
    const e = segments[found].entry
    return { name: e.name, offset: address - e.start }
  }
  return { lookup, entries: entries.length, badLines }
}

// Sorted, possibly overlapping entries -> sorted disjoint segments
// { start, end, entry }, each owned by the latest line covering it.
function flatten (entries) {
  let overlaps = false
  for (let i = 1; i < entries.length && !overlaps; i++) overlaps = entries[i].start < entries[i - 1].end
  if (!overlaps) return entries.map((e) => ({ start: e.start, end: e.end, entry: e }))

  const points = [...new Set(entries.flatMap((e) => [e.start, e.end]))].sort((a, b) => a - b)
  const active = new LatestFirst()
  const segments = []
  let next = 0
  for (let i = 0; i + 1 < points.length; i++) {
    const at = points[i]
    while (next < entries.length && entries[next].start <= at) active.push(entries[next++])
    while (active.size && active.top().end <= at) active.pop()
    if (!active.size) continue
    const entry = active.top()
    const last = segments[segments.length - 1]
    if (last && last.entry === entry && last.end === at) last.end = points[i + 1]
    else segments.push({ start: at, end: points[i + 1], entry })
  }
  return segments
}

function nameOf (hit) {
  return hit.offset === 0 ? hit.name : `${hit.name}+0x${hit.offset.toString(16)}`
}

// One piece of text -> the same with every mapped address named.
function resolveText (text, lookup, { bare = true } = {}) {
  return text.replace(bare ? ADDRESS : ADDRESS_0X, (word) => {
    const hex = word[1] === 'x' || word[1] === 'X' ? word.slice(2) : word
    const address = parseInt(hex, 16)
    if (!Number.isSafeInteger(address)) return word
    const hit = lookup(address)
    return hit ? nameOf(hit) : word
  })
}

// Whole lines are resolved as they come. Only the new chunk is searched for
// a newline, and the pieces of an unfinished line are joined once: searching
// `rest + chunk` flattened the line read so far at every chunk, quadratic in
// a long line without a newline (64 MB took 49 s).
async function resolveStream (input, lookup, options, out) {
  input.setEncoding('utf8')
  let pending = [] // the current line so far, in pieces
  for await (const chunk of input) {
    const cut = chunk.lastIndexOf('\n') + 1
    if (cut === 0) {
      pending.push(chunk)
      continue
    }
    pending.push(chunk.slice(0, cut))
    const text = pending.join('')
    pending = cut < chunk.length ? [chunk.slice(cut)] : []
    if (!out.write(resolveText(text, lookup, options))) await once(out, 'drain')
  }
  // The last line, without its newline.
  const rest = pending.join('')
  if (rest !== '' && !out.write(resolveText(rest, lookup, options))) await once(out, 'drain')
}

async function resolve (argv) {
  const { values, positionals } = parse(argv, SPEC)
  if (values.help) {
    process.stdout.write(help.RESOLVE)
    return 0
  }
  if ((values.map === undefined) === (values.pid === undefined)) throw usageError('resolve needs --map FILE or --pid N (one of them)')
  const mapPath = values.map !== undefined ? values.map : `/tmp/perf-${positiveInteger(values.pid, '--pid')}.map`
  let mapText
  try {
    mapText = fs.readFileSync(mapPath, 'utf8')
  } catch (err) {
    const hint = values.pid !== undefined
      ? ` (process ${values.pid} writes it with kflame's perfMap option or writePerfMap(), or node --perf-basic-prof)`
      : ''
    throw usageError(`cannot read the perf map ${mapPath}: ${err.code === 'ENOENT' ? 'no such file' : err.message}${hint}`)
  }
  for (const file of positionals) {
    if (file !== '-' && !fs.existsSync(file)) throw usageError(`cannot read ${file}: no such file or directory`)
  }
  const map = parseMap(mapText)
  if (map.badLines) stderrLine(`skipped ${plural(map.badLines, 'line')} of ${mapPath} that are not "START SIZE NAME"`)
  if (map.entries === 0) stderrLine(`${mapPath} has no entries: nothing will be named`)

  const out = process.stdout
  const options = { bare: !values['no-bare'] }
  const sources = positionals.length ? positionals : ['-']
  for (const src of sources) {
    await resolveStream(src === '-' ? process.stdin : fs.createReadStream(src), map.lookup, options, out)
  }
  return 0
}

module.exports = { resolve, parseMap, resolveText, resolveStream, SPEC }

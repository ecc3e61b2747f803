'use strict'

// Source maps: JS frames of transpiled or bundled code named after the code
// that was written. A frame "name /app/dist/server.js:LINE:COL_[j]" (V8's
// 1-based position of the function, see README "What a stack looks like")
// becomes "origName /app/src/server.ts:LINE:COL_[j]" when the file has a
// source map that covers the position.
//
// Maps are read with Node's own SourceMap (node:module), no dependency:
// module.findSourceMap() where node already parsed the map
// (--enable-source-maps), else the file's last "//# sourceMappingURL="
// comment: a data: URL (inline map) or a path relative to the file. One map
// per file, read once per cache (one cache per profile, or the caller's).
// A file without a map, or whose map cannot be read or parsed, leaves its
// frames as they were and is counted.
//
// JS thread only. Linear in the folded text: each frame is cut by index
// searches, never by a backtracking regex.

const fs = require('node:fs')
const path = require('node:path')
const { fileURLToPath } = require('node:url')
const nodeModule = require('node:module')
const { formatText, splitCount } = require('./foldedtext')

// The tail of a file read for its sourceMappingURL comment: the comment is
// the last line (a map may be inline, so the tail can be large; the whole
// file is read only when it is a small one).
const COMMENT = 'sourceMappingURL='

// Whether maps are applied by default: node runs with --enable-source-maps,
// or KFLAME_SOURCE_MAPS=1.
function sourceMapsDefault () {
  if (process.env.KFLAME_SOURCE_MAPS === '1') return true
  if (process.env.KFLAME_SOURCE_MAPS === '0') return false
  return process.execArgv.includes('--enable-source-maps') ||
    /(^|\s)--enable-source-maps(\s|$)/.test(process.env.NODE_OPTIONS || '')
}

// A JS frame cut into { name, file, line, col, suffix }, or null for any
// other frame. Names may hold spaces ("get x"); the location is the last
// space-free word.
function parseJsFrame (frame) {
  const suffix = frame.endsWith('_[j]') ? '_[j]' : frame.endsWith('_[i]') ? '_[i]' : null
  if (suffix === null) return null
  const body = frame.slice(0, -4)
  const space = body.lastIndexOf(' ')
  if (space < 0) return null
  const loc = body.slice(space + 1)
  const c2 = loc.lastIndexOf(':')
  const c1 = c2 > 0 ? loc.lastIndexOf(':', c2 - 1) : -1
  if (c1 <= 0) return null
  const line = Number(loc.slice(c1 + 1, c2))
  const col = Number(loc.slice(c2 + 1))
  if (!Number.isInteger(line) || !Number.isInteger(col) || line < 1 || col < 1) return null
  let file = loc.slice(0, c1)
  if (file.startsWith('file://')) {
    try { file = fileURLToPath(file) } catch { return null }
  }
  if (!path.isAbsolute(file)) return null // node:internal/..., eval'd code
  return { name: body.slice(0, space), file, line, col, suffix }
}

// The map's payload for a generated file: { map, dir } with dir the
// directory sources are relative to, or { error: 'missing' | 'broken' }.
function loadMap (file) {
  let found
  try { found = nodeModule.findSourceMap(file) } catch {}
  if (found) return { map: found, dir: path.dirname(file) }
  let text
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch {
    return { error: 'missing' }
  }
  const at = text.lastIndexOf(COMMENT)
  if (at < 2 || !/\/[/*][#@]\s*$/.test(text.slice(Math.max(0, at - 8), at))) return { error: 'missing' }
  let end = at + COMMENT.length
  while (end < text.length && !/\s/.test(text[end]) && text[end] !== '*') end++
  const url = text.slice(at + COMMENT.length, end)
  let json
  let dir = path.dirname(file)
  try {
    if (url.startsWith('data:')) {
      const comma = url.indexOf(',')
      const meta = url.slice(5, comma)
      const data = url.slice(comma + 1)
      json = meta.endsWith(';base64') ? Buffer.from(data, 'base64').toString('utf8') : decodeURIComponent(data)
    } else {
      const mapFile = url.startsWith('file://') ? fileURLToPath(url) : path.resolve(dir, decodeURIComponent(url))
      try {
        json = fs.readFileSync(mapFile, 'utf8')
      } catch {
        return { error: 'missing' }
      }
      dir = path.dirname(mapFile)
    }
    const payload = JSON.parse(json)
    if (payload === null || typeof payload !== 'object' || typeof payload.mappings !== 'string') {
      return { error: 'broken' }
    }
    return { map: new nodeModule.SourceMap(payload), dir }
  } catch {
    return { error: 'broken' }
  }
}

// An original source as an absolute path (a file: URL, an absolute path, or
// one relative to the map's directory and sourceRoot), or null.
function sourcePath (source, entry, dir, map) {
  if (typeof source !== 'string' || source === '') return null
  if (source.startsWith('file://')) {
    try { return fileURLToPath(source) } catch { return null }
  }
  if (/^[a-z][a-z0-9+.-]*:/i.test(source)) return source // webpack://, etc.: as the map says
  const root = map.payload && typeof map.payload.sourceRoot === 'string' ? map.payload.sourceRoot : ''
  return path.resolve(dir, root, source)
}

class SourceMapper {
  constructor () {
    this.files = new Map() // generated file -> { map, dir } | { error }
    this.frames = new Map() // frame -> mapped frame (itself when unmapped)
    this.stats = { mapped: 0, unmapped: 0, files: 0, missing: 0, broken: 0 }
  }

  #file (file) {
    let entry = this.files.get(file)
    if (entry === undefined) {
      entry = loadMap(file)
      this.files.set(file, entry)
      if (entry.error) this.stats[entry.error]++
      else this.stats.files++
    }
    return entry
  }

  // The frame in the original source's terms, or the frame itself. Distinct
  // frames are counted once in stats: mapped, or unmapped (no map, a broken
  // one, or a position it does not cover).
  frame (frame) {
    const cached = this.frames.get(frame)
    if (cached !== undefined) return cached
    const mapped = this.#map(frame)
    this.frames.set(frame, mapped)
    return mapped
  }

  #map (frame) {
    const f = parseJsFrame(frame)
    if (f === null) return frame
    const file = this.#file(f.file)
    if (!file.map) {
      this.stats.unmapped++
      return frame
    }
    let entry
    try {
      entry = file.map.findEntry(f.line - 1, f.col - 1)
    } catch {}
    const source = entry && sourcePath(entry.originalSource, entry, file.dir, file.map)
    if (!source || !Number.isInteger(entry.originalLine)) {
      this.stats.unmapped++
      return frame
    }
    // V8's position is the parameter list's "(": the name is the token
    // before it, which a minifier's map names (esbuild, terser); tsc keeps
    // names as written and emits none.
    let name = f.name
    const plain = name.replace(/^[~^+*]/, '')
    if (plain !== '(anonymous)' && f.col > 1) {
      let before
      try { before = file.map.findEntry(f.line - 1, f.col - 2) } catch {}
      if (before && typeof before.name === 'string' && before.name !== '' &&
          before.generatedLine === f.line - 1) {
        name = name.slice(0, name.length - plain.length) + before.name
      } else if (typeof entry.name === 'string' && entry.name !== '') {
        name = name.slice(0, name.length - plain.length) + entry.name
      }
    }
    this.stats.mapped++
    // Names never hold ';' or line breaks in folded text.
    const loc = `${source}:${entry.originalLine + 1}:${entry.originalColumn + 1}`.replace(/[;\r\n\t\0]/g, ' ')
    return `${name.replace(/[;\r\n\t\0]/g, ' ')} ${loc}${f.suffix}`
  }
}

// Folded text and its samples with every JS frame mapped: lines that name
// alike after mapping merge, and samples.line follows them. Returns
// { folded, samples, stats }.
function applySourceMaps (folded, samples, mapper = new SourceMapper()) {
  const lines = folded.split('\n')
  if (lines[lines.length - 1] === '') lines.pop()
  const counts = new Map()
  const keyOf = new Array(lines.length)
  for (let l = 0; l < lines.length; l++) {
    const { stack, count } = splitCount(lines[l]) || { stack: lines[l], count: 0 } // C writes none such
    const key = stack.split(';').map((f) => mapper.frame(f)).join(';')
    keyOf[l] = key
    counts.set(key, (counts.get(key) || 0) + count)
  }
  const remapped = formatText(counts)
  let outSamples = samples
  if (samples) {
    const index = new Map(remapped.keys.map((k, i) => [k, i]))
    const line = new Uint32Array(samples.line.length)
    for (let i = 0; i < line.length; i++) line[i] = index.get(keyOf[samples.line[i]])
    outSamples = { line, time: samples.time, tid: samples.tid }
  }
  return { folded: remapped.folded, samples: outSamples, stats: { ...mapper.stats } }
}

module.exports = { applySourceMaps, SourceMapper, parseJsFrame, sourceMapsDefault }

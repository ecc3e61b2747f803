'use strict'

// One place for "which format does this file name ask for", "write a
// Profile in a format" and the line that says so, shared by register.js (a
// profile per process), the CLI (merged profiles), continuous windows and
// the HTTP endpoints, so all accept exactly the same names and speak alike.

const fs = require('node:fs')
const path = require('node:path')
const { invalid } = require('./errors')

// Format name (KFLAME_FORMAT, /stop?format=) -> the extension of a file kflame
// names itself (register's default, continuous windows, the HTTP answer's
// filename), the HTTP Content-Type and Content-Disposition, and how a
// Profile becomes its bytes. The graphs open in a browser; the rest are
// downloads for other tools.
const FORMATS = {
  svg: { ext: '.svg', type: 'image/svg+xml; charset=utf-8', disposition: 'inline', render: (p, svgOptions) => p.svg(svgOptions) },
  html: { ext: '.html', type: 'text/html; charset=utf-8', disposition: 'inline', render: (p, svgOptions) => p.html(svgOptions) },
  folded: { ext: '.folded', type: 'text/plain; charset=utf-8', disposition: 'inline', render: (p) => p.folded },
  cpuprofile: {
    ext: '.cpuprofile',
    type: 'application/json; charset=utf-8',
    disposition: 'attachment',
    render: (p) => JSON.stringify(p.cpuprofile())
  },
  trace: { ext: '.trace.json', type: 'application/json; charset=utf-8', disposition: 'attachment', render: (p) => JSON.stringify(p.traceEvents()) },
  pprof: { ext: '.pb.gz', type: 'application/octet-stream', disposition: 'attachment', render: (p) => p.pprof() }
}

// Extension -> format, for names given to kflame. Those with two dots come
// first; any '.json' is trace events.
const EXTENSIONS = [
  ['.pb.gz', 'pprof'],
  ['.trace.json', 'trace'],
  ['.svg', 'svg'],
  ['.html', 'html'],
  ['.htm', 'html'],
  ['.folded', 'folded'],
  ['.txt', 'folded'],
  ['.cpuprofile', 'cpuprofile'],
  ['.json', 'trace']
]

const EXTENSION_LIST = '.svg, .html (flame graph on a canvas), .folded, .txt, .cpuprofile, .json (Chrome trace events) or .pb.gz (pprof)'
const FORMAT_LIST = Object.keys(FORMATS).join('|')

function isFormat (name) {
  return typeof name === 'string' && Object.hasOwn(FORMATS, name)
}

// The extension of `file` that picks a format ('.pb.gz', '.svg', ...), or null.
function extensionOf (file) {
  const lower = path.basename(file).toLowerCase()
  for (const [ext] of EXTENSIONS) {
    if (lower.endsWith(ext) && lower.length > ext.length) return file.slice(file.length - ext.length)
  }
  return null
}

// 'out.svg' -> 'svg'; null when the extension is not one kflame writes.
function formatOfPath (file) {
  const ext = extensionOf(file)
  if (ext === null) return null
  const lower = ext.toLowerCase()
  return EXTENSIONS.find(([e]) => e === lower)[1]
}

function extensionOfFormat (format) {
  return FORMATS[format].ext
}

// A Profile's bytes in a format: a string, or a Buffer for pprof.
function renderProfile (profile, format, svgOptions) {
  if (!isFormat(format)) {
    throw invalid(`unknown output format "${format}"; known: ${FORMAT_LIST}`)
  }
  return FORMATS[format].render(profile, svgOptions)
}

// Writes a Profile to `file` in `format` (by default the one its extension
// picks), through profile.write (lib/safefile.js's rules; folded text and
// SVG of a live profile straight from C). Returns the format written.
function writeProfile (profile, file, format = formatOfPath(file), svgOptions) {
  return profile.write(file, { format, svg: svgOptions })
}

// A command line as a flame graph's title, shortened to fit one.
const TITLE_MAX = 200
function commandTitle (words) {
  const title = words.join(' ')
  return title.length > TITLE_MAX ? title.slice(0, TITLE_MAX - 1) + '…' : title
}

// One "kflame: ..." line on stderr. Synchronous: register also writes from
// 'exit', where asynchronous writes are lost.
function stderrLine (text) {
  try { fs.writeSync(2, `kflame: ${text}\n`) } catch {}
}

module.exports = {
  commandTitle,
  stderrLine,
  FORMATS,
  EXTENSIONS,
  EXTENSION_LIST,
  FORMAT_LIST,
  isFormat,
  extensionOf,
  formatOfPath,
  extensionOfFormat,
  renderProfile,
  writeProfile
}

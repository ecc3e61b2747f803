'use strict'

// How long a flame graph takes to open in a browser: headless Chromium
// (Debian's, through puppeteer-core) loads the file and paints it, for
// graphs of about 1k, 10k, 40k and 100k frames. kflame's SVG, kflame's HTML
// (canvas) and flamegraph.pl's SVG of the same folded stacks, side by side.
//
// A trial is: a new tab, page.goto(file://...) until the load event, then
// two animation frames (the first paint after load is committed), timed
// from node. Each trial opens a fresh tab; tools alternate within a round so
// drift on the machine hits them alike; the median of the rounds is kept.
// Rendering the files is not timed here (bench/render.js does that).
//
//   node bench/browser.js [--quick] [--rounds N] [--sizes 1000,10000,40000,100000]
//     [--json bench/results/browser.json] [--flamegraph-pl PATH] [--timeout S] [--keep]
//
// flamegraph.pl is never vendored: --flamegraph-pl, FLAMEGRAPH_PL, or
// `flamegraph.pl` on PATH; its column is skipped, with a note, without it.

const { spawnSync } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { median, mulberry32, option, machineNotes, machineLine, writeResults } = require('./common')
const chromium = require('../test/chromium')
const kflame = require('..')

const SIZES = [1000, 10000, 40000, 100000]
const WIDTH = 1200

// --- input: folded stacks with a given number of frames ------------------------

// Names as kflame writes them: JS frames with absolute paths (the app's own
// and node_modules), node: internals, C++ and libc.
function namePools (rand) {
  const pick = (xs) => xs[Math.floor(rand() * xs.length)]
  const verbs = ['parse', 'read', 'handle', 'render', 'build', 'resolve', 'emit', 'visit', 'walk', 'check', 'load', 'flush']
  const nouns = ['Expr', 'Atom', 'Statement', 'Request', 'Token', 'Block', 'Node', 'Scope', 'Route', 'Chunk', 'Row', 'Template']
  const line = () => `${1 + Math.floor(rand() * 4000)}:${1 + Math.floor(rand() * 60)}`
  const pools = []
  for (let i = 0; i < 400; i++) {
    const fn = pick(verbs) + pick(nouns) + (rand() < 0.3 ? pick(nouns) : '')
    const r = rand()
    if (r < 0.35) pools.push(`${fn} /srv/app/node_modules/${pick(['acorn', 'express', 'lodash', '@babel/parser', 'ws'])}/${pick(['dist', 'lib'])}/${pick(['index', 'parser', 'util'])}.js:${line()}_[j]`)
    else if (r < 0.65) pools.push(`${fn} /srv/app/src/${pick(['api', 'db', 'views'])}/${pick(nouns).toLowerCase()}.js:${line()}_[j]`)
    else if (r < 0.75) pools.push(`${fn} node:internal/${pick(['timers', 'streams/readable', 'modules/cjs/loader'])}:${line()}_[j]`)
    else if (r < 0.92) pools.push(`v8::internal::${pick(nouns)}::${fn}(v8::internal::Isolate*, v8::internal::Handle<v8::internal::Object>)`)
    else pools.push(pick(['__libc_malloc', 'memmove', 'uv__io_poll', 'epoll_wait', 'read']))
  }
  return pools
}

// Folded text whose tree has `frames` nodes, every one of them wide enough
// to be drawn at WIDTH px and minwidth 0.1 (count 1 per line, at most about
// 11,000 lines): each new stack branches off an earlier one a few frames
// above its leaf and adds 4 to 16 frames of its own.
function generate (frames, seed) {
  const rand = mulberry32(seed)
  const names = namePools(mulberry32(seed ^ 0x9e3779b9))
  const roots = ['main', 'libuv-worker-1', 'v8-worker-2']
  const ids = new Map() // "parentId\0name" -> id
  const stacks = []
  const lines = []
  let count = 1 // the root "all"
  const idOf = (parent, name) => {
    const key = `${parent}\0${name}`
    let id = ids.get(key)
    if (id === undefined) { id = count++; ids.set(key, id) }
    return id
  }
  while (count < frames) {
    let stack
    if (stacks.length === 0 || rand() < 0.02) stack = [roots[Math.floor(rand() ** 2 * roots.length)]]
    else {
      const from = stacks[Math.floor(rand() * stacks.length)]
      const keep = Math.max(1, from.length - 1 - Math.floor(rand() * 12))
      stack = from.slice(0, keep)
    }
    const add = 4 + Math.floor(rand() * 13)
    for (let i = 0; i < add && stack.length < 70; i++) stack.push(names[Math.floor(rand() * names.length)])
    let id = 0
    for (const name of stack) id = idOf(id, name)
    stacks.push(stack)
    lines.push(`${stack.join(';')} 1\n`)
  }
  return lines.join('')
}

// --- the tools -------------------------------------------------------------------

function findFlamegraphPl (args) {
  let pl = option(args, '--flamegraph-pl', 'FLAMEGRAPH_PL')
  if (!pl) {
    const which = spawnSync('sh', ['-c', 'command -v flamegraph.pl'], { encoding: 'utf8' })
    if (which.status === 0) pl = which.stdout.trim()
  }
  if (!pl) return { pl: null, note: 'flamegraph.pl: skipped, give --flamegraph-pl PATH, FLAMEGRAPH_PL, or put it on PATH' }
  if (!fs.existsSync(pl)) return { pl: null, note: `flamegraph.pl: skipped, ${pl} does not exist` }
  if (spawnSync('perl', ['-v']).status !== 0) return { pl: null, note: 'flamegraph.pl: skipped, no perl' }
  return { pl: path.resolve(pl), note: null }
}

// Writes each tool's file for one input; -> [{ tool, file, bytes }].
function renderAll (dir, size, folded, pl) {
  const foldedFile = path.join(dir, `${size}.folded`)
  fs.writeFileSync(foldedFile, folded)
  const out = []
  const profile = kflame.fromFolded(folded)
  const svgFile = path.join(dir, `${size}.kflame.svg`)
  fs.writeFileSync(svgFile, profile.svg({ width: WIDTH }))
  out.push({ tool: 'kflame SVG', file: svgFile })
  const htmlFile = path.join(dir, `${size}.kflame.html`)
  fs.writeFileSync(htmlFile, profile.html({ width: WIDTH }))
  out.push({ tool: 'kflame HTML', file: htmlFile })
  if (pl) {
    const plFile = path.join(dir, `${size}.flamegraph-pl.svg`)
    const r = spawnSync('perl', [pl, '--width', String(WIDTH), foldedFile], { maxBuffer: 1 << 30 })
    if (r.status !== 0) throw new Error(`flamegraph.pl failed: ${String(r.stderr).slice(0, 300)}`)
    fs.writeFileSync(plFile, r.stdout)
    out.push({ tool: 'flamegraph.pl', file: plFile })
  }
  for (const o of out) o.bytes = fs.statSync(o.file).size
  return out
}

// How many frames the page shows once open: each tool's own structure.
function countFrames () {
  /* global document */
  if (document.getElementById('frames') && document.documentElement.nodeName === 'svg') {
    return document.getElementById('frames').querySelectorAll('rect').length
  }
  const canvas = document.querySelector('canvas')
  return canvas ? Number(canvas.getAttribute('data-frames')) : -1
}

async function openOnce (browser, file, timeoutMs) {
  const page = await browser.newPage()
  try {
    await page.setViewport({ width: WIDTH + 40, height: 900 })
    const t0 = performance.now()
    await page.goto(`file://${file}`, { waitUntil: 'load', timeout: timeoutMs })
    await chromium.painted(page)
    const ms = performance.now() - t0
    return { ms, frames: await page.evaluate(countFrames) }
  } finally {
    await page.close()
  }
}

async function main () {
  const args = process.argv.slice(2)
  const quick = args.includes('--quick')
  const rounds = Number(option(args, '--rounds') || (quick ? 1 : 5))
  const sizes = option(args, '--sizes') ? option(args, '--sizes').split(',').map(Number) : SIZES
  const timeoutMs = Number(option(args, '--timeout') || 120) * 1000
  const jsonOut = option(args, '--json')
  const why = chromium.missingReason()
  if (why) {
    console.error(`bench/browser.js: ${why}`)
    process.exitCode = 1
    return
  }
  const { pl, note } = findFlamegraphPl(args)
  const notes = note ? [note] : []
  const machine = machineNotes()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-browser-'))
  const browser = await chromium.launch()
  const version = await browser.version()
  console.log(`${machine ? machineLine(machine) : ''}; ${version}; ${rounds} round(s)`)
  const rows = []
  const inputs = []
  try {
    for (const size of sizes) {
      const folded = generate(size, 17 + size)
      const stats = kflame.fromFolded(folded).stats
      const files = renderAll(dir, size, folded, pl)
      inputs.push({ frames: size, lines: stats.details.lines, samples: stats.samples, foldedBytes: Buffer.byteLength(folded) })
      const times = new Map(files.map((f) => [f.tool, []]))
      const drawn = new Map()
      // One warm-up open per file (not counted): the first open of a tab
      // pays for starting a renderer process.
      for (const f of files) await openOnce(browser, f.file, timeoutMs)
      for (let r = 0; r < rounds; r++) {
        for (const f of files) {
          const o = await openOnce(browser, f.file, timeoutMs)
          times.get(f.tool).push(o.ms)
          drawn.set(f.tool, o.frames)
        }
      }
      for (const f of files) {
        const ts = times.get(f.tool)
        const row = {
          frames: size,
          tool: f.tool,
          ms: median(ts),
          min: Math.min(...ts),
          max: Math.max(...ts),
          runs: ts,
          bytes: f.bytes,
          framesDrawn: drawn.get(f.tool)
        }
        rows.push(row)
        console.log(`${size} frames  ${f.tool.padEnd(14)} median ${row.ms.toFixed(0)} ms ` +
          `(${row.min.toFixed(0)}-${row.max.toFixed(0)})  ${(f.bytes / 2 ** 20).toFixed(2)} MiB  ${row.framesDrawn} frames shown`)
      }
    }
  } finally {
    await browser.close()
    if (!args.includes('--keep')) fs.rmSync(dir, { recursive: true, force: true })
    else console.log(`files kept in ${dir}`)
  }
  for (const n of notes) console.log(n)
  if (jsonOut) {
    writeResults(jsonOut, machine, {
      quick,
      rounds,
      width: WIDTH,
      browser: version,
      method: 'new tab per trial, page.goto(file://) to the load event then two requestAnimationFrame; ' +
        'one untimed warm-up open per file; tools alternate within a round',
      peers: {
        flamegraphPl: pl ? { sha256: crypto.createHash('sha256').update(fs.readFileSync(pl)).digest('hex') } : null,
        notes
      },
      inputs,
      rows
    })
  }
}

// The table of docs/benchmarks.md from a results file (bench/table.js).
function readmeTables (result) {
  const n = (x) => Math.round(x).toLocaleString('en-US')
  const out = []
  const tools = [...new Set(result.rows.map((r) => r.tool))]
  out.push(`| frames | ${tools.map((t) => `${t} (median, min-max)`).join(' | ')} | file sizes (MiB) |`)
  out.push(`| --- | ${tools.map(() => '---').join(' | ')} | --- |`)
  for (const input of result.inputs) {
    const rows = tools.map((t) => result.rows.find((r) => r.frames === input.frames && r.tool === t))
    const cells = rows.map((r) => r ? `${r.tool.startsWith('kflame') ? '**' : ''}${n(r.ms)} ms${r.tool.startsWith('kflame') ? '**' : ''} (${n(r.min)}-${n(r.max)})` : '-')
    const sizes = rows.map((r) => r ? (r.bytes / 2 ** 20).toFixed(1) : '-').join(' / ')
    out.push(`| ${n(input.frames)} | ${cells.join(' | ')} | ${sizes} |`)
  }
  return out
}

module.exports = { readmeTables, generate }

if (require.main === module) main().catch((err) => { console.error(err); process.exitCode = 1 })

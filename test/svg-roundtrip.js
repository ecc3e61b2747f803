'use strict'

// Reads the frames of a kflame flame graph back into folded text: each
// frame's name and count from its <title>, its parent from the geometry
// (the frame one level closer to the root whose span holds its middle).
// Test helper.

const TITLE = /<g><title>(.*?) \((\d+) samples, [\d.]+%\)<\/title><rect x="([\d.]+)" y="(\d+)" width="([\d.]+)"/g

function unescapeXml (s) {
  return s.replace(/&(lt|gt|quot|#39|amp);/g, (_, e) => ({ lt: '<', gt: '>', quot: '"', '#39': "'", amp: '&' })[e])
}

function foldedFromSvg (svg) {
  const inverted = svg.includes('data-inverted="1"')
  const frames = [...svg.matchAll(TITLE)].map((m) => ({
    name: unescapeXml(m[1]), total: Number(m[2]), x: Number(m[3]), y: Number(m[4]), w: Number(m[5]), children: []
  }))
  // Depth order: the root first.
  const ys = [...new Set(frames.map((f) => f.y))].sort((a, b) => inverted ? a - b : b - a)
  const levels = ys.map((y) => frames.filter((f) => f.y === y))
  for (let d = 1; d < levels.length; d++) {
    for (const f of levels[d]) {
      const mid = f.x + f.w / 2
      const parent = levels[d - 1].find((p) => p.x <= mid && mid <= p.x + p.w + 0.05)
      if (!parent) throw new Error(`frame "${f.name}" has no parent`)
      f.parent = parent
      parent.children.push(f)
    }
  }
  const lines = []
  const walk = (f, path) => {
    const self = f.total - f.children.reduce((n, c) => n + c.total, 0)
    if (self > 0 && path.length) lines.push(`${path.join(';')} ${self}`)
    for (const c of f.children) walk(c, [...path, c.name])
  }
  if (levels.length) walk(levels[0][0], [])
  return lines.sort().map((l) => `${l}\n`).join('')
}

// The folded text as a flame graph shows it: names over maxBytes (svg.c's
// NAME_MAX_BYTES) cut at a character boundary with "...", lines that become
// the same merged, sorted like foldedFromSvg's. Node 24's Turboshaft has C++
// names of several kilobytes.
function foldedAsShown (folded, maxBytes = 1000) {
  const cut = (name) => {
    const b = Buffer.from(name)
    if (b.length <= maxBytes) return name
    let n = maxBytes
    while (n > 0 && (b[n] & 0xc0) === 0x80) n--
    return b.subarray(0, n).toString() + '...'
  }
  const counts = new Map()
  for (const line of folded.split('\n')) {
    if (!line) continue
    const sp = line.lastIndexOf(' ')
    const key = line.slice(0, sp).split(';').map(cut).join(';')
    counts.set(key, (counts.get(key) || 0) + Number(line.slice(sp + 1)))
  }
  return [...counts].map(([k, n]) => `${k} ${n}`).sort().map((l) => `${l}\n`).join('')
}

module.exports = { foldedFromSvg, foldedAsShown }

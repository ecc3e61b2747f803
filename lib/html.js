'use strict'

// The HTML flame graph: lib/flame.html (the page, an asset kept as a file)
// with the data src/render/flamehtml.c renders from folded stacks. Options are the
// SVG's (lib/svg.js checks them), so every way in takes the same ones.

const fs = require('node:fs')
const path = require('node:path')
const binding = require('./binding')
const { invalid } = require('./errors')
const { checkSvgOptions } = require('./svg')

const TEMPLATE_PATH = path.join(__dirname, 'flame.html')
const TITLE_MARK = '/*KFLAME_TITLE*/'
const DATA_MARK = '/*KFLAME_DATA*/'
let template = null

function loadTemplate () {
  if (template === null) {
    const text = fs.readFileSync(TEMPLATE_PATH, 'utf8')
    const t = text.indexOf(TITLE_MARK)
    const d = text.indexOf(DATA_MARK)
    if (t < 0 || d < t) throw new Error(`${TEMPLATE_PATH} lacks its placeholders; reinstall kflame`)
    template = [text.slice(0, t), text.slice(t + TITLE_MARK.length, d), text.slice(d + DATA_MARK.length)]
  }
  return template
}

// Text for an HTML element's content.
function escapeHtml (s) {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c])
}

// The page around data (src/render/flamehtml.h: already safe inside <script>).
function page (data, title) {
  const [head, middle, tail] = loadTemplate()
  return head + escapeHtml(title) + middle + data + tail
}

function titleOf (o) {
  return o.title !== undefined ? o.title : o.inverted ? 'Icicle Graph' : 'Flame Graph'
}

// folded text -> { html, stats } (renderSvg's stats).
function renderHtml (folded, options) {
  if (typeof folded !== 'string') {
    throw invalid('renderHtml(folded): folded must be a string')
  }
  const o = checkSvgOptions(options)
  const { data, stats } = binding.htmlData(folded, o)
  return { html: page(data, titleOf(o)), stats }
}

// A live profile's C text -> { html, stats }; options already checked.
function profileHtml (native, checked) {
  const { data, stats } = binding.profileHtmlData(native, checked)
  return { html: page(data, titleOf(checked)), stats }
}

module.exports = { renderHtml, profileHtml }

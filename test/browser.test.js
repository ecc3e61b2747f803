'use strict'

// The flame graphs as people open them: kflame's SVG and HTML pages in
// Debian's Chromium (puppeteer-core, headless), hovered, clicked, searched
// and reloaded from their URL, with assertions on what is drawn (SVG
// attributes and text; the canvas's pixels).
//
// Without Chromium: a failure in CI (CI is set; .ci/run installs it), a
// skip with the reason elsewhere (apt-get install -y chromium to run it).

const t = require('tap')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const kflame = require('..')
const chromium = require('./chromium')

const missing = chromium.missingReason()
if (missing) {
  if (process.env.CI) t.fail(`browser tests cannot run: ${missing}`)
  else t.skip(`browser tests skipped: ${missing}`)
} else {
  main()
}

const GOLDEN = path.join(__dirname, 'golden', 'svg')
const HOSTILE = '</script><script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
const W = 1200
const PAD = 10

// The golden profile, a frame with a hostile name, and a 70-frame-deep stack
// so the graph is taller than the 600-px window.
function input () {
  const deep = ['main']
  for (let i = 0; i < 70; i++) deep.push(`deep${i} /app/src/deep.js:${i + 1}:3_[j]`)
  return fs.readFileSync(path.join(GOLDEN, 'profile.folded'), 'utf8') +
    `main;${HOSTILE} 20\n${deep.join(';')} 30\n`
}

function main () {
  let browser
  let dir
  t.before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-browser-'))
    browser = await chromium.launch()
  })
  t.teardown(async () => {
    if (browser) await browser.close()
    if (dir) fs.rmSync(dir, { recursive: true, force: true })
  })

  async function open (file, hash = '') {
    const page = await browser.newPage()
    await page.setViewport({ width: W + 20, height: 600 })
    page.dialogs = []
    page.on('dialog', async (d) => {
      page.dialogs.push(d.message())
      if (d.type() === 'prompt') await d.accept(page.answer || '')
      else await d.dismiss()
    })
    await page.goto(`file://${file}${hash}`, { waitUntil: 'load' })
    await chromium.painted(page)
    return page
  }

  t.test('SVG: opens on its roots, hover, labels, zoom, search, URL state', async (t) => {
    const file = path.join(dir, 'graph.svg')
    fs.writeFileSync(file, kflame.fromFolded(input()).svg({ cwd: '/app' }))
    const page = await open(file)
    t.teardown(() => page.close())

    // A graph taller than the window opens scrolled to its roots; the
    // header follows.
    const view = await page.evaluate(() => ({
      scrollY: window.scrollY,
      innerHeight: window.innerHeight,
      height: +document.documentElement.getAttribute('height'),
      header: document.getElementById('header').getAttribute('transform'),
      rootY: document.querySelector('#frames > g > rect').getBoundingClientRect().top
    }))
    t.ok(view.height > view.innerHeight, 'the graph is taller than the window')
    t.ok(view.scrollY > 0, 'scrolled down')
    t.ok(view.rootY > 0 && view.rootY < view.innerHeight, 'the root frame is in view')
    t.equal(view.header, `translate(0,${view.scrollY})`, 'the header follows')

    // Labels: short, drawn by C.
    const label = (name) => page.evaluate((name) => {
      for (const g of document.querySelectorAll('#frames > g')) {
        if (g.firstChild.textContent.startsWith(name + ' (')) {
          const text = g.querySelector('text')
          return text ? text.textContent : ''
        }
      }
      return null
    }, name)
    t.equal(await label('alpha /app/src/work.js:14:16_[j]'), 'alpha src/work.js:14')
    t.equal(await label('(interpreted)_[j]'), '(interpreted)')
    const before = await page.evaluate(() => [...document.querySelectorAll('#frames text')].map((e) => e.textContent))

    // Hover: the details line shows the whole name.
    const rectOf = (name) => page.evaluateHandle((name) => {
      for (const g of document.querySelectorAll('#frames > g')) {
        if (g.firstChild.textContent.startsWith(name + ' (')) return g.querySelector('rect')
      }
      return null
    }, name)
    const alpha = await rectOf('alpha /app/src/work.js:14:16_[j]')
    await alpha.hover()
    t.match(await page.$eval('#details', (e) => e.textContent), /^alpha \/app\/src\/work\.js:14:16_\[j\] \(397 samples, /)

    // Click to zoom: run fills the width, its sibling disappears.
    const run = await rectOf('run /app/src/work.js:17:14_[j]')
    const runX = await run.evaluate((r) => +r.getAttribute('x'))
    await run.click()
    t.equal(await run.evaluate((r) => +r.getAttribute('width')), W - 2 * PAD, 'zoomed frame fills the width')
    t.equal(await page.evaluate(() => {
      for (const g of document.querySelectorAll('#frames > g')) {
        if (g.firstChild.textContent.startsWith('listOnTimeout')) return g.getAttribute('class')
      }
    }), 'hide', 'a sibling is hidden')
    t.match(await page.evaluate(() => location.hash), new RegExp(`^#x=${runX}&y=\\d+$`))
    t.equal(await label('run /app/src/work.js:17:14_[j]'), 'run src/work.js:17', 'the script labels as C does')
    t.match(await label('parse node_modules/fast-parse/index.js:3:1_[j]'), /^parse fast-p.*\.\.$/, 'cut to fit')

    // Unzoom: the script's labels are the ones C drew.
    await page.click('#unzoom')
    const after = await page.evaluate(() => [...document.querySelectorAll('#frames text')]
      .map((e) => e.textContent).filter((s) => s !== ''))
    t.same(after, before, 'labels redrawn by the script equal those rendered in C')

    // Search.
    page.answer = '^(alpha|beta) '
    await page.click('#search')
    t.equal(await alpha.evaluate((r) => r.getAttribute('fill')), 'rgb(230,0,230)', 'a match is highlighted')
    t.equal(await page.$eval('#matched', (e) => e.textContent), 'Matched: 63.9%')
    await run.click()
    const hash = await page.evaluate(() => location.hash)
    t.match(hash, new RegExp(`^#x=${runX}&y=\\d+&s=%5E\\(alpha%7Cbeta\\)%20$`))

    // Reload from the URL: zoom and search come back.
    const again = await open(file, hash)
    t.teardown(() => again.close())
    const state = await again.evaluate(() => {
      const out = {}
      for (const g of document.querySelectorAll('#frames > g')) {
        const name = g.firstChild.textContent
        if (name.startsWith('run ')) out.runWidth = +g.querySelector('rect').getAttribute('width')
        if (name.startsWith('alpha ')) out.alphaFill = g.querySelector('rect').getAttribute('fill')
      }
      out.matched = document.getElementById('matched').textContent
      out.unzoom = document.getElementById('unzoom').getAttribute('class')
      return out
    })
    t.same(state, { runWidth: W - 2 * PAD, alphaFill: 'rgb(230,0,230)', matched: 'Matched: 63.9%', unzoom: 'button' })

    // The hostile name is text, nothing ran.
    t.equal(await page.evaluate(() => window.pwned), undefined)
    t.same(page.dialogs, ['Search frames (regular expression):'], 'no other dialog')
  })

  t.test('HTML: canvas drawn, hover, zoom, search, URL state, hostile names', async (t) => {
    const file = path.join(dir, 'graph.html')
    const profile = kflame.fromFolded(input())
    fs.writeFileSync(file, profile.html({ cwd: '/app', title: `T ${HOSTILE}` }))
    const page = await open(file)
    t.teardown(() => page.close())

    t.equal(await page.evaluate(() => window.pwned), undefined, 'no injected script ran')
    t.equal(await page.title(), `T ${HOSTILE}`, 'the title is text')
    t.ok(await page.evaluate((n) => window.kflame.find(n) > 0, HOSTILE), 'the hostile frame is there by its name')
    const drawn = await page.$eval('canvas', (c) => +c.getAttribute('data-frames'))
    t.equal(drawn, await page.evaluate(() => window.kflame.count), 'every frame drawn')

    const view = await page.evaluate(() => ({ scrollY: window.scrollY, innerHeight: window.innerHeight }))
    t.ok(view.scrollY > 0, 'a tall graph opens scrolled to its roots')

    // What one frame looks like on the canvas: its colour, top row.
    const probe = (name, where = 0.5) => page.evaluate((name, where) => {
      const k = window.kflame
      const i = k.find(name)
      const r = k.rect(i)
      if (!r) return { i, hidden: true }
      const canvas = document.querySelector('canvas')
      const ratio = canvas.width / canvas.getBoundingClientRect().width
      const px = Math.floor((r.x + r.w * where) * ratio)
      const py = Math.floor(r.y * ratio)
      const d = canvas.getContext('2d').getImageData(px, py, 1, 1).data
      const box = canvas.getBoundingClientRect()
      return { i, x: r.x, w: r.w, rgb: [d[0], d[1], d[2]], client: [box.left + r.x + r.w * where, box.top + r.y + 7], label: k.label(i) }
    }, name, where)
    const hex = (rgb) => rgb.map((c) => c.toString(16).padStart(2, '0')).join('')
    const data = JSON.parse(await page.$eval('#kflame-data', (e) => e.textContent))
    const colourOf = (name) => data.names.find((e) => e[0] === name)[1]

    const alpha = await probe('alpha /app/src/work.js:14:16_[j]')
    t.equal(hex(alpha.rgb), colourOf('alpha /app/src/work.js:14:16_[j]'), 'drawn in its colour')
    t.equal(alpha.label, 'alpha src/work.js:14', 'the short label')

    // Hover.
    await page.mouse.move(...alpha.client)
    t.match(await page.$eval('#details', (e) => e.textContent), /^alpha \/app\/src\/work\.js:14:16_\[j\] \(397 samples, /)

    // Click to zoom: run fills the width, drawn from edge to edge.
    const run = await probe('run /app/src/work.js:17:14_[j]')
    await page.mouse.click(...run.client)
    const zoomed = await probe('run /app/src/work.js:17:14_[j]', 0.002)
    t.equal(zoomed.x, PAD)
    t.equal(zoomed.w, W - 2 * PAD)
    t.equal(hex(zoomed.rgb), colourOf('run /app/src/work.js:17:14_[j]'), 'its colour at the left edge')
    t.ok((await probe('listOnTimeout node:internal/timers:500:7_[j]')).hidden, 'a sibling is hidden')
    t.equal(await page.evaluate(() => location.hash), `#f=${run.i}`)

    // Search: matches drawn magenta.
    page.answer = '^(alpha|beta) '
    await page.click('#search')
    t.same((await probe('alpha /app/src/work.js:14:16_[j]')).rgb, [230, 0, 230], 'a match is magenta')
    t.equal(await page.$eval('#matched', (e) => e.textContent), 'Matched: 63.9%')
    const hash = await page.evaluate(() => location.hash)
    t.equal(hash, `#f=${run.i}&s=%5E(alpha%7Cbeta)%20`)

    // Reload from the URL.
    const again = await open(file, hash)
    t.teardown(() => again.close())
    const state = await again.evaluate(() => {
      const k = window.kflame
      return { run: k.rect(k.find('run /app/src/work.js:17:14_[j]')).w, matched: document.getElementById('matched').textContent }
    })
    t.same(state, { run: W - 2 * PAD, matched: 'Matched: 63.9%' })
    const beta = await (async () => {
      const page = again
      return page.evaluate(() => {
        const k = window.kflame
        const r = k.rect(k.find('beta /app/src/work.js:15:15_[j]'))
        const canvas = document.querySelector('canvas')
        const d = canvas.getContext('2d').getImageData(Math.floor(r.x + r.w / 2), Math.floor(r.y), 1, 1).data
        return [d[0], d[1], d[2]]
      })
    })()
    t.same(beta, [230, 0, 230], 'the search is drawn again after reload')

    // Unzoom from the button: the root is back.
    await again.click('#unzoom')
    t.equal(await again.evaluate(() => location.hash), '#s=%5E(alpha%7Cbeta)%20')
    t.equal(await again.$eval('canvas', (c) => +c.getAttribute('data-frames')), drawn)
  })
}

'use strict'

// Flame graphs: golden SVGs for fixed inputs, valid XML always, frames that
// read back into the folded input, hostile names, and a real profile.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { XMLValidator } = require('fast-xml-parser')
const kflame = require('..')
const { foldedFromSvg, foldedAsShown } = require('./svg-roundtrip')

const GOLDEN = path.join(__dirname, 'golden', 'svg')
const UPDATE = process.env.KFLAME_UPDATE_GOLDENS === '1'
const cases = fs.readdirSync(GOLDEN).filter((f) => f.endsWith('.folded') && !f.endsWith('.out.folded'))
  .map((f) => f.slice(0, -'.folded'.length))

// Compares with the golden file, which must exist (KFLAME_UPDATE_GOLDENS=1
// writes it).
function golden (t, file, actual) {
  const p = path.join(GOLDEN, file)
  if (UPDATE) fs.writeFileSync(p, actual)
  if (!fs.existsSync(p)) return t.fail(`missing golden ${file} (KFLAME_UPDATE_GOLDENS=1 writes it)`)
  t.equal(actual, fs.readFileSync(p, 'utf8'), `${file} matches its golden`)
}

for (const name of cases) {
  t.test(`golden: ${name}`, async (t) => {
    const input = fs.readFileSync(path.join(GOLDEN, `${name}.folded`), 'utf8')
    // The goldens' app lives in /app: its labels are relative to that.
    const options = { cwd: '/app', ...JSON.parse(fs.readFileSync(path.join(GOLDEN, `${name}.json`), 'utf8')) }
    const profile = kflame.fromFolded(input)
    golden(t, `${name}.out.folded`, profile.folded)
    const svg = profile.svg(options)
    golden(t, `${name}.svg`, svg)
    t.equal(XMLValidator.validate(svg), true, 'valid XML')
  })
}

t.test('frames read back into the folded input', async (t) => {
  for (const name of ['profile', 'hostile']) {
    const profile = kflame.fromFolded(fs.readFileSync(path.join(GOLDEN, `${name}.folded`), 'utf8'))
    // XML cannot carry control characters: the SVG shows them as '?'.
    const expected = profile.folded.replace(/[\x00-\x09\x0b-\x1f\x7f]/g, '?')
    t.equal(foldedFromSvg(profile.svg({ minwidth: 0 })), expected, name)
    t.equal(foldedFromSvg(profile.svg({ minwidth: 0, inverted: true })), expected, `${name}, icicle`)
  }
})

t.test('hostile input: counted, escaped, never breaks the XML', async (t) => {
  const input = fs.readFileSync(path.join(GOLDEN, 'hostile.folded'), 'utf8')
  const profile = kflame.fromFolded(input)
  t.equal(profile.stats.details.badLines, 3)
  t.match(profile.stats.warnings[0], /3 of 8 lines/)
  const { svg, stats } = kflame.renderSvg(input + 'main;bad\u0001control 1\n' + 'x'.repeat(50000) + ' 1\n')
  t.equal(XMLValidator.validate(svg), true)
  t.equal(stats.badLines, 3)
  t.notMatch(svg, /<script>alert/)
  t.match(svg, /&lt;script&gt;alert\(&quot;x&quot;\)&lt;\/script&gt;/)
  t.ok(svg.length < 200000, 'a 50,000-byte name is cut')
})

t.test('options are checked', async (t) => {
  const p = kflame.fromFolded('main;a 1\n')
  t.throws(() => p.svg({ widht: 5 }), { code: 'KFLAME_ERR_UNKNOWN_OPTION' })
  t.throws(() => p.svg({ width: 10 }), { code: 'KFLAME_ERR_OUT_OF_RANGE' })
  t.throws(() => p.svg({ minwidth: '5px' }), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => p.svg({ inverted: 'yes' }), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.match(p.svg({ minwidth: '1%' }), /^<\?xml/)
  t.throws(() => kflame.fromFolded(42), { code: 'KFLAME_ERR_INVALID_ARG' })
})

t.test('a real profile renders, parses and reads back', async (t) => {
  kflame.start({ hz: 999 })
  const end = Date.now() + 200
  while (Date.now() < end) JSON.parse(JSON.stringify({ a: [1, 2, { b: 'c' }] }))
  const profile = kflame.stop()
  const svg = profile.svg({ minwidth: 0 })
  t.equal(XMLValidator.validate(svg), true)
  t.match(svg, /samples at 999 Hz \(cpu-clock\)/, 'subtitle from the stats')
  t.equal(foldedFromSvg(svg), foldedAsShown(profile.folded))
  t.equal(profile.samples.line.length, profile.stats.samples, 'every sample has its line')
  const lines = profile.folded.split('\n').length - 1
  t.ok(profile.samples.line.every((l) => l < lines))
})

t.test('renderSvgFile: file to file, same output, clear errors', async (t) => {
  const os = require('node:os')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-svg-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const input = path.join(GOLDEN, 'profile.folded')
  const out = path.join(dir, 'out.svg')
  const stats = kflame.renderSvgFile(input, out, { title: 'T' })
  const direct = kflame.renderSvg(fs.readFileSync(input, 'utf8'), { title: 'T' })
  t.equal(fs.readFileSync(out, 'utf8'), direct.svg)
  t.same(stats, direct.stats)
  t.throws(() => kflame.renderSvgFile(path.join(dir, 'missing.folded'), out), { code: 'KFLAME_ERR_READ' })
  t.throws(() => kflame.renderSvgFile(input, path.join(dir, 'no', 'such', 'dir.svg')), { code: 'KFLAME_ERR_WRITE' })
  t.throws(() => kflame.renderSvgFile('', out), { code: 'KFLAME_ERR_INVALID_ARG' })
})

// The script and style live as files (src/render/svgscript.js, src/render/svgstyle.css),
// embedded at build time by scripts/embed.js: the script must parse, and
// every SVG must carry exactly these files.
t.test('the embedded script and style are the files in src/, and the script parses', async (t) => {
  const vm = require('node:vm')
  const script = fs.readFileSync(path.join(__dirname, '..', 'src', 'render', 'svgscript.js'), 'utf8')
  const style = fs.readFileSync(path.join(__dirname, '..', 'src', 'render', 'svgstyle.css'), 'utf8')
  t.doesNotThrow(() => new vm.Script(script, { filename: 'src/render/svgscript.js' }), 'the script parses')
  // kfLabel, src/render/framelabel.h's rule, runs without a browser
  const context = { window: { addEventListener () {} } }
  vm.runInNewContext(script, context)
  t.equal(context.kfLabel('run /srv/app/src/work.js:17:14_[j]', '/srv/app'), 'run src/work.js:17')
  t.notMatch(script, /\]\]>/, 'nothing in the script ends its CDATA section')
  t.notMatch(style, /<\//, 'nothing in the style ends its element')
  const { svg } = kflame.renderSvg('all;main 1\n')
  t.equal(svg.slice(svg.indexOf('<script><![CDATA[\n') + 18, svg.indexOf(']]></script>')), script)
  t.equal(svg.slice(svg.indexOf('<style>') + 7, svg.indexOf('</style>')), style.replace(/\n/g, ''))
})

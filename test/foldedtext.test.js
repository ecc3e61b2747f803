'use strict'

// lib/foldedtext.js, the one JS reader and writer of folded text: its line
// grammar and its sanitising rule, each checked against the C side on the
// same inputs (the renderer's counts through kflame.renderSvg; the frame
// name rule through V8's code events, src/jit/jitname.c and kf_fold_sanitize,
// read back from a perf map).

const t = require('tap')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const kflame = require('..')
const { sanitizeFrame, splitCount, splitLine, parseLine, parseText, formatLine, formatText } = require('../lib/foldedtext')

t.test('a line: frames and count, or null', async (t) => {
  t.same(parseLine('main;a b;c 12'), { frames: ['main', 'a b', 'c'], count: 12 })
  t.same(splitLine('main;a b;c 12'), { stack: 'main;a b;c', count: 12 })
  t.same(splitCount('main;;a 2'), { stack: 'main;;a', count: 2 }, 'splitCount takes the stack as it is')
  t.equal(splitCount('main;a two'), null)
  t.same(parseLine('main 007'), { frames: ['main'], count: 7 }, 'leading zeros')
  t.same(parseLine('main;a 3\r'), { frames: ['main', 'a'], count: 3 }, 'CRLF')
  t.same(parseLine('main;a 3   '), { frames: ['main', 'a'], count: 3 }, 'trailing spaces, as C')
  t.same(parseLine('main;a  3'), { frames: ['main', 'a '], count: 3 }, 'the count is after the last space')
  t.same(parseLine('main;a 0'), { frames: ['main', 'a'], count: 0 }, 'zero parses; parseText decides')
  t.same(parseLine('main;a 9007199254740991'), { frames: ['main', 'a'], count: 9007199254740991 })
  for (const bad of ['', 'main', ' 5', 'main;a', 'main;a 1.5', 'main;a -1', 'main;a 1e3', 'main;a 0x10',
    'main;;a 1', ';main 1', 'main; 1', 'main;a 9007199254740992', 'main;a 0000000000000000001',
    'main;a 1\t', 'main;a ١']) {
    t.equal(parseLine(bad), null, JSON.stringify(bad))
  }
})

t.test('a text: merged in order of appearance, bad lines counted, totals exact', async (t) => {
  const text = 'main;b 2\n\n   \nmain;a 1\r\nmain;b 3\nnope\nmain;z 0\n'
  const r = parseText(text)
  t.same([...r.stacks], [['main;b', 5], ['main;a', 1]])
  t.same([r.lines, r.badLines, r.total], [5, 2, 6], 'blank lines are not lines; a zero count is bad')
  const kept = parseText(text, { keepZero: true })
  t.same([...kept.stacks], [['main;b', 5], ['main;a', 1], ['main;z', 0]])
  t.equal(kept.badLines, 1)
  const merged = parseText('a 3\nb 2\n', { total: Number.MAX_SAFE_INTEGER - 4 })
  t.same([...merged.stacks], [['a', 3]], 'a count past 2^53 - 1 in all is bad')
  t.same([merged.badLines, merged.total], [1, Number.MAX_SAFE_INTEGER - 1])
})

t.test('formatting: one sorted line per stack, and back', async (t) => {
  t.equal(formatLine(['main', 'a'], 3), 'main;a 3\n')
  t.equal(formatLine('main;a', 3), 'main;a 3\n')
  const { keys, folded } = formatText(new Map([['main;b', 2], ['main;a', 1]]))
  t.same(keys, ['main;a', 'main;b'])
  t.equal(folded, 'main;a 1\nmain;b 2\n')
  t.same([...parseText(folded).stacks], [['main;a', 1], ['main;b', 2]])
  const name = sanitizeFrame('evil;name\nwith\tcontrols')
  t.same(parseLine(formatLine(['main', name], 1).slice(0, -1)), { frames: ['main', 'evil:name with controls'], count: 1 },
    'a sanitised name stays one frame of one line')
})

// The C renderer (src/render/flametree.c) reads the same lines as good or bad.
t.test('the C renderer and parseText agree line by line', async (t) => {
  const lines = ['main;a 1', 'main;a 3\r', 'main;a 3   ', 'main;a  3', 'main 007', 'main;a 0', 'main;a 1.5',
    'main;a -1', 'main;;a 1', ';main 1', 'main; 1', 'main;a', ' 5', 'main;a 1\t', 'main;a 9007199254740991',
    'main;a 9007199254740992', 'main;a 0000000000000000001', 'main;a 000000000000000001', 'main;a ١',
    'main;f(a, b) /x.js:1:2_[j] 4', 'main;é€😀 2']
  for (const line of lines) {
    const js = parseText(line + '\n')
    const c = kflame.renderSvg(line + '\n').stats
    t.same({ bad: js.badLines, samples: js.total }, { bad: c.badLines, samples: c.samples }, JSON.stringify(line))
  }
})

// Names through C: a JS function's name goes to kflame with V8's code
// events, becomes a frame name in src/jit/jitname.c by kf_fold_sanitize, the
// rule src/render/folded.c applies to every name, and comes out in a perf map.
// A name for a TAP message: only printable ASCII (U+2028 would break the line).
function ascii7 (s) {
  return s.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

t.test('sanitizeFrame is the C rule, on every ASCII character and beyond', async (t) => {
  const ascii = Array.from({ length: 128 }, (_, i) => String.fromCharCode(i)).join('')
  const latin1 = Array.from({ length: 128 }, (_, i) => String.fromCharCode(128 + i)).join('')
  const names = [ascii, latin1, 'a;b\tc\r\nd\0e', '\u2028\u2029\ufeff€😀;\u007f', ';;;', 'x\x1fy\x1bz', 'plain name']
  const key = (n, i) => `kfsan${i}-BEGIN-${n}-END-`
  // Object literal keys name their functions as written.
  const source = '({' + names.map((n, i) => `${JSON.stringify(key(n, i))}: function () { return ${i} }`).join(',') + '})'
  // Arm V8's hook first (writePerfMap does): a function compiled before it
  // shares V8's interpreter trampoline and has no line of its own.
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-arm-'))
  kflame.writePerfMap(path.join(scratch, 'first.map'))
  fs.rmSync(scratch, { recursive: true, force: true })
  const fns = new Function(`return ${source}`)() // eslint-disable-line no-new-func
  names.forEach((n, i) => fns[key(n, i)]())

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-sanitize-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'perf.map')
  kflame.writePerfMap(file)
  const map = fs.readFileSync(file, 'utf8').split('\n')
  names.forEach((n, i) => {
    const begin = `kfsan${i}-BEGIN-`
    const line = map.find((l) => l.includes(begin))
    if (!t.ok(line, `function ${i} is in the perf map`)) return
    const fromC = line.slice(line.indexOf(begin) + begin.length, line.lastIndexOf('-END-'))
    t.equal(fromC, sanitizeFrame(n), `name ${i}: ${ascii7(n).slice(0, 60)}`)
  })
  t.equal(sanitizeFrame(ascii).length, 128, 'one character for one')
  t.notOk(/[;\x00-\x1f\x7f]/.test(sanitizeFrame(ascii + latin1)), 'no separator nor control character is left')
})

t.test('labels take the same rule', async (t) => {
  if (!kflame.isRunning()) {
    try {
      kflame.start({ hz: 999 })
    } catch (err) {
      t.skip(`cannot profile here: ${err.message}`)
      return
    }
  }
  const name = 'GET /a;b\tc\x7f'
  kflame.label(name, () => { const end = Date.now() + 100; while (Date.now() < end); })
  const p = kflame.stop()
  const labelled = p.folded.split('\n').filter((l) => l.includes('GET /a'))
  t.ok(labelled.length > 0, 'the label shows in the folded text')
  for (const l of labelled) t.equal(parseLine(l).frames[1], sanitizeFrame(name), 'one frame: GET /a:b c ')
})

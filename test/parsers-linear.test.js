'use strict'

// Every parser of outside input is linear in its input: folded text (JS and
// C), perf maps and addresses for `kflame resolve`, command lines, options,
// label names, HTTP queries. Each is fed pathological input (long runs of
// spaces, tabs, `;`, digits, `\r`, NUL, lone surrogates, one line of
// megabytes, no final newline) at two sizes: the larger may not take much
// more than 4 times the smaller, and neither more than a bound a quadratic
// parser misses by far (an 80,000-space line once took 5 s in fromFolded).

const t = require('tap')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const http = require('node:http')
const kflame = require('..')
const { modelFromFolded } = require('../lib/exports')
const { parseText } = require('../lib/foldedtext')
const { Readable, Writable } = require('node:stream')
const { parseFrame } = require('../lib/exports/frames')
const { parseMap, resolveText, resolveStream } = require('../lib/cli/resolve')
const { mergeFiles } = require('../lib/cli/merge')
const { parse: parseArgs } = require('../lib/cli/args')
const { SPEC: MERGE_SPEC } = require('../lib/cli/merge')
const { checkSvgOptions } = require('../lib/svg')
const { checkStartOptions } = require('../lib/options')

// Best of three: the VM is noisy, a parser's cost is not.
function time (fn) {
  let best = Infinity
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now()
    fn()
    best = Math.min(best, performance.now() - t0)
  }
  return best
}

const N = 20000 // the smaller size; the larger is 4N = 80,000

// name -> (n) => input of about n characters that strains the parser.
const FOLDED = {
  'spaces inside a frame': (n) => `main;a${' '.repeat(n)}b 1\n`,
  'spaces at the end': (n) => `main;a 1${' '.repeat(n)}\n`,
  'spaces and tabs, then no count': (n) => `main;a${' \t'.repeat(n / 2)}b\n`,
  'a run of ;': (n) => `${';'.repeat(n)} 1\n`,
  'many frames': (n) => `${'f;'.repeat(n / 2)}leaf 1\n`,
  'a run of digits': (n) => `main;a ${'1'.repeat(n)}\n`,
  'digits and spaces': (n) => `${'1 '.repeat(n / 2)}\n`,
  'a run of \\r': (n) => `main;a${'\r'.repeat(n)} 1\n`,
  'NUL bytes': (n) => `main;${'a\0'.repeat(n / 2)} 1\n`,
  'lone surrogates': (n) => `main;${'\ud800'.repeat(n)} 1\n`,
  'no newline': (n) => `main;${'x'.repeat(n)} 1`,
  'many short lines': (n) => 'main;a;b 1\n'.repeat(n / 10)
}

const PARSERS = {
  fromFolded: (text) => kflame.fromFolded(text),
  modelFromFolded: (text) => modelFromFolded(text),
  'foldedtext.parseText': (text) => parseText(text),
  'renderSvg (C)': (text) => kflame.renderSvg(text, { minwidth: 0 })
}

for (const [parser, parse] of Object.entries(PARSERS)) {
  t.test(`${parser} is linear`, async (t) => {
    for (const [what, make] of Object.entries(FOLDED)) {
      const small = make(N)
      const large = make(4 * N)
      const ts = time(() => parse(small))
      const tl = time(() => parse(large))
      t.ok(tl < 12 * ts + 40 && tl < 300, `${what}: ${ts.toFixed(1)} ms at ${small.length} chars, ${tl.toFixed(1)} ms at ${large.length}`)
    }
  })
}

t.test('fromFolded of a line with 80,000 inner spaces takes under 100 ms', async (t) => {
  const line = `main;a${' '.repeat(80000)}b 1\n`
  const ms = time(() => kflame.fromFolded(line))
  t.ok(ms < 100, `${ms.toFixed(1)} ms`)
})

t.test('a 10 MB line without a newline, and 10 MB of short lines', async (t) => {
  const big = `main;${'x'.repeat(10 << 20)} 1`
  const lines = 'main;a;b 1\n'.repeat(1 << 20)
  for (const [name, parse] of Object.entries(PARSERS)) {
    const a = time(() => parse(big))
    const b = time(() => parse(lines))
    t.ok(a < 2000 && b < 4000, `${name}: ${a.toFixed(0)} ms and ${b.toFixed(0)} ms`)
  }
})

t.test('renderSvgFile reads invalid UTF-8 and NUL in linear time', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-linear-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const ms = []
  for (const n of [N, 4 * N]) {
    const bytes = Buffer.concat([Buffer.from('main;'), Buffer.alloc(n, 0xff), Buffer.alloc(n, 0), Buffer.from(' 1\n')])
    const file = path.join(dir, `in-${n}.folded`)
    fs.writeFileSync(file, bytes)
    ms.push(time(() => kflame.renderSvgFile(file, path.join(dir, 'out.svg'))))
  }
  t.ok(ms[1] < 12 * ms[0] + 40 && ms[1] < 300, `${ms.map((x) => x.toFixed(1)).join(' ms, ')} ms`)
})

t.test('kflame resolve: perf maps and addresses', async (t) => {
  const MAPS = {
    'spaces inside a name': (n) => `1000 10 a${' '.repeat(n)}b\n`,
    'spaces and tabs inside a name': (n) => `1000 10 a${' \t'.repeat(n / 2)}b\n`,
    'spaces, no size': (n) => `1000${' '.repeat(n)}x\n`,
    'a long name with \\r': (n) => `1000 10 ${'a\r'.repeat(n / 2)}\n`,
    'many lines': (n) => '1000 10 name\n'.repeat(n / 13)
  }
  for (const [what, make] of Object.entries(MAPS)) {
    const ts = time(() => parseMap(make(N)))
    const tl = time(() => parseMap(make(4 * N)))
    t.ok(tl < 12 * ts + 40 && tl < 300, `${what}: ${ts.toFixed(1)} ms, ${tl.toFixed(1)} ms`)
  }
  const { lookup } = parseMap('1000 10 name\n')
  for (const [what, make] of Object.entries({
    hex: (n) => 'deadbeef'.repeat(n / 8),
    zeros: (n) => '0'.repeat(n),
    '0x runs': (n) => '0x'.repeat(n / 2),
    'words and addresses': (n) => 'at 0x1000 in '.repeat(n / 13)
  })) {
    const ts = time(() => resolveText(make(N), lookup))
    const tl = time(() => resolveText(make(4 * N), lookup))
    t.ok(tl < 12 * ts + 40 && tl < 300, `${what}: ${ts.toFixed(1)} ms, ${tl.toFixed(1)} ms`)
  }
})

// The exports take every frame of a folded profile apart (name, script,
// line): a name is outside input too.
t.test('parseFrame is linear', async (t) => {
  const NAMES = {
    'spaces before the position': (n) => `f${' '.repeat(n)}:1:1_[j]`,
    'words that are not URLs': (n) => `f${' ab.c'.repeat(n / 5)}:1:1_[j]`,
    'a long scheme-like word': (n) => `f ${'a'.repeat(n)}:1:1_[j]`,
    'a run of :1': (n) => `f ${':1'.repeat(n / 2)}x_[j]`,
    'long line and column': (n) => `f a:${'1'.repeat(n / 2)}:${'1'.repeat(n / 2)}x_[j]`,
    'a run of +0x': (n) => `${'a+0x1'.repeat(n / 5)}z`,
    'a run of -1': (n) => '-1'.repeat(n / 2)
  }
  for (const [what, make] of Object.entries(NAMES)) {
    const ts = time(() => parseFrame(make(N)))
    const tl = time(() => parseFrame(make(4 * N)))
    t.ok(tl < 12 * ts + 40 && tl < 300, `${what}: ${ts.toFixed(1)} ms, ${tl.toFixed(1)} ms`)
  }
})

t.test('kflame merge reads files in linear time', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-linear-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const ms = []
  for (const n of [N, 4 * N]) {
    const files = ['a', 'b'].map((name) => path.join(dir, `${name}-${n}.folded`))
    fs.writeFileSync(files[0], `main;a${' '.repeat(n)}b 1\nmain;a${' \t'.repeat(n / 2)}b\n`)
    fs.writeFileSync(files[1], `main;a 1${' '.repeat(n)}\n${';'.repeat(n)} 1\n`)
    ms.push(time(() => mergeFiles(files)))
  }
  t.ok(ms[1] < 12 * ms[0] + 40 && ms[1] < 300, `${ms.map((x) => x.toFixed(1)).join(' ms, ')} ms`)
})

// The command reads its input in chunks: a line without a newline once
// was searched again from its start at every chunk (64 MB took 49 s).
t.test('kflame resolve streams a long line without a newline in linear time', async (t) => {
  const { lookup } = parseMap('1000 10 name\n')
  const run = async (bytes) => {
    const chunk = Buffer.from('x'.repeat(65536))
    const input = Readable.from((function * () { for (let i = 0; i < bytes / 65536; i++) yield chunk })())
    let out = 0
    const sink = new Writable({ write (c, e, cb) { out += c.length; cb() } })
    const t0 = performance.now()
    await resolveStream(input, lookup, { bare: true }, sink)
    t.equal(out, bytes, `${bytes} bytes in, ${bytes} out`)
    return performance.now() - t0
  }
  const ts = await run(4 << 20)
  const tl = await run(16 << 20)
  t.ok(tl < 12 * ts + 100 && tl < 1500, `4 MB in ${ts.toFixed(0)} ms, 16 MB in ${tl.toFixed(0)} ms`)
})

t.test('command lines, options and label names', async (t) => {
  const cases = {
    'CLI: a long value': (n) => () => { try { parseArgs(['--title', 'x'.repeat(n), '--hz', '9'.repeat(n)], MERGE_SPEC) } catch {} },
    'CLI: many arguments': (n) => () => { try { parseArgs(new Array(n / 10).fill('-o').concat('x'), MERGE_SPEC) } catch {} },
    'svg minwidth': (n) => () => { try { checkSvgOptions({ minwidth: `${'1'.repeat(n)}.${'1'.repeat(n)}x%` }) } catch {} },
    'start options: a long perf map path': (n) => () => { try { checkStartOptions({ perfMap: '/'.repeat(n) + '\0', jit: true }) } catch {} },
    'label name with ; and newlines': (n) => () => kflame.label(';\n\t'.repeat(n / 3), () => 1)
  }
  for (const [what, make] of Object.entries(cases)) {
    const ts = time(make(N))
    const tl = time(make(4 * N))
    t.ok(tl < 12 * ts + 40 && tl < 300, `${what}: ${ts.toFixed(1)} ms, ${tl.toFixed(1)} ms`)
  }
})

t.test('HTTP: pathological queries and headers are answered at once', async (t) => {
  const server = http.createServer(kflame.http({ prefix: '/kflame' }))
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const { port } = server.address()
  const ask = (url, headers = {}) => new Promise((resolve, reject) => {
    const t0 = performance.now()
    http.get({ host: '127.0.0.1', port, path: url, headers }, (res) => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - t0 }))
    }).on('error', reject)
  })
  // Node refuses request heads over 16 KiB: these stay just under.
  const n = 14000
  const queries = {
    '&': '&'.repeat(n),
    '=': '='.repeat(n),
    'hz digits': `hz=${'9'.repeat(n)}`,
    'seconds digits': `seconds=${'1'.repeat(n / 2)}.${'1'.repeat(n / 2)}`,
    'percent escapes': '%41'.repeat(n / 3),
    'unknown names': 'a=1&'.repeat(n / 4)
  }
  for (const [what, q] of Object.entries(queries)) {
    const r = await ask(`/kflame/status?${q}`)
    // Empty parameters ('&&&') are no parameters: a 200; the rest a 400.
    t.ok((r.status === 400 || (what === '&' && r.status === 200)) && r.ms < 500, `${what}: ${r.status} in ${r.ms.toFixed(0)} ms`)
  }
  const hosts = { 'a long host': 'a'.repeat(n), 'a bracketed host': `[${':'.repeat(n)}x`, 'colons': ':1'.repeat(n / 2) }
  for (const [what, host] of Object.entries(hosts)) {
    const r = await ask('/kflame/status', { Host: host })
    t.ok(r.status === 403 && r.ms < 500, `${what}: ${r.status} in ${r.ms.toFixed(0)} ms`)
  }
  const r = await ask('/kflame/status', { Authorization: `Bearer ${' '.repeat(n)}x` })
  t.ok(r.ms < 500, `a bearer header of spaces: ${r.status} in ${r.ms.toFixed(0)} ms`)
})

// The C renderer and the JS parsers share one rule: a count that would take
// the total past 2^53 - 1 is a bad line, so every total is exact.
t.test('counts never sum past 2^53 - 1, in C and in JS alike', async (t) => {
  const text = 'main;f 999999999999999\n'.repeat(19) + 'main;g 9007199254740991\nmain;h 1\n'
  const p = kflame.fromFolded(text)
  const expected = 9 * 999999999999999 + 1
  t.equal(p.stats.samples, expected, 'the first 9 lines fit, the next 10 and g would not, h does')
  t.equal(p.stats.details.badLines, 11)
  t.ok(Number.isSafeInteger(p.stats.samples))
  const svg = kflame.renderSvg(text)
  t.equal(svg.stats.samples, expected, 'the C renderer counts the same')
  t.equal(svg.stats.badLines, 11)
  t.match(svg.svg, `all (${expected} samples, 100.00%)`)
  const shares = [...svg.svg.matchAll(/ samples, ([\d.]+)%\)/g)].map((m) => Number(m[1]))
  t.ok(shares.length > 0 && shares.every((x) => x <= 100), `no share above 100%: ${shares.join(', ')}`)
  t.equal(modelFromFolded(text).badLines, 11)

  // The same digits are counts on both sides: leading zeros up to 18 digits.
  const zeros = 'main;a 00000000000000001\nmain;b 000000000000000002\nmain;c 0000000000000000003\n'
  t.same([kflame.fromFolded(zeros).stats.samples, kflame.fromFolded(zeros).stats.details.badLines], [3, 1])
  t.same([kflame.renderSvg(zeros).stats.samples, kflame.renderSvg(zeros).stats.badLines], [3, 1])
  t.equal(modelFromFolded(zeros).badLines, 1)
})

t.test('kflame merge: the total of all files never passes 2^53 - 1', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-total-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const files = ['a', 'b', 'c'].map((name) => path.join(dir, `${name}.folded`))
  fs.writeFileSync(files[0], 'main;f 5000000000000000\n')
  fs.writeFileSync(files[1], 'main;f 5000000000000000\nmain;g 7\n')
  fs.writeFileSync(files[2], 'main;g 4007199254740984\n')
  const m = mergeFiles(files)
  t.equal(m.samples, Number.MAX_SAFE_INTEGER, 'a, then b\'s g, then c: exactly 2^53 - 1')
  t.equal(m.badLines, 1, 'b\'s f would pass it')
  t.same(m.badFiles, [[files[1], 1]])
  t.equal(m.folded, `main;f 5000000000000000\nmain;g ${4007199254740984 + 7}\n`)
})

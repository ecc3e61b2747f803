'use strict'

// The kflame CLI's commands on files: svg, merge, resolve. Arguments and
// usage errors: test/cli-args.test.js; the run mode: test/cli-run.test.js
// and test/cli-exit.test.js.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { mergeFiles } = require('../lib/cli/merge')
const { parseMap, resolveText } = require('../lib/cli/resolve')
const { REPO, CLI, tmpdir, run, runAsync, cli, read } = require('./fixtures/spawn-helpers')

const FOLDED_A = 'main;start;alphaWork /app/a.js:1:1_[j] 30\nmain;start;shared 10\n'
const FOLDED_B = 'main;start;betaWork /app/b.js:1:1_[j] 20\nmain;start;shared 5\n'

t.test('svg: file to stdout, stdin to -o, title, bad lines', async (t) => {
  const dir = tmpdir(t)
  const input = path.join(dir, 'a.folded')
  fs.writeFileSync(input, FOLDED_A + 'not a stack\n')
  const r = cli(['svg', input, '--title', 'Checkout service'])
  t.equal(r.status, 0, r.stderr)
  t.match(r.stdout, /^<\?xml/)
  t.match(r.stdout, 'alphaWork')
  t.match(r.stdout, 'Checkout service')
  t.equal(r.stderr, 'kflame: skipped 1 of 3 lines that are not "frames COUNT"\n')

  const r2 = cli(['svg', '-o', path.join(dir, 'out', 'b.svg'), '--inverted'], { input: FOLDED_B })
  t.equal(r2.status, 0, r2.stderr)
  t.equal(r2.stdout, '')
  t.match(r2.stderr, /^kflame: 25 samples written to .*b\.svg\n$/)
  t.match(read(path.join(dir, 'out', 'b.svg')), 'betaWork')

  const r3 = cli(['svg', input, '-o', path.join(dir, 'c.svg')])
  t.equal(r3.status, 0, r3.stderr)
  t.match(read(path.join(dir, 'c.svg')), 'alphaWork', 'file to file')
  t.same(fs.readdirSync(dir).sort(), ['a.folded', 'c.svg', 'out'], 'no temporary file left')
})

t.test('merge: equal stacks add up; a directory means its *.folded; every format', async (t) => {
  const dir = tmpdir(t)
  const profiles = path.join(dir, 'profiles')
  fs.mkdirSync(profiles)
  fs.writeFileSync(path.join(profiles, 'kflame-1.folded'), FOLDED_A)
  fs.writeFileSync(path.join(profiles, 'kflame-2.folded'), FOLDED_B + 'garbage\n')
  fs.writeFileSync(path.join(profiles, 'notes.txt'), 'not a profile')

  const m = mergeFiles([path.join(profiles, 'kflame-1.folded'), path.join(profiles, 'kflame-2.folded')])
  t.equal(m.samples, 65)
  t.equal(m.badLines, 1)
  t.match(m.folded, 'main;start;shared 15\n')

  const r = cli(['merge', profiles])
  t.equal(r.status, 0, r.stderr)
  t.equal(r.stdout, 'main;start;alphaWork /app/a.js:1:1_[j] 30\nmain;start;betaWork /app/b.js:1:1_[j] 20\nmain;start;shared 15\n',
    'folded on stdout, sorted, added up')
  t.match(r.stderr, /^kflame: skipped 1 of 5 lines that are not "frames COUNT" \(.*kflame-2\.folded: 1\)\n$/)

  const names = ['m.svg', 'm.cpuprofile', 'm.json', 'm.pb.gz', 'm.txt']
  const results = await Promise.all(names.map((name) => runAsync([CLI, 'merge', path.join(profiles, 'kflame-1.folded'),
    path.join(profiles, 'kflame-2.folded'), '-o', path.join(dir, name), '--hz', '250'])))
  for (const [i, name] of names.entries()) {
    const out = path.join(dir, name)
    const r = results[i]
    t.equal(r.status, 0, `${name}: ${r.stderr}`)
    t.match(r.stderr, new RegExp(`kflame: 65 samples from 2 files written to .*${name.replace(/\./g, '\\.')}\\n$`))
    t.ok(fs.statSync(out).size > 0)
  }
  t.match(read(path.join(dir, 'm.svg')), 'betaWork')
  const cpu = JSON.parse(read(path.join(dir, 'm.cpuprofile')))
  t.ok(cpu.nodes.some((n) => n.callFrame.functionName === 'alphaWork'))
  t.equal(cpu.samples.length, 65, 'one sample per count')
  t.ok(Array.isArray(JSON.parse(read(path.join(dir, 'm.json'))).traceEvents))
  t.equal(read(path.join(dir, 'm.txt')), r.stdout, '.txt is folded')

  fs.writeFileSync(path.join(dir, 'junk.folded'), 'junk\n')
  const empty = cli(['merge', path.join(dir, 'junk.folded'), '-o', path.join(dir, 'junk.svg')])
  t.equal(empty.status, 1, 'nothing to write is a failure')
  t.match(empty.stderr, /nothing to write: no stacks/)
})

t.test('resolve: map parsing, overlaps, offsets, bare words', async (t) => {
  const map = parseMap([
    '1000 100 alpha',
    '0x2000 0x10 beta gamma',
    'not a map line',
    '1050 20 inner',
    '7f0000000000 40 LazyCompile:*fib /app/x.js:3:12'
  ].join('\n'))
  t.equal(map.entries, 4)
  t.equal(map.badLines, 1)
  t.same(map.lookup(0x1000), { name: 'alpha', offset: 0 })
  t.same(map.lookup(0x1060), { name: 'inner', offset: 0x10 }, 'the later line wins where entries overlap')
  t.same(map.lookup(0x1080), { name: 'alpha', offset: 0x80 }, 'the earlier one past the overlap')
  t.equal(map.lookup(0x1100), null, 'end is exclusive')
  t.equal(map.lookup(0xfff), null)
  t.same(map.lookup(0x200f), { name: 'beta gamma', offset: 0xf }, 'names keep their spaces')

  t.equal(resolveText('ip 0x1000, ret 0x1008; 0x3000 untouched', map.lookup), 'ip alpha, ret alpha+0x8; 0x3000 untouched')
  t.equal(resolveText('  7f0000000004 [unknown] (/tmp/perf-1.map)', map.lookup), '  LazyCompile:*fib /app/x.js:3:12+0x4 [unknown] (/tmp/perf-1.map)',
    'a bare word as perf script prints it')
  t.equal(resolveText('00001000 id_00001000 00001000z 0x1000abc', map.lookup), 'alpha id_00001000 00001000z 0x1000abc',
    'only words standing alone')
  t.equal(resolveText('0x1000 00001000', map.lookup, { bare: false }), 'alpha 00001000', '--no-bare')
  t.equal(resolveText('ffffffffffffffff 0xffffffffffffffff', map.lookup), 'ffffffffffffffff 0xffffffffffffffff', 'beyond 2^53: kept')
})

t.test('resolve: streams stdin or files, --map and --pid', async (t) => {
  const dir = tmpdir(t)
  const mapFile = path.join(dir, 'perf.map')
  fs.writeFileSync(mapFile, '1000 100 alpha\n2000 10 beta\n')
  const text = 'frame 0x1004\n  0x2000 in beta?\nno address here\nlast line without newline 0x2001'
  const r = cli(['resolve', '--map', mapFile], { input: text })
  t.equal(r.status, 0, r.stderr)
  t.equal(r.stdout, 'frame alpha+0x4\n  beta in beta?\nno address here\nlast line without newline beta+0x1')

  // Many lines, through the stream's chunks.
  const big = Array.from({ length: 50000 }, (_, i) => `${i} at 0x${(0x1000 + (i % 0x100)).toString(16)}\n`).join('')
  const inFile = path.join(dir, 'big.txt')
  fs.writeFileSync(inFile, big)
  const r2 = cli(['resolve', '--map', mapFile, inFile])
  t.equal(r2.status, 0, r2.stderr)
  const lines = r2.stdout.split('\n')
  t.equal(lines.length, 50001)
  t.equal(lines[0], '0 at alpha')
  t.equal(lines[49999], `49999 at alpha+0x${(49999 % 0x100).toString(16)}`)

  // --pid N reads /tmp/perf-N.map, where perf looks.
  const pidMap = `/tmp/perf-${process.pid}.map`
  fs.writeFileSync(pidMap, '1000 100 fromPid\n')
  t.teardown(() => fs.rmSync(pidMap, { force: true }))
  const r3 = cli(['resolve', '--pid', String(process.pid)], { input: '0x1000\n' })
  t.equal(r3.stdout, 'fromPid\n', r3.stderr)
})

t.test('resolve against a perf map written by kflame.writePerfMap', async (t) => {
  const dir = tmpdir(t)
  const mapFile = path.join(dir, 'app.map')
  const script = `
    const kflame = require(${JSON.stringify(REPO)})
    kflame.writePerfMap(${JSON.stringify(mapFile)}) // arms V8's hook: code compiled from now on has lines
    function kflameMappedFunction (n) { let x = 0; for (let i = 0; i < n; i++) x += i % 7; return x }
    for (let i = 0; i < 200; i++) kflameMappedFunction(1e4)
    kflame.writePerfMap(${JSON.stringify(mapFile)})`
  const w = run(['-e', script])
  t.equal(w.status, 0, w.stderr)
  const line = read(mapFile).split('\n').find((l) => l.includes('kflameMappedFunction'))
  t.ok(line, 'the map has the function')
  const [start, size] = line.split(' ')
  const name = line.split(' ').slice(2).join(' ')
  const inside = (parseInt(start, 16) + Math.min(4, parseInt(size, 16) - 1)).toString(16)
  const r = cli(['resolve', '--map', mapFile], { input: `pc=0x${start} ret=0x${inside} sp=0x10\n` })
  t.equal(r.status, 0, r.stderr)
  const offset = parseInt(inside, 16) - parseInt(start, 16)
  t.equal(r.stdout, `pc=${name} ret=${name}${offset ? `+0x${offset.toString(16)}` : ''} sp=0x10\n`)
})

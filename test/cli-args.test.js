'use strict'

// The kflame CLI's argument parsing, --help of each command and its usage
// errors (one line, exit 2). The commands: test/cli.test.js.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { parse } = require('../lib/cli/args')
const { CLI, tmpdir, runAsync, cli } = require('./fixtures/spawn-helpers')

const FOLDED_A = 'main;start;alphaWork /app/a.js:1:1_[j] 30\nmain;start;shared 10\n'

t.test('argument parsing', async (t) => {
  const spec = { output: { type: 'string', short: 'o' }, hz: { type: 'string' }, quiet: { type: 'boolean' }, f: { type: 'string', short: 'f', multiple: true } }
  t.same(parse(['-o', 'a.svg', '--hz=5', 'x', '--quiet', '-fone', '-f', 'two'], spec),
    { values: { output: 'a.svg', hz: '5', quiet: true, f: ['one', 'two'] }, positionals: ['x'] })
  t.same(parse(['--output', 'a.svg', '--', '--hz', '-'], spec), { values: { output: 'a.svg' }, positionals: ['--hz', '-'] })
  t.same(parse(['-o', 'a.svg', 'node', '--hz', '5'], spec, { stopAtPositional: true }),
    { values: { output: 'a.svg' }, positionals: ['node', '--hz', '5'] }, 'options end at the command')
  t.same(parse(['-o', '-'], spec).values, { output: '-' })
  t.same(parse(['--output=-x.svg'], spec).values, { output: '-x.svg' })
  for (const [argv, message] of [
    [['--nope'], /unknown option --nope/],
    [['-z'], /unknown option -z/],
    [['-o'], /-o needs a value/],
    [['-o', '--hz', '5'], /-o needs a value/],
    [['--quiet=1'], /--quiet takes no value/]
  ]) {
    t.throws(() => parse(argv, spec), { code: 'KFLAME_ERR_USAGE', message }, argv.join(' '))
  }
})

t.test('--help of each command: usage on stdout, exit 0', async (t) => {
  const cases = [['--help'], ['-h'], ['svg', '--help'], ['merge', '-h'], ['resolve', '--help'], ['help', 'merge']]
  const results = await Promise.all(cases.map((args) => runAsync([CLI, ...args])))
  for (const [i, args] of cases.entries()) {
    const r = results[i]
    t.equal(r.status, 0, args.join(' '))
    t.match(r.stdout, /^Usage: kflame/)
    t.equal(r.stderr, '')
  }
  t.match(results[2].stdout, /^Usage: kflame svg/)
  const v = cli(['--version'])
  t.equal(v.stdout, `${require('../package.json').version}\n`)
})

t.test('bad arguments: one line on stderr, exit 2', async (t) => {
  const dir = tmpdir(t)
  fs.writeFileSync(path.join(dir, 'a.folded'), FOLDED_A)
  const cases = [
    [[], /no command to run \(see kflame --help\)/],
    [['--frobnicate', 'node'], /unknown option --frobnicate \(see kflame --help\)/],
    [['-o'], /-o needs a value/],
    [['--hz', 'fast', 'node'], /--hz must be a whole number/],
    [['--hz', '0', 'node'], /--hz must be from 1 to \d+/],
    [['--mode', 'ebpf', 'node'], /--mode must be one of auto, perf, timer, got "ebpf"/],
    [['-o', 'out.png', 'node', 'app.js'], /cannot tell the output format of "out\.png": end it with \.svg/],
    [['svg', 'missing.folded'], /cannot read missing\.folded: no such file.*\(see kflame svg --help\)/],
    [['svg', 'a.folded', '-o', 'a.cpuprofile'], /svg writes SVG, not cpuprofile/],
    [['svg', 'a.folded', '--width', 'wide'], /--width must be a positive whole number/],
    [['merge'], /merge needs folded files/],
    [['merge', 'a.folded', '-o', 'x.gif'], /cannot tell the output format of "x\.gif"/],
    [['merge', 'a.folded', 'missing.folded'], /cannot read missing\.folded/],
    [['merge', 'a.folded', '--nope'], /unknown option --nope \(see kflame merge --help\)/],
    [['resolve'], /resolve needs --map FILE or --pid N/],
    [['resolve', '--map', 'missing.map'], /cannot read the perf map missing\.map/],
    [['resolve', '--pid', 'x'], /--pid must be a positive whole number/]
  ]
  // Concurrently; stdin is /dev/null (svg would read it).
  const results = await Promise.all(cases.map(([args]) => runAsync([CLI, ...args], { cwd: dir })))
  for (const [i, [args, message]] of cases.entries()) {
    const r = results[i]
    t.equal(r.status, 2, `kflame ${args.join(' ')}: ${r.stderr}`)
    t.match(r.stderr, new RegExp(`^kflame: ${message.source}.*\\n$`), args.join(' '))
    t.equal(r.stderr.split('\n').length, 2, 'one line')
  }
  t.same(fs.readdirSync(dir), ['a.folded'], 'nothing written')
})

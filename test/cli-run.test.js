'use strict'

// `kflame [-o OUT] [--hz N] [--] COMMAND...`: runs a command with every node
// process profiled and merges their profiles. How it ends (exit codes,
// signals): test/cli-exit.test.js.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const zlib = require('node:zlib')
const { Profile: PprofProfile } = require('pprof-format')
const { nodeOptionsWith, quoteNodeOption } = require('../lib/cli/run')
const { parseFolded } = require('./helpers')
const { CLI, APP, tmpdir, run, runAsync, cli, read } = require('./fixtures/spawn-helpers')

const BURN = 'kflameFixtureBurn'
const node = process.execPath

t.test('NODE_OPTIONS: the user\'s kept, the register path quoted when it must be', async (t) => {
  t.equal(nodeOptionsWith(undefined, '/a/register.js'), '--interpreted-frames-native-stack --require=/a/register.js')
  t.equal(nodeOptionsWith('  ', '/a/register.js'), '--interpreted-frames-native-stack --require=/a/register.js')
  t.equal(nodeOptionsWith('--max-old-space-size=100', '/a/register.js'), '--max-old-space-size=100 --interpreted-frames-native-stack --require=/a/register.js')
  t.equal(quoteNodeOption('/my dir/register.js'), '"/my dir/register.js"')
  t.equal(quoteNodeOption('/a"b\\c'), '"/a\\"b\\\\c"')

  // Node reads it back as one path.
  const dir = tmpdir(t)
  const odd = path.join(dir, 'a dir "with" odd\\chars')
  fs.mkdirSync(odd)
  const preload = path.join(odd, 'preload.js')
  fs.writeFileSync(preload, 'process.stdout.write("preloaded\\n")')
  const r = run(['-e', ''], { env: { NODE_OPTIONS: nodeOptionsWith('--no-deprecation', preload) } })
  t.equal(r.status, 0, r.stderr)
  // Once per isolate that runs preloads: tap's coverage loader adds a
  // loader-hooks thread on Node 22, which runs them too.
  t.match(r.stdout, /^(preloaded\n)+$/)
})

t.test('-o in each format; the command\'s exit code passes through', async (t) => {
  const dir = tmpdir(t)
  const outputs = {
    'out.svg': (file) => t.match(read(file), BURN),
    'out.folded': (file) => t.ok(parseFolded(read(file)).some((s) => s.frames.some((f) => f.startsWith(BURN)))),
    'out.cpuprofile': (file) => t.ok(JSON.parse(read(file)).nodes.some((n) => n.callFrame.functionName === BURN)),
    'out.json': (file) => t.ok(JSON.parse(read(file)).traceEvents.some((e) => String(e.name).includes(BURN))),
    'out.pb.gz': (file) => {
      const p = PprofProfile.decode(zlib.gunzipSync(fs.readFileSync(file)))
      t.ok(p.stringTable.strings.some((s) => s.includes(BURN)))
    }
  }
  // All at once: each is two node processes starting, mostly waiting.
  const names = Object.keys(outputs)
  const results = await Promise.all(names.map((name, i) =>
    runAsync([CLI, '--hz', '499', '-o', name, node, APP, '--burn', '200', '--exit', String(3 + i)], { cwd: dir })))
  names.forEach((name, i) => {
    const r = results[i]
    t.equal(r.status, 3 + i, `${name}: ${r.stderr}`)
    t.match(r.stderr, new RegExp(`^kflame: \\d+ samples from 1 process written to ${name.replace(/\./g, '\\.')}\\n$`))
    outputs[name](path.join(dir, name))
  })
})

t.test('default output kflame-<pid>.svg; several node processes merged; the temp dir removed', async (t) => {
  const dir = tmpdir(t)
  const tmp = tmpdir(t) // os.tmpdir() of the CLI
  const r = cli(['--', node, APP, '--burn', '250', '--child'], { cwd: dir, env: { TMPDIR: tmp, KFLAME_HZ: '499' } })
  t.equal(r.status, 0, r.stderr)
  const files = fs.readdirSync(dir)
  t.equal(files.length, 1, `${files}`)
  t.match(files[0], /^kflame-\d+\.svg$/)
  t.match(r.stderr, new RegExp(`^kflame: \\d+ samples from 2 processes written to ${files[0].replace('.', '\\.')}\\n$`))
  const svg = read(path.join(dir, files[0]))
  t.match(svg, BURN, 'the parent\'s function')
  t.match(svg, 'kflameChildBurn', 'the child\'s function')
  t.same(fs.readdirSync(tmp), [], 'the temporary directory is gone')
})

t.test('the environment the command gets', async (t) => {
  const dir = tmpdir(t)
  const script = 'const e = process.env; console.log(JSON.stringify([e.NODE_OPTIONS, e.KFLAME_OUT, e.KFLAME_FORMAT, e.KFLAME_HZ, e.KFLAME_QUIET, e.KFLAME_MODE]))'
  const r = cli(['--hz', '250', '--mode', 'timer', '-o', 'x.folded', node, '-e', script], {
    cwd: dir, env: { NODE_OPTIONS: '--no-deprecation', KFLAME_HZ: '5' }
  })
  t.equal(r.status, 0, r.stderr)
  const [options, out, format, hz, quiet, mode] = JSON.parse(r.stdout)
  // (tap's coverage loader joins the child's NODE_OPTIONS, quoting each.)
  t.match(options, /--no-deprecation.* "?--require=\/.*\/register\.js/, 'the user\'s NODE_OPTIONS, then ours')
  t.match(out, /\/kflame-[^/]+\/$/, 'a temporary directory')
  t.same([format, hz, quiet, mode], ['folded', '250', '1', 'timer'])
  t.equal(r.stderr, `kflame: ${parseFolded(read(path.join(dir, 'x.folded'))).reduce((n, s) => n + s.count, 0)} samples from 1 process written to x.folded\n`)
})

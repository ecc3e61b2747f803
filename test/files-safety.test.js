'use strict'

// Files kflame writes can not be steered by another user: links planted at
// a target or at the old, predictable temporary names (PATH.PID.tmp) are
// never followed; a link, FIFO, device or directory at a target is refused
// with KFLAME_ERR_UNSAFE_PATH and left as it was. Every path argument is
// checked (non-empty, no NUL). Inputs that are pipes or FIFOs are read, and
// a FIFO nobody writes does not hang. As root, the real attack: `nobody`
// plants the links, a root-only file is the victim. (src/util/safefile.h,
// lib/safefile.js; the C side alone: test/c/test_safefile.c.)

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const kflame = require('..')
const binding = require('../lib/binding')
const { writeFileSafe, checkPath } = require('../lib/safefile')
const { REPO, REGISTER, CLI, tmpdir, run, cli } = require('./fixtures/spawn-helpers')

const VICTIM = 'precious bytes that only their owner may change\n'
const FOLDED = 'main;start;alphaWork 30\nmain;start;shared 10\n'
const isRoot = process.getuid() === 0

function victimIn (dir, mode = 0o644) {
  const file = path.join(dir, 'victim')
  fs.writeFileSync(file, VICTIM, { mode })
  return file
}

function isLink (p) {
  return fs.lstatSync(p).isSymbolicLink()
}

// The directory holds exactly `names`: nothing created, no temporary file.
function holds (t, dir, names, what) {
  t.same(fs.readdirSync(dir).sort(), [...names].sort(), what || `${dir} holds only ${names.join(', ')}`)
}

// Node in a child, killed after `timeout` ms: a hang fails instead of
// stalling tap.
function node (script, { timeout = 10000, input, stdio } = {}) {
  return spawnSync(process.execPath, ['-e', script], { cwd: REPO, encoding: 'utf8', timeout, input, stdio })
}

t.test('writePerfMap: a link at the target is refused, the link\'s target untouched', async (t) => {
  const dir = tmpdir(t)
  const victim = victimIn(dir)
  const map = path.join(dir, 'perf-1.map')
  fs.symlinkSync(victim, map)
  t.throws(() => kflame.writePerfMap(map), {
    code: 'KFLAME_ERR_UNSAFE_PATH',
    message: new RegExp(`^cannot write ${map}: .*not a regular file.*remove it, or choose another path`)
  })
  t.equal(fs.readFileSync(victim, 'utf8'), VICTIM, 'victim byte-identical')
  t.ok(isLink(map), 'the link is still the link')
  holds(t, dir, ['victim', 'perf-1.map'], 'no temporary file left')
})

t.test('writePerfMap: links at the old temporary names are not followed', async (t) => {
  const dir = tmpdir(t)
  const victim = victimIn(dir)
  const map = path.join(dir, 'perf-1.map')
  fs.symlinkSync(victim, `${map}.${process.pid}.tmp`) // the old src/jit/perfmap.c name
  const r = kflame.writePerfMap(map)
  t.ok(r.lines > 0)
  t.equal(fs.readFileSync(victim, 'utf8'), VICTIM, 'victim byte-identical')
  t.ok(fs.lstatSync(map).isFile(), 'the map is a regular file')
  t.equal(fs.readFileSync(map, 'utf8').split('\n').filter(Boolean).length, r.lines)
  t.equal(fs.statSync(map).mode & 0o777, 0o644 & ~process.umask(), 'mode 0644 (less the umask)')
  holds(t, dir, ['victim', 'perf-1.map', `perf-1.map.${process.pid}.tmp`])
  // Written again, over its own regular file.
  t.ok(kflame.writePerfMap(map).lines > 0)
})

t.test('writePerfMap: a FIFO, a directory, a device at the target are refused', async (t) => {
  const dir = tmpdir(t)
  const fifo = path.join(dir, 'fifo.map')
  t.equal(spawnSync('mkfifo', [fifo]).status, 0)
  // In a child: the old code would hang in open(2) on a FIFO without reader.
  const r = node(`
    try { require('.').writePerfMap(${JSON.stringify(fifo)}) } catch (e) { console.log(e.code) }`)
  t.equal(r.signal, null, 'returned, did not hang')
  t.equal(r.stdout.trim(), 'KFLAME_ERR_UNSAFE_PATH', r.stderr)
  t.ok(fs.lstatSync(fifo).isFIFO())

  const sub = path.join(dir, 'dir.map')
  fs.mkdirSync(sub)
  t.throws(() => kflame.writePerfMap(sub), { code: 'KFLAME_ERR_UNSAFE_PATH' })
  t.throws(() => kflame.writePerfMap(sub + '/'), { code: 'KFLAME_ERR_PERF_MAP', message: /Is a directory/ })
  t.same(fs.readdirSync(sub), [])
  holds(t, dir, ['fifo.map', 'dir.map'])
})

t.test('a device node at the target is refused (root: mknod)', { skip: !isRoot && 'mknod needs root' }, async (t) => {
  const dir = tmpdir(t)
  const dev = path.join(dir, 'null.map')
  t.equal(spawnSync('mknod', [dev, 'c', '1', '3']).status, 0, 'mknod as /dev/null')
  t.throws(() => kflame.writePerfMap(dev), { code: 'KFLAME_ERR_UNSAFE_PATH' })
  t.ok(fs.lstatSync(dev).isCharacterDevice(), 'still the device')
  t.throws(() => writeFileSafe(dev, 'x'), { code: 'KFLAME_ERR_UNSAFE_PATH', message: /a character device/ })
  const svgDev = path.join(dir, 'null.svg')
  t.equal(spawnSync('mknod', [svgDev, 'c', '1', '3']).status, 0)
  const input = path.join(dir, 'in.folded')
  fs.writeFileSync(input, FOLDED)
  t.throws(() => kflame.renderSvgFile(input, svgDev), { code: 'KFLAME_ERR_UNSAFE_PATH' })
  t.ok(fs.lstatSync(svgDev).isCharacterDevice())
  holds(t, dir, ['null.map', 'null.svg', 'in.folded'])
})

t.test('start({ perfMap }) + stop() with a link at the map: a profile, and the failure in its stats', async (t) => {
  const dir = tmpdir(t)
  const victim = victimIn(dir)
  const map = path.join(dir, 'perf-2.map')
  fs.symlinkSync(victim, map)
  fs.symlinkSync(victim, `${map}.${process.pid}.tmp`)
  kflame.start({ hz: 499, perfMap: map })
  const end = Date.now() + 1300 // past the collector's once-a-second refresh
  let x = 0
  while (Date.now() < end) x += Math.sqrt(x + 1)
  const p = kflame.stop()
  t.ok(p.stats.samples > 0, 'stop() returned a profile')
  t.ok(p.stats.details.perfMapErrors > 0 || p.stats.details.perfMapLines < 0,
    `the failure is in details: ${JSON.stringify(p.stats.details)}`)
  t.match(p.stats.warnings.join('\n'), /perf map could not be written/)
  t.equal(fs.readFileSync(victim, 'utf8'), VICTIM, 'victim byte-identical')
  t.ok(isLink(map))
  holds(t, dir, ['victim', 'perf-2.map', `perf-2.map.${process.pid}.tmp`])

  // Only the old temporary name planted: the map is written, safely.
  fs.unlinkSync(map)
  kflame.start({ hz: 99, perfMap: map })
  const q = kflame.stop()
  t.ok(q.stats.details.perfMapLines > 0, `lines ${q.stats.details.perfMapLines}`)
  t.ok(fs.lstatSync(map).isFile())
  t.equal(fs.readFileSync(victim, 'utf8'), VICTIM)
})

t.test('a NUL in a path: KFLAME_ERR_INVALID_ARG, nothing created', async (t) => {
  const dir = tmpdir(t)
  const bad = path.join(dir, 'x\0y')
  t.throws(() => kflame.writePerfMap(bad), { code: 'KFLAME_ERR_INVALID_ARG', message: /NUL/ })
  t.throws(() => kflame.writePerfMap('x\0y'), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => kflame.writePerfMap(''), { code: 'KFLAME_ERR_INVALID_ARG' })
  // The binding refuses it too, whoever calls it.
  t.throws(() => binding.writePerfMap(bad), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => kflame.start({ perfMap: bad }), { code: 'KFLAME_ERR_INVALID_ARG', message: /perfMap.*NUL/ })
  t.equal(kflame.isRunning(), false)
  const input = path.join(dir, 'in.folded')
  fs.writeFileSync(input, FOLDED)
  t.throws(() => kflame.renderSvgFile(input, bad), { code: 'KFLAME_ERR_INVALID_ARG', message: /outPath/ })
  t.throws(() => kflame.renderSvgFile(input + '\0', path.join(dir, 'o.svg')), { code: 'KFLAME_ERR_INVALID_ARG', message: /inPath/ })
  t.throws(() => binding.renderSvgFile(input, bad, {}), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => writeFileSafe(bad, 'x'), { code: 'KFLAME_ERR_INVALID_ARG' })
  t.throws(() => checkPath(3, 'p'), { code: 'KFLAME_ERR_INVALID_ARG', name: 'TypeError' })
  holds(t, dir, ['in.folded'], 'nothing created')

  const { readConfig } = require('../lib/register')
  t.throws(() => readConfig({ KFLAME_OUT: bad }), { code: 'KFLAME_ERR_CONFIG', message: /KFLAME_OUT.*NUL/ })
  holds(t, dir, ['in.folded'])
})

t.test('writeFileSafe: the JS writer refuses what the C one refuses', async (t) => {
  const dir = tmpdir(t)
  const victim = victimIn(dir)
  const out = path.join(dir, 'out.folded')
  writeFileSafe(out, 'a 1\n')
  t.equal(fs.readFileSync(out, 'utf8'), 'a 1\n')
  writeFileSafe(out, ['b', Buffer.from(' 2\n')])
  t.equal(fs.readFileSync(out, 'utf8'), 'b 2\n', 'chunks, over a regular file')
  t.equal(fs.statSync(out).mode & 0o777, 0o644 & ~process.umask())

  const link = path.join(dir, 'link.folded')
  fs.symlinkSync(victim, link)
  t.throws(() => writeFileSafe(link, 'evil'), {
    code: 'KFLAME_ERR_UNSAFE_PATH',
    message: new RegExp(`cannot write ${link}: it is a symbolic link, not a regular file.*remove it, or choose another path`)
  })
  const fifo = path.join(dir, 'fifo.folded')
  t.equal(spawnSync('mkfifo', [fifo]).status, 0)
  t.throws(() => writeFileSafe(fifo, 'x'), { code: 'KFLAME_ERR_UNSAFE_PATH', message: /a FIFO/ })
  const sub = path.join(dir, 'sub.folded')
  fs.mkdirSync(sub)
  t.throws(() => writeFileSafe(sub, 'x'), { code: 'KFLAME_ERR_UNSAFE_PATH', message: /a directory/ })
  t.throws(() => writeFileSafe(dir + '/', 'x'), { code: 'EISDIR' })
  t.equal(fs.readFileSync(victim, 'utf8'), VICTIM)
  holds(t, dir, ['victim', 'out.folded', 'link.folded', 'fifo.folded', 'sub.folded'], 'no temporary file left')

  // An fs error names the file asked for, and keeps its code.
  const missing = path.join(dir, 'victim', 'x.folded') // victim is a file
  t.throws(() => writeFileSafe(missing, 'x'), { code: /^(EEXIST|ENOTDIR)$/, message: new RegExp(`cannot write ${path.dirname(missing)}`) })
})

t.test('kflame/register into a world-writable KFLAME_OUT with a planted link', async (t) => {
  const dir = tmpdir(t)
  const shared = path.join(dir, 'shared')
  fs.mkdirSync(shared)
  fs.chmodSync(shared, 0o777) // world-writable, not sticky
  const victim = victimIn(dir)
  const out = path.join(shared, 'out.folded')
  fs.symlinkSync(victim, out)
  const r = run(['-r', REGISTER, '-e', 'let x = 0; const end = Date.now() + 200; while (Date.now() < end) x += Math.sqrt(x + 1)'],
    { env: { KFLAME_OUT: out } })
  t.equal(r.status, 0, 'the app\'s exit code is kept')
  t.match(r.stderr, new RegExp(`kflame: cannot write ${out}: .*symbolic link`))
  t.equal(fs.readFileSync(victim, 'utf8'), VICTIM, 'victim byte-identical')
  t.ok(isLink(out))
  holds(t, shared, ['out.folded'], 'no temporary file left')

  // Without the link: written, a regular file.
  fs.unlinkSync(out)
  const r2 = run(['-r', REGISTER, '-e', '0'], { env: { KFLAME_OUT: out, KFLAME_QUIET: '1' } })
  t.equal(r2.status, 0, r2.stderr)
  t.ok(fs.lstatSync(out).isFile())
  holds(t, shared, ['out.folded'])
})

t.test('renderSvgFile: a FIFO without writer returns at once; a pipe is read', async (t) => {
  const dir = tmpdir(t)
  const fifo = path.join(dir, 'in.fifo')
  t.equal(spawnSync('mkfifo', [fifo]).status, 0)
  const out = path.join(dir, 'out.svg')
  const r = node(`console.log(JSON.stringify(require('.').renderSvgFile(${JSON.stringify(fifo)}, ${JSON.stringify(out)})))`)
  t.equal(r.signal, null, 'returned, did not hang')
  t.equal(r.status, 0, r.stderr)
  t.equal(JSON.parse(r.stdout).samples, 0)
  t.match(fs.readFileSync(out, 'utf8'), /^<\?xml/)

  // /dev/stdin is a pipe here: non-regular input was refused with EINVAL.
  // (Through bash: spawnSync's `input` is a socket, which /dev/stdin cannot
  // open.)
  const script = `console.log(JSON.stringify(require('.').renderSvgFile('/dev/stdin', ${JSON.stringify(out)})))`
  const r2 = spawnSync('bash', ['-c', 'printf "$1" | "$2" -e "$3"', 'sh', FOLDED, process.execPath, script],
    { cwd: REPO, encoding: 'utf8', timeout: 10000 })
  t.equal(r2.status, 0, r2.stderr)
  t.equal(JSON.parse(r2.stdout).samples, 40)
  t.match(fs.readFileSync(out, 'utf8'), 'alphaWork')

  t.throws(() => kflame.renderSvgFile(dir, out), { code: 'KFLAME_ERR_READ', message: /Is a directory/ })
  holds(t, dir, ['in.fifo', 'out.svg'])
})

t.test('kflame svg reads a pipe, with and without -o', async (t) => {
  const dir = tmpdir(t)
  const out = path.join(dir, 'x.svg')
  const sh = (cmd) => spawnSync('bash', ['-c', cmd], { encoding: 'utf8', timeout: 20000, env: { ...process.env, NODE_OPTIONS: '' } })
  const q = (s) => `'${s.replace(/'/g, "'\\''")}'`
  const feed = `<(printf ${q(FOLDED)})`
  const r = sh(`${q(process.execPath)} ${q(CLI)} svg ${feed} -o ${q(out)}`)
  t.equal(r.status, 0, r.stderr)
  t.match(r.stderr, /40 samples written to/)
  t.match(fs.readFileSync(out, 'utf8'), 'alphaWork')
  const r2 = sh(`${q(process.execPath)} ${q(CLI)} svg ${feed}`)
  t.equal(r2.status, 0, r2.stderr)
  t.match(r2.stdout, /^<\?xml/)
  t.match(r2.stdout, 'alphaWork')

  // A FIFO nobody writes: an empty graph at once, with and without -o.
  const fifo = path.join(dir, 'in.fifo')
  t.equal(spawnSync('mkfifo', [fifo]).status, 0)
  for (const args of [['svg', fifo], ['svg', fifo, '-o', out]]) {
    const r3 = cli(args, { timeout: 10000 })
    t.equal(r3.signal, null, `${args.join(' ')} did not hang`)
    t.equal(r3.status, 0, r3.stderr)
    t.match(r3.stderr, /no stacks in/)
  }

  // -o at a link: refused, and a usage error for a NUL.
  const victim = victimIn(dir)
  const link = path.join(dir, 'link.svg')
  fs.symlinkSync(victim, link)
  const input = path.join(dir, 'in.folded')
  fs.writeFileSync(input, FOLDED)
  for (const args of [['svg', input, '-o', link], ['svg', '-o', link], ['merge', input, '-o', link]]) {
    const r4 = cli(args, { input: FOLDED })
    t.equal(r4.status, 1, `${args.join(' ')}: ${r4.stderr}`)
    t.match(r4.stderr, /not a regular file/)
    t.equal(fs.readFileSync(victim, 'utf8'), VICTIM)
  }
  t.ok(isLink(link))
  holds(t, dir, ['x.svg', 'in.fifo', 'victim', 'link.svg', 'in.folded'])
})

// The attack of issue 19, for real: root writes, `nobody` plants.
t.test('as root: links planted by nobody in a shared directory', { skip: !isRoot && 'needs root (runuser -u nobody)' }, async (t) => {
  const asNobody = (...args) => spawnSync('runuser', ['-u', 'nobody', '--', ...args], { encoding: 'utf8' })
  if (asNobody('true').status !== 0) return t.skip('runuser -u nobody does not work here')
  const own = tmpdir(t) // root's, 0700: holds the victim
  const victim = victimIn(own, 0o600)
  const shared = tmpdir(t, 'kflame-shared-')
  fs.chmodSync(shared, 0o777)
  fs.chmodSync(own, 0o755) // nobody may name the victim, not write it

  const map = path.join(shared, `perf-${process.pid}.map`)
  t.equal(asNobody('ln', '-s', victim, `${map}.${process.pid}.tmp`).status, 0)
  t.equal(asNobody('ln', '-s', victim, map).status, 0)
  t.throws(() => kflame.writePerfMap(map), { code: 'KFLAME_ERR_UNSAFE_PATH' })
  kflame.start({ hz: 99, perfMap: map })
  const p = kflame.stop()
  t.ok(p.stats.details.perfMapLines < 0, 'stop() reports the refusal')

  const out = path.join(shared, 'out.folded')
  t.equal(asNobody('ln', '-s', victim, out).status, 0)
  const r = run(['-r', REGISTER, '-e', '0'], { env: { KFLAME_OUT: out } })
  t.equal(r.status, 0)
  t.match(r.stderr, /not a regular file/)

  // A directory planted as nobody's link (shared/profiles -> own): root's
  // register would write into a directory nobody chose.
  t.equal(asNobody('ln', '-s', own, path.join(shared, 'profiles')).status, 0)
  const r2 = run(['-r', REGISTER, '-e', '0'], { env: { KFLAME_OUT: path.join(shared, 'profiles') + '/' } })
  t.equal(r2.status, 0)
  t.match(r2.stderr, /symbolic link owned by another user/)
  holds(t, own, ['victim'], 'nothing written into the linked directory')

  const st = fs.statSync(victim)
  t.equal(fs.readFileSync(victim, 'utf8'), VICTIM, 'the root-only file is untouched')
  t.equal(st.uid, 0)
  t.equal(st.mode & 0o777, 0o600)
  holds(t, shared, [`perf-${process.pid}.map`, `perf-${process.pid}.map.${process.pid}.tmp`, 'out.folded', 'profiles'])
})

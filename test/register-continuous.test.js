'use strict'

// kflame/register with KFLAME_CONTINUOUS: a process profiled in windows from
// its environment alone, to a directory or to a Pyroscope receiver.

const t = require('tap')
const fs = require('node:fs')
const http = require('node:http')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')

const REGISTER = path.join(__dirname, '..', 'register.js')
// Busy for `ms` in slices, so the window timer fires.
const APP = (ms) => `let x = 0; const end = Date.now() + ${ms}; (function s () { const t = Date.now(); while (Date.now() - t < 30) x += Math.sqrt(x + 1); if (Date.now() < end) setImmediate(s) })()`

function cleanEnv (extra) {
  const env = { ...process.env, ...extra }
  for (const k of Object.keys(env)) if (k.startsWith('KFLAME_') && !(k in extra)) delete env[k]
  delete env.NODE_OPTIONS
  return env
}

t.test('windows written to a directory, the newest KFLAME_KEEP kept, the last one at exit', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-regc-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const r = spawnSync(process.execPath, ['-r', REGISTER, '-e', APP(3300)], {
    env: cleanEnv({ KFLAME_CONTINUOUS: '1', KFLAME_OUT: dir + '/', KFLAME_KEEP: '2', KFLAME_HZ: '199' }),
    encoding: 'utf8',
    timeout: 20000
  })
  t.equal(r.status, 0, r.stderr)
  const m = /kflame: (\d+) windows, (\d+) samples: (\d+) delivered/.exec(r.stderr)
  t.ok(m, r.stderr)
  t.ok(Number(m[1]) >= 4, `${m[1]} windows`)
  t.equal(m[3], m[1], 'every window delivered, the last one at exit too')
  const files = fs.readdirSync(dir).filter((f) => /^kflame-\d+-\d{8}T\d{6}Z-\d+\.folded$/.test(f))
  t.equal(files.length, 2, files.join(' '))
  const last = files.map((f) => Number(/-(\d+)\.folded$/.exec(f)[1])).sort((a, b) => a - b)
  t.equal(last[1], Number(m[1]) - 1, 'the window written at exit is among those kept')
})

t.test('windows pushed to Pyroscope while the process runs', async (t) => {
  const pushes = []
  const server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => { pushes.push(new URL(req.url, 'http://x')); res.end() })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const child = spawn(process.execPath, ['-r', REGISTER, '-e', APP(2500)], {
    env: cleanEnv({ KFLAME_CONTINUOUS: '1', KFLAME_PYROSCOPE: `http://127.0.0.1:${server.address().port}`, KFLAME_APP: 'regtest', KFLAME_LABELS: 'env=test' }),
    stdio: ['ignore', 'ignore', 'pipe']
  })
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  const code = await new Promise((resolve) => child.on('exit', resolve))
  t.equal(code, 0, stderr)
  t.ok(pushes.length >= 1, `${pushes.length} pushes`)
  for (const u of pushes) t.match(u.searchParams.get('name'), /^regtest\.cpu\{host=[^,]+,pid=\d+,env=test\}$/)
  t.match(stderr, /\d+ windows, \d+ samples: \d+ delivered, 1 not pushed/, 'the last window, at exit, is counted as not pushed')
})

t.test('a misconfigured KFLAME_CONTINUOUS stops the process before the app runs', async (t) => {
  const cases = [
    [{ KFLAME_CONTINUOUS: 'often' }, /KFLAME_CONTINUOUS="often" is not a number of seconds/],
    [{ KFLAME_CONTINUOUS: '5', KFLAME_OUT: 'profile.svg' }, /must be a directory with KFLAME_CONTINUOUS/],
    [{ KFLAME_CONTINUOUS: '5', KFLAME_PYROSCOPE: 'ftp://host' }, /only http:\/\/ and https:\/\//],
    [{ KFLAME_CONTINUOUS: '5', KFLAME_LABELS: 'env' }, /is not name=value/],
    [{ KFLAME_CONTINUOUS: '5', KFLAME_KEEP: '0' }, /KFLAME_KEEP="0"/]
  ]
  for (const [env, message] of cases) {
    const r = spawnSync(process.execPath, ['-r', REGISTER, '-e', 'console.log("app ran")'], { env: cleanEnv(env), encoding: 'utf8' })
    t.equal(r.status, 2, JSON.stringify(env))
    t.match(r.stderr, message)
    t.notMatch(r.stdout, /app ran/)
  }
})

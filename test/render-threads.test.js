'use strict'

// Rendering is pure and runs on any thread: the main thread rendering a big
// profile while workers render small ones, 100 times, neither crashes nor
// changes a byte. Once, children were sorted through a file-level pointer
// and this crashed the process (SIGSEGV) in 3 runs of 3. In a child, so a
// crash fails the test instead of tap.

const t = require('tap')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

t.test('renderSvg on the main thread and three workers at once, 100 rounds', async (t) => {
  const r = spawnSync(process.execPath, [path.join(__dirname, 'fixtures', 'render-threads.js'), '100'], {
    encoding: 'utf8', timeout: 25000
  })
  t.equal(r.signal, null, `no signal (${r.signal}): ${r.stderr}`)
  t.equal(r.status, 0, r.stderr)
  t.same(JSON.parse(r.stdout), { rounds: 100, same: true }, 'every render of an input gave the same bytes')
})

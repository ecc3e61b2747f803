'use strict'

// A profile whose folded text is too large for one JS string (V8's limit is
// 2^29 - 24 characters) is never lost: stop() returns it, profile.folded
// says why it cannot be a string and what to do, and profile.write() writes
// it out whole, straight from C.

const t = require('tap')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const JS_STRING_MAX = 2 ** 29 - 24

t.test('folded text past V8\'s string limit is written to a file in full', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kflame-large-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const r = spawnSync(process.execPath, [path.join(__dirname, 'fixtures', 'large-profile.js'), dir], {
    encoding: 'utf8', timeout: 25000
  })
  t.equal(r.status, 0, `fixture: ${r.stderr || r.signal}`)
  const out = JSON.parse(r.stdout)
  t.ok(out.stats.foldedBytes > JS_STRING_MAX,
    `the fixture made ${out.stats.foldedBytes} bytes of folded text (${out.stats.samples} samples), over V8's ${JS_STRING_MAX}`)
  t.equal(out.foldedError && out.foldedError.code, 'KFLAME_ERR_TOO_LARGE', 'profile.folded says it is too large')
  t.match(out.foldedError.message, /profile\.write\(path\)/, 'and what to do instead')
  t.equal(out.file.bytes, out.stats.foldedBytes, 'the file holds every byte')
  t.equal(out.file.sum, out.stats.samples, 'and every sample')
  t.equal(out.file.rest, '', 'ending in a newline')
})

'use strict'

// A small app profiled by kflame: JS on the main thread, crypto on libuv's
// thread pool, and file writes that spend time in the kernel.
//
//   node examples/demo.js [out.svg]     (also writes out.folded beside it)

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const kflame = require('..')

const out = process.argv[2] || 'demo.svg'
const foldedOut = out.replace(/\.svg$/, '') + '.folded'

function fib (n) { return n < 2 ? n : fib(n - 1) + fib(n - 2) }

function jsonRoundTrips (ms) {
  const doc = { users: Array.from({ length: 200 }, (_, i) => ({ id: i, name: `user${i}`, tags: ['a', 'b'] })) }
  const end = Date.now() + ms
  while (Date.now() < end) JSON.parse(JSON.stringify(doc))
}

function writeFiles (ms) {
  const file = path.join(os.tmpdir(), `kflame-demo-${process.pid}`)
  const fd = fs.openSync(file, 'w')
  const chunk = Buffer.alloc(4096, 'x')
  const end = Date.now() + ms
  while (Date.now() < end) fs.writeSync(fd, chunk, 0, chunk.length, 0)
  fs.closeSync(fd)
  fs.unlinkSync(file)
}

async function main () {
  kflame.start({ hz: 999 })
  const hashing = Promise.all([1, 2, 3].map(() => new Promise((resolve, reject) =>
    crypto.pbkdf2('secret', 'salt', 300000, 64, 'sha512', (err) => err ? reject(err) : resolve()))))
  fib(30)
  jsonRoundTrips(400)
  writeFiles(300)
  await hashing
  const profile = kflame.stop()

  fs.writeFileSync(out, profile.svg({ title: 'kflame demo' }))
  fs.writeFileSync(foldedOut, profile.folded)
  const { samples, lost, threads, durationMs, kernel, warnings } = profile.stats
  console.log(`kflame: ${samples} samples (${lost} lost) on ${threads} threads in ${durationMs.toFixed(0)} ms, ` +
    `kernel frames: ${kernel ? 'yes' : 'no'}`)
  for (const w of warnings) console.log(`kflame: warning: ${w}`)
  console.log(`kflame: wrote ${out} (open it in a browser) and ${foldedOut} (folded stacks for other tools)`)
}

main().catch((err) => {
  console.error(`kflame demo: ${err.code || ''} ${err.message}`)
  process.exit(1)
})

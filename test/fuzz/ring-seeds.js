'use strict'
// Writes the seed corpus of fuzz_ring (test/fuzz/corpus/fuzz_ring/): fake
// rings holding the records the kernel writes for kflame's events, laid out
// as fuzz_ring.c reads its input. Run it after changing that layout:
//   node test/fuzz/ring-seeds.js
const fs = require('fs')
const path = require('path')

const SAMPLE = 9, LOST = 2, COMM = 3
const KERNEL = 0xffffffffffffff80n, USER = 0xfffffffffffffe00n

function header (type, misc, size) {
  const b = Buffer.alloc(8)
  b.writeUInt32LE(type, 0)
  b.writeUInt16LE(misc, 4)
  b.writeUInt16LE(size, 6)
  return b
}

// u64 id; u32 pid, tid; u64 time; u64 nr; u64 ips[nr]; (then `extra` bytes)
function sample ({ id = 1n, pid = 100, tid = 100, time = 1000n, ips = [], nr = ips.length, extra = 0 }) {
  const body = Buffer.alloc(32 + 8 * ips.length + extra)
  body.writeBigUInt64LE(id, 0)
  body.writeUInt32LE(pid, 8)
  body.writeUInt32LE(tid, 12)
  body.writeBigUInt64LE(time, 16)
  body.writeBigUInt64LE(BigInt(nr), 24)
  ips.forEach((ip, i) => body.writeBigUInt64LE(ip, 32 + 8 * i))
  return Buffer.concat([header(SAMPLE, 2, 8 + body.length), body])
}

function lost (n) {
  const body = Buffer.alloc(16)
  body.writeBigUInt64LE(1n, 0)
  body.writeBigUInt64LE(BigInt(n), 8)
  return Buffer.concat([header(LOST, 0, 24), body])
}

function comm (pid, tid, name) {
  const len = Math.ceil((name.length + 1) / 8) * 8
  const body = Buffer.alloc(8 + len)
  body.writeUInt32LE(pid, 0)
  body.writeUInt32LE(tid, 4)
  body.write(name, 8)
  return Buffer.concat([header(COMM, 0, 8 + body.length), body])
}

// sizeSel: the data area is 64 << sizeSel bytes. The records are written
// from `tail` on, wrapping, as the kernel does; head = tail + `distance`
// (default: the records' length) unless `head` is given.
function ring ({ sizeSel = 2, tail = 0n, records = [], distance, head, twice = false, fill = 0 }) {
  const size = 64 << sizeSel
  const data = Buffer.alloc(size, fill)
  const bytes = Buffer.concat(records)
  for (let i = 0; i < bytes.length; i++) data[Number((tail + BigInt(i)) % BigInt(size))] = bytes[i]
  const state = Buffer.alloc(18)
  state[0] = sizeSel
  state.writeBigUInt64LE(tail, 1)
  const absolute = head !== undefined
  state.writeBigUInt64LE(absolute ? head : BigInt(distance ?? bytes.length), 9)
  state[17] = (absolute ? 1 : 0) | (twice ? 2 : 0)
  return Buffer.concat([state, data])
}

const user = [USER, 0x401000n, 0x401200n, 0x7f0000001000n]
const mixed = [KERNEL, 0xffffffff81000100n, 0xffffffff81000200n, USER, 0x401000n, 0x401200n]
const seeds = {
  'samples': ring({ records: [sample({ ips: user }), sample({ ips: mixed, tid: 101 }), sample({ ips: user })] }),
  'empty-callchain': ring({ records: [sample({ ips: [] }), sample({ ips: [] }), sample({ ips: [], tid: 102 })] }),
  'lost-comm-sample': ring({ sizeSel: 3, records: [comm(100, 100, 'node'), lost(7), comm(100, 101, 'libuv-worker'), sample({ ips: user, tid: 101 })] }),
  'wrap-in-payload': ring({ sizeSel: 2, tail: 256n - 24n, records: [sample({ ips: mixed })] }),
  'wrap-in-header': ring({ sizeSel: 2, tail: 256n - 4n, records: [sample({ ips: user }), sample({ ips: [] })] }),
  'wrap-at-boundary': ring({ sizeSel: 1, tail: 128n - 40n, records: [sample({ ips: [] }), sample({ ips: user })] }),
  'big-tail': ring({ sizeSel: 4, tail: 0xfffffffffffff000n, records: [sample({ ips: mixed }), lost(1)] }),
  'u64-wrap': ring({ sizeSel: 2, tail: 0xffffffffffffffe8n, records: [sample({ ips: user })] }),
  'truncated': ring({ records: [sample({ ips: user }), sample({ ips: mixed })], distance: 60 + 40 }),
  'zero-size-header': ring({ records: [sample({ ips: user }), header(SAMPLE, 0, 0)], distance: 64 + 8 + 32 }),
  'unaligned-size': ring({ records: [header(SAMPLE, 0, 44), Buffer.alloc(40)] }),
  'nr-too-big': ring({ records: [sample({ ips: user, nr: 1000 }), sample({ ips: user, nr: 5 })] }),
  'extra-bytes': ring({ records: [sample({ ips: user, extra: 16 })] }),
  'short-sample': ring({ records: [header(SAMPLE, 0, 24), Buffer.alloc(16)] }),
  'head-behind-tail': ring({ tail: 4096n, head: 4000n, records: [sample({ ips: user })] }),
  'head-overrun': ring({ sizeSel: 0, records: [sample({ ips: [] })], distance: 64 * 3, fill: 0 }),
  'overrun-of-records': ring({ sizeSel: 0, records: [header(LOST, 0, 8), header(LOST, 0, 8), header(LOST, 0, 8), header(LOST, 0, 8), header(LOST, 0, 8), header(LOST, 0, 8), header(LOST, 0, 8), header(LOST, 0, 8)], head: 0x7fffffffffffffffn }),
  'twice': ring({ sizeSel: 3, records: [sample({ ips: user }), sample({ ips: mixed })], twice: true }),
  'whole-ring': ring({ sizeSel: 0, records: [sample({ ips: [USER, 1n, 2n, 3n] })] }),
  'foreign-and-big-nr': ring({ sizeSel: 5, records: [sample({ pid: 7, ips: user }), sample({ ips: Array.from({ length: 127 }, (_, i) => BigInt(0x400000 + i * 16)) })] }),
  'sample-cut-nr-max': ring({ records: [sample({ ips: [], nr: 0xffffffffffffffffn })] }),
}

const dir = path.join(__dirname, 'corpus', 'fuzz_ring')
fs.mkdirSync(dir, { recursive: true })
for (const [name, bytes] of Object.entries(seeds)) fs.writeFileSync(path.join(dir, name), bytes)
console.log(`${Object.keys(seeds).length} seeds in ${path.relative(process.cwd(), dir)}`)

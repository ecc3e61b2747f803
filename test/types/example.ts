// A typed use of kflame's whole public API, through the package's own name
// (package.json's "exports" and "types"), as a TypeScript user writes it.
// test/types/check.js compiles it with tsc --strict and never runs it. The
// lines under @ts-expect-error are wrong uses that must stay errors: were
// index.d.ts to accept one, tsc fails on the unused directive.

import kflame = require('kflame')
import type { ErrorCode, Format, KflameError, LiveProfile, ProfileStats, WindowInfo } from 'kflame'
import { createServer, type Server } from 'node:http'
import Fastify from 'fastify'

// --- start, stop, the profile ---

kflame.start()
kflame.start({ hz: 999, mode: 'timer', event: 'task-clock', kernel: false, ringPages: null, stackBytes: 0 })
kflame.start({ jit: true, tiers: true, dwarf: false, perfMap: '/tmp/x.map', timeline: 1000 })
kflame.start({ perfMap: true, timeline: false, ringPages: 64 })
// @ts-expect-error hz is a number
kflame.start({ hz: '99' })
// @ts-expect-error an unknown option
kflame.start({ hzz: 99 })
// @ts-expect-error no such mode
kflame.start({ mode: 'ebpf' })
// @ts-expect-error no such event
kflame.start({ event: 'cycles' })

const running: boolean = kflame.isRunning()
const profile: LiveProfile = kflame.stop()
const stats: ProfileStats = profile.stats
const samples: number = stats.samples + stats.lost + stats.threads + stats.durationMs + stats.hz
const mode: 'perf' | 'timer' = stats.mode
const event: 'cpu-clock' | 'task-clock' | 'thread-cpu-timer' = stats.event
const warnings: string[] = stats.warnings
const stopTotal: number = stats.details.stopMs.total + stats.details.stopMs.fold
const perfMap: string | null = stats.details.perfMap
const refused: ErrorCode | null = stats.details.perfRefused
const bytes: number = stats.details.profileBytes + stats.details.symbolCacheBytes + stats.details.foldedBytes
const layout: boolean = stats.details.v8Layout
// @ts-expect-error not a field of the details
stats.details.stopMsTotal.toFixed()
// @ts-expect-error a live profile's duration is a number
const noDuration: null = stats.durationMs

const folded: string = profile.folded
if (profile.samples !== null) {
  const line: Uint32Array = profile.samples.line
  const time: Float64Array = profile.samples.time
  const tid: Uint32Array = profile.samples.tid
}
// @ts-expect-error samples may be null
profile.samples.line
// @ts-expect-error read-only
profile.folded = ''
if (profile.timing) {
  const start: number = profile.timing.startUs + profile.timing.wallStart
}

const svg: string = profile.svg({ title: 't', subtitle: 's', width: 1200, minwidth: '0.5%', inverted: true, reverse: false, cwd: '/srv' })
const html: string = profile.html({ minwidth: 2 })
// @ts-expect-error minwidth is pixels or 'N%'
profile.svg({ minwidth: 'wide' })
// @ts-expect-error an unknown flame-graph option
profile.svg({ colours: 'hot' })
const written: Format = profile.write('/tmp/app.svg')
profile.write('/tmp/app.bin', { format: 'pprof', svg: { width: 800 } })
// @ts-expect-error no such format
profile.write('/tmp/app.png', { format: 'png' })
const nodes: number = profile.cpuprofile().nodes[0].callFrame.lineNumber
const deltas: number[] = profile.cpuprofile().timeDeltas
const trace: string = profile.traceEvents().traceEvents[0].ph
const pprof: Buffer = profile.pprof()
// @ts-expect-error pprof() is a Buffer, not a string
const pprofText: string = profile.pprof()
// @ts-expect-error profiles come from stop() and fromFolded()
const made = new kflame.Profile()
const isProfile: boolean = profile instanceof kflame.Profile

// --- folded text and renderers ---

const fromText = kflame.fromFolded('main;a 1\n', { hz: 99 })
const badLines: number = fromText.stats.details.badLines
const foldedHz: number | null = fromText.stats.hz
// @ts-expect-error folded text has no stop timings
fromText.stats.details.stopMs
// @ts-expect-error folded text has no duration
const foldedDuration: number = fromText.stats.durationMs
kflame.fromFolded('main;a 1\n', { hz: null })
// @ts-expect-error text is a string
kflame.fromFolded(Buffer.from('main;a 1\n'))
const rendered = kflame.renderSvg('main;a 1\n', { width: 600 })
const drawn: number = rendered.stats.drawn + rendered.stats.mergedSamples
const page: string = kflame.renderHtml('main;a 1\n').html
const fileStats = kflame.renderSvgFile('in.folded', 'out.svg', { reverse: true })
const badFile: number = fileStats.badLines

// --- caches, perf maps, labels ---

const dropped: number = kflame.dropCaches().bytes + kflame.dropCaches().objects
const map: { path: string; lines: number } = kflame.writePerfMap()
kflame.writePerfMap('/tmp/perf-1.map')
const n: number = kflame.label('job', () => 42)
const later: Promise<string> = kflame.label('request', async () => 'done')
// @ts-expect-error a label of a promise is a promise
const notLater: string = kflame.label('request', async () => 'done')
// @ts-expect-error fn is a function
kflame.label('job', 42)

// --- continuous ---

const c = kflame.continuous({ every: 60, to: '/var/tmp/profiles', keep: 5, format: 'folded', hz: 49 })
kflame.continuous({ to: 'http://pyroscope:4040', app: 'checkout', labels: { env: 'prod' }, headers: { 'X-Scope-OrgID': 'a' }, queue: 8, timeoutMs: 5000 })
kflame.continuous({
  to: async (p: LiveProfile, info: WindowInfo) => { p.write(`/tmp/w-${info.seq}.pb.gz`) },
  every: 10
})
// @ts-expect-error to is required
kflame.continuous({ every: 60 })
// @ts-expect-error a start() option is checked too
kflame.continuous({ to: '/tmp/p', stackBytes: 'lots' })
c.on('window', (info) => { const end: number = info.endMs; const file: string | undefined = info.file })
c.once('dropped', (info: WindowInfo) => info.seq)
c.on('failed', (err, info) => { if (info !== null) info.samples.toFixed() })
// @ts-expect-error no such event
c.on('windw', () => {})
// @ts-expect-error a window's info is not a string
c.on('window', (info: string) => {})
const windows: number = c.stats.windows + c.stats.delivered + c.stats.dropped + c.stats.failed
const lastError: string | null = c.stats.lastError
const app: string = c.app
const whenStopped: Promise<{ windows: number }> = c.stop()
const now: number = c.stopSync().windows

// --- errors ---

try {
  kflame.stop()
} catch (err) {
  const code: ErrorCode = (err as KflameError).code
  if (code === 'KFLAME_ERR_NOT_RUNNING' || code === 'KFLAME_ERR_HTTP_UNCOLLECTED') console.log('idle')
  // @ts-expect-error not a code kflame throws
  if (code === 'KFLAME_ERR_NOPE') console.log('never')
}

// --- HTTP ---

const handler = kflame.http({ prefix: '/kflame', token: 'secret', maxDuration: 60000, maxHz: 199 })
createServer((req, res) => handler(req, res, () => res.end())).listen(0)
createServer(kflame.http())
// @ts-expect-error the token is a string
kflame.http({ token: 42 })
const server: Promise<Server> = kflame.listen({ port: 0, host: '127.0.0.1', unref: false, prefix: '/kflame' })
// @ts-expect-error port is required
kflame.listen({ host: '127.0.0.1' })
const fastify = Fastify()
fastify.register(kflame.fastify, { prefix: '/kflame', token: 'secret' })
// @ts-expect-error maxHz is a number
fastify.register(kflame.fastify, { maxHz: 'many' })

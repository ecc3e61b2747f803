// Types of kflame's public API (lib/index.js and what it re-exports). The
// README's "API" section is the reference; this file says the same in
// TypeScript and is checked by scripts/test.sh (test/types/), against a
// typed example and against the names lib/index.js exports.

/// <reference types="node" />

import type { EventEmitter } from 'node:events'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'

// --- errors ---

/** The stable `code` of every error kflame throws (the README's error table). */
export type ErrorCode =
  | 'KFLAME_ERR_INVALID_ARG'
  | 'KFLAME_ERR_UNKNOWN_OPTION'
  | 'KFLAME_ERR_OUT_OF_RANGE'
  | 'KFLAME_ERR_RUNNING'
  | 'KFLAME_ERR_NOT_RUNNING'
  | 'KFLAME_ERR_PERF_PARANOID'
  | 'KFLAME_ERR_PERF_DENIED'
  | 'KFLAME_ERR_PERF_UNSUPPORTED'
  | 'KFLAME_ERR_TIMER'
  | 'KFLAME_ERR_NO_SIGNAL'
  | 'KFLAME_ERR_MLOCK'
  | 'KFLAME_ERR_FD_LIMIT'
  | 'KFLAME_ERR_NO_THREADS'
  | 'KFLAME_ERR_THREAD'
  | 'KFLAME_ERR_PERF_MAP'
  | 'KFLAME_ERR_JIT_OFF'
  | 'KFLAME_ERR_READ'
  | 'KFLAME_ERR_WRITE'
  | 'KFLAME_ERR_UNSAFE_PATH'
  | 'KFLAME_ERR_TOO_LARGE'
  | 'KFLAME_ERR_SYSTEM'
  | 'KFLAME_ERR_NAPI'
  | 'KFLAME_ERR_CONFIG'
  | 'KFLAME_ERR_PLATFORM'
  | 'KFLAME_ERR_NOT_BUILT'
  | 'KFLAME_ERR_HTTP_BAD_PARAM'
  | 'KFLAME_ERR_HTTP_TOKEN_IN_QUERY'
  | 'KFLAME_ERR_HTTP_UNAUTHORIZED'
  | 'KFLAME_ERR_HTTP_FORBIDDEN'
  | 'KFLAME_ERR_HTTP_NOT_FOUND'
  | 'KFLAME_ERR_HTTP_METHOD'
  | 'KFLAME_ERR_HTTP_NOT_OWNER'
  | 'KFLAME_ERR_HTTP_UNCOLLECTED'
  | 'KFLAME_ERR_HTTP_INSECURE'
  | 'KFLAME_ERR_HTTP_INTERNAL'

/**
 * What kflame throws: an Error (TypeError for a wrong type, RangeError for a
 * value out of range) whose message names the cause and the fix.
 */
export interface KflameError extends Error {
  code: ErrorCode
}

// --- start() ---

export type Mode = 'auto' | 'perf' | 'timer'
/** Where perf events are opened: per CPU, filtered to this process in the kernel, where allowed; else per thread. */
export type PerfScope = 'auto' | 'threads'
export type Event = 'cpu-clock' | 'task-clock'

/** start()'s options; unknown names and wrong types are refused. */
export interface StartOptions {
  /** Samples per second of each thread's CPU time, 1 to kernel.perf_event_max_sample_rate (99). */
  hz?: number
  /** The sampler; 'auto' (the default) is perf events, else the timer sampler with a warning. */
  mode?: Mode
  /** perf mode, CPU time: 'auto' (the default, or KFLAME_PERF_SCOPE) opens one event per CPU with a kernel filter where allowed (root), which costs nothing at a context switch; 'threads' always per thread. */
  perfScope?: PerfScope | null
  event?: Event
  /** Sample kernel frames when this user may (true). */
  kernel?: boolean
  /** Data pages of each ring buffer, a power of two from 1 to 4096; null: the sampler's choice. */
  ringPages?: number | null
  /** Bytes of each sampled stack copied with the sample: 0, or a multiple of 8 from 64 to 60000 (16384). */
  stackBytes?: number
  /** Name JS frames from the JIT code map (true). */
  jit?: boolean
  /** Keep V8's tier markers (~ ^ + *) apart (false). */
  tiers?: boolean
  /** Put back frames a frame-pointer walk skips, from DWARF (true). */
  dwarf?: boolean
  /** true or a path: keep a perf map up to date while profiling (false). */
  perfMap?: boolean | string
  /** Samples kept with their times: true (1,000,000), false (none), or a number, 0 to 2^32 - 1. */
  timeline?: boolean | number
}

// --- profiles ---

/** Output formats, by name: profile.write(), /stop?format=, KFLAME_FORMAT. */
export type Format = 'svg' | 'html' | 'folded' | 'cpuprofile' | 'trace' | 'pprof'

/** The flame graph's options (svg(), html(), renderSvg(), renderHtml(), renderSvgFile()). */
export interface SvgOptions {
  title?: string
  subtitle?: string
  /** Pixels, 100 to 100000 (1200). */
  width?: number
  /** Frames narrower than this many pixels, or 'N%' of the width, are not drawn (0.1). */
  minwidth?: number | `${number}%`
  /** Icicle graph: roots at the top. */
  inverted?: boolean
  /** Stacks read leaf first. */
  reverse?: boolean
  /** Labels of the app's own files are shown relative to this directory (process.cwd()). */
  cwd?: string
}

/** What the C renderer counted (renderSvg, renderHtml, renderSvgFile). */
export interface RenderStats {
  lines: number
  badLines: number
  samples: number
  frames: number
  drawn: number
  mergedFrames: number
  mergedSamples: number
}

/** Every sample the timeline kept, in the order collected. */
export interface Samples {
  /** Indexes the lines of profile.folded. */
  line: Uint32Array
  /** Microseconds on CLOCK_MONOTONIC. */
  time: Float64Array
  tid: Uint32Array
}

/** What stop() took in C, in milliseconds, by phase. */
export interface StopMs {
  total: number
  drain: number
  name: number
  fold: number
  trim: number
}

/** The counters behind a live profile's stats (README, profile.stats). */
export interface ProfileDetails {
  lostInRing: number
  /** The error code that made mode 'auto' use the timer sampler, else null. */
  perfRefused: ErrorCode | null
  timerSignal: number
  timerThreads: number
  timerUnwalked: number
  timerOverHandler: number
  corrupt: number
  noMemory: number
  duplicates: number
  foreign: number
  kernelHidden: boolean
  inheritThread: boolean
  /** perf mode: 'cpus' (an event per CPU, filtered in the kernel) or 'threads'; timer mode: null. */
  perfScope: 'cpus' | 'threads' | null
  /** Why 'auto' could not open CPU-wide events (the system's message), else null. */
  perfScopeError: string | null
  ringPages: number
  attachedThreads: number
  cpus: number
  jitFrames: number
  stackBytes: number
  stackCopies: number
  stackCopyBytes: number
  stackCopiesShort: number
  v8Layout: boolean
  interpretedNamed: number
  interpretedUnnamed: number
  runningAdded: number
  unreportedNamed: number
  unreportedUnnamed: number
  regexpNamed: number
  regexpUnnamed: number
  inlinedFrames: number
  inlinedExact: number
  inlinedUnnamed: number
  inliningRead: number
  inliningFailed: number
  nativeFromDebug: number
  nativeFolded: number
  dwarfTried: number
  dwarfRecovered: number
  dwarfFrames: number
  dwarfBroke: number
  workersArmed: number
  workersFailed: number
  codeEntries: number
  codeBytes: number
  codeEvicted: number
  codeMoved: number
  codeEventsDropped: number
  perfMap: string | null
  perfMapLines: number
  perfMapWrites: number
  perfMapErrors: number
  foldedBytes: number
  timelineSamples: number
  timelineDropped: number
  timelineBytes: number
  stacks: number
  frameNames: number
  profileBytes: number
  symbolCacheBytes: number
  stopMs: StopMs
  labels: number
  labelsDropped: number
}

/** profile.stats of a live profile (stop(), a continuous window). */
export interface ProfileStats {
  samples: number
  lost: number
  threads: number
  durationMs: number
  hz: number
  /** The sampler that ran. */
  mode: 'perf' | 'timer'
  event: Event | 'thread-cpu-timer'
  kernel: boolean
  /** Sentences for anything that made the profile less than complete. */
  warnings: string[]
  details: ProfileDetails
}

/** profile.stats of a profile read from folded text (fromFolded). */
export interface FoldedStats {
  samples: number
  lost: 0
  /** Distinct root frames. */
  threads: number
  durationMs: null
  hz: number | null
  event: null
  kernel: boolean
  warnings: string[]
  details: { lines: number; badLines: number }
}

/** A live profile's clocks: where its time axis starts. */
export interface ProfileTiming {
  /** CLOCK_MONOTONIC, microseconds. */
  startUs: number
  /** Milliseconds since the epoch. */
  wallStart: number
}

export interface WriteOptions {
  /** By default the one the path's extension picks. */
  format?: Format
  /** The flame graph's options (svg and html). */
  svg?: SvgOptions
}

/** Chrome DevTools' .cpuprofile (JSON.stringify it to save). */
export interface CpuProfile {
  nodes: Array<{
    id: number
    callFrame: { functionName: string; scriptId: string; url: string; lineNumber: number; columnNumber: number }
    hitCount: number
    children: number[]
  }>
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

/** One Chrome trace event: 'M' metadata or an 'X' slice. */
export interface TraceEvent {
  name: string
  cat?: string
  ph: 'M' | 'X'
  ts: number
  dur?: number
  pid: number
  tid: number
  args?: Record<string, unknown>
}

/** Chrome trace-event JSON for Perfetto and chrome://tracing. */
export interface TraceEvents {
  traceEvents: TraceEvent[]
  displayTimeUnit: 'ms'
  otherData: {
    source: 'kflame'
    hz: number
    samples: number
    threads: number
    startTime: number
    endTime: number
    clock: string
    timing: string
  }
}

/**
 * A profile: from stop() (S is ProfileStats), a continuous window, or
 * fromFolded() (S is FoldedStats). Made by kflame, not by `new`.
 */
export class Profile<S extends ProfileStats | FoldedStats = ProfileStats | FoldedStats> {
  private constructor ()
  /** FlameGraph's collapsed format: "root;...;leaf COUNT" per line, sorted. Throws KFLAME_ERR_TOO_LARGE past 512 MiB. */
  readonly folded: string
  /** Every sample's line, time and thread; null for a profile from folded text. */
  readonly samples: Samples | null
  stats: S
  /** A live profile's clocks; null for folded text. Not enumerable. */
  readonly timing: ProfileTiming | null
  /** A self-contained interactive SVG flame graph. */
  svg (options?: SvgOptions): string
  /** The flame graph as an HTML page drawn on a canvas. */
  html (options?: SvgOptions): string
  /** Writes the profile to `path` (created anew, renamed over the target); returns the format written. */
  write (path: string, options?: WriteOptions): Format
  cpuprofile (): CpuProfile
  traceEvents (): TraceEvents
  /** Gzipped pprof protobuf. */
  pprof (): Buffer
}

/** A profile stop() returns. */
export type LiveProfile = Profile<ProfileStats>

// --- continuous() ---

/** Where each window goes: a directory, a Pyroscope server's http(s) URL, or a function. */
export type ContinuousSink = string | ((profile: LiveProfile, info: WindowInfo) => void | PromiseLike<unknown>)

export interface ContinuousOptions extends StartOptions {
  to: ContinuousSink
  /** Seconds a window lasts, 1 to 86400 (60). */
  every?: number
  /** Files kept in a directory, 1 to 100000 (10). */
  keep?: number
  /** Of the files in a directory ('pprof'). */
  format?: Format
  /** Pyroscope application name (node.<script name>). */
  app?: string | null
  /** Pyroscope labels besides host and pid. */
  labels?: Record<string, string>
  /** Sent with each push (Authorization, X-Scope-OrgID). */
  headers?: Record<string, string>
  /** Windows waiting for a slow backend at most, 1 to 1000 (4). */
  queue?: number
  /** Of one push, 100 to 600000 (10000). */
  timeoutMs?: number
}

/** A window, as 'window', 'dropped', 'failed' and a function sink see it. */
export interface WindowInfo {
  seq: number
  startMs: number
  endMs: number
  samples: number
  lost: number
  /** What the window held in C. */
  profileBytes: number
  /** The file written, for a directory sink. */
  file?: string
}

export interface ContinuousStats {
  windows: number
  delivered: number
  dropped: number
  failed: number
  lastError: string | null
  samples: number
  lost: number
}

/** A profile without end, handed over in windows: what continuous() returns (no constructor of its own). */
export interface Continuous extends EventEmitter {
  /** The Pyroscope application name. */
  readonly app: string
  readonly stats: ContinuousStats
  /** Ends the profile; the last window is delivered like the others. */
  stop (): Promise<ContinuousStats>
  /** Ends the profile at once (for process 'exit'): the last window is written or handed over, not pushed. */
  stopSync (): ContinuousStats

  on (event: 'window', listener: (info: WindowInfo) => void): this
  on (event: 'dropped', listener: (info: WindowInfo) => void): this
  on (event: 'failed', listener: (err: unknown, info: WindowInfo | null) => void): this
  once (event: 'window', listener: (info: WindowInfo) => void): this
  once (event: 'dropped', listener: (info: WindowInfo) => void): this
  once (event: 'failed', listener: (err: unknown, info: WindowInfo | null) => void): this
  off (event: 'window', listener: (info: WindowInfo) => void): this
  off (event: 'dropped', listener: (info: WindowInfo) => void): this
  off (event: 'failed', listener: (err: unknown, info: WindowInfo | null) => void): this
  addListener (event: 'window', listener: (info: WindowInfo) => void): this
  addListener (event: 'dropped', listener: (info: WindowInfo) => void): this
  addListener (event: 'failed', listener: (err: unknown, info: WindowInfo | null) => void): this
  removeListener (event: 'window', listener: (info: WindowInfo) => void): this
  removeListener (event: 'dropped', listener: (info: WindowInfo) => void): this
  removeListener (event: 'failed', listener: (err: unknown, info: WindowInfo | null) => void): this
}

// --- the API ---

/** Begins sampling every thread of the process. Throws KFLAME_ERR_RUNNING when a profile runs. */
export function start (options?: StartOptions): void
/** Ends the process's profile (whichever isolate started it). Throws KFLAME_ERR_NOT_RUNNING when idle. */
export function stop (): LiveProfile
/**
 * stop() with the draining, naming and folding on libuv's thread pool: the
 * event loop goes on meanwhile. Sampling ends at the call. Rejects as stop() throws.
 */
export function stopAsync (): Promise<LiveProfile>
export function isRunning (): boolean
/** Frees the symbol tables kept between profiles. Throws KFLAME_ERR_RUNNING while profiling. */
export function dropCaches (): { objects: number; symbols: number; bytes: number }
/** Profiles without end, in windows of `every` seconds handed to `to`. */
export function continuous (options: ContinuousOptions): Continuous

/**
 * Runs fn() with `name` as a frame under the thread's root in the samples
 * taken meanwhile; for a promise (a thenable), until it settles.
 */
export function label<T> (name: string, fn: () => PromiseLike<T>): Promise<T>
export function label<T> (name: string, fn: () => T): T

/** Writes the live JIT code map as a perf map (/tmp/perf-<pid>.map by default). */
export function writePerfMap (path?: string): { path: string; lines: number }

/** Folded text from anywhere as a Profile; lines that do not parse are skipped and counted. */
export function fromFolded (text: string, options?: { hz?: number | null }): Profile<FoldedStats>
export function renderSvg (folded: string, options?: SvgOptions): { svg: string; stats: RenderStats }
/** File to file, all in C. */
export function renderSvgFile (inPath: string, outPath: string, options?: SvgOptions): RenderStats
export function renderHtml (folded: string, options?: SvgOptions): { html: string; stats: RenderStats }

// --- the HTTP endpoints ---

/** http(), fastify (as register() options) and listen() take these. */
export interface HttpOptions {
  /** The path the endpoints live under, such as '/kflame' (''). */
  prefix?: string
  /** Visible ASCII, no spaces: every request then needs "Authorization: Bearer <token>". */
  token?: string
  /** Milliseconds, 100 to 3600000 (300000): a /start profile stops itself after this long. */
  maxDuration?: number
  /** The highest hz a request may ask for, 1 to 100000 (999). */
  maxHz?: number
}

export interface ListenOptions extends HttpOptions {
  /** 0 picks a free port. */
  port: number
  /** The address to bind ('127.0.0.1'); anything but loopback needs a token. */
  host?: string
  /** The server alone does not keep the process alive (true). */
  unref?: boolean
}

/** A handler for node:http, express and connect: paths not kflame's go to next(), or get a JSON 404. */
export type HttpHandler = (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void

export function http (options?: HttpOptions): HttpHandler
/** A dedicated admin server, listening. */
export function listen (options: ListenOptions): Promise<Server>
/** A fastify plugin: fastify.register(kflame.fastify, { prefix: '/kflame', token }). */
export function fastify (instance: unknown, options: HttpOptions): Promise<void>

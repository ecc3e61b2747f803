'use strict'

// The "Measured numbers" tables of docs/benchmarks.md, from
// bench/results/*.json: one table (or two) per benchmark, each under a line
// saying what ran, when and on what machine, so the page is regenerated from
// the results rather than typed by hand. Each benchmark formats its own
// results (its module exports formatTables or readmeTables); this file only
// finds, orders and frames them.
//
//   node bench/table.js [--dir bench/results]              markdown on stdout
//   node bench/table.js --readme [FILE]                    also replaces the text between
//                                                          <!-- bench:tables:begin --> and
//                                                          <!-- bench:tables:end --> in FILE
//                                                          (default docs/benchmarks.md; the
//                                                          flag keeps its name from when the
//                                                          tables lived in README.md)

const fs = require('node:fs')
const path = require('node:path')
const { machineLine, option } = require('./common')

const ROOT = path.join(__dirname, '..')
const BEGIN = '<!-- bench:tables:begin -->'
const END = '<!-- bench:tables:end -->'

// In the order of docs/benchmarks.md. `about` says what the numbers are, from the results file.
const BENCHES = [
  {
    file: 'overhead.json',
    title: 'Profiling cost',
    script: 'bench/overhead.js',
    about: (r) => `${r.quick ? 'quick run, ' : ''}${r.rounds} rounds, modes alternating, a fresh process per trial` +
      (r.tools && r.tools.perf ? `; ${r.tools.perf}` : '') + (r.tools && r.tools.zeroX ? `; 0x ${r.tools.zeroX}` : ''),
    tables: (r) => require('./overhead').formatTables(r.rows)
  },
  {
    file: 'accuracy.json',
    title: 'Accuracy and naming',
    script: 'bench/accuracy.js',
    about: (r) => `${r.quick ? 'quick run, ' : ''}${r.rounds} rounds of ${r.seconds} s per tool${r.periodic ? ', periodic split' : ''}` +
      (r.tools && r.tools.perf ? `; ${r.tools.perf}` : ''),
    tables: (r) => require('./accuracy').formatTables(r)
  },
  {
    file: 'truth.json',
    title: "kflame's JS picture against V8's own profiler, on acorn, marked and typescript",
    script: 'bench/truth.js',
    about: (r) => `${r.quick ? 'quick run, ' : ''}${r.rounds} round${r.rounds > 1 ? 's' : ''} of ${r.seconds} s of main-thread CPU per side and workload, ` +
      `kflame at ${r.hz} Hz against \`node --cpu-prof\` at 1 ms` + (r.nodeFlags && r.nodeFlags.length ? `, node ${r.nodeFlags.join(' ')}` : '') +
      (r.stackBytes ? `, stackBytes ${r.stackBytes} on the kflame side` : '') +
      `; acorn ${r.versions.acorn}, marked ${r.versions.marked}, typescript ${r.versions.typescript}`,
    tables: (r) => require('./truth').readmeTables(r)
  },
  {
    file: 'truth-warm.json',
    title: 'The same on a warm process (the work runs 1 s before `start()`)',
    script: 'bench/truth.js --modes v8,kflame,warm',
    about: (r) => `${r.rounds} rounds, as above; the warm side's code was compiled, optimized and inlined before kflame armed V8's code-event hook at \`start()\``,
    tables: (r) => require('./truth').readmeTables(r, 'truth-warm.json')
  },
  ...[['22', '12.4'], ['24', '13.6']].map(([major, v8]) => ({
    file: `truth-node${major}.json`,
    title: `The same on Node ${major} (V8 ${v8})`,
    script: 'bench/truth.js',
    about: (r) => `${r.rounds} rounds, as above, run with Node ${major}'s binary (\`scripts/test-node-major.sh\` fetches it) against an addon built for it`,
    tables: (r) => require('./truth').readmeTables(r, `truth-node${major}.json`)
  })),
  {
    file: 'stackcopy.json',
    title: 'What the stack copy (`stackBytes`) costs and buys',
    script: 'bench/stackcopy.js',
    about: (r) => `${r.quick ? 'quick run, ' : ''}windows alternating in one process, seeded random order; ` +
      'coverage from children whose code was compiled before kflame loaded',
    tables: (r) => require('./stackcopy').readmeTables(r)
  },
  ...[['attribution.json', 999], ['attribution-99.json', 99]].map(([file, hz]) => ({
    file,
    title: hz === 999
      ? 'Where a sample\'s cost goes, beside `perf record -F 999 -g` and perf copying the same stacks (`--call-graph dwarf,16384`)'
      : `The same at ${hz} Hz, beside \`perf record -F ${hz} -g\``,
    script: hz === 999 ? 'bench/attribution.js' : `bench/attribution.js --hz ${hz}`,
    about: (r) => `${r.quick ? 'quick run, ' : ''}${r.rounds} rounds of windows alternating in one process, seeded random order; ` +
      'perf enabled and disabled around its windows through its control fifo; the hook row from separate processes',
    tables: (r) => require('./attribution').readmeTables(r)
  })),
  {
    file: 'timermode.json',
    title: 'The timer sampler (`mode: \'timer\'`) beside perf mode and V8\'s profiler',
    script: 'bench/timermode.js',
    about: (r) => `${r.quick ? 'quick run, ' : ''}${r.rounds} rounds of windows alternating in one process, seeded random order`,
    tables: (r) => require('./timermode').readmeTables(r)
  },
  {
    file: 'nativenames.json',
    title: 'Native frame names against `perf record -g` and `perf record --call-graph dwarf`',
    script: 'bench/nativenames.js',
    about: (r) => `${r.quick ? 'quick run, ' : ''}${r.rounds} rounds, a fresh process per tool and workload, the tools' order rotating each round` +
      (r.tools && r.tools.perf ? `; ${r.tools.perf}` : ''),
    tables: (r) => require('./nativenames').readmeTables(r)
  },
  {
    file: 'workers.json',
    title: "Arming the code-event hook of workers that never load kflame",
    script: 'bench/workers.js',
    about: (r) => `${r.workers} short-lived workers in a row per process, ${r.rounds} rounds, processes alternating`,
    tables: (r) => require('./workers').formatTables(r)
  },
  {
    file: 'http.json',
    title: 'An HTTP server under load',
    script: 'bench/http.js',
    about: (r) => `${r.quick ? 'quick run, ' : ''}${r.rounds} rounds, ${r.warmS} s warm-up + ${r.windowS} s window, ${r.connections} connections, ` +
      `${r.loader.name} ${r.loader.name === 'wrk' ? '' : r.loader.version}`.trim() +
      (r.tools && r.tools.perf ? `; ${r.tools.perf}` : ''),
    // The --warm-kflame run, when there is one, adds the later-profile column.
    tables: (r, dir) => require('./http').readmeTables(r, readJson(path.join(dir, 'http-warm.json')))
  },
  {
    file: 'offcpu.json',
    title: 'An HTTP server under load: CPU and off-CPU sampling',
    script: 'bench/offcpu.js',
    about: (r) => `alternating windows: one server process profiled in ${r.windowMs / 1000} s windows, ${r.rounds} rounds of each kind ` +
      `in a seeded random order, autocannon with ${r.connections} connections throughout; cost = the server's CPU time (all threads) ` +
      "per request, throughput = requests served per second, p99 latency = the 99th percentile of the round trips of one more " +
      'connection sending one request at a time during the window; each as a per-round ratio against the round\'s unprofiled ' +
      'window: median and bootstrap 95% interval',
    tables: (r) => require('./offcpu').readmeTables(r)
  },
  {
    file: 'offcpu-bounded.json',
    title: 'An HTTP server under load: bounded off-CPU sampling, switch-ins from the tracepoint',
    script: 'bench/offcpu.js --kinds none,cpu-99,offcpu-r200,both-99-r200 --rounds 80',
    about: (r) => `as above, ${r.rounds} rounds of ${r.windowMs / 1000} s windows, the kinds a bounded off-CPU profile ` +
      "is made of; switch-ins stamped by kflame's sched_switch tracepoint program (the table above took them from records)",
    tables: (r) => require('./offcpu').readmeTables(r)
  },
  {
    file: 'offcpu-long.json',
    title: 'An HTTP server under load: bounded off-CPU sampling, a long run',
    script: 'bench/offcpu.js --kinds none,offcpu-r200,both-99-r200 --rounds 300',
    about: (r) => `as above, ${r.rounds} rounds of ${r.windowMs / 1000} s windows, only the bounded kinds beside the ` +
      'unprofiled one, so that many rounds narrow the interval the VM\'s scatter leaves wide',
    tables: (r) => require('./offcpu').readmeTables(r)
  },
  {
    file: 'offcpu-r10.json',
    title: 'An HTTP server under load: bounded off-CPU sampling with nearly no stacks',
    script: 'bench/offcpu.js --kinds none,offcpu-r200,offcpu-r10 --rounds 100',
    about: (r) => `as above, ${r.rounds} rounds of ${r.windowMs / 1000} s windows; maxSwitchRate 10 leaves what every ` +
      'switch pays (the switch events, the switch-in stamps) with almost no stacks',
    tables: (r) => require('./offcpu').readmeTables(r)
  },
  {
    file: 'offcpu-nocopy.json',
    title: 'An HTTP server under load: bounded off-CPU sampling without the stack copy',
    script: 'bench/offcpu.js --kinds none,offcpu-r200,offcpu-r200-nocopy --rounds 100',
    about: (r) => `as above, ${r.rounds} rounds of ${r.windowMs / 1000} s windows; stackBytes 0 on one bounded kind: ` +
      'what the 16 KiB copy adds to each switched-out stack',
    tables: (r) => require('./offcpu').readmeTables(r)
  },
  {
    file: 'offcpu-tracepoint.json',
    title: 'An HTTP server under load: bounded off-CPU sampling from the tracepoint',
    script: 'bench/offcpu.js --kinds none,offcpu-r100,offcpu-r200,both-99-r100,both-99-r200 --rounds 200',
    about: (r) => `as above, ${r.rounds} rounds of ${r.windowMs / 1000} s windows, with the switch-outs sampled by kflame's ` +
      "sched_switch program (the tables above: a context-switch event per CPU); its bound counts this process's switches " +
      'only, so a bound of 200 per CPU now takes twice the stacks it took (the other processes\' switches took part of it)',
    tables: (r) => require('./offcpu').readmeTables(r)
  },
  {
    file: 'offcpu-r10-tracepoint.json',
    title: 'An HTTP server under load: bounded off-CPU sampling from the tracepoint, with nearly no stacks',
    script: 'bench/offcpu.js --kinds none,offcpu-r10,offcpu-r100 --rounds 150',
    about: (r) => `as above, ${r.rounds} rounds of ${r.windowMs / 1000} s windows; maxSwitchRate 10 leaves what every ` +
      'switch pays (the tracepoint and its program) with almost no stacks',
    tables: (r) => require('./offcpu').readmeTables(r)
  },
  {
    file: 'offcpu-r10-bound.json',
    title: 'An HTTP server under load: off-CPU from the tracepoint bounded to 10 stacks a second per CPU',
    script: 'bench/offcpu.js --kinds none,offcpu-r10,both-99-r10 --rounds 150',
    about: (r) => `as above, ${r.rounds} rounds of ${r.windowMs / 1000} s windows; the bound that keeps off-CPU ` +
      'sampling under 3%, alone and beside CPU sampling at 99 Hz',
    tables: (r) => require('./offcpu').readmeTables(r)
  },
  {
    file: 'offcpu-attributed.json',
    title: 'An HTTP server under load: bounded off-CPU sampling, direct and attributed',
    script: 'bench/offcpu.js --kinds none,cpu-99,both-99,offcpu-r100,offcpu-r200,both-99-r100,both-99-r200 --rounds 50',
    about: (r) => `as above, ${r.rounds} rounds of ${r.windowMs / 1000} s windows, with switch-ins from the tracepoint; the second ` +
      "table attributes each bounded kind's cost to its parts: the unprofiled server's context switches per request times " +
      "what a switch costs (bench/switchcost.js's tracepoint row, its 95% interval), plus the kind's switched-out stacks " +
      'per request times what a stack costs (the every-switch kind\'s extra CPU over CPU sampling\'s, per stack, from both ' +
      'intervals\' ends)',
    tables: (r) => require('./offcpu').readmeTables(r)
  },
  {
    file: 'switchcost.json',
    title: 'What a perf event on a thread costs it at a context switch',
    script: 'bench/switchcost.js',
    about: (r) => `${r.rounds} rounds, a fresh process per kind and round (seeded random order), two threads pinned to one CPU ` +
      "passing a byte back and forth for 1 s; extra = median of per-round differences against the round's run without events, " +
      'bootstrap 95% interval',
    tables: (r) => require('./switchcost').readmeTables(r)
  },
  {
    file: 'offcpu-latency.json',
    title: 'An HTTP server under load: throughput and latency, longer windows',
    script: 'bench/offcpu.js --kinds none,none-again,cpu-99,cpu-99-threads,timer-99 --window-ms 2000 --rounds 60',
    about: (r) => `as above, ${r.rounds} rounds of ${r.windowMs / 1000} s windows, CPU sampling only, so that each window's ` +
      'probe p99 rests on about 2,400 round trips; `none-again` is a second unprofiled window in each round (A/A): ' +
      'what this method cannot tell from no difference',
    tables: (r) => require('./offcpu').readmeTables(r)
  },
  {
    file: 'stop.json',
    title: 'What `/stop` holds the event loop for',
    script: 'bench/stop.js',
    about: (r) => `${r.quick ? 'quick run, ' : ''}median of ${r.rounds}, a fresh process per profile after a warm-up profile; ` +
      'each rendering on its own after stop()',
    tables: (r) => require('./stop').readmeTables(r)
  },
  {
    file: 'long.json',
    title: 'Long profiles: memory and stop()',
    script: 'bench/long.js',
    about: (r) => `a fresh process per rate, ${r.threads} busy threads (main and workers, started before the profile), ` +
      'a warm-up profile first (symbol tables loaded), RSS from /proc/self/statm every second; rate 0 is the same load unprofiled',
    tables: (r, dir) => require('./long').readmeTables(r, readJson(path.join(dir, 'long-before.json')))
  },
  {
    file: 'soak.json',
    title: 'Continuous mode left running',
    script: 'bench/soak.js',
    about: (r) => `one process, ${r.threads} busy threads, windows written as pprof to a directory (keep 5), RSS every 10 s`,
    tables: (r) => require('./soak').readmeTables(r)
  },
  {
    file: 'distinct.json',
    title: 'stop() of a profile with ~100,000 distinct stacks',
    script: 'bench/distinct.js',
    about: (r) => `median of ${r.rounds} fresh processes after a warm-up profile; main thread and a worker in random ` +
      `recursion at 9999 Hz until ${r.seconds} s of process CPU`,
    tables: (r) => require('./distinct').readmeTables(r)
  },
  {
    file: 'jit.json',
    title: 'JIT code map against `--perf-basic-prof`',
    script: 'bench/jit.js',
    about: (r) => r.quick ? 'quick run' : 'full run',
    tables: (r) => require('./jit').readmeTables(r)
  },
  {
    file: 'hookcost.json',
    title: 'What V8\'s side of JS names costs an app that compiles, while no profile runs',
    script: 'bench/hookcost.js',
    about: (r) => `${r.rounds} rounds, one fresh process per variant and workload each, in a seeded random order; the timed part ` +
      'after kflame has loaded (and, for the profiled row, after a first 0 s profile); extra = per-round ratio against the ' +
      "round's process without kflame: median and bootstrap 95% interval",
    tables: (r) => require('./hookcost').readmeTables(r)
  },
  {
    file: 'render.json',
    title: 'Flame graph rendering against flamegraph.pl',
    script: 'bench/render.js',
    about: (r) => (r.quick ? 'quick run, 1 render each' : 'median of 5 renders (10k lines) and 3 (100k)') +
      `, peak RSS from ${r.rssSource || '?'}` +
      (r.peers && r.peers.notes && r.peers.notes.length ? `; ${r.peers.notes.join('; ')}` : ''),
    tables: (r) => require('./render').readmeTables(r)
  },
  {
    file: 'browser.json',
    title: 'Opening a flame graph in a browser: kflame SVG and HTML against flamegraph.pl',
    script: 'bench/browser.js',
    about: (r) => `${r.quick ? 'quick run, ' : ''}headless ${r.browser}, ${r.width}-px graphs; ${r.method}; ` +
      `median of ${r.rounds} rounds (min-max)` +
      (r.peers && r.peers.notes && r.peers.notes.length ? `; ${r.peers.notes.join('; ')}` : ''),
    tables: (r) => require('./browser').readmeTables(r)
  },
  {
    file: 'labels.json',
    title: 'The cost of `kflame.label()`',
    script: 'bench/labels.js',
    about: (r) => `${r.rounds} rounds, medians`,
    // bench/labels.js runs on require; its one small table is drawn here.
    tables: (r) => [
      '| call | ns per call | extra ns |',
      '| --- | --- | --- |',
      ...r.rows.map((x) => `| ${x.mode} | ${x.nsPerCall} | ${x.mode === 'direct' ? '-' : x.extraNs} |`)
    ]
  }
]
// Read alongside another file, never on their own.
const COMPANIONS = new Set(['http-warm.json', 'long-before.json'])

function readJson (file) {
  try { return JSON.parse(fs.readFileSync(file, 'utf8')) } catch { return null }
}

// Results written before machineNotes() had the fields at the top level.
const machineOf = (r) => r.machine || { date: r.date, cpuModel: r.cpuModel, cpus: r.cpus, kernel: r.kernel, node: r.node }

function render (dir) {
  const out = []
  const seen = new Set()
  for (const b of BENCHES) {
    const file = path.join(dir, b.file)
    const r = readJson(file)
    seen.add(b.file)
    if (!r) {
      console.error(`table: no ${path.relative(ROOT, file)}; run \`node ${b.script} --json ${path.relative(ROOT, file)}\``)
      continue
    }
    const m = machineOf(r)
    const date = m.date ? m.date.slice(0, 10) : 'undated'
    out.push(`**${b.title}** (\`${b.script}\`, ${date}; ${b.about(r)}; ${machineLine(m)}):`)
    out.push('')
    out.push(...b.tables(r, dir))
    for (const n of r.notes || []) out.push('', `Note: ${n}`)
    out.push('')
  }
  for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
    if (!seen.has(f) && !COMPANIONS.has(f)) console.error(`table: ${f} is not a known benchmark's results; left out`)
  }
  return out.join('\n')
}

// Replaces the text between the markers; false when they are not both there.
function replaceBetweenMarkers (file, tables) {
  const text = fs.readFileSync(file, 'utf8')
  const b = text.indexOf(BEGIN)
  const e = text.indexOf(END)
  if (b < 0 || e < b) return false
  const next = `${text.slice(0, b + BEGIN.length)}\n${tables}\n${text.slice(e)}`
  if (next !== text) fs.writeFileSync(file, next)
  return true
}

function main () {
  const args = process.argv.slice(2)
  const dir = path.resolve(option(args, '--dir') || path.join(__dirname, 'results'))
  const tables = render(dir)
  process.stdout.write(tables + '\n')
  const i = args.indexOf('--readme')
  if (i >= 0) {
    const next = args[i + 1]
    const target = path.resolve(next && !next.startsWith('--') ? next : path.join(ROOT, 'docs', 'benchmarks.md'))
    if (replaceBetweenMarkers(target, tables)) console.error(`table: tables written into ${target}`)
    else {
      console.error(`table: ${target} has no ${BEGIN} ... ${END} markers; left unchanged`)
      process.exitCode = 1
    }
  }
}

main()

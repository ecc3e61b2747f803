'use strict'

// What kflame costs an app that compiles a lot while no profile runs: V8's
// code-event hook (armed when kflame loads) and --interpreted-frames-native-stack
// (set when kflame loads). Both can only be had from a process's start, so
// this bench runs fresh processes: each round one process per variant, in a
// seeded random order, and takes per-round ratios against the round's
// process without kflame: median and bootstrap 95% interval. Many short
// rounds, because separate processes scatter by 10-20% on this VM.
//
// Variants:
//   none      node alone
//   lazy      kflame loaded, the default: no hook, no flag until the first
//             start()
//   profiled  the default after a first (short) profile: hook and flag on
//   between   KFLAME_JIT=profile after a first profile: both off again
//   load      KFLAME_JIT=load: hook and flag from load
//   hook      KFLAME_JIT=load with the flag turned off again: the hook alone
//   off       KFLAME_JIT=off: never either
//
// Workloads (the timed part of each process, after kflame has loaded):
//   typescript  require('typescript') (9 MB of JS, compiled lazily) and
//               transpile a module: third-party start-up, compile-heavy
//   eval1000    1,000 fresh functions compiled by indirect eval and called
//               once, after a warm-up: the extreme, all compilation
//
//   node bench/hookcost.js [--rounds N] [--json bench/results/hookcost.json]

const { execFileSync } = require('node:child_process')
const path = require('node:path')
const { mulberry32, machineNotes, machineLine, writeResults } = require('./common')
const { shuffle, summarize } = require('./windows')

const ROOT = path.join(__dirname, '..')
const VARIANTS = [
  { name: 'none', env: {} },
  { name: 'lazy', env: {}, kflame: true },
  { name: 'profiled', env: {}, kflame: true, profileFirst: true },
  { name: 'between', env: { KFLAME_JIT: 'profile' }, kflame: true, profileFirst: true },
  { name: 'load', env: { KFLAME_JIT: 'load' }, kflame: true },
  { name: 'hook', env: { KFLAME_JIT: 'load' }, kflame: true, noFlag: true },
  { name: 'off', env: { KFLAME_JIT: 'off' }, kflame: true }
]
const WORKLOADS = ['typescript', 'eval1000']

function evalFresh (count, from) {
  for (let i = 0; i < count; i++) {
    // eslint-disable-next-line no-eval
    const fn = (0, eval)(`(function f${from + i} (n) { let x = 0; for (let k = 0; k < n; k++) x += k ^ ${i}; return x })`)
    fn(50)
  }
}

function child ([variant, workload]) {
  const v = VARIANTS.find((x) => x.name === variant)
  if (v.kflame) require('..')
  if (v.profileFirst) {
    require('..').start({ hz: 99 })
    require('..').stop()
  }
  if (v.noFlag) require('node:v8').setFlagsFromString('--no-interpreted-frames-native-stack')
  let run
  if (workload === 'typescript') {
    run = () => {
      const ts = require('typescript')
      const source = 'interface A { x: number }\nexport function f (a: A): number { return a.x * 2 }\n'.repeat(100)
      return ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.CommonJS } }).outputText.length
    }
  } else {
    evalFresh(500, 0) // warm-up: the compiler's own code is compiled
    run = () => evalFresh(1000, 500)
  }
  const c0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  run()
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6
  const c = process.cpuUsage(c0)
  process.stdout.write(JSON.stringify({ wallMs, cpuMs: (c.user + c.system) / 1000 }))
}

function main () {
  const args = process.argv.slice(2)
  if (args[0] === '--child') { child(args.slice(1)); return }
  const rounds = Number(args[args.indexOf('--rounds') + 1]) || 40
  const jsonOut = args.includes('--json') ? args[args.indexOf('--json') + 1] : null
  const machine = machineNotes()
  const rand = mulberry32(23)
  const runs = []
  const once = (variant, workload) => {
    const env = { ...process.env, ...VARIANTS.find((v) => v.name === variant).env }
    if (!VARIANTS.find((v) => v.name === variant).env.KFLAME_JIT) delete env.KFLAME_JIT
    const out = execFileSync(process.execPath, [__filename, '--child', variant, workload], { cwd: ROOT, env, encoding: 'utf8' })
    return JSON.parse(out)
  }
  for (const w of WORKLOADS) for (const v of VARIANTS) once(v.name, w) // warm the page cache
  for (let round = 0; round < rounds; round++) {
    for (const workload of WORKLOADS) {
      for (const variant of shuffle(VARIANTS.map((v) => v.name), rand)) runs.push({ round, workload, variant, ...once(variant, workload) })
    }
  }
  const rows = []
  for (const workload of WORKLOADS) {
    for (const { name } of VARIANTS) {
      const mine = runs.filter((r) => r.workload === workload && r.variant === name)
      const base = (r) => runs.find((b) => b.round === r.round && b.workload === workload && b.variant === 'none')
      const ratio = (f) => mine.map((r) => f(r) / f(base(r)) - 1)
      const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
      rows.push({
        workload,
        variant: name,
        wallMs: med(mine.map((r) => r.wallMs)),
        cpuMs: med(mine.map((r) => r.cpuMs)),
        extraWall: name === 'none' ? null : summarize(ratio((r) => r.wallMs), 31),
        extraCpu: name === 'none' ? null : summarize(ratio((r) => r.cpuMs), 37)
      })
    }
  }
  console.log(`hookcost: ${rounds} rounds, one fresh process per variant and workload each, seeded random order; ${machineLine(machine)}`)
  for (const line of readmeTables({ rows })) console.log(line)
  if (jsonOut) writeResults(jsonOut, machine, { rounds, rows, runs })
}

const VARIANT_NAMES = {
  none: 'node alone',
  lazy: 'kflame loaded, never started (the default: nothing armed)',
  profiled: 'kflame loaded, after a first profile (hook and flag on)',
  between: '`KFLAME_JIT=profile`, after a first profile (hook and flag off again)',
  load: 'kflame loaded, `KFLAME_JIT=load` (hook and flag from load)',
  hook: '`KFLAME_JIT=load`, the flag turned off: the hook alone',
  off: 'kflame loaded, `KFLAME_JIT=off`'
}
const WORKLOAD_NAMES = {
  typescript: "`require('typescript')` + `transpileModule`",
  eval1000: '1,000 fresh functions compiled (indirect eval)'
}
function readmeTables (r) {
  const pct = (v) => `${v >= 0 ? '+' : ''}${(v * 100).toFixed(1)}%`
  const ci = (e) => e ? `${pct(e.median)} [${pct(e.ci95[0])}, ${pct(e.ci95[1])}]` : '-'
  return [
    '| workload | process | wall ms | CPU ms | extra wall | extra CPU |',
    '| --- | --- | --- | --- | --- | --- |',
    ...r.rows.map((x) => `| ${WORKLOAD_NAMES[x.workload]} | ${VARIANT_NAMES[x.variant]} | ${x.wallMs.toFixed(1)} | ${x.cpuMs.toFixed(1)} | ` +
      `${ci(x.extraWall)} | ${ci(x.extraCpu)} |`)
  ]
}

if (require.main === module) main()
module.exports = { readmeTables }

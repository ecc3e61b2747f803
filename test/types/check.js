'use strict'

// Checks index.d.ts, cheaply, before the tap tests (scripts/test.sh):
// 1. tsc --strict compiles the typed examples here (tsconfig.json), whose
//    @ts-expect-error lines are wrong uses that must stay errors;
// 2. the values index.d.ts declares are exactly what lib/index.js exports,
//    so a function added to one and not the other fails here.
// Exit code 0 when both hold, 1 with what differs.

const path = require('node:path')
const { spawnSync } = require('node:child_process')
const ts = require('typescript')

const root = path.join(__dirname, '..', '..')
const tsc = require.resolve('typescript/bin/tsc')

const run = spawnSync(process.execPath, [tsc, '-p', path.join(__dirname, 'tsconfig.json')], { stdio: 'inherit' })
if (run.status !== 0) {
  console.error('types: tsc refused test/types (above): index.d.ts and the examples disagree')
  process.exit(1)
}

const file = path.join(root, 'index.d.ts')
const program = ts.createProgram([file], { strict: true, noEmit: true, types: ['node'], skipLibCheck: true })
const checker = program.getTypeChecker()
const declared = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(file)))
  .filter((s) => s.flags & ts.SymbolFlags.Value)
  .map((s) => s.name)
  .sort()
const actual = Object.keys(require(root)).sort()
const missing = actual.filter((n) => !declared.includes(n))
const extra = declared.filter((n) => !actual.includes(n))
if (missing.length || extra.length) {
  if (missing.length) console.error(`types: lib/index.js exports ${missing.join(', ')}, which index.d.ts does not declare`)
  if (extra.length) console.error(`types: index.d.ts declares ${extra.join(', ')}, which lib/index.js does not export`)
  process.exit(1)
}
console.log(`types: index.d.ts compiles with the examples and declares the ${actual.length} values lib/index.js exports`)

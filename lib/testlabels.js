'use strict'

// Per-test labels for test runners: while a test runs, its samples carry the
// test's name as a frame, so a merged flame graph of a suite splits by test.
// Tests nest: a subtest's frame sits under its parent's and carries only its
// own part of the name ("top > sub" becomes "top;sub"); tests inside
// describe() blocks, which have no label of their own, carry the suite path
// ("suite > case").
//
// node:test: hooks on the root test of a `node --test` child process (each
// test file runs in one; NODE_TEST_CONTEXT marks it). Hooks of the root run
// for every test at every depth. Outside `node --test` nothing is installed,
// since loading node:test would make an ordinary script report as a test.
// tap: hooks on tap's root test once the program creates it, in processes
// tap's runner started (TAP_CHILD_ID).
// mocha: `--require kflame/register` picks up register's `mochaHooks`.

const { openLabel, closeLabel } = require('./labels')

const SEPARATOR = ' > '

// Open test labels, innermost last: { fullName, handle }.
const open = []

function enter (fullName) {
  const parent = open[open.length - 1]
  const name = parent && fullName.startsWith(parent.fullName + SEPARATOR)
    ? fullName.slice(parent.fullName.length + SEPARATOR.length)
    : fullName
  open.push({ fullName, handle: openLabel(name || fullName) })
}

function leave (fullName) {
  // Close the innermost entry of this name; with concurrent tests it need
  // not be the last one.
  for (let i = open.length - 1; i >= 0; i--) {
    if (open[i].fullName === fullName) {
      closeLabel(open[i].handle)
      open.splice(i, 1)
      return
    }
  }
}

// node:test's context has fullName since Node 20.16 / 22.3; before, name.
function nodeTestName (ctx) {
  return ctx.fullName || ctx.name || '(test)'
}

function installNodeTest () {
  const { beforeEach, afterEach } = require('node:test')
  beforeEach((ctx) => enter(nodeTestName(ctx)))
  afterEach((ctx) => leave(nodeTestName(ctx)))
}

// tap keeps its root test on globalThis under this symbol, set once, when
// the program first loads tap (CommonJS or ESM: they share it).
const TAP_ROOT = Symbol.for('TAP private constructor')

function hookTap (tap) {
  // "test/a.test.js > TAP > top > sub": the part after the root's name.
  const tapName = (t) => {
    const rootPrefix = `${tap.fullname} > `
    return t.fullname.startsWith(rootPrefix) ? t.fullname.slice(rootPrefix.length) : t.fullname
  }
  tap.beforeEach((t) => enter(tapName(t)))
  tap.afterEach((t) => leave(tapName(t)))
}

// Hooks tap's root test when the program creates it: a process that never
// loads tap (a script a test spawns) is left alone.
function installTap () {
  const existing = globalThis[TAP_ROOT]
  if (existing) return hookTap(existing)
  Object.defineProperty(globalThis, TAP_ROOT, {
    configurable: true,
    get () { return undefined },
    set (tap) {
      Object.defineProperty(globalThis, TAP_ROOT, { value: tap, writable: true, configurable: true, enumerable: true })
      if (tap && typeof tap.beforeEach === 'function') hookTap(tap)
    }
  })
}

let installed = null

// Hooks the test runner this process runs under, once. Returns its name,
// or null when it is none that can be hooked.
function install (env = process.env) {
  if (installed !== null) return installed || null
  installed = false
  if (env.NODE_TEST_CONTEXT) {
    installNodeTest()
    installed = 'node:test'
  } else if (env.TAP_CHILD_ID) {
    installTap()
    installed = 'tap'
  }
  return installed || null
}

function mochaName (test) {
  return test.titlePath().join(SEPARATOR)
}

// Root hook plugin: mocha runs these around every test of every suite.
const mochaHooks = {
  beforeEach () { if (this.currentTest) enter(mochaName(this.currentTest)) },
  afterEach () { if (this.currentTest) leave(mochaName(this.currentTest)) }
}

module.exports = { install, mochaHooks }

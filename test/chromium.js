'use strict'

// Debian's chromium driven through the DevTools protocol (puppeteer-core, no
// browser download), for the browser tests and bench/browser.js. Test and
// bench helper.
//
// Where the browser is: KFLAME_CHROMIUM, else the first of CANDIDATES that
// exists. Headless; --no-sandbox only as root, where Chromium refuses to
// start with its sandbox.

const fs = require('node:fs')

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome']

// The browser's path, or null.
function findChromium () {
  const env = process.env.KFLAME_CHROMIUM
  if (env) return fs.existsSync(env) ? env : null
  return CANDIDATES.find((p) => fs.existsSync(p)) || null
}

// Why the browser tests cannot run here, or null when they can.
function missingReason () {
  if (process.env.KFLAME_CHROMIUM && !findChromium()) {
    return `KFLAME_CHROMIUM=${process.env.KFLAME_CHROMIUM} does not exist`
  }
  if (!findChromium()) {
    return `no Chromium at ${CANDIDATES.join(', ')}: install Debian's (apt-get install -y chromium) ` +
      'or point KFLAME_CHROMIUM at one'
  }
  try {
    require.resolve('puppeteer-core')
  } catch {
    return 'puppeteer-core is not installed: run npm ci (it is a devDependency)'
  }
  return null
}

async function launch (extraArgs = []) {
  const puppeteer = require('puppeteer-core')
  const args = ['--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check', ...extraArgs]
  if (typeof process.getuid === 'function' && process.getuid() === 0) args.push('--no-sandbox')
  return puppeteer.launch({ executablePath: findChromium(), headless: true, args })
}

// Resolves after the browser has painted twice: what was laid out on load
// is on screen.
function painted (page) {
  return page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(() => resolve()))))
}

module.exports = { findChromium, missingReason, launch, painted }

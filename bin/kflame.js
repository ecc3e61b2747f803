#!/usr/bin/env node
'use strict'

// The kflame command: see `kflame --help` and lib/cli/.
require('../lib/cli/main').main(process.argv.slice(2)).then((code) => {
  if (code !== undefined) process.exitCode = code
})

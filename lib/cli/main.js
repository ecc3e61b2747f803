'use strict'

// `kflame ...`: picks the command, and turns errors into exit codes: 2 with
// a pointer to the help for usage errors, 1 for failures, one line each.

const { stderrLine } = require('./io')
const help = require('./help')

const COMMANDS = {
  svg: () => require('./svg').svg,
  merge: () => require('./merge').merge,
  resolve: () => require('./resolve').resolve
}

// -> a Promise of the exit code, or of undefined when the run mode has set
// process.exitCode or re-raised the child's signal itself.
async function main (argv) {
  // `kflame merge dir | head`: a closed pipe ends the work, quietly.
  process.stdout.on('error', (err) => {
    if (err.code !== 'EPIPE') throw err
    process.exit(0)
  })
  let name = null
  let command = () => require('./run').run
  if (Object.hasOwn(COMMANDS, argv[0])) {
    name = argv[0]
    command = COMMANDS[name]
    argv = argv.slice(1)
  } else if (argv[0] === 'help') {
    // `kflame help merge` is `kflame merge --help`.
    const topic = argv[1]
    process.stdout.write(Object.hasOwn(COMMANDS, topic) ? help[topic.toUpperCase()] : help.RUN)
    return 0
  }
  try {
    return await command()(argv)
  } catch (err) {
    if (err.code === 'KFLAME_ERR_USAGE') {
      stderrLine(`${err.message} (see kflame ${name ? `${name} ` : ''}--help)`)
      return 2
    }
    if (typeof err.code === 'string' && err.code.startsWith('KFLAME_ERR_')) {
      stderrLine(err.message)
      return 1
    }
    throw err
  }
}

module.exports = { main, COMMANDS }

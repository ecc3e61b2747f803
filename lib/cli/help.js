'use strict'

// Usage texts of `kflame --help` and `kflame <command> --help`.

const RUN = `Usage: kflame [options] [--] COMMAND [ARGS...]
       kflame svg|merge|resolve ... (kflame <command> --help)

Runs COMMAND (node app.js, npm test, any command that starts node processes)
with every node process in it profiled (NODE_OPTIONS gets
--require=kflame/register), then merges their profiles into one file.

Options:
  -o, --output FILE  where to write; the extension picks the format:
                     .svg (flame graph), .html (flame graph on a canvas,
                     for big profiles), .folded or .txt (folded stacks),
                     .cpuprofile (Chrome DevTools), .json (Chrome trace
                     events), .pb.gz (pprof); default kflame-<pid>.svg
      --hz N         samples per second of each thread (default 99)
      --mode M       auto|perf|timer: the sampler (default auto: perf events,
                     else per-thread CPU-time timers; also KFLAME_MODE)
      --what W       cpu|offcpu|both: CPU time, time off CPU (waiting), or
                     both (default cpu; also KFLAME_WHAT)
      --max-switch-rate N  off-CPU stacks per second at most, per thread (per
                     CPU with CPU-wide events); default 0: every context
                     switch, which a busy server pays dearly for (also
                     KFLAME_MAX_SWITCH_RATE)
      --source-maps  name JS frames after their source maps (TypeScript,
                     bundles; also KFLAME_SOURCE_MAPS=1, or node's
                     --enable-source-maps)
      --title TEXT   the flame graph's title (default: the command)
  -h, --help         this text
  -v, --version      kflame's version

The exit code is COMMAND's; if COMMAND dies of a signal, kflame dies of the
same signal. SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed on to COMMAND.
Options end at COMMAND; use -- to run a command named svg, merge or resolve.

Commands:
  kflame svg [FILE] [-o out.svg]       folded stacks -> SVG flame graph
  kflame merge FILE|DIR... [-o out]    merge folded profiles, write any format
  kflame resolve --map FILE|--pid N    name JIT addresses in text (perf maps)

Examples:
  kflame -o app.svg node app.js
  kflame -o tests.cpuprofile npm test
  kflame -o big.html node app.js
  kflame svg app.folded -o app.svg
  NODE_OPTIONS=--require=kflame/register KFLAME_OUT=prof/ node --test
  kflame merge prof/ -o tests.svg
`

const SVG = `Usage: kflame svg [FILE|-] [-o out.svg] [options]

Renders folded stacks ("frame;frame;...;leaf COUNT" lines, from kflame,
perf + stackcollapse, 0x, ...) as an interactive SVG flame graph. Reads FILE,
or standard input when FILE is - or missing; writes -o FILE, or standard
output.

Options:
  -o, --output FILE  the SVG file (default: standard output)
      --title TEXT   heading (default "Flame Graph")
      --subtitle TEXT
                     the line under the heading
      --width PX     image width in pixels (default 1200)
      --minwidth PX  hide frames narrower than PX pixels, or "N%" (default 0.1)
      --inverted     icicle graph: roots at the top
      --reverse      stacks read from the leaf: who calls the hot functions
  -h, --help         this text

Lines that are not folded stacks are skipped, with one warning on stderr.
For the HTML flame graph (a canvas, for profiles too big for an SVG):
kflame merge FILE -o out.html.
`

const MERGE = `Usage: kflame merge FILE|DIR... [-o OUT] [--title TEXT] [--hz N]

Adds up folded profiles (several processes, test files, runs): equal stacks
add their counts. A DIR stands for its *.folded files (as written by
KFLAME_OUT=DIR/ or kflame's run mode).

Options:
  -o, --output FILE  where to write; the extension picks the format: .svg,
                     .html, .folded or .txt, .cpuprofile, .json (Chrome trace
                     events), .pb.gz (pprof); default: folded text on
                     standard output
      --title TEXT   the flame graph's title (SVG, HTML)
      --hz N         the rate the profiles were taken at (default 99): sets
                     the sample times of .cpuprofile, .json and .pb.gz
  -h, --help         this text

Lines that are not folded stacks are skipped, with one warning on stderr.
`

const RESOLVE = `Usage: kflame resolve (--map FILE | --pid N) [--no-bare] [FILE...]

Names JIT addresses in any text (perf script, DTrace, gdb, logs): each
address that falls inside an entry of a perf map ("START SIZE NAME" lines,
hex, as written by kflame's writePerfMap() or perfMap option, or by node
--perf-basic-prof) is replaced by the entry's name, or NAME+0xOFFSET when it
points inside the code rather than at its start. Everything else is copied
unchanged. Reads the FILEs, or standard input; writes standard output, line
by line, so inputs of any size work.

Addresses: 0x-prefixed hex (0x7f3a1c2d4e00) anywhere, and bare hex words of
8 to 16 digits (7f3a1c2d4e00, as perf script prints them) standing alone.
A bare word is only replaced when it falls inside a map entry, which the
numbers in ordinary text practically never do; --no-bare turns them off.
Where map entries overlap (a --perf-basic-prof map, where V8 reused
memory), the later line wins.

Options:
      --map FILE     the perf map
      --pid N        the map of process N: /tmp/perf-N.map
      --no-bare      only replace 0x-prefixed addresses
  -h, --help         this text
`

module.exports = { RUN, SVG, MERGE, RESOLVE }

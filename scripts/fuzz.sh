#!/usr/bin/env bash
# Builds the libFuzzer targets of test/fuzz/ and runs each for a while:
#   scripts/fuzz.sh [--merge] [seconds-per-target] [target...]
# (default: 60 s, every target). Each run starts from a copy of the target's
# corpus in test/fuzz/corpus/, so the repository is left as it was; with
# --merge, inputs that reached new code are merged back into it (review them
# before committing). Any crash, leak, sanitizer report, broken invariant or
# input slower than 10 s fails the script; the input that did it is kept in
# test/fuzz/build/artifacts/<target>/ and its report is printed.
# Targets run side by side, as many at once as there are CPUs
# (KFLAME_FUZZ_JOBS to choose).
set -euo pipefail
cd "$(dirname "$0")/.."

merge=0
if [ "${1:-}" = --merge ]; then merge=1; shift; fi
seconds=${1:-60}
case "$seconds" in
  '' | *[!0-9]*) echo "fuzz: seconds must be a whole number, not '$seconds'" >&2; exit 2 ;;
esac
[ $# -gt 0 ] && shift
all=(fuzz_folded fuzz_svg fuzz_ring fuzz_elf fuzz_unwind fuzz_dwarf fuzz_bpfring fuzz_v8inline)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [ -f "test/fuzz/$t.c" ] || { echo "fuzz: no target '$t' (there are: ${all[*]})" >&2; exit 2; }
done

# libFuzzer comes with clang's runtime libraries, a separate package on
# Debian/Ubuntu: link an empty target to be sure both are here.
cc=${FUZZ_CC:-clang}
probe=$(mktemp -d /tmp/kflame-fuzz-probe.XXXXXX)
trap 'rm -rf "$probe"' EXIT
if ! command -v "$cc" >/dev/null ||
   ! printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' |
     "$cc" -x c -fsanitize=fuzzer,address,undefined -o "$probe/probe" - 2>"$probe/err"; then
  echo "fuzz: clang with libFuzzer is needed (FUZZ_CC=$cc). On Debian/Ubuntu:" >&2
  echo "  sudo apt-get install -y clang libclang-rt-14-dev" >&2
  [ -s "$probe/err" ] && sed 's/^/  /' "$probe/err" | tail -3 >&2
  exit 1
fi

make -s -C test/fuzz FUZZ_CC="$cc" $(printf 'build/%s ' "${targets[@]}")

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
jobs=${KFLAME_FUZZ_JOBS:-$(nproc)}
work=$(mktemp -d /tmp/kflame-fuzz.XXXXXX)
trap 'rm -rf "$probe" "$work"' EXIT

run_one() {
  local t=$1 corpus="$work/$1"
  local artifacts="test/fuzz/build/artifacts/$t"
  mkdir -p "$artifacts"
  cp -r "test/fuzz/corpus/$t" "$corpus"
  # -timeout: one input slower than this is a finding (the parsers are
  # linear; seconds mean a loop that should not be there).
  if "test/fuzz/build/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" >"$work/$t.log" 2>&1; then
    local execs
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
    echo "ok $t: ${execs:-?} inputs in ${seconds} s, corpus $(ls "test/fuzz/corpus/$t" | wc -l) -> $(ls "$corpus" | wc -l)"
    if [ "$merge" = 1 ]; then
      "test/fuzz/build/$t" -merge=1 "test/fuzz/corpus/$t" "$corpus" >>"$work/$t.log" 2>&1
      echo "   merged: test/fuzz/corpus/$t has $(ls "test/fuzz/corpus/$t" | wc -l) inputs"
    fi
    return 0
  fi
  echo "not ok $t: a finding; the input is in $artifacts/, the report:"
  grep -v '^#[0-9]' "$work/$t.log" | tail -60 | sed 's/^/  /'
  echo "  reproduce: make -C test/fuzz build/$t && test/fuzz/build/$t <input>"
  return 1
}

# Targets side by side, at most $jobs at once; each writes its lines and
# its status to files, printed in order once all are done.
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  (rc=0; run_one "$t" >"$work/$t.out" || rc=$?; echo "$rc" >"$work/$t.rc") &
done
wait
status=0
for t in "${targets[@]}"; do
  cat "$work/$t.out"
  [ "$(cat "$work/$t.rc" 2>/dev/null)" = 0 ] || status=1
done
exit $status

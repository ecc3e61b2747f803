#!/usr/bin/env bash
# The whole test suite: C unit tests (plain, under ASan/UBSan, and the code
# map under TSan), a short run of each fuzz target (KFLAME_FUZZ_SECONDS, 15),
# the TypeScript types (index.d.ts against test/types), then the tap tests.
# Run as root, the tap tests run a second time as an unprivileged user,
# because what kflame may sample (kernel frames, locked memory) differs.
# Then the tap tests once more on each other Node major (KFLAME_OTHER_NODE,
# default "22 24"; "none" skips them).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== C unit tests"
make -s -C test/c run
echo "== C unit tests under AddressSanitizer and UBSan"
make -s -C test/c run SANITIZE=1
echo "== code map, line tables, label log, renderer, timer sampler, collector windows and the parked thread under ThreadSanitizer"
make -s -C test/c run TSAN=1 TESTS="test_codemap test_unwind test_labels test_svg test_timer test_collector test_parked"
echo "== fuzzing (${KFLAME_FUZZ_SECONDS:-15} s per target)"
scripts/fuzz.sh "${KFLAME_FUZZ_SECONDS:-15}"
make -s -C test/c shim
echo "== types: tsc --strict on test/types, and index.d.ts against lib/index.js's exports"
node test/types/check.js

echo "== tap tests as $(id -un)"
npx tap

if [ "$(id -u)" = 0 ] && [ -z "${KFLAME_SKIP_UNPRIVILEGED:-}" ]; then
  user=${KFLAME_TEST_USER:-nobody}
  # The unprivileged user needs a tree it can write (.tap/) and read.
  copy=$(mktemp -d /tmp/kflame-test.XXXXXX)
  trap 'rm -rf "$copy"' EXIT
  cp -a . "$copy/kflame"
  chown -R "$user" "$copy"
  chmod 755 "$copy"
  echo "== tap tests as $user (perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid))"
  (cd "$copy/kflame" && runuser -u "$user" -- env HOME="$copy" npx tap)
fi

others=${KFLAME_OTHER_NODE:-22 24}
if [ "$others" != none ]; then
  for major in $others; do scripts/test-node-major.sh "$major"; done
fi

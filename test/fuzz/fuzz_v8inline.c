/* libFuzzer target: V8's source position table decoder (v8inline.c) and
 * the inlining chains of the table it makes (jitlines.c).
 *
 * Input: 1 byte k, then k inlinings of 6 bytes (caller position as
 * 4 bytes little-endian, caller id as a signed byte, other-script flag),
 * then the position table's bytes.
 * Invariants: decode either fails or pushes at most one entry per two
 * bytes; every chain is at most cap long, and each position in it is an
 * entry's or an inlining's or -1. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jit/jitlines.h"
#include "jit/v8inline.h"

#define FUZZ_TARGET "fuzz_v8inline"
#include "fuzz.h"

#define CAP 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t k = data[0] % 32;
  if (size < 1 + 6 * k) return 0;
  kf_inlining_t in[32];
  for (size_t i = 0; i < k; i++) {
    const uint8_t *p = data + 1 + 6 * i;
    in[i].caller_position = (int64_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                                      (uint32_t)p[3] << 24);
    in[i].caller = (int8_t)p[4];
    in[i].other_script = p[5] & 1;
  }
  const uint8_t *table = data + 1 + 6 * k;
  size_t len = size - 1 - 6 * k;
  kf_lines_t *l = kf_lines_new();
  if (!l) abort();
  int n = kf_v8inline_decode(table, len, l);
  if (n >= 0 && (size_t)n * 2 > len) FAIL("%d entries from %zu bytes", n, len);
  if (n >= 0 && kf_lines_set_inlinings(l, in, k) == 0 && kf_lines_seal(l) == 0) {
    for (uint32_t at = 0; at < 64; at += 3) {
      int64_t chain[CAP];
      int got = kf_lines_inlined(l, at, chain, NULL, CAP);
      if (got < -1 || got > CAP) FAIL("chain of %d", got);
      for (int c = 0; c < got; c++)
        if (chain[c] < -1) FAIL("position %lld", (long long)chain[c]);
    }
  }
  kf_lines_release(l);
  return 0;
}

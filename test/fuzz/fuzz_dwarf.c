/* libFuzzer target: DWARF unwinding over a sample's stack copy
 * (dwarfunwind.c through libunwind's remote interface), as the collector
 * runs it, with the call-frame information of the C library really loaded
 * in this process.
 *
 * Input: 2 bytes choosing the interrupted ip (one of a few glibc functions,
 * plus an offset), 8 bytes of bp, 1 byte n (at most 32), n 8-byte return
 * addresses of the walked chain, then the stack copy (from sp =
 * 0x7ffd0000). Invariants: nothing read outside the copy or the loaded
 * objects (ASan; the accessors refuse the rest), at most the frames the
 * unwinder holds (the frames themselves may be anything a corrupt copy
 * and a DWARF expression compute), and a restart's frame (unless the unwind reached the
 * first frame: no tail) lies inside the copy with its rbp above its sp,
 * and the walk from it stays in the copy. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/dwarfunwind.h"
#include "unwind/userstack.h"

#define FUZZ_TARGET "fuzz_dwarf"
#include "fuzz.h"

#define SP 0x7ffd0000ULL

static kf_dwarf_t *dwarf;

static uint64_t le64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dwarf && !(dwarf = kf_dwarf_new())) abort();
  if (size < 11) return 0;
  void *(*const funcs[])(void *, const void *, size_t) = {memmove, memcpy};
  uint64_t ip = (uint64_t)(uintptr_t)funcs[data[0] & 1] + data[1];
  uint64_t bp = le64(data + 2);
  size_t n = data[10] % 33;
  if (size < 11 + n * 8) return 0;
  uint64_t user[34];
  user[0] = ip;
  for (size_t i = 0; i < n; i++) user[i + 1] = le64(data + 11 + i * 8);
  size_t len = size - 11 - n * 8;
  unsigned char *copy = malloc(len ? len : 1);
  if (!copy) abort();
  memcpy(copy, data + 11 + n * 8, len);
  kf_userstack_t stack = {.ip = ip, .sp = SP, .bp = bp, .bytes = copy, .len = len};
  kf_dwarf_fix_t fix;
  if (kf_dwarf_fix(dwarf, &stack, user, n + 1, &fix)) {
    if (fix.n > KF_DWARF_MAX_FRAMES) FAIL("%zu frames", fix.n);
    if (fix.restart && fix.tail.ip == 0) {
      /* the unwind reached the thread's first frame: no tail */
      if (fix.tail.bytes || fix.tail.len) FAIL("a whole-chain unwind with a tail");
    } else if (fix.restart) {
      const kf_userstack_t *t = &fix.tail;
      if (t->sp < SP || t->sp - SP >= len || t->bytes != copy + (t->sp - SP) || t->len != len - (t->sp - SP) || t->bp < t->sp)
        FAIL("restart frame outside the copy");
      uint64_t rets[64];
      size_t walked = kf_userstack_walk(t, rets, 64);
      if (walked > 64) FAIL("walked %zu", walked);
    }
  }
  free(copy);
  return 0;
}

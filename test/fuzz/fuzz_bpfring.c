/* libFuzzer target: the BPF ring buffer reader (bpfring.c) on a fake ring,
 * and the tracefs format parser of switchin.c on the same bytes as text.
 *
 * Input: 17 bytes of ring state, then the bytes of the data area.
 *   byte 0: data area of 64 << (b % 8) bytes (64 B .. 8 KiB)
 *   bytes 1-8: consumer position, little-endian
 *   bytes 9-16: producer position's distance from it (modulo four data
 *               areas, so it may overrun the ring)
 * The data area is filled with the rest of the input, repeated, into both
 * of its copies (the kernel maps it twice in a row). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sample/bpfring.h"
#include "sample/switchin.h"

#define FUZZ_TARGET "fuzz_bpfring"
#include "fuzz.h"

typedef struct seen {
  const unsigned char *lo, *hi; /* the mapping */
  uint64_t size;
  size_t n;
} seen_t;

static uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void on_record(const void *rec, uint32_t len, void *ctx) {
  seen_t *s = ctx;
  const unsigned char *p = rec;
  if (len > s->size) FAIL("record of %u bytes in a ring of %llu", len, (unsigned long long)s->size);
  if (p < s->lo || p + len > s->hi) FAIL("record outside the mapping");
  volatile unsigned char x = 0;
  for (uint32_t i = 0; i < len; i++) x ^= p[i];
  (void)x;
  s->n++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kf_switchin_next_pid_offset((const char *)data, size);
  if (size < 17) return 0;
  uint64_t ring_size = 64ull << (data[0] % 8);
  uint64_t consumer = le64(data + 1);
  uint64_t producer = consumer + le64(data + 9) % (4 * ring_size);
  const uint8_t *body = data + 17;
  size_t nbody = size - 17;
  unsigned char *mem = malloc(2 * ring_size);
  if (!mem) return 0;
  for (uint64_t i = 0; i < ring_size; i++)
    mem[i] = mem[i + ring_size] = nbody ? body[i % nbody] : 0;
  uint64_t cons = consumer, prod = producer;
  kf_bpfring_t ring = {.consumer = &cons, .producer = &prod, .data = mem, .size = ring_size};
  seen_t s = {mem, mem + 2 * ring_size, ring_size, 0};
  size_t n = kf_bpfring_drain(&ring, on_record, &s);
  if (n != s.n) FAIL("returned %zu, delivered %zu", n, s.n);
  if (cons - consumer > producer - consumer) FAIL("consumer moved outside [consumer, producer]");
  if (prod - consumer > ring_size && (cons != producer || ring.corrupt != 1))
    FAIL("a producer a ring ahead was not skipped and counted");
  free(mem);
  return 0;
}

/* libFuzzer target: the ring-record reader (ring.c) on a fake ring, the
 * sample-body parser, and what the collector does with the samples next
 * (stacks.c aggregates them, folded.c writes them out, flametree.c must
 * read that back without a bad line).
 *
 * Input: 18 bytes of ring state, then the bytes of the data area.
 *   byte 0: data area of 64 << (b % 8) bytes (64 B .. 8 KiB)
 *   bytes 1-8: data_tail, little-endian
 *   bytes 9-16: data_head, or with bit 0 of byte 17 clear, its distance
 *               from the tail (taken modulo four data areas, so it may
 *               overrun the ring)
 *   byte 17: bit 0, head as is; bit 1, deliver the records a second time
 *            after moving head again by the same distance; bit 2, samples
 *            carry 3 user registers and a user stack copy
 * The data area is filled with the rest of the input, repeated. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/flametree.h"
#include "render/folded.h"
#include "sample/ring.h"
#include "collect/stacks.h"

#define PAGE 4096

#define FUZZ_TARGET "fuzz_ring"
#include "fuzz.h"

typedef struct seen {
  kf_ring_t *ring;
  kf_ring_layout_t layout; /* records with user registers and stack or not */
  kf_stacks_t *stacks;
  uint64_t bytes, samples;
} seen_t;

static uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void on_record(const struct perf_event_header *h, void *ctx) {
  seen_t *s = ctx;
  if (h->size < sizeof(*h) || (h->size & 7) || h->size > s->ring->data_size)
    FAIL("record of %u bytes delivered", h->size);
  /* Every byte of the record must be readable (ASan checks the reads). */
  const volatile unsigned char *p = (const unsigned char *)h;
  unsigned char x = 0;
  for (unsigned i = 0; i < h->size; i++) x ^= p[i];
  (void)x;
  s->bytes += h->size;
  /* The collector parses only samples; parse every record to give the
   * parser every shape. */
  kf_ring_sample_t rs;
  if (kf_ring_parse_sample(h, &s->layout, &rs) != 0) return;
  const unsigned char *end = (const unsigned char *)h + h->size;
  if ((const unsigned char *)(rs.ips + rs.nr) > end) FAIL("ips past the record");
  if (rs.regs && (const unsigned char *)(rs.regs + rs.nregs) > end) FAIL("regs past the record");
  if (rs.stack && rs.stack + rs.stack_len > end) FAIL("stack past the record");
  if (rs.regs && rs.nregs != s->layout.user_regs) FAIL("%u regs", rs.nregs);
  if (((uintptr_t)rs.ips & 7) != 0) FAIL("ips not aligned");
  if (h->type != PERF_RECORD_SAMPLE) return;
  if (kf_stacks_add(s->stacks, rs.tid & 3, rs.time, rs.ips, rs.nr) == 0) s->samples++;
}

static const char *frame_name(void *ctx, uint64_t ip, int kernel) {
  static char buf[40];
  (void)ctx;
  snprintf(buf, sizeof buf, "f%llx%s", (unsigned long long)(ip & 0xfff), kernel ? "_[k]" : "");
  return buf;
}

static const char *thread_name(void *ctx, uint32_t tid) {
  static const char *const names[] = {"main", "worker;1", "pool\n2", "\x01\x7f"};
  (void)ctx;
  return names[tid & 3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 18) return 0;
  uint64_t data_size = 64ULL << (data[0] % 8);
  uint64_t tail = le64(data + 1), head = le64(data + 9);
  uint64_t step = head % (4 * data_size);
  if (!(data[17] & 1)) head = tail + step;
  const uint8_t *fill = data + 18;
  size_t fill_len = size - 18;

  /* One page of metadata, the data area right after it, nothing more: ASan
   * sees a read past the end of the ring. */
  unsigned char *mem;
  if (posix_memalign((void **)&mem, PAGE, PAGE + data_size)) return 0;
  memset(mem, 0, PAGE);
  for (uint64_t i = 0; i < data_size; i++)
    mem[PAGE + i] = fill_len ? fill[i % fill_len] : 0;
  struct perf_event_mmap_page *m = (void *)mem;
  m->data_offset = PAGE;
  m->data_size = data_size;
  m->data_tail = tail;
  m->data_head = head;

  kf_ring_t ring;
  if (kf_ring_init(&ring, mem, PAGE + data_size, PAGE) != 0) {
    free(mem);
    return 0;
  }
  seen_t s = {.ring = &ring, .stacks = kf_stacks_new(),
              .layout = {.user_regs = data[17] & 4 ? 3 : 0,
                         .periods = data[17] & 8 ? 1 : 0}};
  if (!s.stacks) abort();
  for (int round = 0; round < (data[17] & 2 ? 2 : 1); round++) {
    uint64_t before = m->data_tail, corrupt = ring.corrupt, bytes = s.bytes;
    if (round == 1) m->data_head += step;
    head = m->data_head;
    uint64_t pending = kf_ring_pending(&ring);
    if (pending != head - before) FAIL("pending %llu", (unsigned long long)pending);
    size_t n = kf_ring_drain(&ring, on_record, &s);
    uint64_t after = m->data_tail;
    if (n > 0 && s.bytes == bytes) FAIL("records without bytes");
    if (ring.corrupt == corrupt) {
      /* In sync: the tail moved by exactly the bytes delivered, not past
       * head, and what is left is less than one whole record. */
      if (after - before != s.bytes - bytes) FAIL("tail moved %llu for %llu bytes",
                                                 (unsigned long long)(after - before),
                                                 (unsigned long long)(s.bytes - bytes));
      if (head - after > head - before) FAIL("tail past head");
      /* A header that fits is a record delivered or a loss of sync. */
      if (head - after >= sizeof(struct perf_event_header))
        FAIL("%llu bytes left unread", (unsigned long long)(head - after));
    } else if (after != head) {
      FAIL("out of sync, yet the tail is not at head");
    }
  }

  /* The samples, folded as at stop(), must read back as a profile of as
   * many samples with no bad line. */
  kf_fold_names_t names = {.frame = frame_name, .thread = thread_name, .max_frames = 127};
  char *text;
  size_t len;
  if (kf_fold(s.stacks, &names, &text, &len, NULL) == 0) {
    if (strlen(text) != len) FAIL("NUL in folded text");
    kf_flametree_t t;
    if (kf_flametree_parse(&t, text, len, 0) == 0) {
      if (t.bad_lines != 0) FAIL("folded output has %llu bad lines:\n%s",
                                 (unsigned long long)t.bad_lines, text);
      if (t.nodes[0].total != s.samples) FAIL("folded %llu samples of %llu",
                                              (unsigned long long)t.nodes[0].total,
                                              (unsigned long long)s.samples);
      kf_flametree_free(&t);
    }
    free(text);
  }
  kf_stacks_free(s.stacks);
  kf_ring_destroy(&ring);
  free(mem);
  return 0;
}

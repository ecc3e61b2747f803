/* The ring reader on hand-built ring memory: the kernel's side is played by
 * put_record(), which writes at data_head exactly as perf does, wrapping at
 * the end of the data area. */
#include <stdint.h>
#include <string.h>

#include "../../src/ring.h"
#include "kftest.h"

#define PAGE 4096
#define DATA (2 * PAGE)

typedef struct fake {
  _Alignas(4096) unsigned char mem[PAGE + DATA];
  kf_ring_t ring;
} fake_t;

static void fake_init(fake_t *f, uint64_t start) {
  memset(f->mem, 0, sizeof f->mem);
  struct perf_event_mmap_page *m = (void *)f->mem;
  m->data_offset = PAGE;
  m->data_size = DATA;
  m->data_head = m->data_tail = start;
  CHECK(kf_ring_init(&f->ring, f->mem, sizeof f->mem, PAGE) == 0);
}

/* A record of `size` bytes whose payload is a byte pattern from `seed`. */
static void put_record(fake_t *f, uint32_t type, uint16_t size, uint8_t seed) {
  struct perf_event_mmap_page *m = (void *)f->mem;
  unsigned char rec[DATA];
  struct perf_event_header h = {.type = type, .misc = 0, .size = size};
  memcpy(rec, &h, sizeof h);
  for (unsigned i = sizeof h; i < size; i++) rec[i] = (uint8_t)(seed + i);
  for (unsigned i = 0; i < size; i++)
    f->mem[PAGE + ((m->data_head + i) & (DATA - 1))] = rec[i];
  m->data_head += size;
}

typedef struct seen {
  int n;
  uint32_t types[64];
  int payload_ok[64];
} seen_t;

static void collect(const struct perf_event_header *h, void *ctx) {
  seen_t *s = ctx;
  const unsigned char *p = (const unsigned char *)h;
  /* The pattern put_record wrote, seeded by the type. */
  int ok = 1;
  for (unsigned i = sizeof *h; i < h->size; i++)
    ok &= p[i] == (uint8_t)(h->type + i);
  s->types[s->n] = h->type;
  s->payload_ok[s->n] = ok;
  s->n++;
}

static void reads_records_in_order(void) {
  static fake_t f;
  fake_init(&f, 0);
  put_record(&f, 9, 16, 9);
  put_record(&f, 10, 64, 10);
  put_record(&f, 11, 8, 11);
  seen_t s = {0};
  CHECK_EQ_U64(kf_ring_drain(&f.ring, collect, &s), 3);
  CHECK(s.types[0] == 9 && s.types[1] == 10 && s.types[2] == 11);
  CHECK(s.payload_ok[0] && s.payload_ok[1] && s.payload_ok[2]);
  CHECK_EQ_U64(f.ring.meta->data_tail, 88);
  CHECK_EQ_U64(kf_ring_pending(&f.ring), 0);
  kf_ring_destroy(&f.ring);
}

static void record_wrapping_the_end_is_whole(void) {
  static fake_t f;
  /* 24 bytes before the end: a 64-byte record wraps in its payload. */
  fake_init(&f, DATA - 24);
  put_record(&f, 7, 64, 7);
  seen_t s = {0};
  CHECK_EQ_U64(kf_ring_drain(&f.ring, collect, &s), 1);
  CHECK(s.types[0] == 7 && s.payload_ok[0]);
  kf_ring_destroy(&f.ring);
}

static void header_wrapping_the_end_is_whole(void) {
  static fake_t f;
  /* 4 bytes before the end: the 8-byte header itself is split. perf records
   * are 8-byte aligned so the kernel never does this, but a reader that
   * assumed it would read garbage if it ever happened. */
  fake_init(&f, DATA - 4);
  put_record(&f, 5, 32, 5);
  seen_t s = {0};
  CHECK_EQ_U64(kf_ring_drain(&f.ring, collect, &s), 1);
  CHECK(s.types[0] == 5 && s.payload_ok[0]);
  kf_ring_destroy(&f.ring);
}

static void many_laps_around_the_ring(void) {
  static fake_t f;
  fake_init(&f, 0);
  int total = 0;
  for (int lap = 0; lap < 200; lap++) {
    put_record(&f, (uint32_t)(lap % 50 + 1), (uint16_t)(8 * (lap % 40 + 1)),
               (uint8_t)(lap % 50 + 1));
    put_record(&f, 3, 120, 3);
    seen_t s = {0};
    total += (int)kf_ring_drain(&f.ring, collect, &s);
    CHECK(s.n == 2 && s.payload_ok[0] && s.payload_ok[1]);
  }
  CHECK(total == 400);
  CHECK(f.ring.meta->data_tail > 4 * DATA);
  kf_ring_destroy(&f.ring);
}

static void less_than_a_header_waits(void) {
  static fake_t f;
  fake_init(&f, 0);
  put_record(&f, 9, 16, 9);
  struct perf_event_mmap_page *m = (void *)f.mem;
  m->data_head = 4;
  seen_t s = {0};
  CHECK_EQ_U64(kf_ring_drain(&f.ring, collect, &s), 0);
  CHECK_EQ_U64(m->data_tail, 0);
  m->data_head = 16;
  CHECK_EQ_U64(kf_ring_drain(&f.ring, collect, &s), 1);
  kf_ring_destroy(&f.ring);
}

/* The kernel moves data_head over whole records only, so a header claiming
 * more than was published means the reader lost sync. */
static void record_longer_than_published_is_corrupt(void) {
  static fake_t f;
  fake_init(&f, 0);
  put_record(&f, 9, 16, 9);
  put_record(&f, 9, 64, 9);
  struct perf_event_mmap_page *m = (void *)f.mem;
  m->data_head -= 8;
  seen_t s = {0};
  CHECK_EQ_U64(kf_ring_drain(&f.ring, collect, &s), 1);
  CHECK_EQ_U64(f.ring.corrupt, 1);
  CHECK_EQ_U64(m->data_tail, m->data_head);
  kf_ring_destroy(&f.ring);
}

static void impossible_header_skips_to_head(void) {
  static fake_t f;
  fake_init(&f, 0);
  put_record(&f, 9, 16, 9);
  struct perf_event_mmap_page *m = (void *)f.mem;
  struct perf_event_header bad = {.type = 9, .size = 12}; /* unaligned */
  memcpy(f.mem + PAGE + 16, &bad, sizeof bad);
  m->data_head += 16;
  seen_t s = {0};
  CHECK_EQ_U64(kf_ring_drain(&f.ring, collect, &s), 1);
  CHECK_EQ_U64(f.ring.corrupt, 1);
  CHECK_EQ_U64(m->data_tail, m->data_head);
  kf_ring_destroy(&f.ring);
}

static void old_kernel_without_data_offset(void) {
  static fake_t f;
  memset(f.mem, 0, sizeof f.mem);
  CHECK(kf_ring_init(&f.ring, f.mem, sizeof f.mem, PAGE) == 0);
  CHECK(f.ring.data == f.mem + PAGE);
  CHECK_EQ_U64(f.ring.data_size, DATA);
  kf_ring_destroy(&f.ring);
}

static const kftest_case_t cases[] = {
    {"ring: reads records in order", reads_records_in_order},
    {"ring: record wrapping the end is whole", record_wrapping_the_end_is_whole},
    {"ring: header wrapping the end is whole", header_wrapping_the_end_is_whole},
    {"ring: many laps around the ring", many_laps_around_the_ring},
    {"ring: less than a header waits", less_than_a_header_waits},
    {"ring: record longer than published is corrupt", record_longer_than_published_is_corrupt},
    {"ring: impossible header skips to head", impossible_header_skips_to_head},
    {"ring: old kernel without data_offset", old_kernel_without_data_offset},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }

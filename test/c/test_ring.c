/* The ring reader on hand-built ring memory: the kernel's side is played by
 * put_record(), which writes at data_head exactly as perf does, wrapping at
 * the end of the data area. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "sample/ring.h"
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

static void check_aligned(const struct perf_event_header *h, void *ctx) {
  CHECK(((uintptr_t)h & 7) == 0);
  collect(h, ctx);
}

/* Found by fuzz_ring: a tail off an 8-byte boundary (the kernel never sets
 * one) handed the callback an unaligned record, whose u64 fields the
 * collector reads in place. */
static void unaligned_record_is_copied_aligned(void) {
  static fake_t f;
  fake_init(&f, 4);
  put_record(&f, 9, 16, 9);
  put_record(&f, 10, 24, 10);
  seen_t s = {0};
  CHECK_EQ_U64(kf_ring_drain(&f.ring, check_aligned, &s), 2);
  CHECK(s.payload_ok[0] && s.payload_ok[1] && s.types[1] == 10);
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

/* Found by fuzz_ring: with head 2^63 bytes past the tail over a ring of
 * valid 8-byte records, the reader delivered the same stale records again
 * and again (2^60 of them). The kernel never runs more than a ring ahead,
 * so that is a loss of sync, as is a head behind the tail. */
static void head_more_than_a_ring_ahead_is_corrupt(void) {
  static fake_t f;
  fake_init(&f, 0);
  for (int i = 0; i < DATA / 8; i++) put_record(&f, 2, 8, 2);
  struct perf_event_mmap_page *m = (void *)f.mem;
  m->data_head = 0x7fffffffffffffffULL;
  seen_t s = {0};
  CHECK_EQ_U64(kf_ring_drain(&f.ring, collect, &s), 0);
  CHECK_EQ_U64(f.ring.corrupt, 1);
  CHECK_EQ_U64(m->data_tail, m->data_head);
  /* Eight bytes more than the ring: the same. */
  kf_ring_destroy(&f.ring);
  fake_init(&f, 64);
  m->data_head = 64 + DATA + 8;
  CHECK_EQ_U64(kf_ring_drain(&f.ring, collect, &s), 0);
  CHECK_EQ_U64(f.ring.corrupt, 1);
  kf_ring_destroy(&f.ring);
}

static void head_behind_tail_is_corrupt(void) {
  static fake_t f;
  fake_init(&f, 4096);
  put_record(&f, 9, 16, 9);
  struct perf_event_mmap_page *m = (void *)f.mem;
  m->data_head = 4000;
  seen_t s = {0};
  CHECK_EQ_U64(kf_ring_drain(&f.ring, collect, &s), 0);
  CHECK_EQ_U64(f.ring.corrupt, 1);
  CHECK_EQ_U64(m->data_tail, 4000);
  /* In sync again from there. */
  put_record(&f, 9, 16, 9);
  CHECK_EQ_U64(kf_ring_drain(&f.ring, collect, &s), 1);
  CHECK_EQ_U64(f.ring.corrupt, 1);
  kf_ring_destroy(&f.ring);
}

/* data_head and data_tail are free-running: after 2^64 bytes head wraps to
 * small numbers while the tail has not yet. */
static void positions_wrap_past_2_64(void) {
  static fake_t f;
  fake_init(&f, 0xffffffffffffffe8ULL);
  put_record(&f, 9, 16, 9);
  put_record(&f, 10, 32, 10);
  struct perf_event_mmap_page *m = (void *)f.mem;
  CHECK_EQ_U64(m->data_head, 24);
  seen_t s = {0};
  CHECK_EQ_U64(kf_ring_drain(&f.ring, collect, &s), 2);
  CHECK(s.types[0] == 9 && s.types[1] == 10 && s.payload_ok[1]);
  CHECK_EQ_U64(m->data_tail, 24);
  CHECK_EQ_U64(f.ring.corrupt, 0);
  kf_ring_destroy(&f.ring);
}

/* A sample as sampler.c asks for it: id, pid, tid, time, nr, ips[nr]. */
static size_t make_sample(uint64_t *rec, uint64_t nr, size_t nips) {
  struct perf_event_header h = {.type = PERF_RECORD_SAMPLE,
                                .size = (uint16_t)(8 * (5 + nips))};
  memcpy(rec, &h, sizeof h);
  rec[1] = 77;                          /* id */
  rec[2] = (uint64_t)12 << 32 | 11;     /* pid 11, tid 12 */
  rec[3] = 123456789;                   /* time */
  rec[4] = nr;
  for (size_t i = 0; i < nips; i++) rec[5 + i] = 0x1000 + i;
  return h.size;
}

static void parses_sample_bodies(void) {
  uint64_t rec[16];
  kf_ring_sample_t rs;
  make_sample(rec, 3, 3);
  CHECK(kf_ring_parse_sample((void *)rec, NULL, &rs) == 0);
  CHECK(rs.id == 77 && rs.pid == 11 && rs.tid == 12 && rs.time == 123456789);
  CHECK(rs.nr == 3 && rs.ips == rec + 5 && rs.ips[2] == 0x1002);
  /* The kernel's empty callchain. */
  make_sample(rec, 0, 0);
  CHECK(kf_ring_parse_sample((void *)rec, NULL, &rs) == 0);
  CHECK(rs.nr == 0);
  /* Room for more ips than announced: the extra bytes are ignored. */
  make_sample(rec, 2, 4);
  CHECK(kf_ring_parse_sample((void *)rec, NULL, &rs) == 0 && rs.nr == 2);
  /* nr larger than the record, even by one, or absurd. */
  make_sample(rec, 4, 3);
  CHECK(kf_ring_parse_sample((void *)rec, NULL, &rs) == -EBADMSG);
  make_sample(rec, UINT64_MAX, 3);
  CHECK(kf_ring_parse_sample((void *)rec, NULL, &rs) == -EBADMSG);
  /* Shorter than the fixed fields. */
  struct perf_event_header h = {.type = PERF_RECORD_SAMPLE, .size = 32};
  memcpy(rec, &h, sizeof h);
  CHECK(kf_ring_parse_sample((void *)rec, NULL, &rs) == -EBADMSG);
  h.size = 0;
  memcpy(rec, &h, sizeof h);
  CHECK(kf_ring_parse_sample((void *)rec, NULL, &rs) == -EBADMSG);
}

/* A sample with one ip, then user registers and a stack copy: abi, 3
 * registers, size 16, 16 bytes of stack, dyn_size. words: how many of the
 * 13 words the record keeps (a record cut short). */
static void make_user_sample(uint64_t *rec, size_t words, uint64_t abi,
                             uint64_t dyn_size) {
  make_sample(rec, 1, 1);
  uint64_t tail[] = {abi, 0xb0, 0x5a, 0x1a, 16, 0x1111, 0x2222, dyn_size};
  memcpy(rec + 6, tail, sizeof tail);
  struct perf_event_header h = {.type = PERF_RECORD_SAMPLE,
                                .size = (uint16_t)(8 * words)};
  memcpy(rec, &h, sizeof h);
}

static void parses_user_registers_and_stack(void) {
  uint64_t rec[16];
  kf_ring_sample_t rs;
  kf_ring_layout_t layout = {.user_regs = 3};
  make_user_sample(rec, 14, PERF_SAMPLE_REGS_ABI_64, 8);
  CHECK(kf_ring_parse_sample((void *)rec, &layout, &rs) == 0);
  CHECK(rs.nr == 1 && rs.nregs == 3 && rs.regs[0] == 0xb0 && rs.regs[2] == 0x1a);
  CHECK(rs.stack == (const unsigned char *)(rec + 11) && rs.stack_len == 8);
  /* dyn_size past size is cut to size. */
  make_user_sample(rec, 14, PERF_SAMPLE_REGS_ABI_64, 999);
  CHECK(kf_ring_parse_sample((void *)rec, &layout, &rs) == 0 && rs.stack_len == 16);
  /* A kernel thread: no registers, and then no stack (size 0). */
  uint64_t none[] = {PERF_SAMPLE_REGS_ABI_NONE, 0};
  make_sample(rec, 1, 1);
  memcpy(rec + 6, none, sizeof none);
  struct perf_event_header h = {.type = PERF_RECORD_SAMPLE, .size = 8 * 8};
  memcpy(rec, &h, sizeof h);
  CHECK(kf_ring_parse_sample((void *)rec, &layout, &rs) == 0);
  CHECK(rs.regs == NULL && rs.nregs == 0 && rs.stack == NULL && rs.stack_len == 0);
  /* Cut anywhere before dyn_size's end: refused. */
  for (size_t words = 6; words < 14; words++) {
    make_user_sample(rec, words, PERF_SAMPLE_REGS_ABI_64, 8);
    CHECK(kf_ring_parse_sample((void *)rec, &layout, &rs) == -EBADMSG);
  }
  /* Without a layout the same record is a callchain with bytes after it. */
  make_user_sample(rec, 14, PERF_SAMPLE_REGS_ABI_64, 8);
  CHECK(kf_ring_parse_sample((void *)rec, NULL, &rs) == 0 && rs.regs == NULL);
}

/* The timer sampler's records carry a count of periods after time. */
static void parses_periods(void) {
  uint64_t rec[8] = {0};
  struct perf_event_header h = {.type = PERF_RECORD_SAMPLE, .size = 8 * 8};
  memcpy(rec, &h, sizeof h);
  rec[1] = 7;                     /* id */
  rec[2] = 5ULL << 32 | 4;        /* pid 4, tid 5 */
  rec[3] = 1000;                  /* time */
  rec[4] = 3;                     /* periods */
  rec[5] = 2;                     /* nr */
  rec[6] = 0xaa;
  rec[7] = 0xbb;
  kf_ring_layout_t layout = {.periods = 1};
  kf_ring_sample_t rs;
  CHECK(kf_ring_parse_sample((void *)rec, &layout, &rs) == 0);
  CHECK(rs.periods == 3 && rs.nr == 2 && rs.ips[1] == 0xbb && rs.tid == 5);
  /* Zero periods, or a record cut before nr: refused. */
  rec[4] = 0;
  CHECK(kf_ring_parse_sample((void *)rec, &layout, &rs) == -EBADMSG);
  rec[4] = 1;
  h.size = 5 * 8;
  memcpy(rec, &h, sizeof h);
  CHECK(kf_ring_parse_sample((void *)rec, &layout, &rs) == -EBADMSG);
  /* Without periods in the layout every sample stands for one. */
  rec[4] = 1;
  h.size = 7 * 8;
  memcpy(rec, &h, sizeof h);
  CHECK(kf_ring_parse_sample((void *)rec, NULL, &rs) == 0 && rs.periods == 1 && rs.nr == 1);
}

static const kftest_case_t cases[] = {
    {"ring: reads records in order", reads_records_in_order},
    {"ring: a sample's count of periods", parses_periods},
    {"ring: record wrapping the end is whole", record_wrapping_the_end_is_whole},
    {"ring: header wrapping the end is whole", header_wrapping_the_end_is_whole},
    {"ring: unaligned record is copied aligned", unaligned_record_is_copied_aligned},
    {"ring: many laps around the ring", many_laps_around_the_ring},
    {"ring: less than a header waits", less_than_a_header_waits},
    {"ring: record longer than published is corrupt", record_longer_than_published_is_corrupt},
    {"ring: impossible header skips to head", impossible_header_skips_to_head},
    {"ring: old kernel without data_offset", old_kernel_without_data_offset},
    {"ring: head more than a ring ahead is corrupt", head_more_than_a_ring_ahead_is_corrupt},
    {"ring: head behind tail is corrupt", head_behind_tail_is_corrupt},
    {"ring: positions wrap past 2^64", positions_wrap_past_2_64},
    {"ring: parses sample bodies", parses_sample_bodies},
    {"ring: parses user registers and the stack copy", parses_user_registers_and_stack},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }

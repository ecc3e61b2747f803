/* The BPF ring reader on hand-built ring memory: put_record() plays the
 * kernel, writing each byte into both copies of the data area as its
 * double mapping shows them; and the sched_switch format parser on the text
 * tracefs gives. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sample/bpfring.h"
#include "sample/switchin.h"
#include "kftest.h"

#define SIZE 256u
#define BUSY (1u << 31)
#define DISCARD (1u << 30)

typedef struct fake {
  uint64_t consumer, producer;
  _Alignas(8) unsigned char data[2 * SIZE];
  kf_bpfring_t ring;
} fake_t;

static void fake_init(fake_t *f, uint64_t start) {
  memset(f, 0, sizeof *f);
  f->consumer = f->producer = start;
  f->ring = (kf_bpfring_t){.consumer = &f->consumer, .producer = &f->producer,
                           .data = f->data, .size = SIZE};
}

static void put_bytes(fake_t *f, uint64_t at, const void *src, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char b = ((const unsigned char *)src)[i];
    f->data[(at + i) & (SIZE - 1)] = b;
    f->data[((at + i) & (SIZE - 1)) + SIZE] = b;
  }
}

/* A record { tid, 0, time } with header flags; returns where it starts. */
static uint64_t put_record(fake_t *f, uint32_t tid, uint64_t time, uint32_t flags) {
  uint64_t at = f->producer;
  uint32_t hdr[2] = {16 | flags, 0};
  unsigned char body[16] = {0};
  memcpy(body, &tid, 4);
  memcpy(body + 8, &time, 8);
  put_bytes(f, at, hdr, 8);
  put_bytes(f, at + 8, body, 16);
  f->producer += 24;
  return at;
}

typedef struct seen {
  int n;
  uint32_t tid[32];
  uint64_t time[32];
} seen_t;

static void collect(const void *rec, uint32_t len, void *ctx) {
  seen_t *s = ctx;
  CHECK(len == 16);
  memcpy(&s->tid[s->n], rec, 4);
  memcpy(&s->time[s->n], (const unsigned char *)rec + 8, 8);
  s->n++;
}

static void reads_records_and_frees_them(void) {
  static fake_t f;
  fake_init(&f, 0);
  put_record(&f, 7, 100, 0);
  put_record(&f, 8, 200, DISCARD);
  put_record(&f, 9, 300, 0);
  seen_t s = {0};
  CHECK(kf_bpfring_drain(&f.ring, collect, &s) == 2);
  CHECK(s.n == 2 && s.tid[0] == 7 && s.time[0] == 100 && s.tid[1] == 9 && s.time[1] == 300);
  CHECK_EQ_U64(f.consumer, 72);
  CHECK(kf_bpfring_drain(&f.ring, collect, &s) == 0);
  CHECK_EQ_U64(f.ring.corrupt, 0);
}

static void a_record_being_written_waits(void) {
  static fake_t f;
  fake_init(&f, 0);
  put_record(&f, 1, 10, 0);
  uint64_t at = put_record(&f, 2, 20, BUSY);
  put_record(&f, 3, 30, 0);
  seen_t s = {0};
  CHECK(kf_bpfring_drain(&f.ring, collect, &s) == 1);
  CHECK_EQ_U64(f.consumer, at);
  uint32_t committed = 16;
  put_bytes(&f, at, &committed, 4);
  CHECK(kf_bpfring_drain(&f.ring, collect, &s) == 2);
  CHECK(s.n == 3 && s.tid[1] == 2 && s.tid[2] == 3);
}

static void a_record_across_the_end_is_whole(void) {
  static fake_t f;
  fake_init(&f, SIZE - 8); /* the header fits, the body wraps */
  put_record(&f, 42, 0x1122334455667788ull, 0);
  seen_t s = {0};
  CHECK(kf_bpfring_drain(&f.ring, collect, &s) == 1);
  CHECK(s.tid[0] == 42 && s.time[0] == 0x1122334455667788ull);
  /* many laps */
  for (int i = 0; i < 100; i++) {
    put_record(&f, (uint32_t)i, (uint64_t)i * 3, 0);
    CHECK(kf_bpfring_drain(&f.ring, collect, &s) == 1);
    CHECK(s.tid[1] == (uint32_t)i && s.time[1] == (uint64_t)i * 3);
    s.n = 1;
  }
}

static void out_of_sync_is_skipped_and_counted(void) {
  static fake_t f;
  fake_init(&f, 0);
  f.producer = SIZE + 8; /* more than a ring ahead */
  seen_t s = {0};
  CHECK(kf_bpfring_drain(&f.ring, collect, &s) == 0);
  CHECK_EQ_U64(f.consumer, SIZE + 8);
  CHECK_EQ_U64(f.ring.corrupt, 1);
  /* a length past what was published */
  fake_init(&f, 0);
  put_record(&f, 1, 1, 0);
  uint32_t huge = 4000;
  put_bytes(&f, 0, &huge, 4);
  CHECK(kf_bpfring_drain(&f.ring, collect, &s) == 0);
  CHECK_EQ_U64(f.consumer, 24);
  CHECK_EQ_U64(f.ring.corrupt, 1);
  /* a producer behind the consumer */
  fake_init(&f, 64);
  f.producer = 40;
  CHECK(kf_bpfring_drain(&f.ring, collect, &s) == 0);
  CHECK_EQ_U64(f.ring.corrupt, 1);
}

static void finds_next_pid_in_the_format(void) {
  static const char format[] =
      "name: sched_switch\nID: 372\nformat:\n"
      "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
      "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
      "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
      "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
      "\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
      "\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n"
      "\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\n"
      "print fmt: \"prev_comm=%s next_pid=%d\", REC->prev_comm, REC->next_pid\n";
  CHECK(kf_switchin_next_pid_offset(format, sizeof format - 1) == 56);
  static const char wide[] = "\tfield:pid_t next_pid;\toffset:56;\tsize:8;\tsigned:1;\n";
  CHECK(kf_switchin_next_pid_offset(wide, sizeof wide - 1) == -1);
  static const char odd[] = "\tfield:pid_t next_pid;\toffset:57;\tsize:4;\tsigned:1;\n";
  CHECK(kf_switchin_next_pid_offset(odd, sizeof odd - 1) == -1);
  static const char junk[] = "\tfield:pid_t next_pid;\toffset:x;\tsize:4;\n";
  CHECK(kf_switchin_next_pid_offset(junk, sizeof junk - 1) == -1);
  static const char early[] = "\tfield:pid_t next_pid;\toffset:4;\tsize:4;\tsigned:1;\n";
  CHECK(kf_switchin_next_pid_offset(early, sizeof early - 1) == -1);
  static const char cut[] = "\tfield:pid_t next_pid;\toffset:56";
  CHECK(kf_switchin_next_pid_offset(cut, sizeof cut - 1) == -1);
  static const char none[] = "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\n";
  CHECK(kf_switchin_next_pid_offset(none, sizeof none - 1) == -1);
  CHECK(kf_switchin_next_pid_offset("", 0) == -1);
}

/* The verifier takes the program, with and without a rate bound (where
 * this process may load it: CAP_BPF and tracefs). */
static void program_loads(void) {
  const uint32_t rates[] = {0, 1, 200, 100000};
  for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
    kf_switchin_t *t = NULL;
    int rc = kf_switchin_open(rates[i], &t);
    if (rc == -EPERM || rc == -EACCES || rc == -ENOENT) {
      fprintf(stderr, "  skipped: %s\n", strerror(-rc));
      return;
    }
    CHECK_EQ_U64((uint64_t)-rc, 0);
    CHECK(t != NULL && kf_switchin_tracepoint(t) > 0);
    kf_switchin_close(t);
  }
}

static const kftest_case_t cases[] = {
    {"bpfring: reads records and frees them", reads_records_and_frees_them},
    {"bpfring: a record being written waits", a_record_being_written_waits},
    {"bpfring: a record across the end is whole", a_record_across_the_end_is_whole},
    {"bpfring: out of sync is skipped and counted", out_of_sync_is_skipped_and_counted},
    {"switchin: finds next_pid in the tracepoint's format", finds_next_pid_in_the_format},
    {"switchin: the program loads, with and without a bound", program_loads},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }

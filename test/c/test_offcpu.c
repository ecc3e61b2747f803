/* Off-CPU pairing (offcpu.h): switch-outs and switch-ins arriving out of
 * order from different rings, weights in periods with the rest carried per
 * thread, switches a sample stands for, waits open at the end, lost
 * switch-ins, and folded text's marker frames. */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include <linux/perf_event.h>

#include "render/folded.h"
#include "sample/offcpu.h"
#include "collect/stacks.h"
#include "kftest.h"

#define MS 1000000ULL

typedef struct emitted {
  uint32_t tid[16];
  uint64_t time[16], periods[16], leaf[16], first[16];
  uint32_t nr[16];
  int n;
} emitted_t;

static int record(void *ctx, uint32_t tid, uint64_t time, const uint64_t *ips,
                  uint32_t nr, uint64_t periods) {
  emitted_t *e = ctx;
  CHECK(e->n < 16);
  e->tid[e->n] = tid;
  e->time[e->n] = time;
  e->periods[e->n] = periods;
  e->first[e->n] = ips[0];
  e->leaf[e->n] = nr > 1 ? ips[1] : 0;
  e->nr[e->n] = nr;
  e->n++;
  return 0;
}

static void offcpu_pairs_out_of_order_arrivals(void) {
  kf_offcpu_t *o = kf_offcpu_new(10 * MS); /* 100 Hz */
  emitted_t e = {0};
  uint64_t a[] = {0xa1, 0xa2}, b[] = {0xb1};
  /* Ring of CPU 1 drained first: the switch-ins come before their outs. */
  CHECK(kf_offcpu_in(o, 7, 130 * MS) == 0);
  CHECK(kf_offcpu_in(o, 8, 260 * MS) == 0);
  CHECK(kf_offcpu_out(o, 7, 100 * MS, 1, a, 2) == 0);
  CHECK(kf_offcpu_out(o, 8, 200 * MS, 1, b, 1) == 0);
  /* Not everything stamped before 150 ms may be in: only thread 7 pairs. */
  kf_offcpu_settle(o, 150 * MS, 0, record, &e);
  CHECK_EQ_U64(e.n, 1);
  CHECK_EQ_U64(e.tid[0], 7);
  CHECK_EQ_U64(e.time[0], 100 * MS); /* stamped when it left the CPU */
  CHECK_EQ_U64(e.periods[0], 3);     /* 30 ms */
  CHECK_EQ_U64(e.nr[0], 3);
  CHECK(e.first[0] == KF_CONTEXT_OFFCPU);
  CHECK_EQ_U64(e.leaf[0], 0xa1);
  kf_offcpu_settle(o, 300 * MS, 0, record, &e);
  CHECK_EQ_U64(e.n, 2);
  CHECK_EQ_U64(e.tid[1], 8);
  CHECK_EQ_U64(e.periods[1], 6);
  kf_offcpu_stats_t st;
  kf_offcpu_stats(o, &st);
  CHECK_EQ_U64(st.paired, 2);
  CHECK_EQ_U64(st.samples, 9);
  CHECK_EQ_U64(st.weighted_ns, 90 * MS);
  kf_offcpu_free(o);
}

static void offcpu_carries_the_rest_of_a_period(void) {
  kf_offcpu_t *o = kf_offcpu_new(10 * MS);
  emitted_t e = {0};
  uint64_t a[] = {0xa1};
  /* Four waits of 4 ms: 16 ms make one sample, given to the wait during
   * which the thread's off-CPU clock passed 10 ms (the third). */
  for (int i = 0; i < 4; i++) {
    CHECK(kf_offcpu_out(o, 5, (uint64_t)i * 10 * MS, 1, a, 1) == 0);
    CHECK(kf_offcpu_in(o, 5, (uint64_t)i * 10 * MS + 4 * MS) == 0);
  }
  kf_offcpu_settle(o, UINT64_MAX, 100 * MS, record, &e);
  CHECK_EQ_U64(e.n, 1);
  CHECK_EQ_U64(e.time[0], 20 * MS);
  CHECK_EQ_U64(e.periods[0], 1);
  kf_offcpu_free(o);
}

static void offcpu_scales_by_switches_and_ends_open_waits(void) {
  kf_offcpu_t *o = kf_offcpu_new(10 * MS);
  emitted_t e = {0};
  uint64_t a[] = {0xa1};
  /* One sample for 4 switches (perf's frequency mode): 5 ms counts 20. */
  CHECK(kf_offcpu_out(o, 3, 0, 4, a, 1) == 0);
  CHECK(kf_offcpu_in(o, 3, 5 * MS) == 0);
  /* A wait still open at the end lasts until the end. */
  CHECK(kf_offcpu_out(o, 4, 50 * MS, 1, a, 1) == 0);
  /* A switch-in lost: the next switch-out replaces the first. */
  CHECK(kf_offcpu_out(o, 6, 10 * MS, 1, a, 1) == 0);
  CHECK(kf_offcpu_out(o, 6, 40 * MS, 1, a, 1) == 0);
  CHECK(kf_offcpu_in(o, 6, 60 * MS) == 0);
  /* A switch-in without a switch-out (the wait began before start). */
  CHECK(kf_offcpu_in(o, 9, 70 * MS) == 0);
  kf_offcpu_settle(o, UINT64_MAX, 100 * MS, record, &e);
  kf_offcpu_stats_t st;
  kf_offcpu_stats(o, &st);
  CHECK_EQ_U64(st.outs, 4);
  CHECK_EQ_U64(st.ins, 3);
  CHECK_EQ_U64(st.unpaired, 1);
  CHECK_EQ_U64(st.open, 1);
  CHECK_EQ_U64(e.n, 3);
  uint64_t by_tid[10] = {0};
  for (int i = 0; i < e.n; i++) by_tid[e.tid[i]] += e.periods[i];
  CHECK_EQ_U64(by_tid[3], 2); /* 4 x 5 ms */
  CHECK_EQ_U64(by_tid[6], 2); /* 40 -> 60 ms */
  CHECK_EQ_U64(by_tid[4], 5); /* 50 -> 100 ms */
  kf_offcpu_free(o);
}

static const char *frame(void *ctx, uint64_t ip, int kernel) {
  (void)ctx;
  (void)kernel;
  return ip == 1 ? "leaf" : "outer";
}

static const char *thread(void *ctx, uint32_t tid) {
  (void)ctx;
  (void)tid;
  return "main";
}

/* switchin.h's rate bound says, just before the sample, how many switches
 * it stands for: the weight goes to the thread's next switch-out, arriving
 * from another ring and in any order, and is forgotten when its sample
 * never came. */
static void offcpu_weights_from_the_bound(void) {
  kf_offcpu_t *o = kf_offcpu_new(10 * MS);
  emitted_t e = {0};
  uint64_t a[] = {0xa1};
  /* Thread 7: weight 5 at 100 ms, its sample 20 us later (period 1). */
  CHECK(kf_offcpu_out(o, 7, 100 * MS + 20000, 1, a, 1) == 0);
  CHECK(kf_offcpu_in(o, 7, 120 * MS + 20000) == 0);
  CHECK(kf_offcpu_weight(o, 7, 100 * MS, 5) == 0);
  /* Thread 8: a weight at the very time of its sample still comes first. */
  CHECK(kf_offcpu_out(o, 8, 200 * MS, 1, a, 1) == 0);
  CHECK(kf_offcpu_weight(o, 8, 200 * MS, 3) == 0);
  CHECK(kf_offcpu_in(o, 8, 210 * MS) == 0);
  /* Thread 9: a weight whose sample was lost; the next sample, 50 ms
   * later, is one switch. */
  CHECK(kf_offcpu_weight(o, 9, 300 * MS, 40) == 0);
  CHECK(kf_offcpu_out(o, 9, 350 * MS, 1, a, 1) == 0);
  CHECK(kf_offcpu_in(o, 9, 370 * MS) == 0);
  kf_offcpu_settle(o, UINT64_MAX, 400 * MS, record, &e);
  CHECK_EQ_U64(e.n, 3);
  CHECK_EQ_U64(e.tid[0], 7);
  CHECK_EQ_U64(e.periods[0], 10); /* 20 ms x 5 */
  CHECK_EQ_U64(e.tid[1], 8);
  CHECK_EQ_U64(e.periods[1], 3);  /* 10 ms x 3 */
  CHECK_EQ_U64(e.tid[2], 9);
  CHECK_EQ_U64(e.periods[2], 2);  /* 20 ms x 1 */
  kf_offcpu_stats_t st;
  kf_offcpu_stats(o, &st);
  CHECK_EQ_U64(st.paired, 3);
  CHECK_EQ_U64(st.unpaired, 0);
  kf_offcpu_free(o);
}

static void offcpu_markers_fold_under_the_root(void) {
  kf_stacks_t *s = kf_stacks_new();
  uint64_t on[] = {(uint64_t)PERF_CONTEXT_USER, 1, 2};
  uint64_t off[] = {KF_CONTEXT_OFFCPU, (uint64_t)PERF_CONTEXT_USER, 1, 2};
  uint64_t idle[] = {KF_CONTEXT_IDLE, (uint64_t)PERF_CONTEXT_USER, 1, 2};
  CHECK(kf_stacks_add(s, 1, 1, on, 3) == 0);
  CHECK(kf_stacks_add_n(s, 1, 2, off, 4, 3) == 0);
  CHECK(kf_stacks_add_n(s, 1, 3, idle, 4, 2) == 0);
  kf_fold_names_t names = {.frame = frame, .thread = thread};
  char *text;
  size_t len;
  CHECK(kf_fold(s, &names, &text, &len, NULL) == 0);
  CHECK_STR(text, "main;(idle);outer;leaf 2\nmain;[off-cpu];outer;leaf 3\nmain;outer;leaf 1\n");
  free(text);
  kf_stacks_free(s);
}

int main(int argc, char **argv) {
  static const kftest_case_t cases[] = {
      {"offcpu_pairs_out_of_order_arrivals", offcpu_pairs_out_of_order_arrivals},
      {"offcpu_carries_the_rest_of_a_period", offcpu_carries_the_rest_of_a_period},
      {"offcpu_scales_by_switches_and_ends_open_waits", offcpu_scales_by_switches_and_ends_open_waits},
      {"offcpu_weights_from_the_bound", offcpu_weights_from_the_bound},
      {"offcpu_markers_fold_under_the_root", offcpu_markers_fold_under_the_root},
      {NULL, NULL}};
  return kftest_main(cases, argc, argv);
}

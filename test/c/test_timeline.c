/* The timeline and the aggregate of named stacks: samples come back as
 * they went in, in order, within a bound that drops the oldest and counts
 * them; names are interned once; named chains count and fold like raw ones. */
#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>

#include "collect/aggregate.h"
#include "render/folded.h"
#include "collect/timeline.h"
#include "kftest.h"

#define U ((uint64_t)PERF_CONTEXT_USER)
#define K ((uint64_t)PERF_CONTEXT_KERNEL)

/* A made-up sample i: times not in order (rings drain out of order), big
 * and small steps, two threads, stack ids up to a million. */
static kf_sample_t sample_of(uint64_t i) {
  uint64_t jitter = (i * 7919) % 5000;
  return (kf_sample_t){.time = 1000000000000ULL + i * 1001001 - jitter,
                       .stack = (uint32_t)((i * 2654435761u) % 1000003),
                       .tid = i % 3 ? 4242 : 4243 + (uint32_t)(i % 7)};
}

static void timeline_round_trip(void) {
  kf_timeline_t *t = kf_timeline_new(1000000);
  const uint64_t n = 50000;
  for (uint64_t i = 0; i < n; i++) {
    kf_sample_t s = sample_of(i);
    CHECK(kf_timeline_add(t, s.time, s.stack, s.tid) == 0);
  }
  CHECK_EQ_U64(kf_timeline_count(t), n);
  CHECK_EQ_U64(kf_timeline_dropped(t), 0);
  /* A few bytes a sample, not the 16 of a plain array. */
  CHECK(kf_timeline_bytes(t) < n * 10);
  kf_timeline_iter_t it;
  kf_timeline_iter(t, &it);
  kf_sample_t s;
  uint64_t i = 0;
  for (; kf_timeline_next(&it, &s); i++) {
    kf_sample_t want = sample_of(i);
    CHECK(s.time == want.time && s.stack == want.stack && s.tid == want.tid);
  }
  CHECK_EQ_U64(i, n);
  kf_timeline_free(t);
}

static void timeline_bound_keeps_newest(void) {
  const uint64_t max = 7000, n = 100000;
  kf_timeline_t *t = kf_timeline_new(max);
  size_t peak = 0;
  for (uint64_t i = 0; i < n; i++) {
    kf_sample_t s = sample_of(i);
    CHECK(kf_timeline_add(t, s.time, s.stack, s.tid) == 0);
    if (kf_timeline_bytes(t) > peak) peak = kf_timeline_bytes(t);
  }
  CHECK_EQ_U64(kf_timeline_count(t), max);
  CHECK_EQ_U64(kf_timeline_dropped(t), n - max);
  CHECK(peak <= 4 * (64 << 10)); /* the bound and a chunk or two */
  kf_timeline_iter_t it;
  kf_timeline_iter(t, &it);
  kf_sample_t s;
  uint64_t i = n - max;
  for (; kf_timeline_next(&it, &s); i++) {
    kf_sample_t want = sample_of(i);
    CHECK(s.time == want.time && s.stack == want.stack && s.tid == want.tid);
  }
  CHECK_EQ_U64(i, n);
  kf_timeline_free(t);

  /* No timeline: every sample counted as dropped, nothing mapped. */
  t = kf_timeline_new(0);
  for (uint64_t k = 0; k < 10; k++) CHECK(kf_timeline_add(t, k, 1, 1) == 0);
  CHECK_EQ_U64(kf_timeline_count(t), 0);
  CHECK_EQ_U64(kf_timeline_dropped(t), 10);
  CHECK_EQ_U64(kf_timeline_bytes(t), 0);
  kf_timeline_iter(t, &it);
  CHECK(!kf_timeline_next(&it, &s));
  kf_timeline_free(t);
}

static void aggregate_interns_and_counts(void) {
  kf_aggregate_t *a = kf_aggregate_new(100);
  uint64_t f, g, f2;
  CHECK(kf_aggregate_frame(a, "f", &f) == 0);
  CHECK(kf_aggregate_frame(a, "g;with;semicolons", &g) == 0);
  CHECK(kf_aggregate_frame(a, "f", &f2) == 0);
  CHECK(f == f2 && f != g);
  CHECK(f < (uint64_t)PERF_CONTEXT_MAX && g < (uint64_t)PERF_CONTEXT_MAX);
  CHECK_STR(kf_aggregate_frame_name(a, g), "g;with;semicolons");
  CHECK(kf_aggregate_frame_name(a, 999) == NULL);
  /* Many names: the table grows, every id keeps its name. */
  char name[32];
  uint64_t ids[5000];
  for (int i = 0; i < 5000; i++) {
    snprintf(name, sizeof name, "fn%d", i);
    CHECK(kf_aggregate_frame(a, name, &ids[i]) == 0);
  }
  for (int i = 0; i < 5000; i++) {
    snprintf(name, sizeof name, "fn%d", i);
    CHECK_STR(kf_aggregate_frame_name(a, ids[i]), name);
  }

  uint64_t chain[] = {U, g, f};
  uint32_t s1, s2;
  CHECK(kf_aggregate_add(a, 7, chain, 3, 5, &s1) == 0);
  CHECK(kf_aggregate_add(a, 7, chain, 3, 2, &s2) == 0);
  CHECK(s1 == s2);
  kf_aggregate_sample(a, 30, s1, 7);
  kf_aggregate_sample(a, 10, s1, 7);
  kf_stack_t st;
  kf_stacks_get(kf_aggregate_stacks(a), s1, &st);
  CHECK_EQ_U64(st.count, 7);
  kf_aggregate_stats_t as;
  kf_aggregate_stats(a, &as);
  CHECK(as.samples == 2 && as.first_time == 10 && as.last_time == 30);
  CHECK(as.frames == 5002 && as.bytes > 0);
  /* Threads: one entry each. */
  kf_agg_thread_t *t = kf_aggregate_thread(a, 7);
  CHECK(t && t->tid == 7 && !t->settled);
  CHECK(kf_aggregate_thread(a, 7) == t);
  size_t nt;
  kf_aggregate_threads(a, &nt);
  CHECK_EQ_U64(nt, 1);
  kf_timeline_t *tl = kf_aggregate_take_timeline(a);
  CHECK_EQ_U64(kf_timeline_count(tl), 2);
  kf_aggregate_sample(a, 40, s1, 7); /* no timeline any more: counted only */
  kf_timeline_free(tl);
  kf_aggregate_free(a);
}

/* Frame ids fold like addresses: folded.h names them through the caller. */
static const char *name_of_id(void *ctx, uint64_t id, int kernel) {
  (void)kernel;
  return kf_aggregate_frame_name(ctx, id);
}
static const char *thread_main(void *ctx, uint32_t tid) {
  (void)ctx, (void)tid;
  return "main";
}

static void aggregate_folds(void) {
  kf_aggregate_t *a = kf_aggregate_new(10);
  uint64_t leaf, mid, sys;
  CHECK(kf_aggregate_frame(a, "leaf", &leaf) == 0);
  CHECK(kf_aggregate_frame(a, "mid", &mid) == 0);
  CHECK(kf_aggregate_frame(a, "sys_read_[k]", &sys) == 0);
  uint64_t c1[] = {K, sys, U, leaf, mid}, c2[] = {U, mid};
  uint32_t s;
  CHECK(kf_aggregate_add(a, 1, c1, 5, 3, &s) == 0);
  CHECK(kf_aggregate_add(a, 1, c2, 2, 1, &s) == 0);
  kf_fold_names_t names = {.frame = name_of_id, .thread = thread_main, .ctx = a};
  char *out;
  size_t len;
  CHECK(kf_fold(kf_aggregate_stacks(a), &names, &out, &len, NULL) == 0);
  CHECK_STR(out, "main;mid 1\nmain;mid;leaf;sys_read_[k] 3\n");
  free(out);
  kf_aggregate_free(a);
}

static const kftest_case_t cases[] = {
    {"timeline: samples come back as added, in a few bytes each", timeline_round_trip},
    {"timeline: past its bound the newest are kept, the rest counted", timeline_bound_keeps_newest},
    {"aggregate: names interned once, chains counted, threads kept", aggregate_interns_and_counts},
    {"aggregate: named chains fold like raw ones", aggregate_folds},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }

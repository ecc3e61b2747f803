/* The collector over the timer sampler, with its namer: windows cut while
 * threads run are handed over whole, each sample in the window its time
 * falls in, none lost at the seam; stop() gets the rest. Run under TSan
 * too: the JS thread's cut/take against the collector thread's folds. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "collect/collector.h"
#include "sample/timersampler.h"
#include "util/clock.h"
#include "kftest.h"

static int stop_spinning; /* atomic */
static uint64_t sink;     /* atomic */

__attribute__((noinline)) static uint64_t spin_work(uint64_t x) {
  for (int i = 0; i < 1000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

static void *spinner(void *arg) {
  (void)arg;
  uint64_t x = 1;
  while (!__atomic_load_n(&stop_spinning, __ATOMIC_RELAXED)) x = spin_work(x);
  __atomic_add_fetch(&sink, x, __ATOMIC_RELAXED);
  return NULL;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Every timeline sample of `a` in [start, end); returns how many. */
static uint64_t check_times(const kf_aggregate_t *a, uint64_t start, uint64_t end) {
  kf_timeline_iter_t it;
  kf_sample_t s;
  uint64_t n = 0;
  kf_timeline_iter(kf_aggregate_timeline(a), &it);
  while (kf_timeline_next(&it, &s)) {
    if (s.time < start || s.time >= end)
      fprintf(stderr, "  sample at %llu outside [%llu, %llu)\n", (unsigned long long)s.time,
              (unsigned long long)start, (unsigned long long)end);
    CHECK(s.time >= start && s.time < end);
    n++;
  }
  return n;
}

static void tile(int made) {
  __atomic_store_n(&stop_spinning, 0, __ATOMIC_RELAXED);
  pthread_t th[2];
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, spinner, NULL) == 0);
  kf_sampler_opts_t so = {.hz = 999, .ring_pages = 16, .stack_bytes = 0};
  kf_timer_t *timer = NULL;
  int sys_errno = 0;
  uint64_t started = kf_now_ns(); /* the first samples come before the collector */
  CHECK(kf_timer_open(&so, &timer, &sys_errno) == 0);
  kf_symbolizer_t *sym = kf_symbolizer_new();
  sleep_ms(5); /* samples certainly stamped before the collector starts */
  /* One case drains on the parked thread, the other on a thread of its own. */
  kf_collector_opts_t co = {.timer = timer, .symbolizer = sym, .timeline_max = 1000000,
                            .started_ns = started, .park = !made};
  kf_collector_t *c = NULL;
  CHECK(kf_collector_start(NULL, &co, &c, &sys_errno) == 0 && sys_errno == 0);

  uint64_t windows_samples = 0, last_end = 0;
  for (int w = 0; w < 4; w++) {
    sleep_ms(120);
    CHECK(kf_collector_cut(c) == 0);
    CHECK(kf_collector_cut(c) == -EBUSY); /* one cut at a time */
    kf_aggregate_t *a = NULL;
    kf_window_stats_t ws;
    int rc = -EAGAIN;
    for (int tries = 0; tries < 50 && rc == -EAGAIN; tries++)
      rc = kf_collector_take_window(c, 100, &a, &ws);
    CHECK(rc == 0 && a);
    CHECK(ws.end > ws.start);
    CHECK_EQ_U64(ws.start, w > 0 ? last_end : started); /* no gap, no overlap */
    last_end = ws.end;
    kf_aggregate_stats_t as;
    kf_aggregate_stats(a, &as);
    CHECK(as.samples > 20);
    CHECK_EQ_U64(check_times(a, ws.start, ws.end), as.samples);
    windows_samples += as.samples;
    kf_aggregate_free(a);
  }
  /* A cut left in flight at stop (or, with `made`, a window made and not
   * taken) goes into stop()'s profile. */
  CHECK(kf_collector_cut(c) == 0);
  sleep_ms(made ? 400 : 30);
  kf_collector_stop(c);
  CHECK(kf_collector_finish(c) == 0);
  kf_window_stats_t rest;
  kf_collector_window(c, &rest);
  CHECK_EQ_U64(rest.start, last_end);
  kf_aggregate_t *a = kf_collector_aggregate(c);
  kf_aggregate_stats_t as;
  kf_aggregate_stats(a, &as);
  CHECK(as.samples > 0);
  CHECK_EQ_U64(check_times(a, rest.start, UINT64_MAX), as.samples);
  const kf_collector_stats_t *cs = kf_collector_stats(c);
  CHECK_EQ_U64(cs->no_memory, 0);
  /* Every sample the collector kept is in exactly one of them. */
  CHECK_EQ_U64(windows_samples + as.samples, cs->samples);
  kf_collector_free(c);
  kf_timer_close(timer);
  kf_symbolizer_free(sym);
  __atomic_store_n(&stop_spinning, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
}

static void windows_tile_the_profile(void) { tile(0); }
static void untaken_window_goes_to_stop(void) { tile(1); }

static const kftest_case_t cases[] = {
    {"collector: windows cut while threads run tile the profile", windows_tile_the_profile},
    {"collector: a window made and not taken goes to stop()'s profile", untaken_window_goes_to_stop},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }

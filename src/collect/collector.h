/*
 * collector: the thread that drains the rings while a profile runs: the perf
 * sampler's (one per CPU) or the timer sampler's (one per thread, same
 * records; the collector also has it scan for new threads every 50 ms and
 * disarms it at stop).
 *
 * It wakes when a ring is half full (and at least every 100 ms), turns each
 * PERF_RECORD_SAMPLE into an entry of a kf_stacks_t, names those about once
 * a second into the profile's aggregate (namer.h), counts PERF_RECORD_LOST,
 * and follows thread names from PERF_RECORD_COMM. It never calls into Node;
 * what goes wrong on it is counted in kf_collector_stats_t for stop() to
 * report. start is called by the thread that starts the session; stop,
 * finish and the results by the one that stops it (any isolate's JS thread,
 * outside the binding's mutex; results only after stop has joined the
 * thread); cut and take_window by JS threads under that mutex.
 */
#ifndef KF_COLLECTOR_H
#define KF_COLLECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "jit/codemap.h"
#include "unwind/dwarfunwind.h"
#include "jit/jitframes.h"
#include "sample/offcpu.h"
#include "sample/sampler.h"
#include "collect/aggregate.h"
#include "collect/stacks.h"
#include "symbols/symbolizer.h"
#include "sample/timersampler.h"

typedef struct kf_collector_opts {
  kf_codemap_t *codemap;  /* JIT code to name frames from, or NULL */
  const char *perf_map;   /* perf map to keep fresh (at most once a second,
                             only when the code changed), or NULL */
  const kf_v8layout_t *v8layout; /* to read V8 frames off stack copies */
  kf_funcpos_t *funcpos;  /* to name inlined functions, or NULL */
  kf_timer_t *timer;      /* samples from the timer sampler, not perf */
  int dwarf;              /* put back frames a frame-pointer walk skipped
                             under a leaf without one (dwarfunwind.h) */
  /* Names the stacks as they come (namer.h), once *symbols_ready is set
   * (by the thread that loads the tables; NULL: ready now). The collector
   * has the symbolizer from then until it is freed. */
  kf_symbolizer_t *symbolizer;
  const int *symbols_ready;
  int keep_tiers;         /* "~foo" and "*foo" stay apart */
  int park;               /* on the parked thread, else one of its own */
  uint64_t timeline_max;  /* samples the timeline keeps (timeline.h) */
  uint64_t offcpu_period_ns; /* off-CPU time one sample stands for (1/hz) */
  /* When sampling began (CLOCK_MONOTONIC ns, taken before the sampler was
   * opened: its first samples are stamped before the collector starts), or
   * 0 for now. The first window starts here. */
  uint64_t started_ns;
  /* Called first on the collector's thread, or NULL: work that would
   * otherwise hold up the thread calling kf_collector_start (the profiler
   * starts its symbol preload thread from here: a new thread can take the
   * rest of its creator's time slice, 3-7 ms). Done before
   * kf_collector_stop returns. */
  void (*on_start)(void *arg);
  void *on_start_arg;
} kf_collector_opts_t;

typedef struct kf_collector_stats {
  uint64_t samples;    /* kept */
  uint64_t lost;       /* PERF_RECORD_LOST: the ring was full */
  uint64_t corrupt;    /* records skipped for an impossible header */
  uint64_t no_memory;  /* samples dropped because malloc failed */
  uint64_t duplicates; /* same thread seen through two events (see .c) */
  uint64_t foreign;    /* samples of other processes (inherit without
                          inherit_thread on old kernels) */
  kf_jitframes_stats_t jit; /* JIT frames named (read after stop) */
  uint64_t stack_copies, stack_bytes; /* user stack copies in samples */
  uint64_t perf_map_writes, perf_map_errors;
  long perf_map_error;  /* of the last failed write: -errno or a KF_ERR code */
  kf_timer_stats_t timer; /* timer sampler's (lost and corrupt included
                             above too) */
  kf_dwarf_stats_t dwarf;
} kf_collector_stats_t;

typedef struct kf_collector kf_collector_t;

/* Starts the draining loop over an open sampler, or over opts->timer when sampler
 * is NULL (either must outlive the collector, as must opts->codemap), on
 * the thread kflame keeps parked between profiles (util/parked.h: a thread
 * created at start() costs the app; that one is made by the first start).
 * Returns 0, -ENOMEM, -errno (the eventfd), or -KF_ERR_THREAD with the
 * errno behind it in *sys_errno (set on every failure). */
int kf_collector_start(kf_sampler_t *sampler, const kf_collector_opts_t *opts,
                       kf_collector_t **out, int *sys_errno);

/* Wakes the thread, lets it drain what the rings still hold, waits for the
 * loop to end (the thread parks again). The
 * caller disables a perf sampler first so the rings stop growing; a timer
 * sampler is disabled by the thread itself, the only one arming it. */
void kf_collector_stop(kf_collector_t *c);

/* A window of a continuous profile: its samples are those stamped in
 * [start, end) (CLOCK_MONOTONIC ns); lost and no_memory counted while it
 * was the one being filled. */
typedef struct kf_window_stats {
  uint64_t start, end, lost, no_memory;
} kf_window_stats_t;

/* JS thread: asks for a cut now: the samples stamped before it become a
 * window of their own, handed over once the rings have given up every sample stamped before
 * it (within about 150 ms). Returns 0, or -EBUSY while an earlier cut is not
 * made or its window not taken. */
int kf_collector_cut(kf_collector_t *c);
/* JS thread: takes the window the last cut made, waiting up to timeout_ms:
 * 0 with *out (the caller frees it) and *stats, or -EAGAIN. */
int kf_collector_take_window(kf_collector_t *c, int timeout_ms, kf_aggregate_t **out,
                             kf_window_stats_t *stats);

/* After stop, on the stopping thread, once the symbol tables are loaded: names
 * what the thread left unnamed (the last second or so). Returns 0, or
 * -ENOMEM with the samples lost counted in no_memory. */
int kf_collector_finish(kf_collector_t *c);
/* The named profile, after finish: since the last window taken (a window
 * cut and not taken is part of it). */
kf_aggregate_t *kf_collector_aggregate(kf_collector_t *c);
/* The window stop() ends, after it joined: since the last window taken. */
void kf_collector_window(kf_collector_t *c, kf_window_stats_t *out);
/* Addresses named from debug files and folded into [object]. */
void kf_collector_names_stats(const kf_collector_t *c, kf_symbolizer_stats_t *out);
/* Off-CPU waits paired and weighed (zeros without off-CPU); after stop. */
void kf_collector_offcpu_stats(const kf_collector_t *c, kf_offcpu_stats_t *out);
/* Names of the JIT frames in the stacks (NULL without a code map). */
const kf_jitframes_t *kf_collector_jitframes(const kf_collector_t *c);
const kf_collector_stats_t *kf_collector_stats(const kf_collector_t *c);

/* The comm (thread name) of a thread seen in samples, or NULL. */
const char *kf_collector_comm(const kf_collector_t *c, uint32_t tid);

void kf_collector_free(kf_collector_t *c);

#endif

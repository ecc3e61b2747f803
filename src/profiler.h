/*
 * profiler: one profiling session at a time, from start() to the folded
 * text. Glues the sampler (perf events), the collector (its thread) and the
 * symbolizer (names), and decides each thread's root frame.
 * Called on the JS thread only; the binding owns the single instance.
 */
#ifndef KF_PROFILER_H
#define KF_PROFILER_H

#include <stddef.h>
#include <stdint.h>

#include "codemap.h"
#include "dwarfunwind.h"
#include "sampler.h"
#include "timersampler.h"
#include "v8frames.h"

/* Which sampler runs: perf events, or per-thread CPU-time timers where
 * perf_event_open is refused (timersampler.h). AUTO tries perf first. */
typedef enum { KF_MODE_AUTO = 0, KF_MODE_PERF, KF_MODE_TIMER } kf_mode_t;

typedef struct kf_profile_opts {
  kf_sampler_opts_t sampler;
  kf_mode_t mode;
  kf_codemap_t *codemap; /* JIT code map; NULL leaves JIT frames [jit] */
  /* V8's frame layout, to name JS frames from stack copies; NULL when
   * this V8 is unknown (frames then come from the callchain alone) */
  const kf_v8layout_t *v8layout;
  kf_funcpos_t *funcpos; /* small functions' source offsets, for inlining */
  int keep_tiers;        /* "~foo" and "*foo" stay apart */
  int dwarf;             /* frames skipped by frame-pointer walks put back
                            from DWARF call-frame information */
  const char *perf_map;  /* perf map path kept fresh while profiling and
                            written at stop, or NULL */
} kf_profile_opts_t;

typedef struct kf_profile_stats {
  uint64_t samples, lost, duplicates, foreign, corrupt, no_memory;
  uint32_t threads;      /* distinct threads in the samples */
  uint64_t duration_ns;  /* start() to stop() */
  uint64_t started_ns;   /* CLOCK_MONOTONIC at start() */
  uint64_t wall_start_ms; /* CLOCK_REALTIME at start(), ms since the epoch */
  uint32_t hz;
  kf_mode_t mode;        /* the sampler that ran: PERF or TIMER */
  /* AUTO fell back to the timer sampler: perf's error code and errno */
  int perf_refused, perf_refused_errno;
  kf_timer_stats_t timer; /* the timer sampler's, when it ran */
  kf_event_t event;
  int kernel;            /* kernel frames were sampled */
  int kernel_refused;    /* asked for, not allowed (perf_event_paranoid) */
  int kernel_hidden;     /* sampled but unnamed (kptr_restrict) */
  int inherit_thread;
  uint32_t ring_pages, ring_pages_asked;
  uint32_t attached, cpus;
  uint64_t jit_frames;           /* frames named from the code map */
  /* From stack copies (jitframes.h): interpreter frames named, left
   * "(interpreted)", running functions put back under a handler. */
  uint64_t interpreted_named, interpreted_unnamed, running_added;
  uint64_t inlined;              /* inlined frames added */
  /* Distinct native addresses named from separate debug files or
   * MiniDebugInfo, and folded into "[object]" (symbolizer.h). */
  uint64_t native_from_debug, native_folded;
  kf_dwarf_stats_t dwarf; /* frames put back (dwarfunwind.h) */
  uint64_t stack_copies_short;   /* frame chain went past the copy */
  uint32_t stack_bytes;          /* asked of the kernel per sample */
  uint64_t stack_copies, stack_copy_bytes; /* received */
  int v8_layout;                 /* V8's frame layout is known */
  uint64_t code_live, code_bytes; /* code map at stop */
  uint64_t code_evicted, code_moved; /* during the profile */
  uint64_t code_events_dropped;  /* code events lost for lack of memory */
  long perf_map_lines;           /* written at stop; -errno on failure */
  uint64_t perf_map_writes;      /* while profiling */
  uint64_t perf_map_errors;
} kf_profile_stats_t;

/* One sample: which line of the folded text, when, on which thread. */
typedef struct kf_profile_sample {
  uint64_t time; /* CLOCK_MONOTONIC ns */
  uint32_t line; /* 0-based line of `folded` */
  uint32_t tid;
} kf_profile_sample_t;

typedef struct kf_profile {
  char *perf_map; /* the perf map path kept while profiling, or NULL */
  char *folded;
  size_t folded_len;
  kf_profile_sample_t *samples; /* every sample, in the order collected */
  size_t nsamples;
  kf_profile_stats_t stats;
} kf_profile_t;

typedef struct kf_profiler kf_profiler_t;

kf_profiler_t *kf_profiler_new(void);
void kf_profiler_free(kf_profiler_t *p); /* stops a running session first */

int kf_profiler_running(const kf_profiler_t *p);

/* Returns 0 or a negative code (error.h); *sys_errno is the errno behind it.
 * On failure nothing is left open. */
int kf_profiler_start(kf_profiler_t *p, const kf_profile_opts_t *opts,
                      int *sys_errno);

/* Stops sampling, joins the collector, closes every event and ring, and
 * names the stacks. On success *out owns the folded text (free with
 * kf_profile_free). Even when naming fails for lack of memory, the events
 * are closed. */
int kf_profiler_stop(kf_profiler_t *p, kf_profile_t *out);

void kf_profile_free(kf_profile_t *profile);

#endif

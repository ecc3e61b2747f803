/*
 * profiler: one profiling session at a time, from start() to the folded
 * text. Glues the sampler (perf events), the collector (its thread) and the
 * symbolizer (names), and decides each thread's root frame.
 *
 * The binding owns the single instance, shared by every isolate (the main
 * thread's and the workers'): kf_profiler_* calls may come from any of
 * their JS threads, one at a time (the caller serialises them with its
 * mutex). Stopping is split so that the slow part runs outside that mutex:
 * kf_profiler_take() takes the session out (cheap, under the mutex),
 * kf_session_stop() names and folds it (without the mutex: the session is
 * the caller's alone), kf_profiler_give_back() returns its symbol tables
 * (under the mutex). Meanwhile another thread may start a new session,
 * which then loads symbol tables of its own.
 */
#ifndef KF_PROFILER_H
#define KF_PROFILER_H

#include <stddef.h>
#include <stdint.h>

#include "jit/codemap.h"
#include "unwind/dwarfunwind.h"
#include "sample/sampler.h"
#include "symbols/symbolizer.h"
#include "collect/timeline.h"
#include "sample/timersampler.h"
#include "jit/v8frames.h"

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
  int park;              /* the collector on the parked thread (parked.h),
                            else on a thread of its own */
  int dwarf;             /* frames skipped by frame-pointer walks put back
                            from DWARF call-frame information */
  const char *perf_map;  /* perf map path kept fresh while profiling and
                            written at stop, or NULL */
  uint64_t timeline_max; /* samples the timeline keeps (timeline.h) */
  int source_maps;       /* JS frames to be mapped at stop (lib/): kept in
                            the stats for whichever isolate stops */
  uint64_t jit_arm_ns;   /* the binding's arming of the calling isolate
                            just before (kf_start_phases_t) */
} kf_profile_opts_t;

/* What start() took, ns of CLOCK_MONOTONIC: in all, arming V8's hook on
 * the calling isolate before kf_profiler_start() (opts->jit_arm_ns: V8
 * reporting the code that exists, at the isolate's first start), opening
 * the sampler (perf_event_open and the rings for every thread, or the
 * timers), starting the collector (reading /proc/self/maps, its thread);
 * and how much of kf_profiler_start() the calling thread spent off its CPU
 * (asleep in the kernel or preempted: wall time less CLOCK_THREAD_CPUTIME_ID
 * time). */
typedef struct kf_start_phases {
  uint64_t total_ns, jit_ns, sampler_ns, collector_ns, off_cpu_ns;
} kf_start_phases_t;

typedef struct kf_profile_stats {
  uint64_t samples, lost, duplicates, foreign, corrupt, no_memory;
  uint32_t threads;      /* distinct threads in the samples */
  uint64_t duration_ns;  /* start() to stop() */
  uint64_t started_ns;   /* CLOCK_MONOTONIC at start() */
  uint64_t wall_start_ms; /* CLOCK_REALTIME at start(), ms since the epoch */
  uint32_t hz;
  uint32_t what;         /* KF_WHAT_* (sampler.h) */
  uint32_t max_switch_rate;
  int source_maps;
  /* Off-CPU (offcpu.h): switched-out samples, those paired with their
   * switch-in, those never paired, the weighed time (ns), and the samples
   * (periods) it made. */
  uint64_t switch_samples, switch_paired, switch_unpaired;
  uint64_t offcpu_ns, offcpu_samples;
  /* CPU-wide: switch-outs sampled and switch-ins stamped by switchin.h's
   * tracepoint program (else a context-switch event and switch records),
   * and why not (errno; 0: not tried) */
  int switchins_traced, switchin_errno;
  kf_mode_t mode;        /* the sampler that ran: PERF or TIMER */
  /* AUTO fell back to the timer sampler: perf's error code and errno */
  int perf_refused, perf_refused_errno;
  kf_timer_stats_t timer; /* the timer sampler's, when it ran */
  kf_event_t event;
  int kernel;            /* kernel frames were sampled */
  int kernel_refused;    /* asked for, not allowed (perf_event_paranoid) */
  int kernel_hidden;     /* sampled but unnamed (kptr_restrict) */
  int inherit_thread;
  uint32_t scope;        /* perf: KF_SCOPE_CPUS or KF_SCOPE_THREADS */
  int scope_errno;       /* why CPU-wide events were not used (0: not tried) */
  uint32_t ring_pages, ring_pages_asked;
  uint32_t attached, cpus;
  uint64_t jit_frames;           /* frames named from the code map */
  /* From stack copies (jitframes.h): interpreter frames named, left
   * "(interpreted)", running functions put back under a handler. */
  uint64_t interpreted_named, interpreted_unnamed, running_added;
  /* Frames of code V8 never reported, named from the copy or left [jit] */
  uint64_t unreported_named, unreported_unnamed;
  /* Frames of RegExp code V8 reported unnamed, named by their expression
   * or left "RegExp:(compiled before start)" */
  uint64_t regexp_named, regexp_unnamed;
  uint64_t inlined;              /* inlined frames added */
  uint64_t inlined_exact, inlined_unnamed; /* from V8's inlining ids; left out */
  uint64_t inlining_read, inlining_failed; /* optimized code whose inlining
                                              was read, or not (since load) */
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
  /* Code events that waited for the code map's lock, and how long (ns),
   * during the profile (codemap.h) */
  uint64_t code_lock_waits, code_lock_wait_ns;
  uint64_t code_events_dropped;  /* code events lost for lack of memory */
  long perf_map_lines;           /* written at stop; -errno or a KF_ERR
                                    code on failure */
  uint64_t perf_map_writes;      /* while profiling */
  uint64_t perf_map_errors;
  long perf_map_error;           /* the last failed write's -errno or code */
  /* The timeline (timeline.h): samples kept, dropped past its bound (or
   * all of them without one), bytes. */
  uint64_t timeline_samples, timeline_dropped, timeline_bytes;
  uint64_t symbol_cache_bytes; /* symbol tables kept for the next profile */
  /* What the profile held at stop (aggregate.h): distinct named stacks,
   * distinct frame names, bytes (the timeline's included). */
  uint64_t named_stacks, named_frames, aggregate_bytes;
  /* What stop() took: in all, the last drain and joining the collector,
   * naming what it left, folding the named stacks into text, handing the
   * freed heap back (malloc_trim). */
  uint64_t stop_ns, stop_drain_ns, stop_name_ns, stop_fold_ns, stop_trim_ns;
  kf_start_phases_t start; /* what this session's start() took */
} kf_profile_stats_t;


typedef struct kf_profile {
  char *perf_map; /* the perf map path kept while profiling, or NULL */
  char *folded;
  size_t folded_len;
  /* Every sample kept, in the order collected: its stack is the 0-based
   * line line_of[stack] of `folded`. */
  kf_timeline_t *timeline;
  uint32_t *line_of;
  kf_profile_stats_t stats;
} kf_profile_t;

typedef struct kf_profiler kf_profiler_t;
typedef struct kf_session kf_session_t;

/* Lives as long as the process: the binding never frees it. */
kf_profiler_t *kf_profiler_new(void);

int kf_profiler_running(const kf_profiler_t *p);
/* The sampler the running session uses (KF_MODE_PERF or KF_MODE_TIMER:
 * what 'auto' chose), or KF_MODE_AUTO when none runs. */
int kf_profiler_mode(const kf_profiler_t *p);

/* Returns 0 or a negative code (error.h); *sys_errno is the errno behind it.
 * On failure nothing is left open. */
int kf_profiler_start(kf_profiler_t *p, const kf_profile_opts_t *opts,
                      int *sys_errno);

/* The running session, taken out: the profiler runs none from here on
 * (running() is false, start() may begin another). NULL when none runs. */
kf_session_t *kf_profiler_take(kf_profiler_t *p);

/* Stops sampling, joins the collector, closes every event and ring, and
 * names the stacks. On success *out owns the folded text (free with
 * kf_profile_free). Even when naming fails for lack of memory, the events
 * are closed. Any thread, without the profiler's caller's mutex. */
int kf_session_stop(kf_session_t *s, kf_profile_t *out);

/* Gives the session's symbol tables back to the profiler for the next
 * session (or frees them when a newer session keeps its own) and frees
 * the session; closes it first when kf_session_stop was not called. */
void kf_profiler_give_back(kf_profiler_t *p, kf_session_t *s);

void kf_profile_free(kf_profile_t *profile);

/* Continuous profiles. cut() asks for the samples so far (since the last
 * window) to become a window of their own; take_window() returns it, as a
 * profile like stop()'s, once made (about 150 ms after the cut; it waits up
 * to timeout_ms). cut returns 0, -EBUSY while the last cut's window is not
 * taken, or -KF_ERR_NOT_RUNNING; take_window 0, -EAGAIN (not made yet) or
 * an error. Windows tile the profile's time: a sample goes to the window
 * its time falls in; stop() returns the samples after the last window
 * taken, a window cut and not taken included. */
int kf_profiler_cut(kf_profiler_t *p);
int kf_profiler_take_window(kf_profiler_t *p, int timeout_ms, kf_profile_t *out);

/* Frees the symbol tables kept across profiles (symbolizer.h), saying what
 * they held in *dropped; the next start() loads them again. Returns 0, or
 * -KF_ERR_RUNNING while a profile runs (its collector names with them).
 * While a stop in another thread still names with them, nothing is freed
 * (zeros in *dropped). */
int kf_profiler_drop_caches(kf_profiler_t *p, kf_symbolizer_cache_t *dropped);

#endif

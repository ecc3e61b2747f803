/*
 * timersampler: samples this process's threads where perf_event_open is
 * refused (the default seccomp profiles of Docker and Podman, a strict
 * kernel.perf_event_paranoid), as async-profiler's ctimer mode and Go's
 * profiler do.
 *
 * Each thread gets a POSIX timer on its own CPU-time clock (timer_create,
 * SIGEV_THREAD_ID) that fires a real-time signal reserved at open and given
 * back, with the previous action exactly as it was, at disable. The handler
 * walks the interrupted thread's frame pointers, every read checked against
 * that thread's stack bounds, copies the top of its stack as perf's
 * PERF_SAMPLE_STACK_USER does, and writes a record laid out as a perf sample
 * of the perf sampler's layout (sampler.h) plus a count of periods, into
 * that thread's ring: a single-producer single-consumer buffer with perf's
 * head/tail protocol, which the collector drains with ring.c like a perf
 * ring. Everything after the rings is shared with the perf sampler, the
 * DWARF unwinding of frames without frame pointers too (dwarfunwind.h: on
 * the collector, over the copy; never in the handler, where libunwind is
 * not async-signal-safe).
 *
 * The handler saves errno, takes no lock, allocates nothing and calls only
 * clock_gettime, gettid and write (to wake the collector when a ring is half
 * full). It runs on the interrupted stack (no SA_ONSTACK) and needs a few
 * hundred bytes of it.
 *
 * Threads. open() arms every thread of /proc/self/task; then the collector
 * calls kf_timer_scan() every few milliseconds, which arms threads started
 * since and deletes the timers of threads that ended. A thread's stack
 * bounds come from /proc/self/maps, found from the sp of a thread blocked in
 * a system call (/proc/self/task/TID/syscall) or else from the sp the
 * handler reports on the thread's first signal; that one sample carries only
 * the interrupted address (counted in unwalked).
 *
 * CPU-time timers are checked at the scheduler tick (CONFIG_HZ, often 250):
 * above that rate a signal stands for several periods, and its record says
 * how many, so counts still measure CPU time.
 *
 * Which thread calls what: open and close on the JS thread; scan, drain and
 * disable on the collector thread between them (close disables too, for a
 * collector that never started). One timer sampler per process at a time.
 */
#ifndef KF_TIMERSAMPLER_H
#define KF_TIMERSAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "sample/ring.h"
#include "sample/sampler.h"

/* Frames the handler walks at most (perf's default limit is 127). */
#define KF_TIMER_MAX_FRAMES 256
/* Threads sampled at once at most; more are counted in unarmed. */
#define KF_TIMER_MAX_THREADS 4096

typedef struct kf_timer_stats {
  uint64_t lost;       /* periods not recorded: the thread's ring was full */
  uint64_t unwalked;   /* samples taken before the thread's stack was known */
  /* samples whose signal came on top of another handler's frame, before
   * its first instruction: taken of the app's context that frame holds */
  uint64_t over_handler;
  uint64_t corrupt;    /* records the ring reader skipped (none expected) */
  uint64_t armed;      /* threads given a timer, in all */
  uint64_t unarmed;    /* threads that could not get one (see arm_errno) */
  int arm_errno;       /* why the last one could not */
  int signo;           /* the real-time signal in use */
} kf_timer_stats_t;

typedef struct kf_timer kf_timer_t;

/* Reserves a signal, installs the handler and arms every thread. Uses hz,
 * ring_pages (per thread) and stack_bytes of opts; event and kernel do not
 * apply (CPU time, user frames only). Returns 0 or a negative code
 * (error.h) with *sys_errno the errno behind it; leaves nothing behind on
 * failure. */
int kf_timer_open(const kf_sampler_opts_t *opts, kf_timer_t **out,
                  int *sys_errno);

/* What open settled: ring_pages, threads armed at open, stack_bytes,
 * max_stack and the layout of the records (kernel is 0). */
const kf_sampler_info_t *kf_timer_info(const kf_timer_t *t);

/* An eventfd that becomes readable when a ring is half full. */
int kf_timer_wake_fd(const kf_timer_t *t);

/* Collector: arms new threads, lets go of ended ones, finds stack bounds. */
void kf_timer_scan(kf_timer_t *t);

/* Collector: finds the stacks of threads whose handler reported an sp
 * outside what is known (it wakes the collector for it); cheap when none
 * did. */
void kf_timer_find_stacks(kf_timer_t *t);

/* Collector: delivers every record the rings hold; returns how many. */
size_t kf_timer_drain(kf_timer_t *t, kf_ring_record_fn fn, void *ctx);

/* Collector (or close): deletes every timer, drops signals still pending,
 * waits for handlers under way, gives the signal back. The rings keep what
 * was written: drain after it. Idempotent. */
void kf_timer_disable(kf_timer_t *t);

/* Collector, or after it joined. */
void kf_timer_stats(const kf_timer_t *t, kf_timer_stats_t *out);

/* Disables if needed and frees everything. */
void kf_timer_close(kf_timer_t *t);

#endif

/*
 * aggregate: a profile's samples once named, as the collector keeps them
 * while it runs: each distinct (thread, chain of frame names) once with a
 * count, the frame names interned once, the timeline of samples
 * (timeline.h), and per thread what names its root frame. Memory grows with
 * what is distinct, and with the timeline up to its bound, never with time.
 *
 * A named chain is a kf_stacks_t entry (stacks.h) whose entries are frame
 * ids in place of addresses, the PERF_CONTEXT_* markers kept: folded.h
 * folds it as it folds raw chains, naming each id from here.
 *
 * Self-contained (it holds copies of every string): one aggregate is filled
 * by one thread, then handed to another, never shared.
 */
#ifndef KF_AGGREGATE_H
#define KF_AGGREGATE_H

#include <stddef.h>
#include <stdint.h>

#include "collect/stacks.h"
#include "collect/timeline.h"

typedef struct kf_aggregate kf_aggregate_t;

/* A thread seen in the samples. `routine` is the function it was started
 * with, once a stack showed it (threadrole.h), or NULL. */
typedef struct kf_agg_thread {
  uint32_t tid;
  int settled;   /* routine is final */
  char *routine; /* owned, or NULL */
  char comm[16]; /* its name when last seen */
} kf_agg_thread_t;

/* timeline_max: samples the timeline keeps (timeline.h). */
kf_aggregate_t *kf_aggregate_new(uint64_t timeline_max);
void kf_aggregate_free(kf_aggregate_t *a);

/* The id of a frame name, interned on first sight. Ids are small integers,
 * never a PERF_CONTEXT_* marker. Returns 0 or -ENOMEM. */
int kf_aggregate_frame(kf_aggregate_t *a, const char *name, uint64_t *id);
/* The name of an id, or NULL. */
const char *kf_aggregate_frame_name(const kf_aggregate_t *a, uint64_t id);

/* `count` samples of a named chain on thread `tid`: *stack receives the
 * chain's index in kf_aggregate_stacks. Returns 0 or -ENOMEM. */
int kf_aggregate_add(kf_aggregate_t *a, uint32_t tid, const uint64_t *ids,
                     uint32_t nr, uint64_t count, uint32_t *stack);
/* One sample of a stack added before, for the timeline. */
void kf_aggregate_sample(kf_aggregate_t *a, uint64_t time, uint32_t stack,
                         uint32_t tid);

/* The thread's entry, added on first sight; NULL for lack of memory. */
kf_agg_thread_t *kf_aggregate_thread(kf_aggregate_t *a, uint32_t tid);
const kf_agg_thread_t *kf_aggregate_threads(const kf_aggregate_t *a, size_t *n);

const kf_stacks_t *kf_aggregate_stacks(const kf_aggregate_t *a);
const kf_timeline_t *kf_aggregate_timeline(const kf_aggregate_t *a);
/* Hands the timeline over (the caller frees it); the aggregate keeps none. */
kf_timeline_t *kf_aggregate_take_timeline(kf_aggregate_t *a);

/* Adds everything of `from` to `into` (names re-interned, timeline
 * appended, threads' routines kept where `into` has none). Returns 0, or
 * -ENOMEM with the samples not added counted in *dropped. */
int kf_aggregate_merge(kf_aggregate_t *into, const kf_aggregate_t *from,
                       uint64_t *dropped);

typedef struct kf_aggregate_stats {
  uint64_t samples;        /* sample periods added */
  uint64_t first_time, last_time; /* of the samples, CLOCK_MONOTONIC ns */
  size_t frames;           /* distinct frame names */
  size_t bytes;            /* held: tables, names, timeline */
} kf_aggregate_stats_t;
void kf_aggregate_stats(const kf_aggregate_t *a, kf_aggregate_stats_t *out);

#endif

/*
 * timeline: every sample's (time, stack, thread), a few bytes each, for the
 * exports that replay a profile over time (cpuprofile, trace events). The
 * aggregate (stacks.h) is all folded text and SVG need; this is the part of
 * a profile that grows with its length, so it is compact and bounded.
 *
 * Samples are delta-encoded (varints of the time difference, zigzagged
 * because rings are drained out of order; of the stack id; of the thread
 * difference) into chunks mapped apart from the heap, so a dropped or freed
 * chunk goes back to the system at once. Past `max` samples the oldest are
 * dropped, whole chunks at a time, and counted; reading skips the few that
 * the oldest chunk still holds beyond `max`, so exactly the newest `max`
 * are read.
 *
 * Written by one thread (the collector), read after it is done with it.
 */
#ifndef KF_TIMELINE_H
#define KF_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "collect/stacks.h"

/* What start() keeps unless told: an hour at 99 Hz on three busy threads,
 * in about 6 MB. */
#define KF_TIMELINE_DEFAULT_MAX 1000000

typedef struct kf_timeline kf_timeline_t;

/* At most `max` samples kept (0: none; every sample is then dropped and
 * counted, which is what "no timeline" asks for). NULL for lack of memory. */
kf_timeline_t *kf_timeline_new(uint64_t max);
void kf_timeline_free(kf_timeline_t *t);

/* Appends one sample. Returns 0 or -ENOMEM (the sample is then counted in
 * dropped). */
int kf_timeline_add(kf_timeline_t *t, uint64_t time, uint32_t stack, uint32_t tid);

/* Samples that can be read, and those dropped (bound or memory). */
uint64_t kf_timeline_count(const kf_timeline_t *t);
uint64_t kf_timeline_dropped(const kf_timeline_t *t);
/* Bytes mapped for it. */
size_t kf_timeline_bytes(const kf_timeline_t *t);

/* Reads the kept samples, oldest first in the order added. */
typedef struct kf_timeline_iter {
  const void *chunk;
  size_t off;
  uint32_t left;    /* samples still to read in chunk */
  uint64_t skip;    /* samples over the bound, not to be handed out */
  kf_sample_t prev;
} kf_timeline_iter_t;

void kf_timeline_iter(const kf_timeline_t *t, kf_timeline_iter_t *it);
/* 1 and *out filled, or 0 at the end. */
int kf_timeline_next(kf_timeline_iter_t *it, kf_sample_t *out);

#endif

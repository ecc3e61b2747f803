/*
 * stacks: aggregates raw samples as they are drained. Each distinct
 * (thread, callchain) is stored once with a count; every sample also keeps
 * its timestamp and stack id, so exports can replay samples over time.
 *
 * Callchains are kept exactly as the kernel wrote them, leaf first, with the
 * PERF_CONTEXT_* markers in place: the collector names a window of them at a
 * time (namer.h) into an aggregate (aggregate.h), which keeps its named
 * chains in a kf_stacks_t too, without the sample list.
 * Used by one thread at a time.
 */
#ifndef KF_STACKS_H
#define KF_STACKS_H

#include <stddef.h>
#include <stdint.h>

#include "sample/offcpu.h" /* KF_CONTEXT_OFFCPU, KF_CONTEXT_IDLE: markers a chain may hold */

typedef struct kf_stacks kf_stacks_t;

typedef struct kf_stack {
  uint32_t tid;
  uint32_t nr;         /* entries in ips, markers included */
  uint64_t count;      /* samples with this stack */
  const uint64_t *ips; /* leaf first; not NULL, even when nr is 0 */
} kf_stack_t;

typedef struct kf_sample {
  uint64_t time;       /* CLOCK_MONOTONIC, ns */
  uint32_t stack;      /* index for kf_stacks_get */
  uint32_t tid;
} kf_sample_t;

kf_stacks_t *kf_stacks_new(void);
void kf_stacks_free(kf_stacks_t *s);

/* Records one sample. nr == 0 (the kernel's empty callchain) is a stack of
 * its own, and ips may then be NULL. Returns 0 or -ENOMEM (the sample is
 * then not kept). */
int kf_stacks_add(kf_stacks_t *s, uint32_t tid, uint64_t time,
                  const uint64_t *ips, uint32_t nr);

/* Records a sample that stands for `periods` sampling periods (a timer that
 * fired late, see timersampler.h): counted, and kept in the timeline, that
 * many times. periods >= 1. */
int kf_stacks_add_n(kf_stacks_t *s, uint32_t tid, uint64_t time,
                    const uint64_t *ips, uint32_t nr, uint64_t periods);

/* Counts `count` samples of a stack without keeping them in the sample
 * list (an aggregate whose timeline is kept elsewhere); *id receives the
 * stack's index. Returns 0 or -ENOMEM. */
int kf_stacks_count_n(kf_stacks_t *s, uint32_t tid, const uint64_t *ips,
                      uint32_t nr, uint64_t count, uint32_t *id);

/* Forgets every stack and sample, and gives their memory back. */
void kf_stacks_clear(kf_stacks_t *s);

/* Bytes held. */
size_t kf_stacks_bytes(const kf_stacks_t *s);

size_t kf_stacks_count(const kf_stacks_t *s);
void kf_stacks_get(const kf_stacks_t *s, size_t i, kf_stack_t *out);

/* Every sample, in the order added. */
const kf_sample_t *kf_stacks_samples(const kf_stacks_t *s, size_t *n);

#endif

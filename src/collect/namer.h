/*
 * namer: names the collector's raw stacks a window at a time, while the
 * profile runs, into an aggregate (aggregate.h): every address becomes the
 * id of its frame name (JIT tokens from jitframes.h, the rest from the
 * symbolizer), so a function's samples share one chain whatever
 * instruction they hit, and stop() has only the last window left to name.
 *
 * It also settles each thread's start routine (threadrole.h) from the raw
 * chains, which the names no longer carry.
 *
 * Owns the symbolizer between new and free: the collector thread calls it
 * while it runs, the JS thread after it joined; never both.
 */
#ifndef KF_NAMER_H
#define KF_NAMER_H

#include <stdint.h>

#include "collect/aggregate.h"
#include "jit/jitframes.h"
#include "collect/stacks.h"
#include "symbols/symbolizer.h"

typedef struct kf_namer kf_namer_t;

typedef struct kf_namer_opts {
  kf_symbolizer_t *symbolizer;
  const kf_jitframes_t *jit; /* NULL: no JIT tokens in the chains */
  int keep_tiers;            /* "~foo" and "*foo" stay apart */
  uint32_t pid;
  /* A thread's current name (comm), or NULL. */
  const char *(*comm)(void *ctx, uint32_t tid);
  void *comm_ctx;
} kf_namer_opts_t;

kf_namer_t *kf_namer_new(const kf_namer_opts_t *opts);
void kf_namer_free(kf_namer_t *n);

/* Names every stack of `raw` and moves its samples into `into`, those at or
 * after `cut` into `later` instead when it is not NULL (the seam between
 * two windows of a continuous profile); then clears raw. Returns 0, or
 * -ENOMEM with the samples not moved counted in *dropped. */
int kf_namer_fold(kf_namer_t *n, kf_stacks_t *raw, kf_aggregate_t *into,
                  kf_aggregate_t *later, uint64_t cut, uint64_t *dropped);

/* Forgets the cached names of one aggregate (before it is freed or handed
 * over, so a new one at the same address is not mistaken for it). */
void kf_namer_forget(kf_namer_t *n, const kf_aggregate_t *a);

/* Distinct addresses named from debug files and folded into [object]
 * (symbolizer.h), since new. */
void kf_namer_stats(const kf_namer_t *n, kf_symbolizer_stats_t *out);

#endif

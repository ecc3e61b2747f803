/*
 * offcpu: turns context switches into off-CPU samples weighted by the time
 * each thread spent switched out.
 *
 * The sampler gives, per thread, a sample with the callchain when the
 * thread is switched out (kf_offcpu_out: standing for `switches` switches
 * when perf samples one in so many) and a stamp when it is switched back in
 * (kf_offcpu_in). The two come through different CPUs' rings, drained one
 * after the other, so they arrive out of order: they are kept until
 * kf_offcpu_settle() is told that everything stamped before a time has
 * arrived, then paired in time order per thread.
 *
 * A pair's weight is its time off CPU times its switches; weights are
 * counted in sampling periods (period_ns, 1/hz), the unit of CPU samples:
 * each thread's off-CPU time runs a clock that yields one sample per period,
 * given to the stack the thread was waiting in when it ticked, the rest of
 * a period carried to the thread's next wait. So a thread that waited the
 * whole profile has as many samples as one that ran the whole time.
 *
 * Pure (no syscalls): one collector thread uses it; tested on its own.
 */
#ifndef KF_OFFCPU_H
#define KF_OFFCPU_H

#include <stddef.h>
#include <stdint.h>

/* kflame's own chain markers, in the PERF_CONTEXT_* range (>=
 * PERF_CONTEXT_MAX) where the kernel uses none: first in a chain, they say
 * the thread was off CPU (switched out) there, waiting or idle (the event
 * loop polling with nothing to do, a pool thread waiting for work; see
 * namer.h). Folded text shows them as a frame under the thread's root:
 * "[off-cpu]" and "(idle)". */
#define KF_CONTEXT_OFFCPU ((uint64_t)-3000)
#define KF_CONTEXT_IDLE ((uint64_t)-3001)

typedef struct kf_offcpu kf_offcpu_t;

typedef struct kf_offcpu_stats {
  uint64_t outs;      /* switched-out samples received */
  uint64_t ins;       /* switch-in stamps received */
  uint64_t paired;    /* outs given a weight */
  uint64_t unpaired;  /* outs followed by another out without a switch-in
                         between (a record lost), or stamped after the end */
  uint64_t open;      /* outs still waiting at the end, weighed to it */
  uint64_t weighted_ns; /* off-CPU time of the pairs, times their switches */
  uint64_t samples;   /* periods handed out */
  uint64_t no_memory; /* outs dropped for lack of memory */
} kf_offcpu_stats_t;

/* Called for each wait that makes `periods` (>= 1) samples: the chain as
 * given to kf_offcpu_out with KF_CONTEXT_OFFCPU (stacks.h) before it,
 * stamped with the switch-out time. Returns 0 or -ENOMEM (counted). */
typedef int (*kf_offcpu_emit_fn)(void *ctx, uint32_t tid, uint64_t time,
                                 const uint64_t *ips, uint32_t nr,
                                 uint64_t periods);

kf_offcpu_t *kf_offcpu_new(uint64_t period_ns);
void kf_offcpu_free(kf_offcpu_t *o);

/* A switch-out at `time` (ns) standing for `switches` (>= 1) switches;
 * the chain is copied. Returns 0 or -ENOMEM (counted in no_memory). */
int kf_offcpu_out(kf_offcpu_t *o, uint32_t tid, uint64_t time,
                  uint64_t switches, const uint64_t *ips, uint32_t nr);
/* A switch-in at `time`. Returns 0 or -ENOMEM. */
int kf_offcpu_in(kf_offcpu_t *o, uint32_t tid, uint64_t time);
/* The thread's switch-out sampled next, within KF_OFFCPU_WEIGHT_NS after
 * `time`, stands for `switches` (>= 1) switches in place of its sample's
 * period: switchin.h's rate bound says so just before the kernel takes the
 * sample. A weight whose sample never comes (lost, and counted, in the
 * ring) is forgotten. Returns 0 or -ENOMEM. */
#define KF_OFFCPU_WEIGHT_NS 1000000ULL
int kf_offcpu_weight(kf_offcpu_t *o, uint32_t tid, uint64_t time,
                     uint64_t switches);

/* Pairs every event stamped before `until` (UINT64_MAX: all of them, at
 * the end), in time order, and emits the waits that make samples. A
 * switch-out still waiting for its switch-in stays for the next call;
 * at the end (until UINT64_MAX) it is a wait that lasted until `end`, the
 * end of the profile (one stamped after `end` is dropped, counted
 * unpaired). */
void kf_offcpu_settle(kf_offcpu_t *o, uint64_t until, uint64_t end,
                      kf_offcpu_emit_fn emit, void *ctx);

void kf_offcpu_stats(const kf_offcpu_t *o, kf_offcpu_stats_t *out);

#endif

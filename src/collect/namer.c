#define _GNU_SOURCE
#include "collect/namer.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>

#include "util/addrmap.h"
#include "util/clock.h"
#include "util/grow.h"
#include "util/mapped.h"
#include "collect/threadrole.h"

/* /proc/self/maps is read again for an address in no mapping known (a
 * library loaded while profiling), at most this often. */
#define MAPS_RELOAD_NS 1000000000ULL
/* An address cache past this many entries starts over (a long profile of
 * code that keeps moving must not grow it without end). */
#define CACHE_MAX_ENTRIES ((size_t)1 << 20)

/* (address, context) -> frame id in one aggregate. */
typedef struct cache {
  const kf_aggregate_t *owner;
  kf_addrmap_t ids;
} cache_t;

struct kf_namer {
  kf_namer_opts_t opts;
  int begun;
  uint64_t begun_at;
  kf_symbolizer_stats_t before; /* stats of symbolizer rounds ended */
  cache_t caches[2];
  uint64_t *ids;
  size_t ids_cap;
  /* Per raw stack of a fold: its samples for each target, then its id. */
  uint64_t *counts;
  uint32_t *named;
  size_t counts_cap, named_cap;
};

kf_namer_t *kf_namer_new(const kf_namer_opts_t *opts) {
  kf_namer_t *n = calloc(1, sizeof(*n));
  if (n) n->opts = *opts;
  return n;
}

static void cache_reset(cache_t *c, const kf_aggregate_t *owner) {
  kf_addrmap_clear(&c->ids);
  c->owner = owner;
}

void kf_namer_free(kf_namer_t *n) {
  if (!n) return;
  cache_reset(&n->caches[0], NULL);
  cache_reset(&n->caches[1], NULL);
  free(n->ids);
  kf_mapped_free(n->counts, n->counts_cap, sizeof(uint64_t));
  kf_mapped_free(n->named, n->named_cap, sizeof(uint32_t));
  free(n);
}

void kf_namer_forget(kf_namer_t *n, const kf_aggregate_t *a) {
  for (int i = 0; i < 2; i++)
    if (n->caches[i].owner == a) cache_reset(&n->caches[i], NULL);
}

static cache_t *cache_for(kf_namer_t *n, const kf_aggregate_t *a,
                          const kf_aggregate_t *other) {
  for (int i = 0; i < 2; i++)
    if (n->caches[i].owner == a) return &n->caches[i];
  /* Not one's: the cache of neither `a` nor `other` is free to take. */
  cache_t *c = n->caches[0].owner != other ? &n->caches[0] : &n->caches[1];
  cache_reset(c, a);
  return c;
}

static void symbolizer_begin(kf_namer_t *n) {
  kf_symbolizer_stats_t now;
  kf_symbolizer_stats(n->opts.symbolizer, &now);
  n->before.from_debug += now.from_debug;
  n->before.folded += now.folded;
  kf_symbolizer_begin(n->opts.symbolizer); /* a failure leaves no maps: "[unknown]" */
  n->begun = 1;
  n->begun_at = kf_now_ns();
}

/* The frame name of an address, as the fold of raw chains named it. */
static const char *name_of(kf_namer_t *n, uint64_t ip, int kernel) {
  if (n->opts.jit && kf_jitframes_is_token(ip)) {
    const char *name = kf_jitframes_name(n->opts.jit, ip, n->opts.keep_tiers);
    return name ? name : "[jit]_[j]";
  }
  const char *name = kf_symbolizer_frame(n->opts.symbolizer, ip, kernel);
  if (!kernel && strcmp(name, "[unknown]") == 0 &&
      kf_now_ns() - n->begun_at >= MAPS_RELOAD_NS) {
    symbolizer_begin(n); /* mapped since the maps were read? */
    name = kf_symbolizer_frame(n->opts.symbolizer, ip, kernel);
  }
  return name;
}

static int frame_id(kf_namer_t *n, cache_t *c, kf_aggregate_t *a, uint64_t ip,
                    int kernel, uint64_t *id) {
  if (c->ids.count >= CACHE_MAX_ENTRIES) cache_reset(c, a);
  if (kf_addrmap_get(&c->ids, ip, kernel, id)) return 0;
  if (kf_aggregate_frame(a, name_of(n, ip, kernel), id) ||
      kf_addrmap_put(&c->ids, ip, kernel, *id))
    return -ENOMEM;
  return 0;
}

/* User frames from the leaf within which the idle wait's caller is found:
 * libc's wrappers (epoll_wait; pthread_cond_wait and the futex wait under
 * it) come before it, never a function of the application. */
#define IDLE_DEPTH 6

/* An off-CPU chain (named, leaf first) of a thread with nothing to do:
 * the event loop polling (epoll_wait called by libuv's uv__io_poll), a
 * thread pool or V8 platform worker waiting for a task (uv_cond_wait
 * called by libuv's `worker` or node's PlatformWorkerThread), or one of
 * kflame's own threads. Only the innermost user frames count: a callback
 * run from uv__io_poll that then waits (Atomics.wait in a message handler)
 * is a real wait. These are not waits worth showing; the SVG hides them. */
static int idle_chain(const kf_namer_t *n, const kf_aggregate_t *a, const kf_stack_t *st) {
  const char *comm = n->opts.comm ? n->opts.comm(n->opts.comm_ctx, st->tid) : NULL;
  if (comm && strncmp(comm, "kflame-", 7) == 0) return 1;
  const char *callee = NULL;
  int user = 0, depth = 0;
  for (uint32_t i = 0; i < st->nr && depth < IDLE_DEPTH; i++) {
    if (st->ips[i] >= (uint64_t)PERF_CONTEXT_MAX) {
      user = st->ips[i] == (uint64_t)PERF_CONTEXT_USER;
      continue;
    }
    if (!user) continue;
    depth++;
    const char *name = kf_aggregate_frame_name(a, n->ids[i]);
    if (!name) continue;
    if (strcmp(name, "uv__io_poll") == 0) return 1;
    if (callee && strcmp(callee, "uv_cond_wait") == 0 &&
        (strcmp(name, "worker") == 0 ||
         strcmp(name, "node::(anonymous namespace)::PlatformWorkerThread(void*)") == 0))
      return 1;
    callee = name;
  }
  return 0;
}

/* The chain with each frame's address replaced by its name's id, markers
 * kept (folded.c reads contexts from them), into n->ids. */
static int name_chain(kf_namer_t *n, cache_t *c, kf_aggregate_t *a,
                      const kf_stack_t *st) {
  if (kf_grow((void **)&n->ids, &n->ids_cap, st->nr + 1, sizeof(uint64_t), 256))
    return -ENOMEM;
  int kernel = 0;
  for (uint32_t i = 0; i < st->nr; i++) {
    uint64_t ip = st->ips[i];
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
      kernel = ip == (uint64_t)PERF_CONTEXT_KERNEL;
      n->ids[i] = ip;
      continue;
    }
    if (frame_id(n, c, a, ip, kernel, &n->ids[i])) return -ENOMEM;
  }
  if (st->nr && st->ips[0] == KF_CONTEXT_OFFCPU && idle_chain(n, a, st))
    n->ids[0] = KF_CONTEXT_IDLE;
  return 0;
}

/* The outermost frame of a stack that is not C library start-up code
 * (clone3, start_thread): the function the thread was started with. */
static const char *start_routine(kf_symbolizer_t *sym, const kf_stack_t *st) {
  for (uint32_t i = st->nr; i-- > 0;) {
    uint64_t ip = st->ips[i];
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) break; /* only user frames */
    if (kf_symbolizer_in_libc(sym, ip)) continue;
    return kf_symbolizer_frame(sym, ip, 0);
  }
  return NULL;
}

/* A role is settled by the first stack whose outermost frame is one of
 * Node's start routines (the main thread's by its first stack). A chain
 * broken by a frame without a frame pointer ends in a garbage frame and
 * settles nothing; threads no stack settled are named by comm. */
static int settle_thread(kf_namer_t *n, kf_aggregate_t *a, const kf_stack_t *st) {
  kf_agg_thread_t *t = kf_aggregate_thread(a, st->tid);
  if (!t) return -ENOMEM;
  const char *comm = n->opts.comm ? n->opts.comm(n->opts.comm_ctx, st->tid) : NULL;
  if (comm) strncpy(t->comm, comm, sizeof t->comm - 1);
  if (t->settled) return 0;
  const char *routine = start_routine(n->opts.symbolizer, st);
  if (st->tid != n->opts.pid && !kf_thread_role(routine)) return 0;
  if (routine && !(t->routine = strdup(routine))) return -ENOMEM;
  t->settled = 1;
  return 0;
}

int kf_namer_fold(kf_namer_t *n, kf_stacks_t *raw, kf_aggregate_t *into,
                  kf_aggregate_t *later, uint64_t cut, uint64_t *dropped) {
  size_t nstacks = kf_stacks_count(raw), nsamples;
  const kf_sample_t *samples = kf_stacks_samples(raw, &nsamples);
  int rc = 0;
  if (nsamples == 0) goto out;
  if (!n->begun) symbolizer_begin(n);
  kf_aggregate_t *targets[2] = {into, later};
  if (kf_mapped_grow((void **)&n->counts, &n->counts_cap, nstacks * 2, sizeof(uint64_t), 4096) ||
      kf_mapped_grow((void **)&n->named, &n->named_cap, nstacks * 2, sizeof(uint32_t), 4096)) {
    rc = -ENOMEM;
    *dropped += nsamples;
    goto out;
  }
  memset(n->counts, 0, nstacks * 2 * sizeof(uint64_t));
  for (size_t i = 0; i < nsamples; i++)
    n->counts[samples[i].stack * 2 + (later && samples[i].time >= cut)]++;
  for (size_t s = 0; s < nstacks; s++) {
    kf_stack_t st;
    kf_stacks_get(raw, s, &st);
    for (int w = 0; w < 2; w++) {
      uint64_t count = n->counts[s * 2 + w];
      if (!count) continue;
      kf_aggregate_t *a = targets[w];
      cache_t *c = cache_for(n, a, targets[!w]);
      if (settle_thread(n, a, &st) || name_chain(n, c, a, &st) ||
          kf_aggregate_add(a, st.tid, n->ids, st.nr, count, &n->named[s * 2 + w])) {
        rc = -ENOMEM;
        *dropped += count;
        n->counts[s * 2 + w] = 0; /* no timeline entry for what is not counted */
      }
    }
  }
  for (size_t i = 0; i < nsamples; i++) {
    int w = later && samples[i].time >= cut;
    uint32_t s = samples[i].stack;
    if (n->counts[s * 2 + w])
      kf_aggregate_sample(targets[w], samples[i].time, n->named[s * 2 + w], samples[i].tid);
  }
out:
  kf_stacks_clear(raw);
  return rc;
}

void kf_namer_stats(const kf_namer_t *n, kf_symbolizer_stats_t *out) {
  kf_symbolizer_stats(n->opts.symbolizer, out);
  out->from_debug += n->before.from_debug;
  out->folded += n->before.folded;
}

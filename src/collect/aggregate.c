#define _GNU_SOURCE
#include "collect/aggregate.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "util/hash.h"
#include "util/mapped.h"

struct kf_aggregate {
  kf_stacks_t *stacks;  /* named chains, counts only */
  kf_timeline_t *timeline;
  /* Interned names: NUL-terminated in `pool`, id i at offsets[i]; found by
   * open addressing on their hash (slot: id + 1, 0 empty). */
  char *pool;
  size_t pool_len, pool_cap;
  uint32_t *offsets;
  size_t nnames, offsets_cap;
  uint32_t *slots;
  size_t nslots;
  kf_agg_thread_t *threads;
  size_t nthreads, threads_cap;
  uint64_t samples, first_time, last_time;
};

kf_aggregate_t *kf_aggregate_new(uint64_t timeline_max) {
  kf_aggregate_t *a = calloc(1, sizeof(*a));
  if (!a) return NULL;
  a->stacks = kf_stacks_new();
  a->timeline = kf_timeline_new(timeline_max);
  if (!a->stacks || !a->timeline) {
    kf_aggregate_free(a);
    return NULL;
  }
  return a;
}

void kf_aggregate_free(kf_aggregate_t *a) {
  if (!a) return;
  kf_stacks_free(a->stacks);
  kf_timeline_free(a->timeline);
  kf_mapped_free(a->pool, a->pool_cap, 1);
  kf_mapped_free(a->offsets, a->offsets_cap, sizeof(uint32_t));
  kf_mapped_free(a->slots, a->nslots, sizeof(uint32_t));
  for (size_t i = 0; i < a->nthreads; i++) free(a->threads[i].routine);
  free(a->threads);
  free(a);
}

static uint64_t hash_name(const char *s, size_t n) {
  return kf_hash_mix(kf_fnv_bytes(KF_FNV_OFFSET, s, n));
}

static int rehash(kf_aggregate_t *a) {
  size_t n = a->nslots ? a->nslots * 2 : 1024;
  uint32_t *slots = kf_mapped_calloc(n, sizeof(uint32_t));
  if (!slots) return -ENOMEM;
  for (size_t i = 0; i < a->nnames; i++) {
    const char *name = a->pool + a->offsets[i];
    size_t j = hash_name(name, strlen(name)) & (n - 1);
    while (slots[j]) j = (j + 1) & (n - 1);
    slots[j] = (uint32_t)(i + 1);
  }
  kf_mapped_free(a->slots, a->nslots, sizeof(uint32_t));
  a->slots = slots;
  a->nslots = n;
  return 0;
}

int kf_aggregate_frame(kf_aggregate_t *a, const char *name, uint64_t *id) {
  size_t len = strlen(name);
  if ((a->nnames + 1) * 2 > a->nslots && rehash(a)) return -ENOMEM;
  size_t j = hash_name(name, len) & (a->nslots - 1);
  for (; a->slots[j]; j = (j + 1) & (a->nslots - 1)) {
    const char *known = a->pool + a->offsets[a->slots[j] - 1];
    if (strcmp(known, name) == 0) {
      *id = a->slots[j] - 1;
      return 0;
    }
  }
  if (a->nnames >= UINT32_MAX - 1 || a->pool_len + len + 1 > UINT32_MAX ||
      kf_mapped_grow((void **)&a->pool, &a->pool_cap, a->pool_len + len + 1, 1, 65536) ||
      kf_mapped_grow((void **)&a->offsets, &a->offsets_cap, a->nnames + 1, sizeof(uint32_t), 4096))
    return -ENOMEM;
  memcpy(a->pool + a->pool_len, name, len + 1);
  a->offsets[a->nnames] = (uint32_t)a->pool_len;
  a->pool_len += len + 1;
  a->slots[j] = (uint32_t)(a->nnames + 1);
  *id = a->nnames++;
  return 0;
}

const char *kf_aggregate_frame_name(const kf_aggregate_t *a, uint64_t id) {
  return id < a->nnames ? a->pool + a->offsets[id] : NULL;
}

int kf_aggregate_add(kf_aggregate_t *a, uint32_t tid, const uint64_t *ids,
                     uint32_t nr, uint64_t count, uint32_t *stack) {
  return kf_stacks_count_n(a->stacks, tid, ids, nr, count, stack);
}

void kf_aggregate_sample(kf_aggregate_t *a, uint64_t time, uint32_t stack,
                         uint32_t tid) {
  if (a->samples == 0 || time < a->first_time) a->first_time = time;
  if (time > a->last_time) a->last_time = time;
  a->samples++;
  if (a->timeline) kf_timeline_add(a->timeline, time, stack, tid); /* failures counted there */
}

kf_agg_thread_t *kf_aggregate_thread(kf_aggregate_t *a, uint32_t tid) {
  for (size_t i = a->nthreads; i-- > 0;)
    if (a->threads[i].tid == tid) return &a->threads[i];
  if (kf_grow((void **)&a->threads, &a->threads_cap, a->nthreads + 1,
              sizeof(kf_agg_thread_t), 16))
    return NULL;
  kf_agg_thread_t *t = &a->threads[a->nthreads++];
  memset(t, 0, sizeof(*t));
  t->tid = tid;
  return t;
}

const kf_agg_thread_t *kf_aggregate_threads(const kf_aggregate_t *a, size_t *n) {
  *n = a->nthreads;
  return a->threads;
}

const kf_stacks_t *kf_aggregate_stacks(const kf_aggregate_t *a) { return a->stacks; }

const kf_timeline_t *kf_aggregate_timeline(const kf_aggregate_t *a) { return a->timeline; }

kf_timeline_t *kf_aggregate_take_timeline(kf_aggregate_t *a) {
  kf_timeline_t *t = a->timeline;
  a->timeline = NULL;
  return t;
}

static int merge_threads(kf_aggregate_t *into, const kf_aggregate_t *from) {
  for (size_t i = 0; i < from->nthreads; i++) {
    const kf_agg_thread_t *f = &from->threads[i];
    kf_agg_thread_t *t = kf_aggregate_thread(into, f->tid);
    if (!t) return -ENOMEM;
    if (f->comm[0]) memcpy(t->comm, f->comm, sizeof t->comm);
    if (t->settled || !f->settled) continue;
    if (f->routine && !(t->routine = strdup(f->routine))) return -ENOMEM;
    t->settled = 1;
  }
  return 0;
}

int kf_aggregate_merge(kf_aggregate_t *into, const kf_aggregate_t *from,
                       uint64_t *dropped) {
  size_t n = kf_stacks_count(from->stacks);
  int had = into->samples > 0;
  uint64_t first = into->first_time;
  uint32_t *map = malloc((n ? n : 1) * sizeof(uint32_t));
  uint64_t *ids = NULL;
  size_t ids_cap = 0;
  int rc = map && merge_threads(into, from) == 0 ? 0 : -ENOMEM;
  for (size_t i = 0; i < n && rc == 0; i++) {
    kf_stack_t st;
    kf_stacks_get(from->stacks, i, &st);
    if (kf_grow((void **)&ids, &ids_cap, st.nr + 1, sizeof(uint64_t), 64)) {
      rc = -ENOMEM;
      break;
    }
    for (uint32_t k = 0; k < st.nr && rc == 0; k++)
      rc = st.ips[k] >= (uint64_t)PERF_CONTEXT_MAX
               ? (ids[k] = st.ips[k], 0)
               : kf_aggregate_frame(into, kf_aggregate_frame_name(from, st.ips[k]), &ids[k]);
    if (rc == 0) rc = kf_aggregate_add(into, st.tid, ids, st.nr, st.count, &map[i]);
  }
  if (rc == 0 && from->timeline) {
    kf_timeline_iter_t it;
    kf_sample_t s;
    kf_timeline_iter(from->timeline, &it);
    while (kf_timeline_next(&it, &s)) kf_aggregate_sample(into, s.time, map[s.stack], s.tid);
  }
  if (rc == 0) { /* what the timeline did not keep still counts */
    into->samples += from->samples - (from->timeline ? kf_timeline_count(from->timeline) : 0);
    if (from->samples) {
      into->first_time = had && first < from->first_time ? first : from->first_time;
      if (from->last_time > into->last_time) into->last_time = from->last_time;
    }
  } else {
    *dropped += from->samples;
  }
  free(map);
  free(ids);
  return rc;
}

void kf_aggregate_stats(const kf_aggregate_t *a, kf_aggregate_stats_t *out) {
  out->samples = a->samples;
  out->first_time = a->first_time;
  out->last_time = a->last_time;
  out->frames = a->nnames;
  out->bytes = kf_stacks_bytes(a->stacks) + a->pool_cap + a->offsets_cap * 4 +
               a->nslots * 4 + a->threads_cap * sizeof(kf_agg_thread_t) +
               (a->timeline ? kf_timeline_bytes(a->timeline) : 0);
}

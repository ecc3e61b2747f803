#define _GNU_SOURCE
#include "collect/stacks.h"

#include "util/hash.h"
#include "util/mapped.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
  uint64_t hash;
  uint64_t count;
  uint64_t ips_off; /* into s->ips */
  uint32_t tid, nr;
} entry_t;

struct kf_stacks {
  entry_t *entries;
  size_t nentries, entries_cap;
  uint32_t *slots; /* open addressing: entry index + 1, 0 = empty */
  size_t nslots;   /* power of two */
  uint64_t *ips;
  size_t nips, ips_cap;
  kf_sample_t *samples;
  size_t nsamples, samples_cap;
};

static uint64_t hash_stack(uint32_t tid, const uint64_t *ips, uint32_t nr) {
  /* FNV-1a over 64-bit words, then a final mix so low bits spread. */
  return kf_hash_mix(kf_fnv_words(KF_FNV_OFFSET ^ tid, ips, nr));
}

kf_stacks_t *kf_stacks_new(void) { return calloc(1, sizeof(kf_stacks_t)); }

void kf_stacks_free(kf_stacks_t *s) {
  if (!s) return;
  kf_stacks_clear(s);
  free(s);
}

static int rehash(kf_stacks_t *s) {
  size_t n = s->nslots ? s->nslots * 2 : 1024;
  uint32_t *slots = kf_mapped_calloc(n, sizeof(uint32_t));
  if (!slots) return -ENOMEM;
  for (size_t i = 0; i < s->nentries; i++) {
    size_t j = s->entries[i].hash & (n - 1);
    while (slots[j]) j = (j + 1) & (n - 1);
    slots[j] = (uint32_t)(i + 1);
  }
  kf_mapped_free(s->slots, s->nslots, sizeof(uint32_t));
  s->slots = slots;
  s->nslots = n;
  return 0;
}

int kf_stacks_add(kf_stacks_t *s, uint32_t tid, uint64_t time,
                  const uint64_t *ips, uint32_t nr) {
  return kf_stacks_add_n(s, tid, time, ips, nr, 1);
}

/* The index of (tid, ips), added with a count of 0 when new; -ENOMEM. */
static int find_or_add(kf_stacks_t *s, uint32_t tid, const uint64_t *ips,
                       uint32_t nr, uint32_t *out) {
  /* Keep the table at most half full. */
  if ((s->nentries + 1) * 2 > s->nslots && rehash(s)) return -ENOMEM;
  uint64_t h = hash_stack(tid, ips, nr);
  size_t j = h & (s->nslots - 1);
  for (; s->slots[j]; j = (j + 1) & (s->nslots - 1)) {
    entry_t *e = &s->entries[s->slots[j] - 1];
    /* nr == 0 is the kernel's empty callchain; ips may then be NULL, and
     * memcmp must not see it even for 0 bytes. */
    if (e->hash == h && e->tid == tid && e->nr == nr &&
        (nr == 0 || memcmp(s->ips + e->ips_off, ips, nr * sizeof(uint64_t)) == 0)) {
      *out = s->slots[j] - 1;
      return 0;
    }
  }
  if (s->nentries >= UINT32_MAX - 1 ||
      kf_mapped_grow((void **)&s->entries, &s->entries_cap, s->nentries + 1,
              sizeof(entry_t), 1024) ||
      /* At least one slot, so the pool exists and an empty stack's ips
       * (s->ips + ips_off) is never NULL + 0. */
      kf_mapped_grow((void **)&s->ips, &s->ips_cap, s->nips + nr + (s->ips == NULL),
              sizeof(uint64_t), 1024))
    return -ENOMEM;
  uint32_t id = (uint32_t)s->nentries++;
  s->entries[id] = (entry_t){
      .hash = h, .count = 0, .ips_off = s->nips, .tid = tid, .nr = nr};
  if (nr) memcpy(s->ips + s->nips, ips, nr * sizeof(uint64_t));
  s->nips += nr;
  s->slots[j] = id + 1;
  *out = id;
  return 0;
}

int kf_stacks_add_n(kf_stacks_t *s, uint32_t tid, uint64_t time,
                    const uint64_t *ips, uint32_t nr, uint64_t periods) {
  uint32_t id;
  if (periods == 0 || periods > SIZE_MAX / 2 ||
      kf_mapped_grow((void **)&s->samples, &s->samples_cap, s->nsamples + periods,
              sizeof(kf_sample_t), 1024) ||
      find_or_add(s, tid, ips, nr, &id))
    return -ENOMEM;
  s->entries[id].count += periods;
  for (uint64_t i = 0; i < periods; i++)
    s->samples[s->nsamples++] = (kf_sample_t){.time = time, .stack = id, .tid = tid};
  return 0;
}

int kf_stacks_count_n(kf_stacks_t *s, uint32_t tid, const uint64_t *ips,
                      uint32_t nr, uint64_t count, uint32_t *id) {
  if (find_or_add(s, tid, ips, nr, id)) return -ENOMEM;
  s->entries[*id].count += count;
  return 0;
}

void kf_stacks_clear(kf_stacks_t *s) {
  kf_mapped_free(s->entries, s->entries_cap, sizeof(entry_t));
  kf_mapped_free(s->slots, s->nslots, sizeof(uint32_t));
  kf_mapped_free(s->ips, s->ips_cap, sizeof(uint64_t));
  kf_mapped_free(s->samples, s->samples_cap, sizeof(kf_sample_t));
  memset(s, 0, sizeof(*s));
}

size_t kf_stacks_bytes(const kf_stacks_t *s) {
  return s->entries_cap * sizeof(entry_t) + s->nslots * sizeof(uint32_t) +
         s->ips_cap * sizeof(uint64_t) + s->samples_cap * sizeof(kf_sample_t);
}

size_t kf_stacks_count(const kf_stacks_t *s) { return s->nentries; }

void kf_stacks_get(const kf_stacks_t *s, size_t i, kf_stack_t *out) {
  const entry_t *e = &s->entries[i];
  out->tid = e->tid;
  out->nr = e->nr;
  out->count = e->count;
  out->ips = s->ips + e->ips_off;
}

const kf_sample_t *kf_stacks_samples(const kf_stacks_t *s, size_t *n) {
  *n = s->nsamples;
  return s->samples;
}

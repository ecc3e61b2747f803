#include "jitframes.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

#define TOKEN_BASE 0xfffe000000000000ULL
#define TOKEN_MASK 0xffff000000000000ULL
#define NAME_BYTES 1024

typedef struct jit_name {
  char *merged; /* "foo a.js:1:2_[j]" */
  char *tiered; /* "~foo a.js:1:2_[j]" */
  uint64_t hash;
  char tier;
} jit_name_t;

struct kf_jitframes {
  kf_codemap_t *map;
  jit_name_t *names;
  size_t nnames, names_cap;
  uint32_t *slots; /* open addressing: name index + 1, 0 when empty */
  size_t nslots;
};

static uint64_t hash_name(const char *s, char tier) {
  uint64_t h = 1469598103934665603ULL ^ (unsigned char)tier; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

kf_jitframes_t *kf_jitframes_new(kf_codemap_t *map) {
  kf_jitframes_t *j = calloc(1, sizeof(*j));
  if (j) j->map = map;
  return j;
}

void kf_jitframes_free(kf_jitframes_t *j) {
  if (!j) return;
  for (size_t i = 0; i < j->nnames; i++) {
    free(j->names[i].merged);
    free(j->names[i].tiered);
  }
  free(j->names);
  free(j->slots);
  free(j);
}

int kf_jitframes_is_token(uint64_t ip) {
  return (ip & TOKEN_MASK) == TOKEN_BASE;
}

static int rehash(kf_jitframes_t *j) {
  size_t n = j->nslots ? j->nslots * 2 : 256;
  uint32_t *slots = calloc(n, sizeof(*slots));
  if (!slots) return -ENOMEM;
  for (size_t i = 0; i < j->nnames; i++) {
    size_t s = j->names[i].hash & (n - 1);
    while (slots[s]) s = (s + 1) & (n - 1);
    slots[s] = (uint32_t)i + 1;
  }
  free(j->slots);
  j->slots = slots;
  j->nslots = n;
  return 0;
}

static char *frame_text(const char *name, char tier) {
  size_t n = strlen(name);
  char *s = malloc(n + 6);
  if (!s) return NULL;
  size_t k = 0;
  if (tier) s[k++] = tier;
  memcpy(s + k, name, n);
  memcpy(s + k + n, "_[j]", 5);
  return s;
}

/* Index of (name, tier), added when new; -ENOMEM. */
static long intern(kf_jitframes_t *j, const char *name, char tier) {
  if ((j->nnames + 1) * 2 > j->nslots && rehash(j)) return -ENOMEM;
  size_t n = strlen(name);
  uint64_t h = hash_name(name, tier);
  size_t s = h & (j->nslots - 1);
  for (; j->slots[s]; s = (s + 1) & (j->nslots - 1)) {
    const jit_name_t *e = &j->names[j->slots[s] - 1];
    if (e->hash == h && e->tier == tier &&
        strncmp(e->merged, name, n) == 0 && strcmp(e->merged + n, "_[j]") == 0)
      return (long)(j->slots[s] - 1);
  }
  if (kf_grow((void **)&j->names, &j->names_cap, j->nnames + 1,
              sizeof(*j->names), 256))
    return -ENOMEM;
  jit_name_t *e = &j->names[j->nnames];
  e->hash = h;
  e->tier = tier;
  e->merged = frame_text(name, '\0');
  e->tiered = frame_text(name, tier);
  if (!e->merged || !e->tiered) {
    free(e->merged);
    free(e->tiered);
    return -ENOMEM;
  }
  j->slots[s] = (uint32_t)++j->nnames;
  return (long)(j->nnames - 1);
}

int kf_jitframes_resolve(kf_jitframes_t *j, uint64_t time,
                         const uint64_t *ips, uint32_t nr, uint64_t *out) {
  char name[NAME_BYTES];
  int user = 0, named = 0;
  for (uint32_t i = 0; i < nr; i++) {
    uint64_t ip = ips[i];
    out[i] = ip;
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
      user = ip == (uint64_t)PERF_CONTEXT_USER;
      continue;
    }
    char tier;
    if (!user || !j->map ||
        kf_codemap_lookup(j->map, ip, time, name, sizeof name, &tier) < 0)
      continue;
    long id = intern(j, name, tier);
    if (id < 0) return -ENOMEM;
    out[i] = TOKEN_BASE | (uint64_t)id;
    named++;
  }
  return named;
}

const char *kf_jitframes_name(const kf_jitframes_t *j, uint64_t token,
                              int keep_tier) {
  uint64_t id = token & ~TOKEN_MASK;
  if (!kf_jitframes_is_token(token) || id >= j->nnames) return NULL;
  return keep_tier ? j->names[id].tiered : j->names[id].merged;
}

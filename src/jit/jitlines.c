#include "jit/jitlines.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "util/hash.h"

typedef struct line {
  uint32_t code_offset, position;
  int32_t inlining; /* V8's inlining id, -1: the outer function's own */
} line_t;

struct kf_lines {
  atomic_int refs;
  int broken;
  line_t *lines;
  size_t n, cap;
  kf_inlining_t *inlinings; /* by inlining id; NULL: ids not known */
  size_t ninlinings;
};

kf_lines_t *kf_lines_new(void) {
  kf_lines_t *l = calloc(1, sizeof(*l));
  if (l) atomic_init(&l->refs, 1);
  return l;
}

int kf_lines_push(kf_lines_t *l, uint32_t code_offset, uint32_t position) {
  if (l->broken) return -ENOMEM;
  if (kf_grow((void **)&l->lines, &l->cap, l->n + 1, sizeof(line_t), 16)) {
    l->broken = 1;
    return -ENOMEM;
  }
  l->lines[l->n++] = (line_t){code_offset, position, -1};
  return 0;
}

int kf_lines_push_inlined(kf_lines_t *l, uint32_t code_offset, uint32_t position,
                          int32_t inlining) {
  int rc = kf_lines_push(l, code_offset, position);
  if (rc == 0) l->lines[l->n - 1].inlining = inlining < 0 ? -1 : inlining;
  return rc;
}

int kf_lines_set_inlinings(kf_lines_t *l, const kf_inlining_t *in, size_t n) {
  if (l->broken) return -ENOMEM;
  kf_inlining_t *copy = malloc((n ? n : 1) * sizeof(*copy));
  if (!copy) {
    l->broken = 1;
    return -ENOMEM;
  }
  if (n) memcpy(copy, in, n * sizeof(*copy));
  free(l->inlinings);
  l->inlinings = copy;
  l->ninlinings = n;
  return 0;
}

static int by_offset(const void *a, const void *b) {
  const line_t *x = a, *y = b;
  if (x->code_offset != y->code_offset)
    return x->code_offset < y->code_offset ? -1 : 1;
  return x->position < y->position ? -1 : x->position > y->position;
}

void kf_lines_abandon(kf_lines_t *l) {
  l->broken = 1;
  free(l->lines);
  l->lines = NULL;
  l->n = l->cap = 0;
}

int kf_lines_seal(kf_lines_t *l) {
  if (l->broken) return -ENOMEM;
  if (l->n > 1) qsort(l->lines, l->n, sizeof(line_t), by_offset); /* lines NULL when empty */
  return 0;
}

void kf_lines_retain(kf_lines_t *l) { atomic_fetch_add(&l->refs, 1); }

void kf_lines_release(kf_lines_t *l) {
  if (!l || atomic_fetch_sub(&l->refs, 1) != 1) return;
  free(l->inlinings);
  free(l->lines);
  free(l);
}

size_t kf_lines_count(const kf_lines_t *l) { return l->n; }

/* How many entries of a sealed table are at or before code_offset. */
static size_t entries_upto(const kf_lines_t *l, uint32_t code_offset) {
  size_t lo = 0, hi = l->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (l->lines[mid].code_offset <= code_offset) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

int kf_lines_at(const kf_lines_t *l, uint32_t code_offset, int64_t out[3]) {
  return kf_lines_window(l, code_offset, 1, out);
}

int kf_lines_window(const kf_lines_t *l, uint32_t code_offset, size_t side,
                    int64_t *out) {
  for (size_t k = 0; k < 2 * side + 1; k++) out[k] = -1;
  size_t lo = entries_upto(l, code_offset);
  if (lo == 0) return -1;
  size_t at = lo - 1;
  for (size_t k = 0; k <= side && k <= at; k++) out[side - k] = l->lines[at - k].position;
  for (size_t k = 1; k <= side && at + k < l->n; k++) out[side + k] = l->lines[at + k].position;
  return 0;
}

int kf_lines_inlined(const kf_lines_t *l, uint32_t code_offset, int64_t *out,
                     uint64_t *bytecodes, size_t cap) {
  if (!l->inlinings) return -1;
  size_t lo = entries_upto(l, code_offset);
  if (lo == 0) return 0;
  const line_t *at = &l->lines[lo - 1];
  int64_t position = at->position;
  size_t n = 0;
  /* Each id's caller has a smaller id in V8's numbering, but a table read
   * from memory is not trusted to say so: at most cap steps. */
  for (int32_t id = at->inlining; id >= 0 && n < cap; n++) {
    if ((size_t)id >= l->ninlinings) return -1; /* inconsistent: no chain */
    const kf_inlining_t *in = &l->inlinings[id];
    out[n] = in->other_script ? -1 : position;
    if (bytecodes) bytecodes[n] = in->bytecode;
    position = in->caller_position;
    id = in->caller;
  }
  return (int)n;
}

/* ---- (script, offset) -> function ------------------------------------- */

#define AMBIGUOUS UINT32_MAX

typedef struct slot {
  uint64_t key;  /* script << 32 | offset; 0 when empty (script 0 never) */
  uint32_t fn;   /* index into names, or AMBIGUOUS */
} slot_t;

struct kf_funcpos {
  pthread_mutex_t lock;
  slot_t *slots;
  size_t nslots, used, max_entries;
  char **names;
  size_t nnames, names_cap;
  uint32_t *name_slots; /* open addressing over names: index + 1 */
  size_t nname_slots;
  size_t name_bytes;
  kf_funcpos_stats_t stats;
};


static uint64_t hash_str(const char *s) { return kf_fnv_str(KF_FNV_OFFSET, s); }

kf_funcpos_t *kf_funcpos_new(size_t max_entries) {
  kf_funcpos_t *f = calloc(1, sizeof(*f));
  if (!f) return NULL;
  pthread_mutex_init(&f->lock, NULL);
  f->max_entries = max_entries;
  return f;
}

void kf_funcpos_free(kf_funcpos_t *f) {
  if (!f) return;
  for (size_t i = 0; i < f->nnames; i++) free(f->names[i]);
  free(f->names);
  free(f->name_slots);
  free(f->slots);
  pthread_mutex_destroy(&f->lock);
  free(f);
}

static int grow_slots(kf_funcpos_t *f) {
  size_t n = f->nslots ? f->nslots * 2 : 4096;
  slot_t *slots = calloc(n, sizeof(*slots));
  if (!slots) return -ENOMEM;
  for (size_t i = 0; i < f->nslots; i++) {
    if (!f->slots[i].key) continue;
    size_t j = kf_hash_mix(f->slots[i].key) & (n - 1);
    while (slots[j].key) j = (j + 1) & (n - 1);
    slots[j] = f->slots[i];
  }
  free(f->slots);
  f->slots = slots;
  f->nslots = n;
  return 0;
}

static int grow_names(kf_funcpos_t *f) {
  size_t n = f->nname_slots ? f->nname_slots * 2 : 1024;
  uint32_t *slots = calloc(n, sizeof(*slots));
  if (!slots) return -ENOMEM;
  for (size_t i = 0; i < f->nnames; i++) {
    size_t j = hash_str(f->names[i]) & (n - 1);
    while (slots[j]) j = (j + 1) & (n - 1);
    slots[j] = (uint32_t)i + 1;
  }
  free(f->name_slots);
  f->name_slots = slots;
  f->nname_slots = n;
  return 0;
}

/* Index of the function named `name`, added when new; -ENOMEM. */
static long intern(kf_funcpos_t *f, const char *name) {
  if ((f->nnames + 1) * 2 > f->nname_slots && grow_names(f)) return -ENOMEM;
  size_t j = hash_str(name) & (f->nname_slots - 1);
  for (; f->name_slots[j]; j = (j + 1) & (f->nname_slots - 1))
    if (strcmp(f->names[f->name_slots[j] - 1], name) == 0)
      return (long)f->name_slots[j] - 1;
  if (f->nnames >= AMBIGUOUS - 1 ||
      kf_grow((void **)&f->names, &f->names_cap, f->nnames + 1, sizeof(char *),
              256))
    return -ENOMEM;
  char *copy = strdup(name);
  if (!copy) return -ENOMEM;
  f->names[f->nnames] = copy;
  f->name_slots[j] = (uint32_t)++f->nnames;
  f->stats.functions++;
  f->name_bytes += strlen(name) + 1 + sizeof(char *);
  return (long)f->nnames - 1;
}

static slot_t *slot_for(kf_funcpos_t *f, uint64_t key) {
  size_t j = kf_hash_mix(key) & (f->nslots - 1);
  while (f->slots[j].key && f->slots[j].key != key) j = (j + 1) & (f->nslots - 1);
  return &f->slots[j];
}

int kf_funcpos_add(kf_funcpos_t *f, uint32_t script, const char *name,
                   const kf_lines_t *lines) {
  if (script == 0 || lines->n == 0) return 0;
  int rc = 0;
  pthread_mutex_lock(&f->lock);
  long fn = intern(f, name);
  if (fn < 0) rc = -ENOMEM;
  for (size_t i = 0; rc == 0 && i < lines->n; i++) {
    uint64_t key = (uint64_t)script << 32 | lines->lines[i].position;
    if ((f->used + 1) * 2 > f->nslots && grow_slots(f)) {
      rc = -ENOMEM;
      break;
    }
    slot_t *s = slot_for(f, key);
    if (s->key) {
      if (s->fn != (uint32_t)fn && s->fn != AMBIGUOUS) {
        s->fn = AMBIGUOUS;
        f->stats.ambiguous++;
      }
      continue;
    }
    if (f->used >= f->max_entries) {
      f->stats.dropped += lines->n - i;
      break;
    }
    *s = (slot_t){key, (uint32_t)fn};
    f->used++;
    f->stats.entries++;
  }
  pthread_mutex_unlock(&f->lock);
  return rc;
}

/* The id of the function owning (script, position), or -1. Locked. */
static int64_t owner_locked(kf_funcpos_t *f, uint32_t script, int64_t position) {
  if (script == 0 || position < 0 || position > UINT32_MAX || !f->nslots) return -1;
  slot_t *s = slot_for(f, (uint64_t)script << 32 | (uint64_t)position);
  return s->key && s->fn != AMBIGUOUS ? (int64_t)s->fn : -1;
}

/* The name of function `id` into buf (cut to cap - 1): its length, or -1.
 * Locked. */
static int name_locked(kf_funcpos_t *f, int64_t id, char *buf, size_t cap) {
  if (id < 0 || (size_t)id >= f->nnames) return -1;
  const char *name = f->names[id];
  size_t n = strlen(name);
  if (cap) {
    size_t k = n < cap - 1 ? n : cap - 1;
    memcpy(buf, name, k);
    buf[k] = '\0';
  }
  return (int)n;
}

int kf_funcpos_find(kf_funcpos_t *f, uint32_t script, int64_t position,
                    char *buf, size_t cap) {
  pthread_mutex_lock(&f->lock);
  int rc = name_locked(f, owner_locked(f, script, position), buf, cap);
  pthread_mutex_unlock(&f->lock);
  return rc;
}

void kf_funcpos_owners(kf_funcpos_t *f, uint32_t script, const int64_t *positions,
                       size_t n, int64_t *owners) {
  pthread_mutex_lock(&f->lock);
  for (size_t i = 0; i < n; i++) owners[i] = owner_locked(f, script, positions[i]);
  pthread_mutex_unlock(&f->lock);
}

int kf_funcpos_name(kf_funcpos_t *f, int64_t id, char *buf, size_t cap) {
  pthread_mutex_lock(&f->lock);
  int rc = name_locked(f, id, buf, cap);
  pthread_mutex_unlock(&f->lock);
  return rc;
}

void kf_funcpos_stats(kf_funcpos_t *f, kf_funcpos_stats_t *out) {
  pthread_mutex_lock(&f->lock);
  *out = f->stats;
  out->bytes = f->nslots * sizeof(slot_t) + f->nname_slots * sizeof(uint32_t) +
               f->name_bytes;
  pthread_mutex_unlock(&f->lock);
}

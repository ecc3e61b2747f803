#define _GNU_SOURCE
#include "render/flametree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "util/hash.h"

typedef struct span {
  const char *name;
  size_t len;
} span_t;

/* A slot of the child table: the node and its hash, so a probe rarely
 * touches a node (or its name in the text) that is not the one sought. */
typedef struct slot {
  uint32_t id; /* node index + 1; 0 empty */
  uint32_t hash;
} slot_t;

/* Child lookup: open addressing over (parent, name). */
typedef struct builder {
  span_t *spans; /* the frames of the line being added */
  size_t spans_cap;
  /* The previous line's path: folded text is usually sorted, so a line
   * shares a long prefix with the one before, found without hashing. */
  span_t *prev;
  uint32_t *prev_ids;
  size_t nprev, prev_cap, prev_ids_cap;
  kf_flametree_t *t;
  size_t cap;
  slot_t *slots;
  size_t nslots;
  uint64_t *hashes; /* per node: rehashing must not reread the names */
  size_t hashes_cap;
  unsigned char *indexed; /* per node: its children are in the table */
  size_t indexed_cap, nindexed;
  uint32_t *last_child; /* per node: the child added last, to append */
  size_t last_cap;
} builder_t;

static uint64_t hash(uint32_t parent, const char *s, size_t n) {
  return kf_hash_mix(kf_fnv_bytes(KF_FNV_OFFSET ^ parent, s, n));
}

static int rehash(builder_t *b) {
  size_t n = b->nslots ? b->nslots * 2 : 1024;
  slot_t *slots = calloc(n, sizeof(*slots));
  if (!slots) return -ENOMEM;
  for (size_t i = 0; i < b->nslots; i++) {
    if (!b->slots[i].id) continue;
    size_t s = b->hashes[b->slots[i].id - 1] & (n - 1);
    while (slots[s].id) s = (s + 1) & (n - 1);
    slots[s] = b->slots[i];
  }
  free(b->slots);
  b->slots = slots;
  b->nslots = n;
  return 0;
}

/* Enters node `id` (hash h) into the child table. */
static int slot_put(builder_t *b, uint32_t id, uint64_t h) {
  if ((b->nindexed + 1) * 2 > b->nslots && rehash(b)) return -ENOMEM;
  size_t s = h & (b->nslots - 1);
  while (b->slots[s].id) s = (s + 1) & (b->nslots - 1);
  b->slots[s] = (slot_t){id + 1, (uint32_t)(h >> 32)};
  b->hashes[id] = h;
  b->nindexed++;
  return 0;
}

/* The children of a node enter the table only when a line looks one up
 * while it has some: a path seen once (most of a big profile's leaves)
 * never costs a random access into the table. */
static int index_children(builder_t *b, uint32_t parent) {
  const kf_ftnode_t *nodes = b->t->nodes;
  for (uint32_t c = nodes[parent].first_child; c; c = nodes[c].next_sibling)
    if (slot_put(b, c, hash(parent, nodes[c].name, nodes[c].name_len))) return -ENOMEM;
  b->indexed[parent] = 1;
  return 0;
}

/* The child of `parent` named name[0..n), added when new; -1: no memory. */
static long child(builder_t *b, uint32_t parent, const char *name, size_t n) {
  kf_flametree_t *t = b->t;
  uint64_t h = 0;
  if (t->nodes[parent].first_child) {
    if (!b->indexed[parent] && index_children(b, parent)) return -1;
    h = hash(parent, name, n);
    for (size_t s = h & (b->nslots - 1); b->slots[s].id; s = (s + 1) & (b->nslots - 1)) {
      if (b->slots[s].hash != (uint32_t)(h >> 32)) continue;
      const kf_ftnode_t *x = &t->nodes[b->slots[s].id - 1];
      if (x->parent == parent && x->name_len == n && memcmp(x->name, name, n) == 0)
        return (long)(b->slots[s].id - 1);
    }
  }
  if (kf_grow((void **)&t->nodes, &b->cap, t->count + 1, sizeof(*t->nodes), 1024) ||
      kf_grow((void **)&b->last_child, &b->last_cap, t->count + 1,
              sizeof(*b->last_child), 1024) ||
      kf_grow((void **)&b->hashes, &b->hashes_cap, t->count + 1,
              sizeof(*b->hashes), 1024) ||
      kf_grow((void **)&b->indexed, &b->indexed_cap, t->count + 1,
              sizeof(*b->indexed), 1024))
    return -1;
  uint32_t id = (uint32_t)t->count++;
  kf_ftnode_t *x = &t->nodes[id];
  memset(x, 0, sizeof(*x));
  x->name = name;
  x->name_len = (uint32_t)n;
  x->parent = parent;
  x->depth = t->nodes[parent].depth + 1;
  if (x->depth > t->max_depth) t->max_depth = x->depth;
  x->waiting = t->nodes[parent].waiting;
  if (!x->waiting && n == 9 && memcmp(name, "[off-cpu]", 9) == 0) x->waiting = 1;
  if (!x->waiting && n == 6 && memcmp(name, "(idle)", 6) == 0) x->waiting = 2;
  b->last_child[id] = 0;
  b->indexed[id] = 0;
  if (b->last_child[parent]) t->nodes[b->last_child[parent]].next_sibling = id;
  else t->nodes[parent].first_child = id;
  b->last_child[parent] = id;
  if (b->indexed[parent] && slot_put(b, id, h)) return -1;
  return id;
}

/* "frames COUNT": the count after the last space. 0 when malformed. */
static uint64_t split_count(const char *line, size_t n, size_t *frames_len) {
  while (n && (line[n - 1] == '\r' || line[n - 1] == ' ')) n--;
  size_t i = n;
  while (i && line[i - 1] >= '0' && line[i - 1] <= '9') i--;
  if (i == n || i == 0 || line[i - 1] != ' ' || n - i > 18) return 0;
  uint64_t count = 0;
  for (size_t k = i; k < n; k++) count = count * 10 + (uint64_t)(line[k] - '0');
  *frames_len = i - 1;
  return count;
}

/* Splits "frame;frame;..." into b->spans. Returns the number of frames, 0
 * when one is empty (a bad line), or -ENOMEM. */
static long split_frames(builder_t *b, const char *s, size_t n) {
  size_t nf = 0;
  for (size_t start = 0; start <= n; nf++) {
    const char *semi = memchr(s + start, ';', n - start);
    size_t len = semi ? (size_t)(semi - (s + start)) : n - start;
    if (len == 0) return 0;
    if (kf_grow((void **)&b->spans, &b->spans_cap, nf + 1, sizeof(*b->spans), 64))
      return -ENOMEM;
    b->spans[nf] = (span_t){s + start, len};
    start += len + 1;
  }
  return (long)nf;
}

static int add_line(builder_t *b, size_t nf, uint64_t count, int reverse) {
  kf_flametree_t *t = b->t;
  if (kf_grow((void **)&b->prev, &b->prev_cap, nf, sizeof(*b->prev), 64) ||
      kf_grow((void **)&b->prev_ids, &b->prev_ids_cap, nf, sizeof(*b->prev_ids), 64))
    return -ENOMEM;
  uint32_t at = 0;
  t->nodes[0].total += count;
  int same = 1; /* still on the previous line's path */
  for (size_t k = 0; k < nf; k++) {
    const span_t *f = &b->spans[reverse ? nf - 1 - k : k];
    same = same && k < b->nprev && b->prev[k].len == f->len &&
           memcmp(b->prev[k].name, f->name, f->len) == 0;
    long id = same ? (long)b->prev_ids[k] : child(b, at, f->name, f->len);
    if (id < 0) return -ENOMEM;
    at = (uint32_t)id;
    t->nodes[at].total += count;
    b->prev[k] = *f;
    b->prev_ids[k] = at;
  }
  b->nprev = nf;
  t->nodes[at].self += count;
  return 0;
}

/* qsort_r's comparator: the nodes come as its argument, never through a
 * file-level pointer, so trees can be sorted on several threads at once. */
static int by_name(const void *a, const void *b, void *nodes) {
  const kf_ftnode_t *x = &((const kf_ftnode_t *)nodes)[*(const uint32_t *)a];
  const kf_ftnode_t *y = &((const kf_ftnode_t *)nodes)[*(const uint32_t *)b];
  size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
  int c = memcmp(x->name, y->name, n);
  return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* Relinks every node's children in name order: flame graphs are drawn
 * alphabetically, so equal input gives equal output whatever its order. */
static int sort_children(kf_flametree_t *t) {
  uint32_t *ids = NULL;
  size_t cap = 0;
  for (size_t p = 0; p < t->count; p++) {
    size_t n = 0;
    for (uint32_t c = t->nodes[p].first_child; c; c = t->nodes[c].next_sibling) {
      if (kf_grow((void **)&ids, &cap, n + 1, sizeof(*ids), 64)) {
        free(ids);
        return -ENOMEM;
      }
      ids[n++] = c;
    }
    if (n < 2) continue;
    qsort_r(ids, n, sizeof(*ids), by_name, t->nodes);
    t->nodes[p].first_child = ids[0];
    for (size_t i = 0; i + 1 < n; i++) t->nodes[ids[i]].next_sibling = ids[i + 1];
    t->nodes[ids[n - 1]].next_sibling = 0;
  }
  free(ids);
  return 0;
}

/* A frame is exactly "(idle)". */
static int has_idle(const builder_t *b, size_t nf) {
  for (size_t k = 0; k < nf; k++)
    if (b->spans[k].len == 6 && memcmp(b->spans[k].name, "(idle)", 6) == 0) return 1;
  return 0;
}

int kf_flametree_parse(kf_flametree_t *t, const char *text, size_t len,
                       int reverse) {
  return kf_flametree_parse_idle(t, text, len, reverse, 0);
}

int kf_flametree_parse_idle(kf_flametree_t *t, const char *text, size_t len,
                            int reverse, int hide_idle) {
  memset(t, 0, sizeof(*t));
  builder_t b = {.t = t};
  int rc = -ENOMEM;
  if (kf_grow((void **)&t->nodes, &b.cap, 1, sizeof(*t->nodes), 1024) ||
      kf_grow((void **)&b.last_child, &b.last_cap, 1, sizeof(*b.last_child), 1024) ||
      kf_grow((void **)&b.hashes, &b.hashes_cap, 1, sizeof(*b.hashes), 1024) ||
      kf_grow((void **)&b.indexed, &b.indexed_cap, 1, sizeof(*b.indexed), 1024))
    goto out;
  memset(&t->nodes[0], 0, sizeof(t->nodes[0]));
  t->nodes[0].name = "all";
  t->nodes[0].name_len = 3;
  b.last_child[0] = 0;
  b.indexed[0] = 0;
  t->count = 1;
  for (size_t pos = 0; pos < len;) {
    const char *nl = memchr(text + pos, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
    const char *line = text + pos;
    pos += n + 1;
    if (n == 0 || (n == 1 && line[0] == '\r')) continue;
    t->lines++;
    size_t frames_len = 0;
    uint64_t count = split_count(line, n, &frames_len);
    /* A count that would take the total past 2^53 - 1 is a bad line: every
     * sum stays exact, here and as a JS number (lib/folded.js, the same rule). */
    if (count > KF_FLAMETREE_MAX_TOTAL - t->nodes[0].total) count = 0;
    long nf = count ? split_frames(&b, line, frames_len) : 0;
    if (nf < 0) goto out;
    if (nf == 0) {
      t->bad_lines++;
      continue;
    }
    if (hide_idle && has_idle(&b, (size_t)nf)) {
      t->hidden_lines++;
      t->hidden_samples += count;
      continue;
    }
    if (add_line(&b, (size_t)nf, count, reverse)) goto out;
  }
  rc = sort_children(t);
out:
  free(b.slots);
  free(b.last_child);
  free(b.spans);
  free(b.prev);
  free(b.prev_ids);
  free(b.hashes);
  free(b.indexed);
  if (rc) kf_flametree_free(t);
  return rc;
}

void kf_flametree_free(kf_flametree_t *t) {
  free(t->nodes);
  memset(t, 0, sizeof(*t));
}

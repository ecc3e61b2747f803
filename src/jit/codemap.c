#define _GNU_SOURCE
#include "jit/codemap.h"

#include <errno.h>
#include <pthread.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/grow.h"
#include "util/hash.h"

/* glibc's tsearch tree node: key pointer and two children. Counted in
 * `bytes` so the reported memory is what the map really holds. */
#define TREE_NODE_BYTES (3 * sizeof(void *))

typedef struct code_entry {
  uint64_t start, end; /* [start, end) */
  uint64_t born, died; /* [born, died); died is 0 while live */
  uintptr_t owner;     /* isolate; 0 when shared (embedded builtins) */
  char tier;
  uint8_t kind;        /* enum kf_code_kind */
  uint32_t script;     /* V8's script id + 1, 0 when unknown */
  kf_lines_t *lines;   /* source offsets (optimized code), or NULL */
  char name[];
} code_t;

/* Dead entries are found through the 4 KiB pages they cover: a lookup of
 * an address no live code holds (every native frame of every sample) must
 * not scan all the code that died in the window. */
#define PAGE_SHIFT 12
#define PAGE_LINKS_PER_ENTRY_MAX 64 /* bigger code: found by a scan */

typedef struct page_link {
  uint64_t page;
  code_t *code;
  struct page_link *next;
} page_link_t;

/* Change stamps, for caches of lookups: each 4 KiB page of the address
 * space hashes to a slot holding the generation of the last change to
 * code on a page of that slot (a page shares its slot with others: a
 * change there makes their answers look stale too, never the reverse).
 * Changes over more pages than STAMP_SPAN_MAX set the epoch instead,
 * which every page's stamp includes. Written under the lock, read without
 * it (kf_codemap_stamp). */
#define STAMP_SLOTS 8192
#define STAMP_SPAN_MAX 64

struct kf_codemap {
  pthread_mutex_t lock;
  uint64_t stamps[STAMP_SLOTS];
  uint64_t stamp_epoch;
  uint64_t bytecode_generation; /* kf_codemap_bytecode_generation */
  void *live;     /* tsearch tree of code_t, ordered by range */
  code_t **dead;  /* in the order they died */
  size_t ndead, dead_cap;
  page_link_t **pages; /* hash of page -> dead code covering it */
  size_t npages;       /* buckets, a power of two */
  size_t nlinks;
  size_t nhuge;        /* dead code over more pages than links are made for */
  int keep_dead;
  kf_codemap_stats_t stats;
};

/* Live ranges never overlap, so "overlaps" is equality of this order: a
 * one-byte key finds the entry holding an address, and a range key finds
 * any entry it overlaps. */
static uint64_t first_page(const code_t *c) { return c->start >> PAGE_SHIFT; }
static uint64_t last_page(const code_t *c) { return (c->end - 1) >> PAGE_SHIFT; }
static int is_huge(const code_t *c) {
  return last_page(c) - first_page(c) >= PAGE_LINKS_PER_ENTRY_MAX;
}

static size_t bucket(const kf_codemap_t *m, uint64_t page) {
  return kf_hash_fib(page, m->npages);
}

static int index_grow(kf_codemap_t *m) {
  size_t n = m->npages ? m->npages * 2 : 1024;
  page_link_t **pages = calloc(n, sizeof(*pages));
  if (!pages) return -ENOMEM;
  size_t old_n = m->npages;
  page_link_t **old = m->pages;
  m->pages = pages;
  m->npages = n;
  for (size_t i = 0; i < old_n; i++) {
    for (page_link_t *l = old[i], *next; l; l = next) {
      next = l->next;
      size_t b = bucket(m, l->page);
      l->next = m->pages[b];
      m->pages[b] = l;
    }
  }
  free(old);
  return 0;
}

static void unlink_page(kf_codemap_t *m, const code_t *c, uint64_t page) {
  for (page_link_t **at = &m->pages[bucket(m, page)]; *at; at = &(*at)->next) {
    if ((*at)->code == c && (*at)->page == page) {
      page_link_t *gone = *at;
      *at = gone->next;
      free(gone);
      m->nlinks--;
      return;
    }
  }
}

/* Links dead code c from each page it covers; -ENOMEM leaves none. */
static int index_add(kf_codemap_t *m, code_t *c) {
  if (is_huge(c)) {
    m->nhuge++;
    return 0;
  }
  if (m->nlinks + PAGE_LINKS_PER_ENTRY_MAX > m->npages && index_grow(m))
    return -ENOMEM;
  for (uint64_t p = first_page(c); p <= last_page(c); p++) {
    page_link_t *l = malloc(sizeof(*l));
    if (!l) {
      for (uint64_t q = first_page(c); q < p; q++) unlink_page(m, c, q);
      return -ENOMEM;
    }
    size_t b = bucket(m, p);
    *l = (page_link_t){.page = p, .code = c, .next = m->pages[b]};
    m->pages[b] = l;
    m->nlinks++;
  }
  return 0;
}

static void index_remove(kf_codemap_t *m, const code_t *c) {
  if (is_huge(c)) {
    m->nhuge--;
    return;
  }
  for (uint64_t p = first_page(c); p <= last_page(c); p++) unlink_page(m, c, p);
}

/* Entry e changed (came, went or got lines): a new generation, stamped
 * on its pages. */
static void changed(kf_codemap_t *m, const code_t *e) {
  uint64_t g = __atomic_add_fetch(&m->stats.generation, 1, __ATOMIC_RELEASE);
  if (e->kind == KF_CODE_BYTECODE)
    __atomic_store_n(&m->bytecode_generation, g, __ATOMIC_RELEASE);
  uint64_t first = e->start >> PAGE_SHIFT, last = (e->end - 1) >> PAGE_SHIFT;
  if (last - first >= STAMP_SPAN_MAX) {
    __atomic_store_n(&m->stamp_epoch, g, __ATOMIC_RELEASE);
    return;
  }
  for (uint64_t p = first; p <= last; p++)
    __atomic_store_n(&m->stamps[kf_hash_fib(p, STAMP_SLOTS)], g, __ATOMIC_RELEASE);
}

uint64_t kf_codemap_bytecode_generation(kf_codemap_t *m) {
  return __atomic_load_n(&m->bytecode_generation, __ATOMIC_ACQUIRE);
}

uint64_t kf_codemap_stamp(kf_codemap_t *m, uint64_t addr) {
  uint64_t page = __atomic_load_n(&m->stamps[kf_hash_fib(addr >> PAGE_SHIFT, STAMP_SLOTS)],
                                  __ATOMIC_ACQUIRE);
  uint64_t epoch = __atomic_load_n(&m->stamp_epoch, __ATOMIC_ACQUIRE);
  return page > epoch ? page : epoch;
}

static int by_range(const void *a, const void *b) {
  const code_t *x = a, *y = b;
  if (x->end <= y->start) return -1;
  if (x->start >= y->end) return 1;
  return 0;
}

static size_t code_bytes(const code_t *e) {
  return sizeof(*e) + strlen(e->name) + 1 + TREE_NODE_BYTES;
}

static void code_free(void *p) {
  code_t *e = p;
  if (e) kf_lines_release(e->lines);
  free(e);
}

static code_t *code_new(uint64_t start, uint64_t len, const char *name,
                        char tier, uint8_t kind, uintptr_t owner,
                        uint64_t born) {
  size_t n = strlen(name);
  code_t *e = malloc(sizeof(*e) + n + 1);
  if (!e) return NULL;
  e->start = start;
  e->end = start + (len ? len : 1);
  e->born = born;
  e->died = 0;
  e->owner = owner;
  e->tier = tier;
  e->kind = kind;
  e->script = 0;
  e->lines = NULL;
  memcpy(e->name, name, n + 1);
  return e;
}

kf_codemap_t *kf_codemap_new(void) {
  kf_codemap_t *m = calloc(1, sizeof(*m));
  if (m) pthread_mutex_init(&m->lock, NULL);
  return m;
}

static void free_dead(kf_codemap_t *m) {
  for (size_t i = 0; i < m->ndead; i++) {
    index_remove(m, m->dead[i]);
    m->stats.bytes -= code_bytes(m->dead[i]);
    code_free(m->dead[i]);
  }
  m->ndead = 0;
}

void kf_codemap_free(kf_codemap_t *m) {
  if (!m) return;
  tdestroy(m->live, code_free);
  free_dead(m);
  free(m->dead);
  free(m->pages);
  pthread_mutex_destroy(&m->lock);
  free(m);
}

/* Takes a live entry out of the tree: it died at `when`. It is kept for
 * older samples while a profile is collected, freed otherwise. */
static void bury(kf_codemap_t *m, code_t *e, uint64_t when) {
  tdelete(e, &m->live, by_range);
  m->stats.live--;
  changed(m, e);
  e->died = when;
  if (m->keep_dead && when > e->born &&
      kf_grow((void **)&m->dead, &m->dead_cap, m->ndead + 1, sizeof(*m->dead),
              64) == 0 &&
      index_add(m, e) == 0) {
    m->dead[m->ndead++] = e;
    return;
  }
  m->stats.bytes -= code_bytes(e);
  code_free(e);
}

static int same_code(const code_t *a, const code_t *b) {
  return a->start == b->start && a->end == b->end && a->tier == b->tier &&
         a->kind == b->kind && strcmp(a->name, b->name) == 0;
}

/* Puts e in the live set, burying whatever it overlaps. e is owned by the
 * map afterwards, inserted or not. */
static int insert(kf_codemap_t *m, code_t *e) {
  void **node;
  while ((node = tfind(e, &m->live, by_range))) {
    code_t *old = *node;
    if (same_code(old, e)) {
      /* The same code reported again: by another isolate (embedded
       * builtins are shared) or by a second enumeration. */
      if (old->owner != e->owner) old->owner = 0;
      if (e->born < old->born) old->born = e->born;
      code_free(e);
      return 0;
    }
    bury(m, old, e->born);
    m->stats.evicted++;
  }
  if (!tsearch(e, &m->live, by_range)) {
    code_free(e);
    return -ENOMEM;
  }
  m->stats.live++;
  m->stats.bytes += code_bytes(e);
  changed(m, e);
  return 0;
}

/* The lock, for a code event on a JS thread: a wait is counted and timed
 * only when the lock is taken (no clock read otherwise). */
static void lock_for_event(kf_codemap_t *m) {
  if (pthread_mutex_trylock(&m->lock) == 0) return;
  uint64_t t0 = kf_now_ns();
  pthread_mutex_lock(&m->lock);
  m->stats.lock_waits++;
  m->stats.lock_wait_ns += kf_now_ns() - t0;
}

int kf_codemap_add(kf_codemap_t *m, uint64_t start, uint64_t len,
                   const char *name, char tier, enum kf_code_kind kind,
                   uintptr_t owner, uint64_t born) {
  code_t *e = code_new(start, len, name, tier, (uint8_t)kind, owner, born);
  if (!e) return -ENOMEM;
  lock_for_event(m);
  int rc = insert(m, e);
  if (rc == 0) m->stats.added++;
  pthread_mutex_unlock(&m->lock);
  return rc;
}

static code_t *live_at(kf_codemap_t *m, uint64_t addr) {
  code_t key = {.start = addr, .end = addr + 1};
  void **node = tfind(&key, &m->live, by_range);
  return node ? *node : NULL;
}

int kf_codemap_attach_lines(kf_codemap_t *m, uint64_t start, uint32_t script,
                            kf_lines_t *lines) {
  int rc = -ENOENT;
  lock_for_event(m);
  code_t *e = live_at(m, start);
  if (e && e->start == start) {
    e->script = script;
    if (lines) kf_lines_retain(lines);
    kf_lines_release(e->lines);
    e->lines = lines;
    /* Lookups there now give positions: answers cached before are stale. */
    changed(m, e);
    rc = 0;
  }
  pthread_mutex_unlock(&m->lock);
  return rc;
}

int kf_codemap_move(kf_codemap_t *m, uint64_t from, uint64_t to,
                    uint64_t when) {
  int rc = 0;
  lock_for_event(m);
  code_t *old = live_at(m, from);
  if (old && old->start == from && from != to) {
    code_t *moved = code_new(to, old->end - old->start, old->name,
                             old->tier, old->kind, old->owner, when);
    if (!moved) {
      rc = -ENOMEM;
    } else {
      moved->script = old->script;
      if ((moved->lines = old->lines)) kf_lines_retain(moved->lines);
      bury(m, old, when);
      rc = insert(m, moved);
      if (rc == 0) m->stats.moved++;
    }
  }
  pthread_mutex_unlock(&m->lock);
  return rc;
}

typedef struct owned {
  uintptr_t owner;
  code_t **list;
  size_t n, cap;
  int failed;
} owned_t;

static void collect_owned(const void *node, VISIT which, void *ctx) {
  if (which != postorder && which != leaf) return;
  code_t *e = *(code_t *const *)node;
  owned_t *o = ctx;
  if (e->owner != o->owner || o->failed) return;
  if (kf_grow((void **)&o->list, &o->cap, o->n + 1, sizeof(*o->list), 64))
    o->failed = 1;
  else
    o->list[o->n++] = e;
}

void kf_codemap_drop_owner(kf_codemap_t *m, uintptr_t owner, uint64_t when) {
  if (owner == 0) return;
  owned_t o = {.owner = owner};
  pthread_mutex_lock(&m->lock);
  /* Without memory for the list the entries stay: they are evicted like
   * any stale code once their addresses are reused. */
  twalk_r(m->live, collect_owned, &o);
  for (size_t i = 0; i < o.n; i++) bury(m, o.list[i], when);
  pthread_mutex_unlock(&m->lock);
  free(o.list);
}

static int copy_name(const code_t *e, uint64_t addr, char *buf, size_t cap,
                     kf_code_info_t *info) {
  size_t n = strlen(e->name);
  if (cap) {
    size_t k = n < cap - 1 ? n : cap - 1;
    memcpy(buf, e->name, k);
    buf[k] = '\0';
  }
  info->start = e->start;
  info->tier = e->tier;
  info->kind = (enum kf_code_kind)e->kind;
  info->script = e->script;
  info->positions[0] = info->positions[1] = info->positions[2] = -1;
  if (e->lines) kf_lines_at(e->lines, (uint32_t)(addr - e->start), info->positions);
  return (int)n;
}

static int covers(const code_t *d, uint64_t addr) {
  return d->start <= addr && addr < d->end;
}

static int holds(const code_t *d, uint64_t addr, uint64_t t) {
  return covers(d, addr) && d->born <= t && t < d->died;
}

/* Dead code that held addr at time t, or at any time when `any_time`: at
 * one address, dead entries' lifetimes do not overlap, so the first match
 * is the one. */
static const code_t *dead_find(const kf_codemap_t *m, uint64_t addr,
                               uint64_t t, int any_time) {
  if (m->nlinks) {
    uint64_t page = addr >> PAGE_SHIFT;
    for (const page_link_t *l = m->pages[bucket(m, page)]; l; l = l->next)
      if (l->page == page && (any_time ? covers(l->code, addr) : holds(l->code, addr, t)))
        return l->code;
  }
  for (size_t i = m->ndead; m->nhuge && i-- > 0;)
    if (is_huge(m->dead[i]) &&
        (any_time ? covers(m->dead[i], addr) : holds(m->dead[i], addr, t)))
      return m->dead[i];
  return NULL;
}

static const code_t *dead_at(const kf_codemap_t *m, uint64_t addr, uint64_t t) {
  return dead_find(m, addr, t, 0);
}

int kf_codemap_lookup(kf_codemap_t *m, uint64_t addr, uint64_t t, char *buf,
                      size_t cap, kf_code_info_t *info) {
  int rc = -1;
  pthread_mutex_lock(&m->lock);
  uint64_t stamp = kf_codemap_stamp(m, addr);
  uint64_t stable_since = UINT64_MAX;
  code_t *e = live_at(m, addr);
  if (e && e->born <= t) {
    rc = copy_name(e, addr, buf, cap, info);
    /* Later times find the same live entry until the live set changes. */
    stable_since = e->born;
  } else {
    const code_t *d = dead_at(m, addr, t);
    if (d) rc = copy_name(d, addr, buf, cap, info);
    /* Nothing there at any time: nothing there later either. */
    else if (!e && !dead_find(m, addr, 0, 1)) stable_since = 0;
  }
  pthread_mutex_unlock(&m->lock);
  info->stamp = stamp;
  info->stable_since = stable_since;
  return rc;
}

uint64_t kf_codemap_generation(kf_codemap_t *m) {
  return __atomic_load_n(&m->stats.generation, __ATOMIC_ACQUIRE);
}

/* The code at addr at time t, live or dead (under the lock), or NULL. */
static const code_t *code_at_time(kf_codemap_t *m, uint64_t addr, uint64_t t) {
  const code_t *e = live_at(m, addr);
  return e && e->born <= t ? e : dead_at(m, addr, t);
}

int kf_codemap_positions(kf_codemap_t *m, uint64_t addr, uint64_t t,
                         size_t side, int64_t *out) {
  int rc = -1;
  pthread_mutex_lock(&m->lock);
  const code_t *e = code_at_time(m, addr, t);
  if (e && e->lines)
    rc = kf_lines_window(e->lines, (uint32_t)(addr - e->start), side, out);
  pthread_mutex_unlock(&m->lock);
  return rc;
}

int kf_codemap_inlined(kf_codemap_t *m, uint64_t addr, uint64_t t, int64_t *out,
                       uint64_t *bytecodes, size_t cap) {
  int rc = -1;
  pthread_mutex_lock(&m->lock);
  const code_t *e = code_at_time(m, addr, t);
  if (e && e->lines) rc = kf_lines_inlined(e->lines, (uint32_t)(addr - e->start), out, bytecodes, cap);
  pthread_mutex_unlock(&m->lock);
  return rc;
}

void kf_codemap_keep_dead(kf_codemap_t *m, int on) {
  pthread_mutex_lock(&m->lock);
  /* Counted: a session stopping in one thread still names with dead code
   * while another thread's new session asks to keep it. */
  m->keep_dead += on ? 1 : -1;
  if (m->keep_dead < 0) m->keep_dead = 0;
  if (!m->keep_dead) {
    m->stats.retired += m->ndead;
    free_dead(m);
  }
  pthread_mutex_unlock(&m->lock);
}

void kf_codemap_retire(kf_codemap_t *m, uint64_t horizon) {
  pthread_mutex_lock(&m->lock);
  size_t kept = 0;
  for (size_t i = 0; i < m->ndead; i++) {
    code_t *d = m->dead[i];
    if (d->died < horizon) {
      index_remove(m, d);
      m->stats.bytes -= code_bytes(d);
      m->stats.retired++;
      code_free(d);
    } else {
      m->dead[kept++] = d;
    }
  }
  m->ndead = kept;
  pthread_mutex_unlock(&m->lock);
}

static void format_entry(const void *node, VISIT which, void *ctx) {
  if (which != postorder && which != leaf) return; /* in order, once each */
  const code_t *e = *(code_t *const *)node;
  FILE *f = ctx;
  if (e->kind == KF_CODE_BYTECODE) return; /* data, never executed */
  fprintf(f, "%lx %lx ", (unsigned long)e->start,
          (unsigned long)(e->end - e->start));
  if (e->tier) fputc(e->tier, f);
  fputs(e->name, f);
  fputc('\n', f);
}

int kf_codemap_format(kf_codemap_t *m, char **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  FILE *f = open_memstream(out, out_len);
  if (!f) return -ENOMEM;
  pthread_mutex_lock(&m->lock);
  twalk_r(m->live, format_entry, f);
  pthread_mutex_unlock(&m->lock);
  int failed = ferror(f);
  if (fclose(f) != 0 || failed) {
    free(*out);
    *out = NULL;
    *out_len = 0;
    return -ENOMEM;
  }
  return 0;
}

void kf_codemap_stats(kf_codemap_t *m, kf_codemap_stats_t *out) {
  pthread_mutex_lock(&m->lock);
  *out = m->stats;
  out->dead = m->ndead;
  pthread_mutex_unlock(&m->lock);
}

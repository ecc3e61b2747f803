#include "folded.h"

#include "addrmap.h"
#include "grow.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

typedef struct line {
  const char *text; /* "root;...;leaf", no count, not NUL-terminated */
  size_t len;
  uint64_t count;
  uint32_t stack; /* index in kf_stacks */
} line_t;

typedef struct buf {
  char *p;
  size_t len, cap;
} buf_t;

/* Room for `more` bytes and a terminating NUL. */
static int buf_reserve(buf_t *b, size_t more) {
  return kf_grow((void **)&b->p, &b->cap, b->len + more + 1, 1, 4096);
}

/* Room for one more frame of n bytes after a ';' (none before the first):
 * where to write it, or NULL for lack of memory. The caller adds n to len. */
static char *buf_next_frame(buf_t *b, size_t n) {
  if (buf_reserve(b, n + 1)) return NULL;
  if (b->len) b->p[b->len++] = ';';
  b->p[b->len + n] = '\0';
  return b->p + b->len;
}

/* Appends one already sanitised frame. */
static int buf_append(buf_t *b, const char *name, size_t n) {
  char *dst = buf_next_frame(b, n);
  if (!dst) return -ENOMEM;
  memcpy(dst, name, n);
  b->len += n;
  return 0;
}

static int buf_frame(buf_t *b, const char *name) {
  /* An empty frame would make the line unreadable ("a;;b" is a bad line). */
  if (!name || !*name) name = "[unknown]";
  size_t n = strlen(name);
  char *dst = buf_next_frame(b, n);
  if (!dst) return -ENOMEM;
  b->len += kf_fold_sanitize(dst, name, n);
  return 0;
}

/* Each address is named and sanitised once per fold, however many stacks
 * hold it: a profile of 100,000 distinct stacks names millions of frames
 * from a few thousand addresses. (ip, kernel) -> the sanitised name in
 * `pool`, as offset << 32 | length. */
typedef struct name_cache {
  kf_addrmap_t names;
  buf_t pool;
} name_cache_t;

/* Appends the frame of (ip, kernel) to b, naming it on first sight. */
static int cached_frame(name_cache_t *c, const kf_fold_names_t *names,
                        uint64_t ip, int kernel, buf_t *b) {
  uint64_t at;
  if (kf_addrmap_get(&c->names, ip, kernel, &at))
    return buf_append(b, c->pool.p + (at >> 32), (uint32_t)at);
  const char *name = names->frame(names->ctx, ip, kernel);
  if (!name || !*name) name = "[unknown]";
  size_t n = strlen(name);
  if (n > UINT32_MAX || c->pool.len + n > UINT32_MAX || buf_reserve(&c->pool, n))
    return -ENOMEM;
  size_t off = c->pool.len;
  c->pool.len += kf_fold_sanitize(c->pool.p + off, name, n);
  if (kf_addrmap_put(&c->names, ip, kernel, (uint64_t)off << 32 | n)) return -ENOMEM;
  return buf_append(b, c->pool.p + off, n);
}

/* The lines' texts, in chunks mapped apart from the heap: when the text is
 * made they go back to the system at once, where freed heap blocks would
 * stay in the process (a big profile's names would be held twice). */
typedef struct arena_chunk {
  struct arena_chunk *next;
  size_t used, cap; /* bytes after the header */
} arena_chunk_t;

#define ARENA_CHUNK ((size_t)4 << 20)

static char *arena_copy(arena_chunk_t **arena, const char *p, size_t n) {
  arena_chunk_t *c = *arena;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
    void *m = mmap(NULL, sizeof(*c) + cap, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    c = m;
    *c = (arena_chunk_t){.next = *arena, .cap = cap};
    *arena = c;
  }
  char *dst = (char *)(c + 1) + c->used;
  memcpy(dst, p, n);
  c->used += n;
  return dst;
}

static void arena_free(arena_chunk_t *c) {
  while (c) {
    arena_chunk_t *next = c->next;
    munmap(c, sizeof(*c) + c->cap);
    c = next;
  }
}

static int by_text(const void *a, const void *b) {
  const line_t *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->text, y->text, n);
  if (c) return c;
  return x->len < y->len ? -1 : x->len > y->len;
}

/* One stack, root first. perf writes the callchain leaf first, each context
 * announced by a marker: [KERNEL, k_leaf .. k_outer, USER, u_leaf .. u_outer].
 * Reading it backwards gives user frames outermost first, then kernel ones. */
static int fold_one(const kf_stack_t *st, const kf_fold_names_t *names,
                    name_cache_t *cache, buf_t *b, unsigned char *ctx_of) {
  unsigned char ctx = 0; /* 0 unknown, 1 kernel, 2 user, 3 skipped (guest) */
  uint32_t frames = 0;
  const char *waited = NULL; /* off-CPU: the frame under the root */
  for (uint32_t i = 0; i < st->nr; i++) {
    uint64_t ip = st->ips[i];
    if (ip == KF_CONTEXT_OFFCPU || ip == KF_CONTEXT_IDLE) {
      waited = ip == KF_CONTEXT_IDLE ? "(idle)" : "[off-cpu]";
      ctx_of[i] = 0;
      continue;
    }
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
      ctx = ip == (uint64_t)PERF_CONTEXT_KERNEL ? 1
            : ip == (uint64_t)PERF_CONTEXT_USER ? 2
                                                : 3;
      ctx_of[i] = 0;
      continue;
    }
    ctx_of[i] = ctx == 0 ? 2 : ctx;
    frames++;
  }
  b->len = 0;
  if (buf_frame(b, names->thread(names->ctx, st->tid))) return -ENOMEM;
  if (waited && buf_frame(b, waited)) return -ENOMEM;
  if (names->max_frames && frames >= names->max_frames &&
      buf_frame(b, "[truncated]"))
    return -ENOMEM;
  for (uint32_t i = st->nr; i-- > 0;) {
    if (ctx_of[i] != 1 && ctx_of[i] != 2) continue;
    if (cached_frame(cache, names, st->ips[i], ctx_of[i] == 1, b)) return -ENOMEM;
  }
  return 0;
}

int kf_fold(const kf_stacks_t *stacks, const kf_fold_names_t *names,
            char **out, size_t *len, uint32_t *line_of_stack) {
  size_t n = kf_stacks_count(stacks);
  line_t *lines = calloc(n ? n : 1, sizeof(line_t));
  buf_t b = {0}, text = {0};
  arena_chunk_t *arena = NULL;
  name_cache_t cache = {0};
  unsigned char *ctx_of = NULL;
  size_t ctx_cap = 0, made = 0;
  int rc = -ENOMEM;
  if (!lines) goto out;

  for (size_t i = 0; i < n; i++) {
    kf_stack_t st;
    kf_stacks_get(stacks, i, &st);
    if (st.nr > ctx_cap) {
      free(ctx_of);
      ctx_cap = st.nr * 2;
      if (!(ctx_of = malloc(ctx_cap))) goto out;
    }
    if (fold_one(&st, names, &cache, &b, ctx_of)) goto out;
    if (!(lines[made].text = arena_copy(&arena, b.p, b.len))) goto out;
    lines[made].len = b.len;
    lines[made].count = st.count;
    lines[made].stack = (uint32_t)i;
    made++;
  }
  qsort(lines, made, sizeof(line_t), by_text);

  /* Equal lines (stacks that name alike) merge into the first of their run;
   * each stack learns its line. Then the text is sized exactly: no doubling
   * buffer beside the lines. */
  size_t unique = 0, total = 0;
  char count_buf[32];
  for (size_t i = 0; i < made; unique++) {
    line_t run = lines[i];
    if (line_of_stack) line_of_stack[run.stack] = (uint32_t)unique;
    size_t j = i + 1;
    for (; j < made && by_text(&run, &lines[j]) == 0; j++) {
      run.count += lines[j].count;
      if (line_of_stack) line_of_stack[lines[j].stack] = (uint32_t)unique;
    }
    lines[unique] = run;
    total += run.len + (size_t)snprintf(count_buf, sizeof count_buf, " %llu\n",
                                        (unsigned long long)run.count);
    i = j;
  }
  if (!(text.p = malloc(total + 1))) goto out;
  for (size_t i = 0; i < unique; i++) {
    memcpy(text.p + text.len, lines[i].text, lines[i].len);
    text.len += lines[i].len;
    text.len += (size_t)snprintf(text.p + text.len, total + 1 - text.len, " %llu\n",
                                 (unsigned long long)lines[i].count);
  }
  text.p[text.len] = '\0';
  *out = text.p;
  *len = text.len;
  text.p = NULL;
  rc = 0;
out:
  arena_free(arena);
  kf_addrmap_clear(&cache.names);
  free(cache.pool.p);
  free(lines);
  free(b.p);
  free(text.p);
  free(ctx_of);
  return rc;
}

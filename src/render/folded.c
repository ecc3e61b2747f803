#define _GNU_SOURCE /* qsort_r */
#include "render/folded.h"

#include "util/addrmap.h"
#include "util/grow.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fold works on names, not on text: every distinct name is sanitised once
 * into `pool`, each stack becomes a run of name indices, and the lines are
 * sorted and merged by comparing those runs as the text they stand for.
 * The text is written once, at its exact size, in sorted order. Building
 * each line's text first and sorting that (as before) wrote the profile's
 * bytes twice into fresh memory: at stop() of a large profile most of the
 * time went to the page faults. */

typedef struct name {
  uint32_t off, len; /* in pool */
} name_t;

typedef struct line {
  size_t first;   /* index in pieces */
  uint32_t n;     /* names in the line, root first */
  uint32_t stack; /* index in kf_stacks */
  uint64_t count;
} line_t;

typedef struct fold {
  const kf_fold_names_t *names;
  kf_addrmap_t by_frame;  /* (ip, kernel) -> name index */
  kf_addrmap_t by_thread; /* tid -> name index */
  char *pool;
  size_t pool_len, pool_cap;
  name_t *table;
  size_t table_len, table_cap;
  uint32_t *pieces; /* every line's name indices, one after another */
  size_t pieces_len, pieces_cap;
  uint32_t offcpu, idle, truncated; /* fixed names' indices */
} fold_t;

/* Adds a name (sanitised into the pool) and gives its index. An empty name
 * would make the line unreadable ("a;;b" is a bad line): it is "[unknown]". */
static int add_name(fold_t *f, const char *name, uint32_t *index) {
  if (!name || !*name) name = "[unknown]";
  size_t n = strlen(name);
  if (n > UINT32_MAX || f->pool_len + n > UINT32_MAX ||
      kf_grow((void **)&f->pool, &f->pool_cap, f->pool_len + n, 1, 4096) ||
      kf_grow((void **)&f->table, &f->table_cap, f->table_len + 1, sizeof(name_t), 256))
    return -ENOMEM;
  f->table[f->table_len] = (name_t){.off = (uint32_t)f->pool_len, .len = (uint32_t)n};
  f->pool_len += kf_fold_sanitize(f->pool + f->pool_len, name, n);
  *index = (uint32_t)f->table_len++;
  return 0;
}

static int push_piece(fold_t *f, uint32_t index) {
  if (kf_grow((void **)&f->pieces, &f->pieces_cap, f->pieces_len + 1, sizeof(uint32_t), 4096))
    return -ENOMEM;
  f->pieces[f->pieces_len++] = index;
  return 0;
}

/* The name index of (ip, kernel), naming it on first sight: an address is
 * named and sanitised once per fold however many stacks hold it. */
static int frame_piece(fold_t *f, uint64_t ip, int kernel) {
  uint64_t index;
  if (!kf_addrmap_get(&f->by_frame, ip, kernel, &index)) {
    uint32_t i;
    if (add_name(f, f->names->frame(f->names->ctx, ip, kernel), &i) ||
        kf_addrmap_put(&f->by_frame, ip, kernel, i))
      return -ENOMEM;
    index = i;
  }
  return push_piece(f, (uint32_t)index);
}

static int thread_piece(fold_t *f, uint32_t tid) {
  uint64_t index;
  if (!kf_addrmap_get(&f->by_thread, tid, 0, &index)) {
    uint32_t i;
    if (add_name(f, f->names->thread(f->names->ctx, tid), &i) ||
        kf_addrmap_put(&f->by_thread, tid, 0, i))
      return -ENOMEM;
    index = i;
  }
  return push_piece(f, (uint32_t)index);
}

/* One stack's names, root first. perf writes the callchain leaf first, each
 * context announced by a marker: [KERNEL, k_leaf .. k_outer, USER, u_leaf ..
 * u_outer]. Reading it backwards gives user frames outermost first, then
 * kernel ones. ctx_of holds each entry's context: 0 none (a marker), 1
 * kernel, 2 user, 3 skipped (guest). */
static int stack_pieces(fold_t *f, const kf_stack_t *st, unsigned char *ctx_of) {
  unsigned char ctx = 0;
  uint32_t frames = 0;
  int waited = -1; /* off-CPU: the name under the root */
  for (uint32_t i = 0; i < st->nr; i++) {
    uint64_t ip = st->ips[i];
    ctx_of[i] = 0;
    if (ip == KF_CONTEXT_OFFCPU || ip == KF_CONTEXT_IDLE) {
      waited = (int)(ip == KF_CONTEXT_IDLE ? f->idle : f->offcpu);
    } else if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
      ctx = ip == (uint64_t)PERF_CONTEXT_KERNEL ? 1 : ip == (uint64_t)PERF_CONTEXT_USER ? 2 : 3;
    } else {
      ctx_of[i] = ctx == 0 ? 2 : ctx;
      frames++;
    }
  }
  if (thread_piece(f, st->tid)) return -ENOMEM;
  if (waited >= 0 && push_piece(f, (uint32_t)waited)) return -ENOMEM;
  if (f->names->max_frames && frames >= f->names->max_frames && push_piece(f, f->truncated))
    return -ENOMEM;
  for (uint32_t i = st->nr; i-- > 0;)
    if ((ctx_of[i] == 1 || ctx_of[i] == 2) && frame_piece(f, st->ips[i], ctx_of[i] == 1))
      return -ENOMEM;
  return 0;
}

/* Compares two lines as their texts "a;b;c" compare (memcmp order), name
 * by name: a shared index is a shared name, skipped at once. Names hold no
 * ';' (sanitised), so where one name is a prefix of the other, the shorter
 * line's next byte is its ';' (or its end) against a name byte. */
static int by_text(const void *pa, const void *pb, void *arg) {
  const fold_t *f = arg;
  const line_t *x = pa, *y = pb;
  const uint32_t *a = f->pieces + x->first, *b = f->pieces + y->first;
  uint32_t n = x->n < y->n ? x->n : y->n;
  for (uint32_t i = 0; i < n; i++) {
    if (a[i] == b[i]) continue;
    const name_t *na = &f->table[a[i]], *nb = &f->table[b[i]];
    uint32_t len = na->len < nb->len ? na->len : nb->len;
    int c = memcmp(f->pool + na->off, f->pool + nb->off, len);
    if (c) return c;
    if (na->len == nb->len) continue; /* two indices, one text */
    if (na->len < nb->len) {
      int next = i + 1 < x->n ? ';' : -1;
      return next < (unsigned char)f->pool[nb->off + len] ? -1 : 1;
    }
    int next = i + 1 < y->n ? ';' : -1;
    return (unsigned char)f->pool[na->off + len] < next ? -1 : 1;
  }
  return x->n < y->n ? -1 : x->n > y->n;
}

static size_t line_bytes(const fold_t *f, const line_t *l) {
  size_t bytes = l->n ? l->n - 1 : 0; /* the ';'s */
  for (uint32_t i = 0; i < l->n; i++) bytes += f->table[f->pieces[l->first + i]].len;
  return bytes;
}

static int fixed_names(fold_t *f) {
  return add_name(f, "[off-cpu]", &f->offcpu) || add_name(f, "(idle)", &f->idle) ||
                 add_name(f, "[truncated]", &f->truncated)
             ? -ENOMEM
             : 0;
}

int kf_fold(const kf_stacks_t *stacks, const kf_fold_names_t *names,
            char **out, size_t *len, uint32_t *line_of_stack) {
  size_t n = kf_stacks_count(stacks);
  fold_t f = {.names = names};
  line_t *lines = calloc(n ? n : 1, sizeof(line_t));
  unsigned char *ctx_of = NULL;
  size_t ctx_cap = 0;
  char *text = NULL;
  int rc = -ENOMEM;
  if (!lines || fixed_names(&f)) goto out;

  for (size_t i = 0; i < n; i++) {
    kf_stack_t st;
    kf_stacks_get(stacks, i, &st);
    if (kf_grow((void **)&ctx_of, &ctx_cap, st.nr, 1, 256)) goto out;
    lines[i].first = f.pieces_len;
    if (stack_pieces(&f, &st, ctx_of)) goto out;
    lines[i].n = (uint32_t)(f.pieces_len - lines[i].first);
    lines[i].stack = (uint32_t)i;
    lines[i].count = st.count;
  }
  qsort_r(lines, n, sizeof(line_t), by_text, &f);

  /* Equal lines (stacks that name alike) merge into the first of their run;
   * each stack learns its line. Then the text is sized exactly. */
  size_t unique = 0, total = 0;
  char count_buf[32];
  for (size_t i = 0; i < n; unique++) {
    line_t run = lines[i];
    if (line_of_stack) line_of_stack[run.stack] = (uint32_t)unique;
    size_t j = i + 1;
    for (; j < n && by_text(&run, &lines[j], &f) == 0; j++) {
      run.count += lines[j].count;
      if (line_of_stack) line_of_stack[lines[j].stack] = (uint32_t)unique;
    }
    lines[unique] = run;
    total += line_bytes(&f, &run) + (size_t)snprintf(count_buf, sizeof count_buf, " %llu\n",
                                                     (unsigned long long)run.count);
    i = j;
  }
  if (!(text = malloc(total + 1))) goto out;
  size_t at = 0;
  for (size_t i = 0; i < unique; i++) {
    const line_t *l = &lines[i];
    for (uint32_t k = 0; k < l->n; k++) {
      const name_t *name = &f.table[f.pieces[l->first + k]];
      if (k) text[at++] = ';';
      memcpy(text + at, f.pool + name->off, name->len);
      at += name->len;
    }
    at += (size_t)snprintf(text + at, total + 1 - at, " %llu\n", (unsigned long long)l->count);
  }
  text[at] = '\0';
  *out = text;
  *len = at;
  text = NULL;
  rc = 0;
out:
  kf_addrmap_clear(&f.by_frame);
  kf_addrmap_clear(&f.by_thread);
  free(f.pool);
  free(f.table);
  free(f.pieces);
  free(lines);
  free(ctx_of);
  free(text);
  return rc;
}

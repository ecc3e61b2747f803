#include "folded.h"

#include "grow.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

typedef struct line {
  char *text;   /* "root;...;leaf", no count */
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

size_t kf_fold_sanitize(char *dst, const char *name, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)name[i];
    dst[i] = c == ';' ? ':' : (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
  }
  return len;
}

static int buf_frame(buf_t *b, const char *name) {
  size_t n = strlen(name);
  if (buf_reserve(b, n + 1)) return -ENOMEM;
  if (b->len) b->p[b->len++] = ';';
  b->len += kf_fold_sanitize(b->p + b->len, name, n);
  b->p[b->len] = '\0';
  return 0;
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
                    buf_t *b, unsigned char *ctx_of) {
  unsigned char ctx = 0; /* 0 unknown, 1 kernel, 2 user, 3 skipped (guest) */
  uint32_t frames = 0;
  for (uint32_t i = 0; i < st->nr; i++) {
    uint64_t ip = st->ips[i];
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
  if (names->max_frames && frames >= names->max_frames &&
      buf_frame(b, "[truncated]"))
    return -ENOMEM;
  for (uint32_t i = st->nr; i-- > 0;) {
    if (ctx_of[i] != 1 && ctx_of[i] != 2) continue;
    const char *name = names->frame(names->ctx, st->ips[i], ctx_of[i] == 1);
    if (buf_frame(b, name)) return -ENOMEM;
  }
  return 0;
}

int kf_fold(const kf_stacks_t *stacks, const kf_fold_names_t *names,
            char **out, size_t *len, uint32_t *line_of_stack) {
  size_t n = kf_stacks_count(stacks);
  line_t *lines = calloc(n ? n : 1, sizeof(line_t));
  buf_t b = {0}, text = {0};
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
    if (fold_one(&st, names, &b, ctx_of)) goto out;
    if (!(lines[made].text = malloc(b.len + 1))) goto out;
    memcpy(lines[made].text, b.p, b.len + 1);
    lines[made].len = b.len;
    lines[made].count = st.count;
    lines[made].stack = (uint32_t)i;
    made++;
  }
  qsort(lines, made, sizeof(line_t), by_text);

  uint32_t line_no = 0;
  for (size_t i = 0; i < made; line_no++) {
    uint64_t count = 0;
    size_t j = i;
    for (; j < made && by_text(&lines[i], &lines[j]) == 0; j++) {
      count += lines[j].count;
      if (line_of_stack) line_of_stack[lines[j].stack] = line_no;
    }
    if (buf_reserve(&text, lines[i].len + 32)) goto out;
    memcpy(text.p + text.len, lines[i].text, lines[i].len);
    text.len += lines[i].len;
    text.len += (size_t)snprintf(text.p + text.len, 32, " %llu\n",
                                 (unsigned long long)count);
    i = j;
  }
  if (buf_reserve(&text, 0)) goto out;
  text.p[text.len] = '\0';
  *out = text.p;
  *len = text.len;
  text.p = NULL;
  rc = 0;
out:
  for (size_t i = 0; i < made; i++) free(lines[i].text);
  free(lines);
  free(b.p);
  free(text.p);
  free(ctx_of);
  return rc;
}

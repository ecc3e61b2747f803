/*
 * outbuf: the growing text a renderer writes into (the SVG, the HTML flame
 * graph's data). A failed allocation is remembered, and later writes are
 * dropped, so a renderer checks once at the end. Always NUL-terminated
 * once anything is written. One thread at a time.
 */
#ifndef KF_OUTBUF_H
#define KF_OUTBUF_H

#include <stddef.h>
#include <string.h>

#include "util/grow.h"

typedef struct kf_outbuf {
  char *p;
  size_t len, cap;
  int failed;
} kf_outbuf_t;

static inline void kf_outbuf_put(kf_outbuf_t *b, const char *s, size_t n) {
  if (b->failed) return;
  if (kf_grow((void **)&b->p, &b->cap, b->len + n + 1, 1, 1 << 16)) {
    b->failed = 1;
    return;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static inline void kf_outbuf_puts(kf_outbuf_t *b, const char *s) {
  kf_outbuf_put(b, s, strlen(s));
}

#endif

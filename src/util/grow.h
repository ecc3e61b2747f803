/*
 * grow: the one array-growing helper of the core. Any thread.
 */
#ifndef KF_GROW_H
#define KF_GROW_H

#include <errno.h>
#include <stdlib.h>

/* Makes *buf hold at least `need` elements of `elem` bytes, doubling from
 * `first`. Returns 0 or -ENOMEM (then *buf and *cap are unchanged). */
static inline int kf_grow(void **buf, size_t *cap, size_t need, size_t elem,
                          size_t first) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : first;
  while (n < need) n *= 2;
  void *p = realloc(*buf, n * elem);
  if (!p) return -ENOMEM;
  *buf = p;
  *cap = n;
  return 0;
}

#endif

/*
 * mapped: arrays that grow with a profile, in memory mapped apart from
 * malloc's heaps. Freed, they go back to the system at once; a freed heap
 * block stays in the process (and after a big free glibc raises its own
 * thresholds, so later ones stay too), which would leave a long profile's
 * peak in the app's RSS after stop(). Any thread.
 */
#ifndef KF_MAPPED_H
#define KF_MAPPED_H

/* mremap: the including file defines _GNU_SOURCE before any include. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

static inline size_t kf_mapped_bytes(size_t n, size_t elem) {
  size_t page = 4096;
  return (n * elem + page - 1) & ~(page - 1);
}

/* n zeroed elements, or NULL. */
static inline void *kf_mapped_calloc(size_t n, size_t elem) {
  if (n == 0 || n > SIZE_MAX / elem / 2) return NULL;
  void *p = mmap(NULL, kf_mapped_bytes(n, elem), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static inline void kf_mapped_free(void *p, size_t n, size_t elem) {
  if (p) munmap(p, kf_mapped_bytes(n, elem));
}

/* Makes *buf hold at least `need` elements, doubling from `first`; new
 * elements are zero. Returns 0 or -ENOMEM (then *buf and *cap unchanged). */
static inline int kf_mapped_grow(void **buf, size_t *cap, size_t need,
                                 size_t elem, size_t first) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : first;
  while (n < need) n *= 2;
  if (n > SIZE_MAX / elem / 2) return -ENOMEM;
  void *p = *buf ? mremap(*buf, kf_mapped_bytes(*cap, elem), kf_mapped_bytes(n, elem),
                          MREMAP_MAYMOVE)
                 : mmap(NULL, kf_mapped_bytes(n, elem), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -ENOMEM;
  *buf = p;
  *cap = n;
  return 0;
}

#endif

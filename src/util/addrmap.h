/*
 * addrmap: (address, kernel?) -> a 64-bit value, the cache that naming
 * keeps so each address is named once however many stacks hold it (the
 * namer: address -> frame id; folding: frame -> its sanitised name).
 * Open addressing, at most half full, in memory mapped apart from malloc
 * (mapped.h). Used by one thread at a time.
 */
#ifndef KF_ADDRMAP_H
#define KF_ADDRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct kf_addrmap_slot {
  uint64_t ip;
  uint64_t value;
  uint8_t used, kernel;
} kf_addrmap_slot_t;

typedef struct kf_addrmap {
  kf_addrmap_slot_t *slots;
  size_t cap, count;
} kf_addrmap_t; /* zeroed: empty */

/* The value of (ip, kernel): 1 and *value, or 0. */
int kf_addrmap_get(const kf_addrmap_t *m, uint64_t ip, int kernel, uint64_t *value);

/* Adds (ip, kernel) -> value; the key must not be there. Returns 0 or
 * -ENOMEM. */
int kf_addrmap_put(kf_addrmap_t *m, uint64_t ip, int kernel, uint64_t value);

/* Empties it and gives its memory back. */
void kf_addrmap_clear(kf_addrmap_t *m);

#endif

#define _GNU_SOURCE
#include "util/addrmap.h"

#include <errno.h>

#include "util/hash.h"
#include "util/mapped.h"

static size_t slot_of(uint64_t ip, int kernel, size_t cap) {
  return kf_hash_fib(ip ^ (uint64_t)kernel, cap);
}

int kf_addrmap_get(const kf_addrmap_t *m, uint64_t ip, int kernel, uint64_t *value) {
  if (m->cap == 0) return 0;
  for (size_t k = slot_of(ip, kernel, m->cap); m->slots[k].used; k = (k + 1) & (m->cap - 1))
    if (m->slots[k].ip == ip && m->slots[k].kernel == (uint8_t)kernel) {
      *value = m->slots[k].value;
      return 1;
    }
  return 0;
}

static int grow(kf_addrmap_t *m) {
  size_t cap = m->cap ? m->cap * 2 : 4096;
  kf_addrmap_slot_t *slots = kf_mapped_calloc(cap, sizeof(*slots));
  if (!slots) return -ENOMEM;
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->slots[i].used) continue;
    size_t k = slot_of(m->slots[i].ip, m->slots[i].kernel, cap);
    while (slots[k].used) k = (k + 1) & (cap - 1);
    slots[k] = m->slots[i];
  }
  kf_mapped_free(m->slots, m->cap, sizeof(kf_addrmap_slot_t));
  m->slots = slots;
  m->cap = cap;
  return 0;
}

int kf_addrmap_put(kf_addrmap_t *m, uint64_t ip, int kernel, uint64_t value) {
  if ((m->count + 1) * 2 > m->cap && grow(m)) return -ENOMEM;
  size_t k = slot_of(ip, kernel, m->cap);
  while (m->slots[k].used) k = (k + 1) & (m->cap - 1);
  m->slots[k] = (kf_addrmap_slot_t){.ip = ip, .value = value, .used = 1, .kernel = (uint8_t)kernel};
  m->count++;
  return 0;
}

void kf_addrmap_clear(kf_addrmap_t *m) {
  kf_mapped_free(m->slots, m->cap, sizeof(kf_addrmap_slot_t));
  *m = (kf_addrmap_t){0};
}

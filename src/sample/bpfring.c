#include "sample/bpfring.h"

#define HEADER 8u
#define BUSY (1u << 31)
#define DISCARD (1u << 30)

size_t kf_bpfring_drain(kf_bpfring_t *ring, kf_bpfring_record_fn fn, void *ctx) {
  uint64_t cons = __atomic_load_n(ring->consumer, __ATOMIC_RELAXED);
  /* Pairs with the kernel's release of producer_pos: the records below it
   * are visible once we have read it. */
  uint64_t prod = __atomic_load_n(ring->producer, __ATOMIC_ACQUIRE);
  size_t delivered = 0;
  if (prod - cons > ring->size) {
    ring->corrupt++;
    __atomic_store_n(ring->consumer, prod, __ATOMIC_RELEASE);
    return 0;
  }
  while (cons < prod) {
    const unsigned char *at = ring->data + (cons & (ring->size - 1));
    uint32_t len = __atomic_load_n((const uint32_t *)at, __ATOMIC_ACQUIRE);
    if (len & BUSY) break; /* reserved, not yet committed: next drain */
    uint32_t body = len & ~DISCARD;
    uint64_t step = ((uint64_t)body + HEADER + 7) & ~(uint64_t)7;
    if (step > prod - cons) {
      ring->corrupt++;
      cons = prod;
      break;
    }
    if (!(len & DISCARD)) {
      fn(at + HEADER, body, ctx);
      delivered++;
    }
    cons += step;
  }
  /* Frees the space for the kernel (it reads the position with acquire). */
  __atomic_store_n(ring->consumer, cons, __ATOMIC_RELEASE);
  return delivered;
}

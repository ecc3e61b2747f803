#include "ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int kf_ring_init(kf_ring_t *ring, void *meta, size_t map_size,
                 size_t page_size) {
  memset(ring, 0, sizeof(*ring));
  ring->meta = meta;
  struct perf_event_mmap_page *m = meta;
  if (m->data_size != 0) {
    ring->data = (unsigned char *)meta + m->data_offset;
    ring->data_size = m->data_size;
  } else {
    /* Kernels before 4.1 leave these zero: the data follows the first page. */
    ring->data = (unsigned char *)meta + page_size;
    ring->data_size = map_size - page_size;
  }
  ring->scratch = malloc(ring->data_size);
  return ring->scratch ? 0 : -ENOMEM;
}

void kf_ring_destroy(kf_ring_t *ring) {
  free(ring->scratch);
  ring->scratch = NULL;
}

uint64_t kf_ring_pending(const kf_ring_t *ring) {
  uint64_t head = __atomic_load_n(&ring->meta->data_head, __ATOMIC_ACQUIRE);
  return head - ring->meta->data_tail;
}

size_t kf_ring_drain(kf_ring_t *ring, kf_ring_record_fn fn, void *ctx) {
  /* Acquire pairs with the kernel's store of data_head: record bytes written
   * before head moved are visible once we see the new head. */
  uint64_t head = __atomic_load_n(&ring->meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = ring->meta->data_tail;
  uint64_t mask = ring->data_size - 1;
  size_t delivered = 0;

  while (tail < head) {
    if (head - tail < sizeof(struct perf_event_header)) break;
    uint64_t off = tail & mask;
    struct perf_event_header hdr;
    uint64_t first = ring->data_size - off;
    if (first >= sizeof(hdr)) {
      memcpy(&hdr, ring->data + off, sizeof(hdr));
    } else {
      memcpy(&hdr, ring->data + off, first);
      memcpy((unsigned char *)&hdr + first, ring->data, sizeof(hdr) - first);
    }
    if (hdr.size < sizeof(hdr) || (hdr.size & 7) != 0 ||
        hdr.size > ring->data_size || hdr.size > head - tail) {
      ring->corrupt++;
      tail = head;
      break;
    }
    const struct perf_event_header *rec;
    if (off + hdr.size <= ring->data_size) {
      rec = (const struct perf_event_header *)(ring->data + off);
    } else {
      memcpy(ring->scratch, ring->data + off, first);
      memcpy(ring->scratch + first, ring->data, hdr.size - first);
      rec = (const struct perf_event_header *)ring->scratch;
    }
    fn(rec, ctx);
    delivered++;
    tail += hdr.size;
  }
  /* Release: our reads of the records happen before the kernel may reuse the
   * space we hand back. */
  __atomic_store_n(&ring->meta->data_tail, tail, __ATOMIC_RELEASE);
  return delivered;
}

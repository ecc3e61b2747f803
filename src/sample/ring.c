#include "sample/ring.h"

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

  /* The kernel never writes more than the ring holds past our tail. More
   * (or a head behind the tail) means the two are out of sync: reading on
   * would deliver stale bytes as records, up to 2^61 of them. */
  if (head - tail > ring->data_size) {
    ring->corrupt++;
    tail = head;
  }
  /* Differences, not comparisons: the positions are free-running u64s. */
  while (head - tail >= sizeof(struct perf_event_header)) {
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
    if (off + hdr.size <= ring->data_size && (off & 7) == 0) {
      rec = (const struct perf_event_header *)(ring->data + off);
    } else {
      /* Wrapped, or not 8-byte aligned (the kernel's records are 8-byte
       * multiples from 0, so only a tail set by someone else is): a copy,
       * so the callback can read u64 fields in place (found by fuzz_ring). */
      uint64_t part = first < hdr.size ? first : hdr.size;
      memcpy(ring->scratch, ring->data + off, part);
      memcpy(ring->scratch + part, ring->data, hdr.size - part);
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

/* Steps over n bytes of the record; -EBADMSG when fewer are left. */
static int take(const unsigned char **p, size_t *room, size_t n) {
  if (*room < n) return -EBADMSG;
  *p += n;
  *room -= n;
  return 0;
}

static int take_u64(const unsigned char **p, size_t *room, uint64_t *out) {
  if (*room < 8) return -EBADMSG;
  memcpy(out, *p, 8);
  return take(p, room, 8);
}

int kf_ring_parse_sample(const struct perf_event_header *rec,
                         const kf_ring_layout_t *layout,
                         kf_ring_sample_t *out) {
  memset(out, 0, sizeof(*out));
  out->periods = 1;
  if (rec->size < sizeof(*rec) + 24) return -EBADMSG;
  const unsigned char *p = (const unsigned char *)(rec + 1);
  size_t room = rec->size - sizeof(*rec);
  uint64_t nr;
  memcpy(&out->id, p, 8);
  memcpy(&out->pid, p + 8, 4);
  memcpy(&out->tid, p + 12, 4);
  memcpy(&out->time, p + 16, 8);
  p += 24;
  room -= 24;
  if (layout && layout->periods &&
      (take_u64(&p, &room, &out->periods) || out->periods == 0))
    return -EBADMSG;
  if (take_u64(&p, &room, &nr)) return -EBADMSG;
  /* nr is the kernel's word, checked against the record's own size. */
  if (nr > room / 8) return -EBADMSG;
  out->nr = (uint32_t)nr;
  out->ips = (const uint64_t *)p;
  p += nr * 8;
  room -= nr * 8;
  if (!layout || layout->user_regs == 0) return 0; /* the rest is ignored */

  /* u64 abi; u64 regs[user_regs] unless abi is NONE (a kernel thread) */
  uint64_t abi, size, dyn_size;
  if (take_u64(&p, &room, &abi)) return -EBADMSG;
  if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
    const unsigned char *regs = p;
    if (take(&p, &room, (size_t)layout->user_regs * 8)) return -EBADMSG;
    out->regs = (const uint64_t *)regs;
    out->nregs = layout->user_regs;
  }
  /* u64 size; char data[size]; u64 dyn_size (only when size != 0) */
  if (take_u64(&p, &room, &size)) return -EBADMSG;
  if (size == 0) return 0;
  if (size > room || room - size < 8) return -EBADMSG;
  const unsigned char *data = p;
  memcpy(&dyn_size, p + size, 8);
  out->stack = data;
  out->stack_len = dyn_size < size ? dyn_size : size;
  return 0;
}

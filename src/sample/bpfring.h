/*
 * bpfring: reads records out of a BPF ring buffer (BPF_MAP_TYPE_RINGBUF)
 * mapped into this process, as the kernel lays it out: a consumer position
 * we write, a producer position the kernel writes, and a data area of
 * 2^n bytes mapped twice in a row, so a record never wraps. Each record is
 * an 8-byte header { u32 len (bit 31: still being written, bit 30:
 * discarded); u32 page offset } then len bytes, padded to 8.
 *
 * No syscalls here: tests drive it with hand-built buffers. Called only
 * from the collector thread (one reader per ring).
 */
#ifndef KF_BPFRING_H
#define KF_BPFRING_H

#include <stddef.h>
#include <stdint.h>

typedef struct kf_bpfring {
  uint64_t *consumer;       /* its own page, mapped writable */
  const uint64_t *producer; /* followed, a page on, by the data area */
  const unsigned char *data;
  uint64_t size;            /* of the data area: a power of two */
  uint64_t corrupt;         /* times the ring was out of sync (skipped) */
} kf_bpfring_t;

/* Called for each record; the pointer is valid only during the call. */
typedef void (*kf_bpfring_record_fn)(const void *rec, uint32_t len, void *ctx);

/* Consumes every committed record up to the first still being written,
 * skipping discarded ones, and publishes the new consumer position.
 * Returns the number of records delivered. A producer more than the ring's
 * size ahead (or behind), or a record longer than the ring, means the ring
 * is out of sync: the rest is skipped and counted in `corrupt`. */
size_t kf_bpfring_drain(kf_bpfring_t *ring, kf_bpfring_record_fn fn, void *ctx);

#endif

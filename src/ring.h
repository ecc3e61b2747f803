/*
 * ring: reads records out of a perf_event mmap ring buffer.
 *
 * The kernel writes records at data_head; we consume from data_tail and
 * publish the new tail so the kernel can reuse the space. A record that
 * straddles the end of the data area (or, never from the kernel, starts off
 * an 8-byte boundary) is copied into a scratch buffer so the callback always
 * sees one contiguous, 8-byte aligned record.
 *
 * No syscalls here: a ring is just memory, so the tests drive this module
 * with hand-built buffers. Called only from the collector thread (one reader
 * per ring).
 */
#ifndef KF_RING_H
#define KF_RING_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kf_ring {
  struct perf_event_mmap_page *meta; /* first page of the mapping */
  unsigned char *data;               /* data area, size is a power of two */
  uint64_t data_size;
  unsigned char *scratch;            /* data_size bytes, for wrapped records */
  uint64_t corrupt;                  /* records dropped for a bad header */
} kf_ring_t;

/* Called for each record; the pointer is valid only during the call. */
typedef void (*kf_ring_record_fn)(const struct perf_event_header *rec,
                                  void *ctx);

/* Sets up a reader over `meta` (a mapping of 1 + 2^n pages). data_offset and
 * data_size are taken from the page when the kernel fills them, else the data
 * area is assumed to start one page after meta. Returns 0 or -ENOMEM. */
int kf_ring_init(kf_ring_t *ring, void *meta, size_t map_size,
                 size_t page_size);
void kf_ring_destroy(kf_ring_t *ring);

/* Consumes every complete record between tail and head. Returns the number of
 * records delivered. A header whose size is impossible (0, unaligned, larger
 * than the ring), or a head more than the ring's size past the tail (or
 * behind it), means the ring is out of sync: the rest is skipped, counted in
 * ring->corrupt, and the tail moves to head. */
size_t kf_ring_drain(kf_ring_t *ring, kf_ring_record_fn fn, void *ctx);

/* Bytes written but not yet consumed. */
uint64_t kf_ring_pending(const kf_ring_t *ring);

/* A PERF_RECORD_SAMPLE as the sampler asks for it (sample_type IDENTIFIER |
 * TID | TIME | CALLCHAIN, see sampler.c):
 *   u64 id; u32 pid, tid; u64 time; u64 nr; u64 ips[nr];
 * ips points into the record (8-byte aligned: records are 8-byte multiples
 * in a page-aligned ring or the malloc'd scratch copy) and is valid as long
 * as the record is. nr == 0 is the kernel's empty callchain. */
typedef struct kf_ring_sample {
  uint64_t id, time;
  uint32_t pid, tid;
  uint32_t nr;
  const uint64_t *ips;
} kf_ring_sample_t;

/* Reads the body of a sample record of rec->size bytes. Pure; any thread.
 * Returns 0, or -EBADMSG when the body is shorter than its fields or than
 * the nr it announces (the caller counts it as corrupt). */
int kf_ring_parse_sample(const struct perf_event_header *rec,
                         kf_ring_sample_t *out);

#endif

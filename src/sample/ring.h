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

/* What a sample record holds beyond the fixed fields (see sampler.c). */
typedef struct kf_ring_layout {
  /* 1: a u64 follows time: how many sampling periods the sample stands for
   * (PERF_SAMPLE_PERIOD's place; the timer sampler's records carry it, as a
   * timer that fired late stands for the periods it missed). 0: one each. */
  uint32_t periods;
  /* 0: the record ends after the callchain. Else PERF_SAMPLE_REGS_USER
   * with this many registers, then PERF_SAMPLE_STACK_USER, follow it. */
  uint32_t user_regs;
} kf_ring_layout_t;

/* A PERF_RECORD_SAMPLE as the sampler asks for it (sample_type IDENTIFIER |
 * TID | TIME [| PERIOD] | CALLCHAIN [| REGS_USER | STACK_USER]):
 *   u64 id; u32 pid, tid; u64 time; [u64 periods;] u64 nr; u64 ips[nr];
 *   [u64 abi; u64 regs[user_regs] (absent when abi is NONE);
 *    u64 size; char stack[size]; u64 dyn_size (absent when size is 0)]
 * Pointers point into the record (ips and regs 8-byte aligned: records are
 * 8-byte multiples in a page-aligned ring or the malloc'd scratch copy) and
 * are valid as long as the record is. nr == 0 is the kernel's empty
 * callchain. */
typedef struct kf_ring_sample {
  uint64_t id, time;
  uint64_t periods;            /* >= 1 */
  uint32_t pid, tid;
  uint32_t nr;
  const uint64_t *ips;
  const uint64_t *regs;        /* NULL when the sample has none */
  uint32_t nregs;
  const unsigned char *stack;  /* the copy of the user stack from sp on */
  uint64_t stack_len;          /* bytes of it the kernel filled */
} kf_ring_sample_t;

/* Reads the body of a sample record of rec->size bytes laid out as
 * `layout` says (NULL: no user registers or stack). Pure; any thread.
 * Returns 0, or -EBADMSG when the body is shorter than its fields or than
 * the sizes it announces (the caller counts it as corrupt). */
int kf_ring_parse_sample(const struct perf_event_header *rec,
                         const kf_ring_layout_t *layout,
                         kf_ring_sample_t *out);

#endif

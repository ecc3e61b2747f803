/*
 * userstack: the kernel's copy of the top of a sampled thread's user stack
 * (PERF_SAMPLE_STACK_USER), with the registers taken at the sample
 * (PERF_SAMPLE_REGS_USER), read the way an unwinder needs it.
 *
 * Every read is checked against the copy: the live stack is never touched,
 * and an address outside the copy (a frame deeper than the copy reaches, a
 * corrupt frame pointer) is simply not readable. Pure: memory in, values
 * out; any thread; fuzzed (test/fuzz/fuzz_unwind.c).
 */
#ifndef KF_USERSTACK_H
#define KF_USERSTACK_H

#include <stddef.h>
#include <stdint.h>

typedef struct kf_userstack {
  uint64_t ip, sp, bp;        /* user registers at the sample */
  const unsigned char *bytes; /* the copy of [sp, sp + len) */
  uint64_t len;
} kf_userstack_t;

/* The 8-byte word at stack address `addr` into *out when all of it lies in
 * the copy. Returns 0, or -1 when it does not. */
int kf_userstack_word(const kf_userstack_t *s, uint64_t addr, uint64_t *out);

/* The frame pointers of the frames of a user callchain as the kernel
 * walked it (ips[0] is ip, ips[k] the return address saved in the frame at
 * fps[k-1], fps[0] is bp). fps[k] is the saved frame pointer in the frame
 * at fps[k-1], kept only while the copy holds that link, the return address
 * beside it is ips[k] (the kernel read the same memory at the same moment:
 * anything else means this is not the chain it walked) and the chain moves
 * up the stack. Returns how many leading entries of fps are known, at most
 * n (0 when n is 0); fps has room for n. */
size_t kf_userstack_frames(const kf_userstack_t *s, const uint64_t *ips,
                           size_t n, uint64_t *fps);
/* The same walk carried on from a part already done: fps[0..have) known
 * (1 <= have), up to n. Returns how many leading entries are known now,
 * `have` when the next link is not. Each frame walked reads the copy where
 * it may not be cached yet: callers walk only as deep as they need. */
size_t kf_userstack_frames_more(const kf_userstack_t *s, const uint64_t *ips,
                                size_t have, size_t n, uint64_t *fps);

/* Walks the frame-pointer chain from s->bp inside the copy, as the kernel
 * would: writes the return address of each frame to rets (at most max) for
 * as long as each link lies in the copy and moves up the stack. Returns how
 * many. */
size_t kf_userstack_walk(const kf_userstack_t *s, uint64_t *rets, size_t max);

#endif

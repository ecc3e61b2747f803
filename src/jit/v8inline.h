/*
 * v8inline: V8's own inlining of a piece of optimized code, read from the
 * code's objects when V8 adds it, so that inlined functions get exact
 * frames (jitlines.h kf_lines_inlined) instead of inferred ones.
 *
 * V8's line events give each instruction's source offset but drop the
 * inlining id that V8's source position table keeps beside it, and the
 * code's deoptimization data keeps each id's call site (its
 * InliningPositions). Both are V8-internal objects: their field offsets
 * come from the postmortem-debugging constants node exports (v8dbg_*, as
 * llnode reads them), the rest (where the Code object is from the
 * instruction start, and for V8 12 the Code fields) from the V8 versions
 * checked: 11.3, 12.4 and 13.6 (Node 20, 22 and 24; kf_v8inline_setup).
 * Every read goes through process_vm_readv on this process, so a layout
 * that is not what it should be gives an error, never a fault; and every
 * object's map is checked for its instance type before it is read.
 *
 * Thread-safety: setup once (under the shim's arming, on a JS thread);
 * read on the thread that reports the code (V8's JS threads); decode is
 * pure.
 */
#ifndef KF_V8INLINE_H
#define KF_V8INLINE_H

#include <stddef.h>
#include <stdint.h>

#include "jit/jitlines.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Looks the layout up for this V8 (its version string). Returns 1 when
 * kflame can read it here, else 0 (and read always returns NULL). */
int kf_v8inline_setup(const char *v8_version);

/* The source offsets and inlining of the optimized code whose instructions
 * start at code_start, as a sealed table; NULL when it inlined nothing,
 * its objects cannot be read, or memory ran out (V8's line events then
 * serve). */
kf_lines_t *kf_v8inline_read(uintptr_t code_start);

/* Decodes V8's source position table (len bytes: per entry, the code
 * offset's and the source position's deltas, zig-zag VLQ) into `into`,
 * each entry with its inlining id. Returns the entries pushed, or -1 for
 * a table that does not decode (cut short, an offset out of range) or
 * -ENOMEM. Linear in len. */
int kf_v8inline_decode(const uint8_t *table, size_t len, kf_lines_t *into);

/* Code objects read and found to inline, and reads given up. */
typedef struct kf_v8inline_stats {
  uint64_t read, failed;
} kf_v8inline_stats_t;
void kf_v8inline_stats(kf_v8inline_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif

/*
 * jitframes: names a profile's JIT frames while its samples are collected,
 * when the code map still knows what ran at each sample's time.
 *
 * Each user-space address that JIT code held at the sample's time is
 * replaced by a token standing for that code's name (interned once per
 * profile), so stacks aggregate by function rather than by address, and
 * the names outlive the code map's entries. Tokens are non-canonical
 * addresses (0xfffe...) that no real frame or PERF_CONTEXT marker can be.
 *
 * resolve is called on the collector thread; names are read after the
 * collector has joined.
 */
#ifndef KF_JITFRAMES_H
#define KF_JITFRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "jit/codemap.h"
#include "jit/jitlines.h"
#include "symbols/procmaps.h"
#include "unwind/userstack.h"
#include "jit/v8frames.h"
#include "jit/v8heap.h"
#include "jit/v8regexp.h"

typedef struct kf_jitframes kf_jitframes_t;

/* `layout`: V8's frame layout, to name frames from a sample's stack copy;
 * NULL names them from the callchain alone. */
kf_jitframes_t *kf_jitframes_new(kf_codemap_t *map,
                                 const kf_v8layout_t *layout);
void kf_jitframes_free(kf_jitframes_t *j);

/* Code that runs at a second address (procmaps.h): looked up at its first
 * when the map knows nothing at the second. Keeps up to 8; before the
 * first resolve. */
void kf_jitframes_alias(kf_jitframes_t *j, const kf_code_alias_t *aliases,
                        size_t n);

/* Names inlined functions from the source offsets of optimized code
 * (jitlines.h): a frame of optimized code whose instruction belongs to an
 * inlined function becomes "inlined_[i];outer_[j]" (leaf first: the
 * inlined token, then the outer), and one inlined in another inlined one
 * "inner_[i];middle_[i];outer_[j]" (jitframes.c: inlined_at says how they
 * are told apart). Before the first resolve. */
void kf_jitframes_inlining(kf_jitframes_t *j, kf_funcpos_t *funcpos);

/* Whether generated code is at addr (an anonymous executable mapping):
 * called on the collector thread, once per address until the code map
 * changes. */
typedef int (*kf_jitframes_is_jit_fn)(void *ctx, uint64_t addr);

/* Names frames of generated code the map knows nothing of (jitframes.c:
 * unreported_function) from their stack copy, each checked against its
 * JSFunction in V8's heap as `heap` lays it out (NULL: only counted).
 * Before the first resolve. */
void kf_jitframes_unreported(kf_jitframes_t *j, kf_jitframes_is_jit_fn is_jit,
                             void *ctx, const kf_v8heap_layout_t *heap);

/* Names RegExp code V8 reported without its expression (compiled before
 * the hook was armed) from the expression its frame was called with, read
 * in V8's heap as `regexps` lays it out (v8regexp.h). Without it, such
 * code stays KF_JITNAME_REGEXP_EXISTING. Before the first resolve. */
void kf_jitframes_regexps(kf_jitframes_t *j, const kf_v8regexp_layout_t *regexps);

typedef struct kf_jitframes_stats {
  uint64_t named;               /* callchain frames named from the code map */
  /* Frames of the shared interpreter trampoline named by the BytecodeArray
   * in their frame, and those left "(interpreted)" (frame beyond the stack
   * copy, or no bytecode known there). */
  uint64_t interpreted_named, interpreted_unnamed;
  /* Functions a bytecode handler at the leaf was running, put back under
   * it: the callchain skips them. */
  uint64_t running_added;
  /* Frames of generated code V8 never reported (OSR code compiled before
   * the hook was armed) named from the BytecodeArray their frame keeps,
   * and those left "[jit]". */
  uint64_t unreported_named, unreported_unnamed;
  /* Frames of RegExp code V8 reported without its expression, named from
   * the expression their frame holds, and those left unnamed (a frame not
   * built yet, or not in the copy). */
  uint64_t regexp_named, regexp_unnamed;
  uint64_t inlined;             /* inlined frames added */
  /* Of those, from V8's own inlining ids (v8inline.h); and inlined
   * functions V8 told of that could not be named (left out). */
  uint64_t inlined_exact, inlined_unnamed;
  /* Samples with a frame to read (an interpreter frame) past the end of
   * their stack copy: it was named from the callchain alone. */
  uint64_t copy_short;
  uint64_t cache_hits;          /* frames resolved from the address cache */
} kf_jitframes_stats_t;

/* Inlined functions a frame may expand into (the innermost and those that
 * inlined it, nested), and the entries resolve may write for a callchain
 * of nr entries: a frame becomes at most its inlined functions and its own
 * code, the leaf also the running function put back with its own. */
#define KF_JITFRAMES_MAX_INLINED 4
#define KF_JITFRAMES_OUT(nr) ((size_t)(nr) * (2 * KF_JITFRAMES_MAX_INLINED + 2) + 1)

/* Copies the callchain ips[0..nr) of a sample taken at `time` into out,
 * with JIT frames as tokens. With `stack` (the sample's user registers and
 * stack copy; NULL when it has none) interpreter frames are named from
 * their BytecodeArray and the function under a frameless bytecode handler
 * is put back; inlined functions add a frame each: out needs room for
 * KF_JITFRAMES_OUT(nr) entries. Returns the number of entries written, or
 * -ENOMEM. */
int kf_jitframes_resolve(kf_jitframes_t *j, uint64_t time,
                         const uint64_t *ips, uint32_t nr,
                         const kf_userstack_t *stack, uint64_t *out);

/* What resolve did so far. */
const kf_jitframes_stats_t *kf_jitframes_stats(const kf_jitframes_t *j);

int kf_jitframes_is_token(uint64_t ip);

/* The token of generated code no code event named (an isolate without the
 * hook, gone by stop()): named "[jit]_[j]". */
#define KF_JIT_UNNAMED 0xfffeffffffffffffULL

/* The frame name of a token: "name file:line:col_[j]", with V8's tier
 * marker in front when keep_tier is set; "[jit]_[j]" for KF_JIT_UNNAMED.
 * NULL for an unknown token. */
const char *kf_jitframes_name(const kf_jitframes_t *j, uint64_t token,
                              int keep_tier);

#endif

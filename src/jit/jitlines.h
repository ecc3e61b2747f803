/*
 * jitlines: where in the source V8's compiled code is, from the line events
 * of V8's code-event hook, to tell inlined functions from their callers.
 *
 * V8 reports, for each piece of code it compiles, a table of (offset in the
 * code, offset in the script's source). For optimized code the source
 * offsets of an inlined function's instructions are in that function's own
 * body, but V8's event carries no inlining id and no script: only the
 * offset. kflame keeps:
 *   - kf_lines_t: one such table, per optimized code object (codemap.h);
 *   - kf_funcpos_t: every source offset of the bytecode of each small
 *     function (only functions small enough to be inlined), by (script,
 *     offset) -> function. An offset two functions claim is ambiguous and
 *     names neither.
 * Where kflame can read V8's own inlining (v8inline.h: Node 20), the
 * code's table is V8's position table instead, each entry with its
 * inlining id and each id with its call site (kf_lines_inlined), and the
 * inference below is not needed. Elsewhere:
 * An instruction of optimized code belongs to an inlined function G when
 * its source offset is one of G's own (exactly, not merely inside G's
 * range) in the code's script and an adjacent entry of the table is one of
 * G's too (see jitframes.c): an offset of an inlined function of another
 * script, read in this script, rarely lands on one function twice.
 *
 * Thread-safety: a kf_lines_t is built by one thread (V8's, in the hook),
 * then sealed and shared read-only (reference counted); kf_funcpos_t has
 * its own mutex (V8's threads add, the collector looks up).
 */
#ifndef KF_JITLINES_H
#define KF_JITLINES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the shim releases tables */
#endif

typedef struct kf_lines kf_lines_t;

/* A new table with one reference; NULL when out of memory. */
kf_lines_t *kf_lines_new(void);
/* Adds an entry while building. Returns 0 or -ENOMEM (the table is then
 * marked broken, and kf_lines_seal fails). */
int kf_lines_push(kf_lines_t *l, uint32_t code_offset, uint32_t position);
/* Gives up building: later pushes do nothing and kf_lines_seal fails, as
 * after a failed push (the code turned out to be of no use to kflame). */
void kf_lines_abandon(kf_lines_t *l);
/* Sorts by code offset; the table is read-only afterwards. Returns 0, or
 * -ENOMEM when a push failed or building was abandoned. */
int kf_lines_seal(kf_lines_t *l);
void kf_lines_retain(kf_lines_t *l);
void kf_lines_release(kf_lines_t *l); /* frees at the last reference */
size_t kf_lines_count(const kf_lines_t *l);

/* Source offsets around `code_offset` in a sealed table: out[1] of the
 * last entry at or before it, out[0] and out[2] of the entries before and
 * after that one; -1 where there is none. Returns 0, or -1 when no entry
 * is at or before code_offset. */
int kf_lines_at(const kf_lines_t *l, uint32_t code_offset, int64_t out[3]);
/* The same with `side` entries on each side: out[side] is the offset of
 * the last entry at or before code_offset, out[side - k] and out[side + k]
 * those k entries before and after it (out holds 2 * side + 1). */
int kf_lines_window(const kf_lines_t *l, uint32_t code_offset, size_t side,
                    int64_t *out);

/* Optimized code whose inlining V8 told (v8inline.h): each entry carries
 * its inlining id, and each id its call site. */
typedef struct kf_inlining {
  int64_t caller_position; /* the call's source offset in the caller */
  int32_t caller;          /* the caller's inlining id, -1: the outer function */
  int32_t other_script;    /* the inlined function is of another script than
                              the outer one: its offsets name nothing here */
  uint64_t bytecode;       /* the inlined function's first bytecode (the
                              address BYTE_CODE events name it by), or 0 */
} kf_inlining_t;

/* kf_lines_push with the entry's inlining id (-1: the outer function's). */
int kf_lines_push_inlined(kf_lines_t *l, uint32_t code_offset, uint32_t position,
                          int32_t inlining);
/* The inlinings of the table's ids (copied). Returns 0 or -ENOMEM (the
 * table is then broken). */
int kf_lines_set_inlinings(kf_lines_t *l, const kf_inlining_t *in, size_t n);
/* The functions inlined at code_offset of a sealed table, innermost first:
 * the source offset of each in its own body into out (-1 for a function of
 * another script), and when bytecodes is not NULL each one's first
 * bytecode into it (0: not known), at most cap of them. Returns how many
 * (0: the outer function's own code), or -1 when the table does not know
 * its inlining (V8's line events only) or its ids do not hold together. */
int kf_lines_inlined(const kf_lines_t *l, uint32_t code_offset, int64_t *out,
                     uint64_t *bytecodes, size_t cap);

typedef struct kf_funcpos kf_funcpos_t;

/* An index of at most max_entries (script, offset) pairs. */
kf_funcpos_t *kf_funcpos_new(size_t max_entries);
void kf_funcpos_free(kf_funcpos_t *f);

/* The function named `name` (a frame name, "foo a.js:1:2") with V8's tier
 * marker `tier`, of script `script` (V8's script id + 1; 0 is no script and
 * is ignored), has the source offsets of `lines`. Returns 0, or -ENOMEM
 * (what fit is kept; the rest is counted as dropped). Any thread. */
int kf_funcpos_add(kf_funcpos_t *f, uint32_t script, const char *name,
                   const kf_lines_t *lines);

/* The function with source offset `position` in `script`, its name copied
 * into buf (NUL-terminated, cut to cap - 1). Returns the name's length, or
 * -1 when none or more than one function has that offset. Any thread. */
int kf_funcpos_find(kf_funcpos_t *f, uint32_t script, int64_t position,
                    char *buf, size_t cap);

/* The functions that own each of positions[0..n) in `script`, as ids
 * (equal ids: one function) into owners[0..n): -1 where none or more than
 * one does, or the position is negative. One lock for all. Any thread. */
void kf_funcpos_owners(kf_funcpos_t *f, uint32_t script, const int64_t *positions,
                       size_t n, int64_t *owners);
/* The name of function `id` (kf_funcpos_owners), copied into buf as
 * kf_funcpos_find does: its length, or -1 for no such id. Any thread. */
int kf_funcpos_name(kf_funcpos_t *f, int64_t id, char *buf, size_t cap);

typedef struct kf_funcpos_stats {
  uint64_t entries, functions, ambiguous, dropped, bytes;
} kf_funcpos_stats_t;
void kf_funcpos_stats(kf_funcpos_t *f, kf_funcpos_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif

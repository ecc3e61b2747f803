/*
 * codemap: which JIT code occupied which address, and when. Thread-safe:
 * V8 adds code on JS threads and moves it on GC helper threads, the
 * collector looks names up, the JS thread writes perf maps. One mutex
 * guards everything; each call holds it for a tree operation (or, for
 * kf_codemap_format, one walk over the live set).
 *
 * V8 never reports code removal. New code overlapping live code means the
 * old code is dead, so the live set never overlaps and its size follows
 * live code, not history. An entry is valid over [born, died): a sample is
 * named by the code at its address at the sample's time, so an address V8
 * reused still names samples taken before the reuse after the old code.
 * Dead entries are kept only while `keep_dead` is on (a profile is being
 * collected or named), and only until the collector says no pending sample is older
 * (kf_codemap_retire): memory stays bounded by live code plus the window
 * of samples not processed yet.
 *
 * Times are CLOCK_MONOTONIC nanoseconds, the clock perf samples carry.
 */
#ifndef KF_CODEMAP_H
#define KF_CODEMAP_H

#include <stddef.h>
#include <stdint.h>

#include "jit/jitlines.h"

typedef struct kf_codemap kf_codemap_t;

typedef struct kf_codemap_stats {
  uint64_t live, dead;      /* entries now */
  uint64_t bytes;           /* memory held by entries */
  uint64_t added, moved, evicted, retired; /* since creation */
  uint64_t generation;      /* changes whenever the live set or an entry's
                               line table does: whenever a lookup's
                               answer may */
  /* Code events (add, lines, move: the JS threads' side) that found the
   * lock held, and the ns they waited for it: what a sample's lookups cost
   * the app. */
  uint64_t lock_waits, lock_wait_ns;
} kf_codemap_stats_t;

/* What a piece of code is, as far as reading a stack goes. */
enum kf_code_kind {
  KF_CODE_OTHER = 0, /* builtins, stubs, regular expressions */
  KF_CODE_JS,        /* a JS function's code, any tier */
  /* The shared InterpreterEntryTrampoline and the InterpreterEnterAt*
   * builtins: the frame they own is an interpreter frame, whose function
   * is named by the BytecodeArray it holds. */
  KF_CODE_INTERPRETER_ENTRY,
  /* A bytecode handler: runs in the interpreter frame of the function whose
   * bytecode it executes, usually without a frame of its own. */
  KF_CODE_BYTECODE_HANDLER,
  /* A BytecodeArray's bytecodes (V8's BYTE_CODE events): data, never
   * executed and left out of perf maps; names interpreter frames. */
  KF_CODE_BYTECODE,
};

/* What a lookup found besides the name. */
typedef struct kf_code_info {
  uint64_t start; /* where the code begins */
  char tier;
  enum kf_code_kind kind;
  uint32_t script; /* V8's script id + 1; 0 when unknown */
  /* Source offsets at the address looked up, from the code's line table
   * (kf_lines_at: before, at, after); -1 where there is none. */
  int64_t positions[3];
  /* Set by every lookup, found or not: the answer holds for any later
   * lookup at this address at a time >= stable_since while the address's
   * stamp is still `stamp` (kf_codemap_stamp); UINT64_MAX when it holds
   * for this time only (dead code, or live code born after it). For
   * caches of lookups (jitframes.c). */
  uint64_t stamp, stable_since;
} kf_code_info_t;

kf_codemap_t *kf_codemap_new(void);
void kf_codemap_free(kf_codemap_t *m);

/* Code [start, start + len) named `name` (tier: V8's tier marker or '\0')
 * of `kind` appeared at time `born` (0: it has existed since before anyone could
 * sample it). `owner` tells isolates apart. Live code it overlaps dies at
 * `born`; code identical to a live entry is left as it is.
 * Returns 0 or -ENOMEM. Any thread. */
int kf_codemap_add(kf_codemap_t *m, uint64_t start, uint64_t len,
                   const char *name, char tier, enum kf_code_kind kind,
                   uintptr_t owner, uint64_t born);

/* The live code starting at `start` is of V8 script `script` (id + 1) and
 * has the source offsets of `lines` (sealed; the map takes a reference;
 * NULL for none). Returns 0, or -ENOENT when no live code starts there.
 * Any thread. */
int kf_codemap_attach_lines(kf_codemap_t *m, uint64_t start, uint32_t script,
                            kf_lines_t *lines);

/* stats.generation, read without the lock. Any thread. */
uint64_t kf_codemap_generation(kf_codemap_t *m);

/* The generation of the last change that may have changed a lookup's
 * answer at addr: code added, moved, gone or given lines on addr's 4 KiB
 * page (or on a page sharing its slot, or over a span too big to stamp
 * page by page). It only grows. Read without the lock: a cache of lookups
 * keeps an answer while its address's stamp stays what the lookup said,
 * where the map's generation changes with every code event anywhere.
 * Any thread. */
uint64_t kf_codemap_stamp(kf_codemap_t *m, uint64_t addr);

/* The generation of the last change to bytecode (KF_CODE_BYTECODE
 * entries) anywhere: answers that name functions from bytecode elsewhere
 * (inlined functions, jitframes.c) hold while it stays. Any thread. */
uint64_t kf_codemap_bytecode_generation(kf_codemap_t *m);

/* The code starting at `from` moved to `to` at time `when` (GC).
 * Unknown code is ignored. Returns 0 or -ENOMEM. Any thread. */
int kf_codemap_move(kf_codemap_t *m, uint64_t from, uint64_t to,
                    uint64_t when);

/* Every live entry of `owner` died at `when` (its isolate went away). */
void kf_codemap_drop_owner(kf_codemap_t *m, uintptr_t owner, uint64_t when);

/* The name of the code at `addr` at time `t`, copied into buf
 * (NUL-terminated, truncated to cap - 1). Returns the name's length and
 * fills *info, or returns -1 when no code known to kflame was there (then
 * only info->stamp and stable_since are set). */
int kf_codemap_lookup(kf_codemap_t *m, uint64_t addr, uint64_t t, char *buf,
                      size_t cap, kf_code_info_t *info);

/* The source offsets around `addr` in the line table of the code there at
 * time t (kf_lines_window: 2 * side + 1 of them). Returns 0, or -1 when no
 * code known to kflame was there or it has no line table. */
int kf_codemap_positions(kf_codemap_t *m, uint64_t addr, uint64_t t,
                         size_t side, int64_t *out);

/* The functions inlined at `addr` in the code there at time t, as V8 told
 * them (kf_lines_inlined: innermost first, each one's own source offset
 * and, with bytecodes, its first bytecode). Returns how many, or -1 when no
 * code was there or its table does not know its inlining. */
int kf_codemap_inlined(kf_codemap_t *m, uint64_t addr, uint64_t t, int64_t *out,
                       uint64_t *bytecodes, size_t cap);

/* While on, code that dies is kept for lookups of older samples; turning
 * it off frees every dead entry. Counted: each on needs its off (a session
 * still naming and a new one may overlap), and dead code goes with the
 * last off. */
void kf_codemap_keep_dead(kf_codemap_t *m, int on);

/* Frees dead entries that died before `horizon`: no sample older than it
 * is still to be looked up. */
void kf_codemap_retire(kf_codemap_t *m, uint64_t horizon);

/* The live set of executable code (bytecode left out) in perf map format ("ADDR SIZE NAME\n", hex, ascending,
 * the tier marker before the name) into a malloc'd buffer. Returns 0 or
 * -ENOMEM. */
int kf_codemap_format(kf_codemap_t *m, char **out, size_t *out_len);

void kf_codemap_stats(kf_codemap_t *m, kf_codemap_stats_t *out);

#endif

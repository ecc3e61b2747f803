#include "jit/jitframes.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "util/hash.h"
#include "jit/jitname.h"
#include "jit/v8heap.h"

#define TOKEN_BASE 0xfffe000000000000ULL
#define TOKEN_MASK 0xffff000000000000ULL
#define NAME_BYTES 1024
#define MAX_ALIASES 8

/* What a return address resolved to, kept while the code map's answer
 * there holds (kf_code_info_t's stamp and stable_since): most frames of a
 * sample are the same addresses as the last sample's, and each lookup
 * otherwise takes the map's lock, walks its tree and hashes a name.
 * Direct-mapped by address. */
#define CACHE_SLOTS 2048
#define NO_NAMES UINT64_MAX
typedef struct cached_frame {
  uint64_t addr; /* 0: empty */
  uint64_t stamp, stable_since;
  /* kf_codemap_bytecode_generation when its inlined functions were named
   * (from bytecode anywhere), or NO_NAMES when none were looked for */
  uint64_t names;
  uint64_t token; /* 0: no code known there */
  kf_code_info_t info;
  int ninlined;
  int exact;   /* the inlined functions are V8's own (v8inline.h) */
  int unnamed; /* and so many V8 told of were left out */
  int unreported; /* no code known, yet generated code is there */
  uint64_t inlined[KF_JITFRAMES_MAX_INLINED];
} cached_frame_t;

/* The same for the function an interpreter frame's BytecodeArray names
 * (frame_function), by the array's first bytecode: a deep stack of
 * interpreted frames asks for the same few arrays in every sample. */
#define FUNCTION_CACHE_SLOTS 1024
typedef struct cached_function {
  uint64_t bytecode; /* 0: empty */
  uint64_t stamp, stable_since;
  uint64_t token; /* 0: V8 reported no bytecode starting there */
} cached_function_t;

typedef struct jit_name {
  char *merged; /* "foo a.js:1:2_[j]", or _[i] when inlined */
  char *tiered; /* "~foo a.js:1:2_[j]" */
  uint64_t hash;
  char tier;
} jit_name_t;

struct kf_jitframes {
  kf_codemap_t *map;
  const kf_v8layout_t *layout;
  kf_jitframes_stats_t stats;
  uint64_t *fps; /* frame pointers of the sample being resolved */
  size_t fps_cap;
  kf_code_alias_t aliases[MAX_ALIASES];
  size_t naliases;
  kf_funcpos_t *funcpos; /* small functions' source offsets, or NULL */
  kf_jitframes_is_jit_fn is_jit; /* generated code at an address, or NULL */
  void *is_jit_ctx;
  const kf_v8heap_layout_t *heap; /* to check a frame's function, or NULL */
  const kf_v8regexp_layout_t *regexps; /* to name RegExp code, or NULL */
  uint64_t regexp_existing;       /* the token of RegExp code so named */
  jit_name_t *names;
  size_t nnames, names_cap;
  uint32_t *slots; /* open addressing: name index + 1, 0 when empty */
  size_t nslots;
  cached_frame_t *cache; /* CACHE_SLOTS, or NULL: every frame looked up */
  cached_function_t *functions; /* FUNCTION_CACHE_SLOTS, or NULL */
};

/* FNV-1a over the name, seeded by the tier and whether it is inlined */
static uint64_t hash_name(const char *s, char tier, int inlined) {
  return kf_fnv_str((KF_FNV_OFFSET ^ (unsigned char)tier) + (uint64_t)inlined, s);
}

void kf_jitframes_inlining(kf_jitframes_t *j, kf_funcpos_t *funcpos) {
  j->funcpos = funcpos;
}

void kf_jitframes_unreported(kf_jitframes_t *j, kf_jitframes_is_jit_fn is_jit,
                             void *ctx, const kf_v8heap_layout_t *heap) {
  j->is_jit = is_jit;
  j->is_jit_ctx = ctx;
  j->heap = heap;
}

kf_jitframes_t *kf_jitframes_new(kf_codemap_t *map,
                                 const kf_v8layout_t *layout) {
  kf_jitframes_t *j = calloc(1, sizeof(*j));
  if (j) {
    j->map = map;
    j->layout = layout;
    j->cache = calloc(CACHE_SLOTS, sizeof(*j->cache));
    j->functions = calloc(FUNCTION_CACHE_SLOTS, sizeof(*j->functions));
  }
  return j;
}

void kf_jitframes_free(kf_jitframes_t *j) {
  if (!j) return;
  for (size_t i = 0; i < j->nnames; i++) {
    free(j->names[i].merged);
    free(j->names[i].tiered);
  }
  free(j->names);
  free(j->slots);
  free(j->fps);
  free(j->cache);
  free(j->functions);
  free(j);
}

void kf_jitframes_alias(kf_jitframes_t *j, const kf_code_alias_t *aliases,
                        size_t n) {
  j->naliases = n < MAX_ALIASES ? n : MAX_ALIASES;
  memcpy(j->aliases, aliases, j->naliases * sizeof(*aliases));
}

int kf_jitframes_is_token(uint64_t ip) {
  return (ip & TOKEN_MASK) == TOKEN_BASE;
}

static int rehash(kf_jitframes_t *j) {
  size_t n = j->nslots ? j->nslots * 2 : 256;
  uint32_t *slots = calloc(n, sizeof(*slots));
  if (!slots) return -ENOMEM;
  for (size_t i = 0; i < j->nnames; i++) {
    size_t s = j->names[i].hash & (n - 1);
    while (slots[s]) s = (s + 1) & (n - 1);
    slots[s] = (uint32_t)i + 1;
  }
  free(j->slots);
  j->slots = slots;
  j->nslots = n;
  return 0;
}

static const char *suffix(int inlined) { return inlined ? "_[i]" : "_[j]"; }

static char *frame_text(const char *name, char tier, int inlined) {
  size_t n = strlen(name);
  char *s = malloc(n + 6);
  if (!s) return NULL;
  size_t k = 0;
  if (tier) s[k++] = tier;
  memcpy(s + k, name, n);
  memcpy(s + k + n, suffix(inlined), 5);
  return s;
}

/* Index of (name, tier), added when new; -ENOMEM. */
static long intern(kf_jitframes_t *j, const char *name, char tier,
                   int inlined) {
  if ((j->nnames + 1) * 2 > j->nslots && rehash(j)) return -ENOMEM;
  size_t n = strlen(name);
  uint64_t h = hash_name(name, tier, inlined);
  size_t s = h & (j->nslots - 1);
  for (; j->slots[s]; s = (s + 1) & (j->nslots - 1)) {
    const jit_name_t *e = &j->names[j->slots[s] - 1];
    if (e->hash == h && e->tier == tier &&
        strncmp(e->merged, name, n) == 0 &&
        strcmp(e->merged + n, suffix(inlined)) == 0)
      return (long)(j->slots[s] - 1);
  }
  if (kf_grow((void **)&j->names, &j->names_cap, j->nnames + 1,
              sizeof(*j->names), 256))
    return -ENOMEM;
  jit_name_t *e = &j->names[j->nnames];
  e->hash = h;
  e->tier = tier;
  e->merged = frame_text(name, '\0', inlined);
  e->tiered = frame_text(name, tier, inlined);
  if (!e->merged || !e->tiered) {
    free(e->merged);
    free(e->tiered);
    return -ENOMEM;
  }
  j->slots[s] = (uint32_t)++j->nnames;
  return (long)(j->nnames - 1);
}

/* The token of (name, tier), inlined or not, into *token. Returns 1 or
 * -ENOMEM. */
static int token_of(kf_jitframes_t *j, const char *name, char tier,
                    int inlined, uint64_t *token) {
  long id = intern(j, name, tier, inlined);
  if (id < 0) return -ENOMEM;
  *token = TOKEN_BASE | (uint64_t)id;
  return 1;
}

void kf_jitframes_regexps(kf_jitframes_t *j, const kf_v8regexp_layout_t *regexps) {
  /* Interned now: resolve tells such frames by their token. */
  if (token_of(j, KF_JITNAME_REGEXP_EXISTING, '\0', 0, &j->regexp_existing) > 0)
    j->regexps = regexps;
}

/* The code at addr at `time`: its name into name[NAME_BYTES] and what it
 * is into *info. Returns 1, or 0 when the map knows no code there (also at
 * the first address of an alias). */
static int lookup(kf_jitframes_t *j, uint64_t addr, uint64_t time,
                  kf_code_info_t *info, char *name) {
  int found = kf_codemap_lookup(j->map, addr, time, name, NAME_BYTES, info);
  uint64_t stamp = info->stamp, stable_since = info->stable_since;
  for (size_t i = 0; found < 0 && i < j->naliases; i++) {
    const kf_code_alias_t *a = &j->aliases[i];
    if (addr >= a->start && addr < a->end) {
      found = kf_codemap_lookup(j->map, a->target + (addr - a->start), time,
                                name, NAME_BYTES, info);
      /* The answer holds as long as every lookup's does: stamps only grow,
       * so the greatest changes when any of them does (stamp_at). */
      if (info->stamp > stamp) stamp = info->stamp;
      if (info->stable_since > stable_since) stable_since = info->stable_since;
    }
  }
  info->stamp = stamp;
  info->stable_since = stable_since;
  return found >= 0;
}

/* The stamp lookup gives at addr, read now: the code map's stamp there,
 * and at the second address of each alias covering it. */
static uint64_t stamp_at(kf_jitframes_t *j, uint64_t addr) {
  uint64_t stamp = kf_codemap_stamp(j->map, addr);
  for (size_t i = 0; i < j->naliases; i++) {
    const kf_code_alias_t *a = &j->aliases[i];
    if (addr >= a->start && addr < a->end) {
      uint64_t there = kf_codemap_stamp(j->map, a->target + (addr - a->start));
      if (there > stamp) stamp = there;
    }
  }
  return stamp;
}

/* Whether an answer cached for `addr` from a lookup that gave `stamp` and
 * `stable_since` holds for a sample at `time`. */
static int still_holds(kf_jitframes_t *j, uint64_t addr, uint64_t time,
                       uint64_t stamp, uint64_t stable_since) {
  return time >= stable_since && stamp == stamp_at(j, addr);
}

/* The token of the code at addr at `time` into *token, with what it is and
 * its name (name[NAME_BYTES]). Returns 1, 0 when the map knows no code
 * there, or -ENOMEM. */
static int named_token_at(kf_jitframes_t *j, uint64_t addr, uint64_t time,
                          uint64_t *token, kf_code_info_t *info, char *name) {
  if (!lookup(j, addr, time, info, name)) return 0;
  return token_of(j, name, info->tier, 0, token);
}

static int token_at(kf_jitframes_t *j, uint64_t addr, uint64_t time,
                    uint64_t *token, kf_code_info_t *info) {
  char name[NAME_BYTES];
  return named_token_at(j, addr, time, token, info, name);
}

/* The functions inlined where optimized code (named outer_name) was at
 * `addr`, looked up into *info, as tokens into chain, innermost first.
 * Returns how many (at most KF_JITFRAMES_MAX_INLINED), 0 when the address
 * is the outer function's own code or not known, or -ENOMEM.
 *
 * The innermost: the instruction's source offset is one of a small
 * function's own in the code's script, and so is an adjacent entry's of the
 * code's line table (an offset of another script's function, read in this
 * one, rarely lands twice on one function).
 *
 * The ones around it: V8's events carry no inlining chain, but a function
 * B that inlined C surrounds C's instructions in the table: B's entries run
 * up to C's (the call's set-up) and on after them (what B does with the
 * result). So, in a window of the table around the address, the run of
 * C's entries is followed out both ways; when the entries met first on
 * each side are both B's, B called C. Then B's run is followed out, and so
 * on. Anything else met first (the outer function, an offset no function
 * or two functions own, or two different functions) ends the chain: a
 * function inlined after another would otherwise pass for its caller. So
 * does C coming back beyond B's runs: code motion (a loop's body laid out
 * around another's) also puts B's instructions on both sides of C's.
 * What this cannot see, it leaves out: a B whose instructions were all
 * scheduled away (no entry of B around C) is a frame missing, not a
 * wrong one. */
#define WINDOW_SIDE 24
#define WINDOW (2 * WINDOW_SIDE + 1)

/* Whether function `inner` comes again in the window beyond the run of
 * function `caller` that starts at owners[from], going `dir` (-1 or 1). */
static int recurs(const int64_t owners[WINDOW], int from, int dir, int64_t caller,
                  int64_t inner) {
  int k = from;
  while (k >= 0 && k < WINDOW && owners[k] == caller) k += dir;
  for (; k >= 0 && k < WINDOW; k += dir)
    if (owners[k] == inner) return 1;
  return 0;
}

/* Whether V8 reported bytecode starting exactly at `bytecode` (a function's
 * first bytecode, as its BYTE_CODE event names it), alive at `time`: its
 * name into name[NAME_BYTES], what it is into *info. */
static int bytecode_at(kf_jitframes_t *j, uint64_t bytecode, uint64_t time,
                       kf_code_info_t *info, char *name) {
  return lookup(j, bytecode, time, info, name) && info->kind == KF_CODE_BYTECODE &&
         info->start == bytecode;
}

/* The same from V8's own inlining (v8inline.h), where the code's table
 * has it: each inlined function is named by its source offset (funcpos:
 * learned from the line events of its bytecode, so only for functions
 * compiled after the hook was armed), else by its bytecode, which V8
 * reported at arming too (BYTE_CODE events). A frame that names nothing
 * (another script's function with no bytecode known, an offset two
 * functions claim) is left out, not guessed. Returns -1 when the table has
 * no inlining, so that the inference below runs instead. */
static int exact_inlined(kf_jitframes_t *j, uint64_t addr, uint64_t time,
                         const kf_code_info_t *info,
                         uint64_t chain[KF_JITFRAMES_MAX_INLINED], int *exact, int *unnamed) {
  int64_t positions[KF_JITFRAMES_MAX_INLINED], owners[KF_JITFRAMES_MAX_INLINED];
  uint64_t bytecodes[KF_JITFRAMES_MAX_INLINED];
  int n = kf_codemap_inlined(j->map, addr, time, positions, bytecodes, KF_JITFRAMES_MAX_INLINED);
  if (n < 0) return n;
  *exact = 1;
  if (n == 0) return 0;
  kf_funcpos_owners(j->funcpos, info->script, positions, (size_t)n, owners);
  char name[NAME_BYTES];
  kf_code_info_t fn;
  int made = 0;
  for (int k = 0; k < n; k++) {
    if (positions[k] < 0 || owners[k] < 0 ||
        kf_funcpos_name(j->funcpos, owners[k], name, sizeof name) < 0) {
      if (!bytecodes[k] || !bytecode_at(j, bytecodes[k], time, &fn, name)) {
        (*unnamed)++;
        continue;
      }
    }
    int rc = token_of(j, name, info->tier, 1, &chain[made]);
    if (rc < 0) return rc;
    made += rc;
  }
  return made;
}

/* Whether inlined_at looks for inlined functions in the code looked up
 * into *info: their names come from other code's bytecode. */
static int names_inlined(const kf_jitframes_t *j, const kf_code_info_t *info) {
  return j->funcpos && info->kind == KF_CODE_JS && info->positions[1] >= 0;
}

static int inlined_at(kf_jitframes_t *j, uint64_t addr, uint64_t time,
                      const kf_code_info_t *info, const char *outer_name,
                      uint64_t chain[KF_JITFRAMES_MAX_INLINED], int *exact,
                      int *unnamed) {
  char name[NAME_BYTES], near[NAME_BYTES];
  *exact = *unnamed = 0;
  if (!names_inlined(j, info)) return 0;
  int told = exact_inlined(j, addr, time, info, chain, exact, unnamed);
  if (told >= 0) return told;
  /* Every JS frame comes here: the three offsets' owners in one lookup,
   * a name fetched only for a confirmed inlined function. */
  int64_t around[3];
  kf_funcpos_owners(j->funcpos, info->script, info->positions, 3, around);
  int confirmed = 0;
  for (int side = 0; side <= 2 && !confirmed; side += 2)
    confirmed = info->positions[side] != info->positions[1] && around[side] >= 0 &&
                around[side] == around[1];
  if (!confirmed || kf_funcpos_name(j->funcpos, around[1], name, sizeof name) < 0 ||
      strcmp(name, outer_name) == 0)
    return 0;
  int rc = token_of(j, name, info->tier, 1, &chain[0]);
  if (rc <= 0) return rc;

  /* The functions around, by id: one lookup for the whole window. */
  int64_t window[WINDOW], owners[WINDOW];
  if (kf_codemap_positions(j->map, addr, time, WINDOW_SIDE, window) != 0) return 1;
  kf_funcpos_owners(j->funcpos, info->script, window, WINDOW, owners);
  int64_t current = owners[WINDOW_SIDE];
  int n = 1, left = WINDOW_SIDE, right = WINDOW_SIDE;
  while (n < KF_JITFRAMES_MAX_INLINED && current >= 0) {
    /* Out of the current function's run, both ways. */
    while (left > 0 && owners[left - 1] == current) left--;
    while (right < WINDOW - 1 && owners[right + 1] == current) right++;
    if (left == 0 || right == WINDOW - 1) break;
    int64_t caller = owners[left - 1];
    if (caller < 0 || owners[right + 1] != caller ||
        recurs(owners, left - 1, -1, caller, current) ||
        recurs(owners, right + 1, 1, caller, current) ||
        kf_funcpos_name(j->funcpos, caller, near, sizeof near) < 0 ||
        strcmp(near, outer_name) == 0)
      break;
    rc = token_of(j, near, info->tier, 1, &chain[n]);
    if (rc < 0) return rc;
    if (rc == 0) break;
    n++;
    current = caller;
    left--;
    right++;
  }
  return n;
}

/* The function whose interpreter frame is at fp, from the BytecodeArray
 * the frame holds: its name into name[NAME_BYTES], what it is into *info,
 * the array's first bytecode into *bytecode. Returns 1, or 0 when the
 * frame cannot be read or V8 reported no bytecode starting at the address
 * it gives. */
static int frame_bytecode(kf_jitframes_t *j, uint64_t time, const kf_userstack_t *stack,
                          uint64_t fp, uint64_t *bytecode, kf_code_info_t *info,
                          char *name) {
  return kf_v8frames_bytecode(j->layout, stack, fp, bytecode) == 0 &&
         bytecode_at(j, *bytecode, time, info, name);
}

/* The token of the function whose interpreter frame is at fp. Returns 1,
 * 0 when not known (frame_bytecode), or -ENOMEM. */
static int frame_function(kf_jitframes_t *j, uint64_t time,
                          const kf_userstack_t *stack, uint64_t fp,
                          uint64_t *token) {
  uint64_t bytecode;
  if (kf_v8frames_bytecode(j->layout, stack, fp, &bytecode)) return 0;
  cached_function_t *c =
      j->functions ? &j->functions[kf_hash_mix(bytecode) & (FUNCTION_CACHE_SLOTS - 1)] : NULL;
  if (c && c->bytecode == bytecode && still_holds(j, bytecode, time, c->stamp, c->stable_since)) {
    *token = c->token;
    return c->token != 0;
  }
  kf_code_info_t info;
  char name[NAME_BYTES];
  int rc = bytecode_at(j, bytecode, time, &info, name) ? token_of(j, name, info.tier, 0, token) : 0;
  if (rc < 0) return rc;
  if (c && info.stable_since != UINT64_MAX)
    *c = (cached_function_t){.bytecode = bytecode,
                             .stamp = info.stamp,
                             .stable_since = info.stable_since,
                             .token = rc ? *token : 0};
  return rc;
}

/* The frame pointer of the code sampled at the leaf, or the one it is
 * about to have or just gave up: bp once its frame is built; before (in
 * its prologue) or after (its epilogue), sp holds the return address into
 * its caller's code, where the frame pointer would be sp - 8, or (after
 * push rbp) the caller's frame pointer, which bp still is, with the
 * return address above it. Once built, sp points at values pushed below
 * the frame. Returns 1, or 0 when the copy does not say. */
static int leaf_frame_pointer(kf_jitframes_t *j, uint64_t time,
                              const kf_userstack_t *stack, uint64_t *fp) {
  uint64_t top, next;
  kf_code_info_t info;
  char name[NAME_BYTES];
  if (kf_userstack_word(stack, stack->sp, &top)) return 0;
  if (lookup(j, top - 1, time, &info, name)) {
    *fp = stack->sp - 8;
  } else if (top != stack->bp) {
    *fp = stack->bp;
  } else {
    if (kf_userstack_word(stack, stack->sp + 8, &next) || !lookup(j, next - 1, time, &info, name))
      return 0;
    *fp = stack->sp;
  }
  return 1;
}

/* Whether the code sampled at the leaf (the trampoline) has built its
 * frame: bp is then its own interpreter frame. */
static int frame_built(kf_jitframes_t *j, uint64_t time,
                       const kf_userstack_t *stack) {
  uint64_t fp;
  return leaf_frame_pointer(j, time, stack, &fp) && fp == stack->bp;
}

/* Whether addr is a return address into code: V8's known code, or
 * generated code (JS code is only ever called from either). */
static int is_code(kf_jitframes_t *j, uint64_t time, uint64_t addr) {
  kf_code_info_t info;
  char name[NAME_BYTES];
  return addr > 0 && (lookup(j, addr - 1, time, &info, name) ||
                      (j->is_jit && j->is_jit(j->is_jit_ctx, addr - 1)));
}

/* The function whose frame at fp runs code V8 never reported: on-stack-
 * replacement code compiled before the hook was armed. V8's report of
 * the code that exists lists the code attached to functions, and OSR code
 * is not (it sits in the function's feedback vector), so a loop V8
 * replaced before the first start() would run as "[jit]" for the whole
 * profile, its time under its caller. OSR code carries on in the
 * interpreter (or baseline) frame it replaced, which keeps the function's
 * BytecodeArray where an interpreter frame does. That slot is a spill
 * slot in any other frame, and may hold a stale BytecodeArray of an
 * earlier frame at the same depth: the frame's own JSFunction (always
 * written) must run that bytecode, read in V8's heap (v8heap.h). Returns
 * 1, 0 when not named (left to be "[jit]"), or -ENOMEM. */
static int unreported_function(kf_jitframes_t *j, uint64_t time,
                               const kf_userstack_t *stack, uint64_t fp,
                               uint64_t *token) {
  uint64_t function, bytecode;
  kf_code_info_t info;
  char name[NAME_BYTES];
  /* The heap is read last: a worker without the hook has no bytecode
   * known, and its frames cost no system call. Named without a tier: V8
   * does not say whose OSR code it is. */
  if (!j->heap || !frame_bytecode(j, time, stack, fp, &bytecode, &info, name) ||
      kf_v8frames_function(j->layout, stack, fp, &function) ||
      !kf_v8heap_runs_bytecode(j->heap, function,
                               kf_v8frames_bytecode_array(j->layout, bytecode)))
    return 0;
  return token_of(j, name, '\0', 0, token);
}

/* Whether unreported code sampled at the leaf has its own frame at bp: it
 * is not in a prologue, where bp is still the caller's frame and sp holds
 * the return address into the caller, or (after push rbp) bp with the
 * return address above it. OSR code has no prologue: it is jumped into
 * with its frame built. (Slots not yet pushed are below sp, where the
 * copy, which starts at sp, has nothing.) */
static int unreported_leaf_frame(kf_jitframes_t *j, uint64_t time,
                                 const kf_userstack_t *stack) {
  uint64_t top, next;
  if (kf_userstack_word(stack, stack->sp, &top) || is_code(j, time, top)) return 0;
  return top != stack->bp ||
         (kf_userstack_word(stack, stack->sp + 8, &next) == 0 && !is_code(j, time, next));
}

/* The function a leaf builtin or bytecode handler was running for, which
 * the callchain skips when the leaf has no frame of its own: it starts at
 * the caller's frame pointer (bp) and return address. Returns how many
 * tokens to put back under the leaf, leaf first, into tokens (1, or more
 * when the call was in functions inlined into the caller's code), 0 when
 * there is none, or -ENOMEM.
 * - A bytecode handler runs in the interpreter frame at bp (when it has a
 *   frame of its own, bp holds a typed-frame marker where an interpreter
 *   frame holds a context, and nothing is found).
 * - Another builtin (with no frame of its own) was called by the JS code
 *   its return address at sp points into. If the builtin did build a frame,
 *   its caller is the callchain's next entry, and is not put back twice. */
static int running_function(kf_jitframes_t *j, uint64_t time,
                            const kf_userstack_t *stack,
                            const kf_code_info_t *leaf, const uint64_t *ips,
                            uint32_t nuser,
                            uint64_t tokens[KF_JITFRAMES_MAX_INLINED + 1]) {
  if (leaf->kind == KF_CODE_BYTECODE_HANDLER)
    return frame_function(j, time, stack, stack->bp, &tokens[0]);
  uint64_t ret, next_token, caller_token;
  kf_code_info_t caller, next;
  char name[NAME_BYTES];
  if (leaf->kind != KF_CODE_OTHER ||
      kf_userstack_word(stack, stack->sp, &ret) != 0)
    return 0;
  int rc = named_token_at(j, ret - 1, time, &caller_token, &caller, name);
  if (rc == 0 && j->is_jit && j->is_jit(j->is_jit_ctx, ret - 1)) {
    /* Called from code V8 never reported (unreported_function): its frame
     * is at bp (a builtin that built its own frame has a frame-type marker
     * there instead of a context, and is not named). */
    rc = unreported_function(j, time, stack, stack->bp, &tokens[0]);
    if (rc > 0) j->stats.unreported_named++;
    return rc;
  }
  if (rc <= 0) return rc;
  if (caller.kind != KF_CODE_JS) return 0;
  if (nuser > 1) {
    rc = token_at(j, ips[1] - 1, time, &next_token, &next);
    if (rc < 0) return rc;
    if (rc > 0 && next.start == caller.start) return 0;
  }
  /* The call may be in a function inlined into the caller's code. */
  int exact, unnamed;
  rc = inlined_at(j, ret - 1, time, &caller, name, tokens, &exact, &unnamed);
  if (rc > 0 && exact) j->stats.inlined_exact += (uint64_t)rc;
  j->stats.inlined_unnamed += (uint64_t)unnamed;
  if (rc < 0) return rc;
  tokens[rc] = caller_token;
  return rc + 1;
}

/* The token of RegExp code V8 reported without its expression, named
 * from the expression its frame at fp was called with (v8regexp.h).
 * Returns 1, 0 when that cannot be read, or -ENOMEM. */
static int regexp_frame(kf_jitframes_t *j, const kf_userstack_t *stack, uint64_t fp,
                        uint64_t *token) {
  uint64_t regexp;
  char source[KF_V8REGEXP_SOURCE_MAX + 1], flags[16], name[NAME_BYTES];
  long len;
  if (kf_v8frames_regexp(j->layout, stack, fp, &regexp) ||
      (len = kf_v8regexp_source(j->regexps, regexp, source, flags)) < 0)
    return 0;
  kf_jitname_regexp(source, (size_t)len, flags, name, sizeof name);
  return token_of(j, name, '\0', 0, token);
}

/* The code at return address `at` at `time`: its token and what it is,
 * with the functions inlined there (*ninlined of them into chain), from
 * the cache when the map's answer there still holds. Returns 1, 0 when no
 * code is known there (*unreported: yet generated code is there), or
 * -ENOMEM. */
static int code_at(kf_jitframes_t *j, uint64_t at, uint64_t time,
                   uint64_t *token, kf_code_info_t *info,
                   uint64_t chain[KF_JITFRAMES_MAX_INLINED], int *ninlined,
                   int *exact, int *unnamed, int *unreported) {
  cached_frame_t *c = j->cache ? &j->cache[kf_hash_mix(at) & (CACHE_SLOTS - 1)] : NULL;
  if (c && c->addr == at && still_holds(j, at, time, c->stamp, c->stable_since) &&
      (c->names == NO_NAMES || c->names == kf_codemap_bytecode_generation(j->map))) {
    j->stats.cache_hits++;
    *token = c->token;
    *info = c->info;
    *ninlined = c->ninlined;
    *exact = c->exact;
    *unnamed = c->unnamed;
    *unreported = c->unreported;
    memcpy(chain, c->inlined, (size_t)c->ninlined * sizeof(uint64_t));
    return c->token != 0;
  }
  uint64_t names = kf_codemap_bytecode_generation(j->map); /* before: stale, never fresh */
  char name[NAME_BYTES];
  int rc = named_token_at(j, at, time, token, info, name);
  *ninlined = *exact = *unnamed = *unreported = 0;
  if (rc == 1) *ninlined = inlined_at(j, at, time, info, name, chain, exact, unnamed);
  if (rc < 0 || *ninlined < 0) return -ENOMEM;
  if (rc == 0 && j->is_jit) *unreported = j->is_jit(j->is_jit_ctx, at);
  if (c && info->stable_since != UINT64_MAX) {
    *c = (cached_frame_t){.addr = at,
                          .stamp = info->stamp,
                          .names = rc == 1 && names_inlined(j, info) ? names : NO_NAMES,
                          .stable_since = info->stable_since,
                          .token = rc ? *token : 0,
                          .info = *info,
                          .ninlined = *ninlined,
                          .exact = *exact,
                          .unnamed = *unnamed,
                          .unreported = *unreported};
    memcpy(c->inlined, chain, (size_t)*ninlined * sizeof(uint64_t));
  }
  return rc;
}

/* The frame pointers of a sample's user frames (j->fps, fps[0] its rbp),
 * walked in the copy only as deep as a frame whose slots are read: each
 * frame walked is a read of the copy that may miss the cache. */
typedef struct frame_walk {
  const kf_userstack_t *stack; /* NULL: nothing to walk */
  const uint64_t *ips;         /* the user chain */
  uint32_t nuser, nfps;
  int stopped;                 /* the walk can go no deeper */
} frame_walk_t;

/* Whether frame k's pointer is known (j->fps[k]), walking on to it. */
static int frame_at(kf_jitframes_t *j, frame_walk_t *w, uint32_t k) {
  if (k < w->nfps) return 1;
  if (!w->stack || w->stopped || k >= w->nuser) return 0;
  w->nfps = (uint32_t)kf_userstack_frames_more(w->stack, w->ips, w->nfps, k + 1, j->fps);
  if (w->nfps > k) return 1;
  w->stopped = 1;
  /* The chain goes on past the copy's end: frames there are not read. */
  uint64_t last = j->fps[w->nfps - 1];
  if (last < w->stack->sp || w->stack->len < 16 || last - w->stack->sp > w->stack->len - 16)
    j->stats.copy_short++;
  return 0;
}

/* Frame k of code V8 never reported, named by unreported_function; at
 * the leaf only once its frame is built. Returns 1, 0 when not named, or
 * -ENOMEM. */
static int unreported_frame(kf_jitframes_t *j, frame_walk_t *w, uint32_t k,
                            uint64_t time, uint64_t *token) {
  int rc = 0;
  if (frame_at(j, w, k) && (k > 0 || unreported_leaf_frame(j, time, w->stack)))
    rc = unreported_function(j, time, w->stack, j->fps[k], token);
  if (rc > 0) j->stats.unreported_named++;
  if (rc == 0) j->stats.unreported_unnamed++;
  return rc;
}

/* Frame k of RegExp code V8 reported without its expression, named by
 * regexp_frame. At the leaf, also in its prologue or epilogue, when its
 * argument is already (or still) on the stack: where leaf_frame_pointer
 * finds the frame, or, when that holds no expression, at bp and at the
 * two frame pointers the prologue makes (sp - 8, then sp once rbp is
 * pushed). Either test can be misled: V8's runtime calls RegExp code from
 * C++, whose return address the code map does not know, so a prologue
 * called from there passes for a built frame; and RegExp code calls its
 * own subroutines, so a built frame can have a return address into code
 * at sp and pass for a prologue. Returns 1, 0 when not named (left
 * KF_JITNAME_REGEXP_EXISTING), or -ENOMEM. */
static int existing_regexp_frame(kf_jitframes_t *j, frame_walk_t *w, uint32_t k,
                                 uint64_t time, uint64_t *token) {
  uint64_t fps[4];
  size_t n = 0;
  if (k > 0 && frame_at(j, w, k)) fps[n++] = j->fps[k];
  if (k == 0 && w->stack) {
    uint64_t found = 0;
    if (leaf_frame_pointer(j, time, w->stack, &found)) fps[n++] = found;
    const uint64_t others[] = {w->stack->bp, w->stack->sp - 8, w->stack->sp};
    for (size_t i = 0; i < 3; i++) /* each position read once */
      if (others[i] != found) fps[n++] = others[i];
  }
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) rc = regexp_frame(j, w->stack, fps[i], token);
  if (rc > 0) j->stats.regexp_named++;
  if (rc == 0) j->stats.regexp_unnamed++;
  return rc;
}

int kf_jitframes_resolve(kf_jitframes_t *j, uint64_t time,
                         const uint64_t *ips, uint32_t nr,
                         const kf_userstack_t *stack, uint64_t *out) {
  uint32_t user = nr, n = 0;
  for (uint32_t i = 0; i < nr; i++)
    if (ips[i] == (uint64_t)PERF_CONTEXT_USER) {
      user = i + 1;
      break;
    }
  frame_walk_t walk = {0};
  if (stack && j->layout && user < nr) {
    if (kf_grow((void **)&j->fps, &j->fps_cap, nr - user, sizeof(uint64_t),
                128))
      return -ENOMEM;
    j->fps[0] = stack->bp;
    walk = (frame_walk_t){.stack = stack, .ips = ips + user, .nuser = nr - user, .nfps = 1};
  }
  for (uint32_t i = 0; i < nr; i++) {
    /* A return address the kernel read off a corrupt frame can be any
     * value, a token's too: it must not pass for a JIT name. */
    out[n++] = kf_jitframes_is_token(ips[i]) ? 0 : ips[i];
    if (i < user || !j->map) continue;
    kf_code_info_t info;
    uint64_t token, function, chain[KF_JITFRAMES_MAX_INLINED];
    uint32_t k = i - user; /* frame k of the user stack, 0 the leaf */
    /* A return address is looked up at its call instruction: one byte
     * before it is still the call, also when the call ends the code. */
    uint64_t at = k > 0 && ips[i] > 0 ? ips[i] - 1 : ips[i];
    int found = 0, exact = 0, unnamed = 0, unreported = 0, at_start;
    int rc = code_at(j, at, time, &token, &info, chain, &found, &exact, &unnamed,
                     &unreported);
    if (rc == 0 && k > 0) {
      /* A frame the deoptimizer made: it continues in the interpreter, and
       * its callee returns to the very start of InterpreterEnterAtBytecode
       * (or AtNextBytecode), not after a call. */
      rc = code_at(j, ips[i], time, &token, &info, chain, &found, &exact, &unnamed,
                   &at_start);
      if (rc > 0 && !(info.kind == KF_CODE_INTERPRETER_ENTRY && info.start == ips[i])) rc = 0;
      found = exact = unnamed = 0;
    }
    if (rc == 0 && unreported) {
      rc = unreported_frame(j, &walk, k, time, &token);
      if (rc < 0) return -ENOMEM;
      if (rc > 0) out[n - 1] = token;
      continue;
    }
    if (rc < 0) return -ENOMEM;
    if (rc == 0) continue;
    out[n - 1] = token;
    j->stats.named++;
    j->stats.inlined_unnamed += (uint64_t)unnamed;
    if (token == j->regexp_existing && j->regexps &&
        existing_regexp_frame(j, &walk, k, time, &out[n - 1]) < 0)
      return -ENOMEM;
    if (found) {
      /* leaf first: the inlined functions, then the code they are in */
      memcpy(&out[n - 1], chain, (size_t)found * sizeof(uint64_t));
      n += (uint32_t)found - 1;
      out[n++] = token;
      j->stats.inlined += (uint64_t)found;
      if (exact) j->stats.inlined_exact += (uint64_t)found;
      continue;
    }
    if (info.kind == KF_CODE_INTERPRETER_ENTRY) {
      /* The shared trampoline owns the interpreter frame at fps[k]; at the
       * leaf, only once it has built it. */
      if (frame_at(j, &walk, k) && (k > 0 || frame_built(j, time, stack)))
        found = frame_function(j, time, stack, j->fps[k], &function);
      if (found < 0) return -ENOMEM;
      if (found) out[n - 1] = function;
      if (found) j->stats.interpreted_named++;
      else j->stats.interpreted_unnamed++;
    } else if (k == 0 && walk.stack) {
      uint64_t put_back[KF_JITFRAMES_MAX_INLINED + 1];
      found = running_function(j, time, stack, &info, ips + user, nr - user,
                               put_back);
      if (found < 0) return -ENOMEM;
      for (int f = 0; f < found; f++) out[n++] = put_back[f];
      if (found) j->stats.running_added++;
      if (found > 1) j->stats.inlined += (uint64_t)found - 1;
    }
  }
  return (int)n;
}

const kf_jitframes_stats_t *kf_jitframes_stats(const kf_jitframes_t *j) {
  return &j->stats;
}

const char *kf_jitframes_name(const kf_jitframes_t *j, uint64_t token,
                              int keep_tier) {
  uint64_t id = token & ~TOKEN_MASK;
  if (token == KF_JIT_UNNAMED) return "[jit]_[j]";
  if (!kf_jitframes_is_token(token) || id >= j->nnames) return NULL;
  return keep_tier ? j->names[id].tiered : j->names[id].merged;
}

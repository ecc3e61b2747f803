/* Reading V8 frames off a sample's stack copy: userstack.c (bounded reads,
 * the frame-pointer chain checked against the kernel's callchain),
 * v8frames.c (layouts, the BytecodeArray slot), jitframes.c (what the
 * collector does with both) and procmaps.c's code aliases. */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/codemap.h"
#include "jit/jitframes.h"
#include "jit/jitname.h"
#include "symbols/procmaps.h"
#include "unwind/userstack.h"
#include "jit/v8frames.h"
#include "jit/v8heap.h"
#include "jit/v8inline.h"
#include "jit/v8regexp.h"
#include "kftest.h"

#define SP 0x7ffd0000ULL
#define COPY 512

/* A stack copy of COPY bytes from SP, zeroed, with words written by put. */
typedef struct fake {
  unsigned char bytes[COPY];
  kf_userstack_t s;
} fake_t;

static void fake_init(fake_t *f, uint64_t bp) {
  memset(f, 0, sizeof(*f));
  f->s = (kf_userstack_t){.ip = 0, .sp = SP, .bp = bp, .bytes = f->bytes,
                          .len = COPY};
}

static void put(fake_t *f, uint64_t addr, uint64_t value) {
  CHECK(addr >= SP && addr + 8 <= SP + COPY);
  memcpy(f->bytes + (addr - SP), &value, 8);
}

/* A frame at fp: saved fp and return address. */
static void frame(fake_t *f, uint64_t fp, uint64_t next, uint64_t ret) {
  put(f, fp, next);
  put(f, fp + 8, ret);
}

static const kf_v8layout_t *node20(void) {
  const kf_v8layout_t *l = kf_v8layout_for("11.3.244.8-node.33");
  CHECK(l != NULL);
  return l;
}

/* An interpreter frame at fp holding the BytecodeArray whose first
 * bytecode is at `bytecode` (context tagged, as in a JS frame). */
static void interpreter_frame(fake_t *f, uint64_t fp, uint64_t bytecode) {
  const kf_v8layout_t *l = node20();
  put(f, fp + (int64_t)l->context_from_fp, 0x12340001);
  put(f, fp + (int64_t)l->bytecode_array_from_fp,
      bytecode - l->bytecode_header + 1);
}

static void words_in_bounds(void) {
  fake_t f;
  fake_init(&f, SP + 64);
  put(&f, SP, 11);
  put(&f, SP + COPY - 8, 22);
  uint64_t v = 0;
  CHECK(kf_userstack_word(&f.s, SP, &v) == 0 && v == 11);
  CHECK(kf_userstack_word(&f.s, SP + COPY - 8, &v) == 0 && v == 22);
  CHECK(kf_userstack_word(&f.s, SP + COPY - 7, &v) == -1); /* straddles the end */
  CHECK(kf_userstack_word(&f.s, SP + COPY, &v) == -1);
  CHECK(kf_userstack_word(&f.s, SP - 8, &v) == -1);
  CHECK(kf_userstack_word(&f.s, UINT64_MAX - 3, &v) == -1);
  f.s.len = 7; /* shorter than a word */
  CHECK(kf_userstack_word(&f.s, SP, &v) == -1);
  f.s.bytes = NULL;
  f.s.len = COPY;
  CHECK(kf_userstack_word(&f.s, SP, &v) == -1);
}

static void frames_follow_the_callchain(void) {
  fake_t f;
  fake_init(&f, SP + 0x40);
  frame(&f, SP + 0x40, SP + 0x80, 0xa1);
  frame(&f, SP + 0x80, SP + 0xc0, 0xa2);
  frame(&f, SP + 0xc0, SP + 0x4000, 0xa3); /* the next frame is past the copy */
  uint64_t ips[] = {0xa0, 0xa1, 0xa2, 0xa3, 0xa4}, fps[5];
  CHECK_EQ_U64(kf_userstack_frames(&f.s, ips, 5, fps), 4);
  CHECK_EQ_U64(fps[0], SP + 0x40);
  CHECK_EQ_U64(fps[2], SP + 0xc0);
  CHECK_EQ_U64(fps[3], SP + 0x4000); /* known, but not readable */
  /* A return address the kernel did not see: the chain stops there. */
  ips[2] = 0xbad;
  CHECK_EQ_U64(kf_userstack_frames(&f.s, ips, 5, fps), 2);
  /* A link pointing down the stack (a loop) stops it too. */
  ips[2] = 0xa2;
  frame(&f, SP + 0x80, SP + 0x40, 0xa2);
  CHECK_EQ_U64(kf_userstack_frames(&f.s, ips, 5, fps), 2);
  CHECK_EQ_U64(kf_userstack_frames(&f.s, ips, 0, fps), 0);
  CHECK_EQ_U64(kf_userstack_frames(&f.s, ips, 1, fps), 1);
}

static void layouts_by_version(void) {
  CHECK(kf_v8layout_for("11.3.244.8-node.33")->bytecode_header == 54);
  CHECK(kf_v8layout_for("12.4.254.21-node.33")->bytecode_header == 64);
  CHECK(kf_v8layout_for("13.6.233.17-node.53") != NULL);
  CHECK(kf_v8layout_for("99.1.0") == NULL);
  CHECK(kf_v8layout_for("11") == NULL);
  CHECK(kf_v8layout_for("") == NULL);
  CHECK(kf_v8layout_for(NULL) == NULL);
}

static void bytecode_slot(void) {
  const kf_v8layout_t *l = node20();
  fake_t f;
  fake_init(&f, SP + 0x100);
  interpreter_frame(&f, SP + 0x100, 0x500036);
  uint64_t bc = 0;
  CHECK(kf_v8frames_bytecode(l, &f.s, SP + 0x100, &bc) == 0);
  CHECK_EQ_U64(bc, 0x500036);
  /* A typed frame: a Smi-shaped marker where a JS frame has its context. */
  put(&f, SP + 0x100 - 8, 0x22);
  CHECK(kf_v8frames_bytecode(l, &f.s, SP + 0x100, &bc) == -1);
  /* A slot holding no heap object. */
  interpreter_frame(&f, SP + 0x100, 0x500036);
  put(&f, SP + 0x100 - 32, 0x500000);
  CHECK(kf_v8frames_bytecode(l, &f.s, SP + 0x100, &bc) == -1);
  /* Slots outside the copy; no layout. */
  CHECK(kf_v8frames_bytecode(l, &f.s, SP + 8, &bc) == -1);
  CHECK(kf_v8frames_bytecode(l, &f.s, SP + 0x4000, &bc) == -1);
  CHECK(kf_v8frames_bytecode(NULL, &f.s, SP + 0x100, &bc) == -1);
}

/* The code map a V8 process would have, named as the hook names it. */
#define TRAMPOLINE 0x100000ULL
#define HANDLER 0x200000ULL
#define BAR 0x300000ULL
#define BUILTIN 0x400000ULL
#define ENTER_AT_NEXT 0x480000ULL
#define FOO_BYTECODE 0x500036ULL
#define OTHER_BYTECODE 0x600036ULL

static void add_named(kf_codemap_t *m, uint64_t start, uint64_t len,
                      const char *v8name, int bytecode) {
  char name[1024], tier;
  kf_jitname(v8name, strlen(v8name), name, sizeof name, &tier);
  enum kf_code_kind kind =
      bytecode ? KF_CODE_BYTECODE : kf_jitname_kind(v8name, strlen(v8name));
  CHECK(kf_codemap_add(m, start, len, name, tier, kind, 1, 0) == 0);
}

static kf_codemap_t *v8_map(void) {
  kf_codemap_t *m = kf_codemap_new();
  add_named(m, TRAMPOLINE, 0x100, "Builtin:InterpreterEntryTrampoline", 0);
  add_named(m, HANDLER, 0x100, "BytecodeHandler:Add", 0);
  add_named(m, BAR, 0x100, "JS:*bar b.js:2:2", 0);
  add_named(m, BUILTIN, 0x100, "Builtin:MultiplySmi_Baseline", 0);
  add_named(m, FOO_BYTECODE, 0x40, "JS:~foo a.js:1:1", 1);
  add_named(m, OTHER_BYTECODE, 0x40, "JS:~other a.js:9:1", 1);
  return m;
}

#define U ((uint64_t)PERF_CONTEXT_USER)

static const char *name_of(kf_jitframes_t *j, uint64_t v) {
  const char *n = kf_jitframes_name(j, v, 0);
  return n ? n : "(raw)";
}

/* A frame the deoptimizer made goes on in the interpreter: its callee
 * returns to the very start of InterpreterEnterAtNextBytecode, where a
 * lookup one byte before (as for a call's return address) finds nothing.
 * It is an interpreter frame all the same, named from its BytecodeArray. */
static void deoptimized_frames_named(void) {
  kf_codemap_t *m = v8_map();
  add_named(m, ENTER_AT_NEXT, 0x100, "Builtin:InterpreterEnterAtNextBytecode", 0);
  kf_jitframes_t *j = kf_jitframes_new(m, node20());
  fake_t f;
  fake_init(&f, SP + 0x40);
  frame(&f, SP + 0x40, SP + 0x100, ENTER_AT_NEXT);
  frame(&f, SP + 0x100, SP + 0x180, 0x7000);
  interpreter_frame(&f, SP + 0x100, FOO_BYTECODE);
  uint64_t ips[] = {U, BAR + 4, ENTER_AT_NEXT, 0x7000}, out[5];
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, &f.s, out) == 4);
  CHECK_STR(name_of(j, out[1]), "bar b.js:2:2_[j]");
  CHECK_STR(name_of(j, out[2]), "foo a.js:1:1_[j]");
  /* Only at a start, and only of an interpreter entry: a return address
   * at the start of other code is not taken for one. */
  uint64_t other[] = {U, BAR + 4, BUILTIN, 0x7000};
  CHECK(kf_jitframes_resolve(j, 5, other, 4, &f.s, out) == 4);
  CHECK_EQ_U64(out[2], BUILTIN);
  kf_jitframes_free(j);
  kf_codemap_free(m);
}

/* bar (leaf, own frame at 0x40) called from an interpreted function, foo,
 * whose frame (at 0x100) the shared trampoline owns. */
static void bar_over_interpreted_foo(fake_t *f) {
  fake_init(f, SP + 0x40);
  frame(f, SP + 0x40, SP + 0x100, TRAMPOLINE + 0x10);
  frame(f, SP + 0x100, SP + 0x180, 0x7000);
  interpreter_frame(f, SP + 0x100, FOO_BYTECODE);
}

/* An interpreter frame's function comes from a cache of BytecodeArrays
 * that follows the map: bytecode V8 put where another's was names frames
 * sampled after it, and the one before names those sampled before. */
static void interpreted_frame_cache_follows_the_map(void) {
  kf_codemap_t *m = v8_map();
  kf_codemap_keep_dead(m, 1);
  kf_jitframes_t *j = kf_jitframes_new(m, node20());
  fake_t f;
  bar_over_interpreted_foo(&f);
  uint64_t ips[] = {U, BAR + 4, TRAMPOLINE + 0x10, 0x7000}, out[5];
  for (uint64_t t = 5; t <= 6; t++) {
    CHECK(kf_jitframes_resolve(j, t, ips, 4, &f.s, out) == 4);
    CHECK_STR(name_of(j, out[2]), "foo a.js:1:1_[j]");
  }
  CHECK(kf_codemap_add(m, FOO_BYTECODE, 0x40, "reused c.js:4:1", '~', KF_CODE_BYTECODE, 1, 10) == 0);
  CHECK(kf_jitframes_resolve(j, 11, ips, 4, &f.s, out) == 4);
  CHECK_STR(name_of(j, out[2]), "reused c.js:4:1_[j]");
  CHECK(kf_jitframes_resolve(j, 7, ips, 4, &f.s, out) == 4); /* drained late */
  CHECK_STR(name_of(j, out[2]), "foo a.js:1:1_[j]");
  CHECK(kf_jitframes_resolve(j, 12, ips, 4, &f.s, out) == 4);
  CHECK_STR(name_of(j, out[2]), "reused c.js:4:1_[j]");
  kf_jitframes_free(j);
  kf_codemap_keep_dead(m, 0);
  kf_codemap_free(m);
}

static void interpreted_frames_named(void) {
  kf_codemap_t *m = v8_map();
  kf_jitframes_t *j = kf_jitframes_new(m, node20());
  fake_t f;
  bar_over_interpreted_foo(&f);
  uint64_t ips[] = {U, BAR + 4, TRAMPOLINE + 0x10, 0x7000}, out[5];
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, &f.s, out) == 4);
  CHECK_STR(name_of(j, out[1]), "bar b.js:2:2_[j]");
  CHECK_STR(name_of(j, out[2]), "foo a.js:1:1_[j]");
  CHECK_EQ_U64(out[3], 0x7000);
  CHECK_EQ_U64(kf_jitframes_stats(j)->interpreted_named, 1);
  /* Without the copy: "(interpreted)", as the callchain alone gives. */
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, NULL, out) == 4);
  CHECK_STR(name_of(j, out[2]), "(interpreted)_[j]");
  /* A stale slot (no bytecode reported there) or one pointing inside an
   * array rather than at its start: left "(interpreted)", counted. */
  interpreter_frame(&f, SP + 0x100, 0x900036);
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, &f.s, out) == 4);
  CHECK_STR(name_of(j, out[2]), "(interpreted)_[j]");
  interpreter_frame(&f, SP + 0x100, FOO_BYTECODE + 8);
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, &f.s, out) == 4);
  CHECK_STR(name_of(j, out[2]), "(interpreted)_[j]");
  CHECK_EQ_U64(kf_jitframes_stats(j)->interpreted_unnamed, 3);
  CHECK_EQ_U64(kf_jitframes_stats(j)->interpreted_named, 1);
  CHECK_EQ_U64(kf_jitframes_stats(j)->copy_short, 0);
  /* A chain that goes on past the copy's end is counted when a frame
   * there had to be read (an interpreter frame); the walk goes no deeper
   * than the last frame read. */
  frame(&f, SP + 0x100, SP + 0x4000, 0x7000);
  uint64_t past[] = {U, BAR + 4, TRAMPOLINE + 0x10, 0x7000, 0x7100}, past_out[7];
  CHECK(kf_jitframes_resolve(j, 5, past, 5, &f.s, past_out) == 5);
  CHECK_EQ_U64(kf_jitframes_stats(j)->copy_short, 0);
  uint64_t past_read[] = {U, BAR + 4, TRAMPOLINE + 0x10, 0x7000, TRAMPOLINE + 0x10};
  CHECK(kf_jitframes_resolve(j, 5, past_read, 5, &f.s, past_out) == 5);
  CHECK_STR(name_of(j, past_out[4]), "(interpreted)_[j]");
  CHECK_EQ_U64(kf_jitframes_stats(j)->copy_short, 1);
  frame(&f, SP + 0x100, SP + 0x180, 0x7000);
  /* The trampoline at the leaf, its frame not built yet: the word at sp is
   * the return address into its caller, or (after push rbp) bp itself.
   * The frame at bp is the caller's: nothing named from it. */
  interpreter_frame(&f, SP + 0x40, OTHER_BYTECODE);
  uint64_t leaf[] = {U, TRAMPOLINE + 0x10, 0x7000};
  put(&f, SP, BAR + 0x21);
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "(interpreted)_[j]");
  put(&f, SP, SP + 0x40);
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "(interpreted)_[j]");
  /* Built: sp holds what the trampoline pushed (undefined, say). */
  put(&f, SP, 0x12340009);
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "other a.js:9:1_[j]");
  kf_jitframes_free(j);
  kf_codemap_free(m);
}

static void running_function_put_back(void) {
  kf_codemap_t *m = v8_map();
  kf_jitframes_t *j = kf_jitframes_new(m, node20());
  fake_t f;
  /* A frameless bytecode handler running foo: bp is foo's interpreter
   * frame; the callchain goes from the handler to foo's caller. */
  fake_init(&f, SP + 0x100);
  frame(&f, SP + 0x100, SP + 0x180, 0x7000);
  interpreter_frame(&f, SP + 0x100, FOO_BYTECODE);
  uint64_t ips[] = {U, HANDLER + 4, 0x7000}, out[4];
  CHECK(kf_jitframes_resolve(j, 5, ips, 3, &f.s, out) == 4);
  CHECK_STR(name_of(j, out[1]), "BytecodeHandler:Add_[j]");
  CHECK_STR(name_of(j, out[2]), "foo a.js:1:1_[j]");
  CHECK_EQ_U64(out[3], 0x7000);
  /* A handler with a frame of its own (a stub frame's marker at bp - 8):
   * nothing is put back; the trampoline above names foo. */
  put(&f, SP + 0x100 - 8, 0x22);
  CHECK(kf_jitframes_resolve(j, 5, ips, 3, &f.s, out) == 3);
  /* A frameless builtin called by bar: its return address at sp. */
  fake_init(&f, SP + 0x100);
  frame(&f, SP + 0x100, SP + 0x180, 0x7000);
  put(&f, SP, BAR + 0x20);
  uint64_t b[] = {U, BUILTIN + 4, 0x7000};
  CHECK(kf_jitframes_resolve(j, 5, b, 3, &f.s, out) == 4);
  CHECK_STR(name_of(j, out[1]), "Builtin:MultiplySmi_Baseline_[j]");
  CHECK_STR(name_of(j, out[2]), "bar b.js:2:2_[j]");
  /* The builtin built a frame: bar is the callchain's next entry already. */
  uint64_t framed[] = {U, BUILTIN + 4, BAR + 0x30, 0x7000};
  frame(&f, SP + 0x100, SP + 0x180, BAR + 0x30);
  CHECK(kf_jitframes_resolve(j, 5, framed, 4, &f.s, out) == 4);
  /* What sp holds is not JS code (nothing known there, or V8 code that
   * is not a JS function's): nothing. A native leaf: nothing. */
  put(&f, SP, 0x7100);
  CHECK(kf_jitframes_resolve(j, 5, b, 3, &f.s, out) == 3);
  put(&f, SP, TRAMPOLINE + 0x11);
  CHECK(kf_jitframes_resolve(j, 5, b, 3, &f.s, out) == 3);
  uint64_t native[] = {U, 0x7200, 0x7000};
  put(&f, SP, BAR + 0x20);
  CHECK(kf_jitframes_resolve(j, 5, native, 3, &f.s, out) == 3);
  CHECK_EQ_U64(kf_jitframes_stats(j)->running_added, 2);
  kf_jitframes_free(j);
  kf_codemap_free(m);
}

/* Generated code the map does not know, at OSR_CODE (is_jit says so):
 * on-stack-replacement code V8 compiled before the hook was armed. Its
 * frame keeps the interpreter frame's BytecodeArray slot, and its
 * JSFunction, whose SharedFunctionInfo (read in memory laid out as V8's
 * heap, v8heap.h) must run that bytecode. */
#define OSR_CODE 0x800000ULL

static int fake_is_jit(void *ctx, uint64_t addr) {
  (*(int *)ctx)++;
  return addr >= OSR_CODE && addr < OSR_CODE + 0x1000;
}

/* Heap objects: a map keeps its instance type 8 bytes in; a JSFunction its
 * SharedFunctionInfo 24 bytes in, which keeps its function data 8 in. */
static const kf_v8heap_layout_t fake_heap = {.map_type = 8, .function_shared = 24,
                                             .sfi_function_data = 8, .sfi_type = 262,
                                             .code_type = 245, .interpreter_data_type = 159,
                                             .bytecode_type = 191};
typedef struct fake_function {
  uint64_t sfi_map[2], code_map[2], bytecode_map[2], sfi[2], code[4], function[4];
  uint64_t bytecode[16]; /* the BytecodeArray: its first bytecode 54 bytes in */
} fake_function_t;

static uint64_t tagged(const void *p) { return (uint64_t)(uintptr_t)p + 1; }

/* The first bytecode of a fake function, as its BYTE_CODE event names it. */
static uint64_t first_bytecode(const fake_function_t *h) {
  return (uint64_t)(uintptr_t)h->bytecode + node20()->bytecode_header;
}

/* A JSFunction with its bytecode, as its function data when `baseline` is
 * 0, else held by its baseline Code 16 bytes in (as V8 11.3 lays it out);
 * its BytecodeArray named `v8name` in the map. Returns it tagged. */
static uint64_t fake_function(fake_function_t *h, int baseline, kf_codemap_t *m,
                              const char *v8name) {
  memset(h, 0, sizeof(*h));
  h->sfi_map[1] = fake_heap.sfi_type;
  h->code_map[1] = fake_heap.code_type;
  h->bytecode_map[1] = fake_heap.bytecode_type;
  h->bytecode[0] = tagged(h->bytecode_map);
  h->code[0] = tagged(h->code_map);
  h->code[2] = tagged(h->bytecode);
  h->sfi[0] = tagged(h->sfi_map);
  h->sfi[1] = baseline ? tagged(h->code) : tagged(h->bytecode);
  h->function[3] = tagged(h->sfi);
  add_named(m, first_bytecode(h), 0x40, v8name, 1);
  return tagged(h->function);
}

static void unreported_code_named_from_its_frame(void) {
  kf_codemap_t *m = v8_map();
  kf_jitframes_t *j = kf_jitframes_new(m, node20());
  int asked = 0;
  kf_jitframes_unreported(j, fake_is_jit, &asked, &fake_heap);
  static fake_function_t foo, other;
  uint64_t foo_fn = fake_function(&foo, 1, m, "JS:~foo a.js:1:1");
  uint64_t other_fn = fake_function(&other, 0, m, "JS:~other a.js:9:1");
  fake_t f;
  /* bar (leaf) called from OSR code of foo (frame at 0x100). */
  fake_init(&f, SP + 0x40);
  frame(&f, SP + 0x40, SP + 0x100, OSR_CODE + 0x10);
  frame(&f, SP + 0x100, SP + 0x180, 0x7000);
  interpreter_frame(&f, SP + 0x100, first_bytecode(&foo));
  put(&f, SP + 0x100 - 16, foo_fn);
  uint64_t ips[] = {U, BAR + 4, OSR_CODE + 0x10, 0x7000}, out[5];
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, &f.s, out) == 4);
  CHECK_STR(name_of(j, out[2]), "foo a.js:1:1_[j]");
  /* No tier: V8 does not say whose OSR code it is. */
  CHECK_STR(kf_jitframes_name(j, out[2], 1), "foo a.js:1:1_[j]");
  CHECK_EQ_U64(out[3], 0x7000); /* native: not generated code, left */
  CHECK_EQ_U64(kf_jitframes_stats(j)->unreported_named, 1);
  /* Whether code is there is asked once per address while the map holds. */
  int before = asked;
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, &f.s, out) == 4);
  CHECK(asked == before);
  /* The function data the array itself (only interpreted so far). */
  put(&f, SP + 0x100 - 16, other_fn);
  interpreter_frame(&f, SP + 0x100, first_bytecode(&other));
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, &f.s, out) == 4);
  CHECK_STR(name_of(j, out[2]), "other a.js:9:1_[j]");
  /* A stale BytecodeArray in the slot (an earlier frame's, in what is now
   * a spill slot): the frame's function does not run it. Left as the
   * kernel gave it (the collector makes it "[jit]"), counted. */
  interpreter_frame(&f, SP + 0x100, first_bytecode(&foo));
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, &f.s, out) == 4);
  CHECK_EQ_U64(out[2], OSR_CODE + 0x10);
  /* A function slot that is no object, or whose object is not a function
   * of a SharedFunctionInfo; a slot naming no reported bytecode, or the
   * middle of one; no copy. */
  put(&f, SP + 0x100 - 16, 0x1234);
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, &f.s, out) == 4);
  CHECK_EQ_U64(out[2], OSR_CODE + 0x10);
  put(&f, SP + 0x100 - 16, tagged(foo.code));
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, &f.s, out) == 4);
  CHECK_EQ_U64(out[2], OSR_CODE + 0x10);
  put(&f, SP + 0x100 - 16, foo_fn);
  interpreter_frame(&f, SP + 0x100, 0x900036);
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, &f.s, out) == 4);
  CHECK_EQ_U64(out[2], OSR_CODE + 0x10);
  interpreter_frame(&f, SP + 0x100, first_bytecode(&foo) + 8);
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, &f.s, out) == 4);
  CHECK_EQ_U64(out[2], OSR_CODE + 0x10);
  CHECK(kf_jitframes_resolve(j, 5, ips, 4, NULL, out) == 4);
  CHECK_EQ_U64(out[2], OSR_CODE + 0x10);
  CHECK_EQ_U64(kf_jitframes_stats(j)->unreported_unnamed, 6);
  CHECK_EQ_U64(kf_jitframes_stats(j)->unreported_named, 3);

  /* At the leaf: the frame at bp is its own once built (sp holds a value
   * the code pushed or spilled, bp among them), not in a prologue (sp
   * holds the return address into the caller, or bp with it above). */
  fake_init(&f, SP + 0x100);
  frame(&f, SP + 0x100, SP + 0x180, 0x7000);
  interpreter_frame(&f, SP + 0x100, first_bytecode(&foo));
  put(&f, SP + 0x100 - 16, foo_fn);
  uint64_t leaf[] = {U, OSR_CODE + 0x20, 0x7000};
  put(&f, SP, 0x12340009);
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "foo a.js:1:1_[j]");
  put(&f, SP, SP + 0x100);
  put(&f, SP + 8, 0x12340009);
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "foo a.js:1:1_[j]");
  put(&f, SP + 8, BAR + 0x21);
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_EQ_U64(out[1], OSR_CODE + 0x20);
  put(&f, SP + 8, OSR_CODE + 0x41);
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_EQ_U64(out[1], OSR_CODE + 0x20);
  put(&f, SP, BAR + 0x21);
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_EQ_U64(out[1], OSR_CODE + 0x20);
  /* A frameless builtin called from OSR code: foo put back under it. A
   * builtin with a frame of its own (a marker at bp - 8): nothing. */
  put(&f, SP, OSR_CODE + 0x30);
  uint64_t b[] = {U, BUILTIN + 4, 0x7000};
  CHECK(kf_jitframes_resolve(j, 5, b, 3, &f.s, out) == 4);
  CHECK_STR(name_of(j, out[1]), "Builtin:MultiplySmi_Baseline_[j]");
  CHECK_STR(name_of(j, out[2]), "foo a.js:1:1_[j]");
  put(&f, SP + 0x100 - 8, 0x22);
  CHECK(kf_jitframes_resolve(j, 5, b, 3, &f.s, out) == 3);
  CHECK_EQ_U64(kf_jitframes_stats(j)->unreported_named, 6);
  kf_jitframes_free(j);

  /* Without V8's heap layout nothing is named this way, only counted;
   * without the predicate, not even counted. */
  put(&f, SP + 0x100 - 8, 0x12340001);
  put(&f, SP, 0x12340009);
  j = kf_jitframes_new(m, node20());
  kf_jitframes_unreported(j, fake_is_jit, &asked, NULL);
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_EQ_U64(out[1], OSR_CODE + 0x20);
  CHECK_EQ_U64(kf_jitframes_stats(j)->unreported_unnamed, 1);
  kf_jitframes_free(j);
  j = kf_jitframes_new(m, node20());
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_EQ_U64(out[1], OSR_CODE + 0x20);
  CHECK_EQ_U64(kf_jitframes_stats(j)->unreported_unnamed, 0);
  kf_jitframes_free(j);
  kf_codemap_free(m);
}

/* RegExp code V8 reported without its expression ("Regular expression
 * code", at REGEXP_CODE), named from the expression its frame was called
 * with, 32 bytes above its frame pointer, read in memory laid out as V8's
 * heap (v8regexp.h): a JSRegExp (V8 11, 12) or a RegExpData (13). */
#define REGEXP_CODE 0xa00000ULL

static const kf_v8regexp_layout_t fake_regexps = {
    .map_type = 8, .regexp_type = 2131, .regexp_source = 32,
    .data_types = {183, 185, 184}, .data_source = 16, .data_flags = 24,
    .first_nonstring_type = 128, .representation_mask = 7, .seq_tag = 0, .thin_tag = 5,
    .encoding_mask = 8, .one_byte_tag = 8, .string_length = 12, .seq_chars = 16,
    .thin_actual = 16};

/* A heap object: its map (instance type 8 bytes in), then its fields. */
typedef struct fake_object {
  uint64_t map[2];
  uint64_t words[1 + 2048 / 8];
} fake_object_t;

static uint64_t fake_object(fake_object_t *o, long type) {
  memset(o, 0, sizeof(*o));
  o->map[1] = (uint64_t)type;
  o->words[0] = tagged(o->map);
  return tagged(o->words);
}

/* A sequential string of n units (one byte each, or two), type as V8's
 * instance types go: 8 one-byte, 0 two-byte. */
static uint64_t fake_string(fake_object_t *o, long type, const void *units, size_t n) {
  uint64_t s = fake_object(o, type);
  int32_t length = (int32_t)n;
  memcpy((char *)o->words + 12, &length, 4);
  memcpy((char *)o->words + 16, units, n * (type & 8 ? 1 : 2));
  return s;
}

/* An object whose field at `offset` is `value`. */
static uint64_t fake_holder(fake_object_t *o, long type, long offset, uint64_t value) {
  uint64_t h = fake_object(o, type);
  memcpy((char *)o->words + offset, &value, 8);
  return h;
}

static void existing_regexps_named(void) {
  kf_codemap_t *m = v8_map();
  add_named(m, REGEXP_CODE, 0x200, "RegExp:Regular expression code", 0);
  kf_jitframes_t *j = kf_jitframes_new(m, node20());
  kf_jitframes_regexps(j, &fake_regexps);
  static fake_object_t src, re, stale_src, stale, other;
  uint64_t regexp = fake_holder(&re, 2131, 32, fake_string(&src, 8, "ab+c", 4));
  uint64_t stale_regexp = fake_holder(&stale, 2131, 32, fake_string(&stale_src, 8, "zz", 2));
  fake_t f;
  uint64_t out[8];

  /* At the leaf, its frame built: bp is its frame. */
  fake_init(&f, SP + 0x40);
  frame(&f, SP + 0x40, SP + 0x100, 0x7000);
  put(&f, SP, 0x12340009);
  put(&f, SP + 0x40 + 32, regexp);
  uint64_t leaf[] = {U, REGEXP_CODE + 0x10, 0x7000};
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "RegExp:/ab+c/_[j]");
  /* Built, inside one of its own subroutines: a return address into the
   * RegExp code itself at sp, which passes for a prologue's. */
  put(&f, SP, REGEXP_CODE + 0x41);
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "RegExp:/ab+c/_[j]");
  put(&f, SP, 0x12340009);
  /* Deeper: RegExp code calling a C helper (a case-insensitive compare). */
  uint64_t deep[] = {U, 0x7100, REGEXP_CODE + 0x20, 0x7000};
  frame(&f, SP + 0x40, SP + 0x100, REGEXP_CODE + 0x20);
  frame(&f, SP + 0x100, SP + 0x180, 0x7000);
  put(&f, SP + 0x100 + 32, regexp);
  CHECK(kf_jitframes_resolve(j, 5, deep, 4, &f.s, out) == 4);
  CHECK_STR(name_of(j, out[2]), "RegExp:/ab+c/_[j]");
  CHECK_EQ_U64(kf_jitframes_stats(j)->regexp_named, 3);

  /* In its prologue, called from a builtin (RegExpExecInternal): the
   * return address at sp, the
   * argument 24 bytes above it; bp still the caller's frame, whose slot
   * 32 above holds another expression, not this one's. */
  fake_init(&f, SP + 0x100);
  frame(&f, SP + 0x100, SP + 0x180, 0x7000);
  put(&f, SP + 0x100 + 32, stale_regexp);
  put(&f, SP, BUILTIN + 0x21);
  put(&f, SP + 24, regexp);
  uint64_t prologue[] = {U, REGEXP_CODE, 0x7000};
  CHECK(kf_jitframes_resolve(j, 5, prologue, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "RegExp:/ab+c/_[j]");
  /* After push rbp: bp at sp, the return address above, the argument 32
   * bytes above sp. */
  put(&f, SP, SP + 0x100);
  put(&f, SP + 8, BUILTIN + 0x21);
  put(&f, SP + 24, 0);
  put(&f, SP + 32, regexp);
  CHECK(kf_jitframes_resolve(j, 5, prologue, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "RegExp:/ab+c/_[j]");
  /* Called from C++ (V8's runtime): its return address is not known
   * code, so the prologue looks like a built frame at bp, which holds no
   * expression; the prologue's frame pointer to be is tried next. */
  put(&f, SP, 0x7123);
  put(&f, SP + 8, 0);
  put(&f, SP + 24, regexp);
  put(&f, SP + 32, 0);
  put(&f, SP + 0x100 + 32, 0);
  CHECK(kf_jitframes_resolve(j, 5, prologue, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "RegExp:/ab+c/_[j]");

  /* V8 13: a RegExpData of any of its types, with the flags V8 names its
   * code with, in V8's order (g, i, y, d: bits 0, 1, 3, 7). */
  fake_init(&f, SP + 0x40);
  put(&f, SP, 0x12340009);
  frame(&f, SP + 0x40, SP + 0x100, 0x7000);
  uint64_t data = fake_holder(&other, 185, 16, fake_string(&src, 8, "ab+c", 4));
  memcpy((char *)other.words + 24, &(uint64_t){(uint64_t)0x8b << 32}, 8);
  put(&f, SP + 0x40 + 32, data);
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "RegExp:/ab+c/dgiy_[j]");

  /* Sources: Latin-1 one-byte characters and two-byte ones as UTF-8, a
   * surrogate pair as one character, a lone surrogate as U+FFFD; a thin
   * string followed to its actual string. */
  put(&f, SP + 0x40 + 32, regexp);
  fake_string(&src, 8, "a\xe9", 2);
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "RegExp:/a\xc3\xa9/_[j]");
  uint16_t units[] = {'x', 0x2192, 0xd83d, 0xde00, 0xd800, 'y'};
  fake_string(&src, 0, units, 6);
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "RegExp:/x\xe2\x86\x92\xf0\x9f\x98\x80\xef\xbf\xbdy/_[j]");
  fake_holder(&src, 13, 16, fake_string(&stale_src, 8, "thin", 4));
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "RegExp:/thin/_[j]");
  CHECK_EQ_U64(kf_jitframes_stats(j)->regexp_named, 10);

  /* A source too long for a name is cut at a character's end. */
  char text[KF_V8REGEXP_SOURCE_MAX + 1], source[KF_V8REGEXP_SOURCE_MAX + 1], flags[16];
  memset(text, 'a', sizeof text);
  text[KF_V8REGEXP_SOURCE_MAX - 1] = (char)0xe9; /* 2 bytes of UTF-8: cut before */
  fake_string(&src, 8, text, sizeof text);
  CHECK(kf_v8regexp_source(&fake_regexps, regexp, source, flags) == KF_V8REGEXP_SOURCE_MAX - 1);
  CHECK(strspn(source, "a") == KF_V8REGEXP_SOURCE_MAX - 1 && flags[0] == '\0');
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK(strncmp(name_of(j, out[1]), "RegExp:/aaaa", 12) == 0);

  /* Nothing named, counted, the frame left as V8 reported it: not a
   * regexp (another type, a Smi, nothing readable), a source that is not
   * a sequential or thin string (a cons string, type 9), or no string. */
  static fake_object_t wrong_type, cons_re, cons, nonstring_re, nonstring;
  uint64_t existing = 0, before = kf_jitframes_stats(j)->regexp_unnamed;
  uint64_t bad[] = {fake_holder(&wrong_type, 262, 32, regexp), 0x12345600, tagged((void *)8),
                    fake_holder(&cons_re, 2131, 32, fake_holder(&cons, 9, 16, 0)),
                    fake_holder(&nonstring_re, 2131, 32, fake_holder(&nonstring, 200, 16, 0))};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    put(&f, SP + 0x40 + 32, bad[i]);
    CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
    CHECK_STR(name_of(j, out[1]), "RegExp:(compiled before start)_[j]");
    existing = out[1];
  }
  CHECK_EQ_U64(kf_jitframes_stats(j)->regexp_unnamed, before + 5);
  /* No copy: the same. */
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, NULL, out) == 3);
  CHECK_EQ_U64(out[1], existing);
  kf_jitframes_free(j);

  /* Without the layout: left as V8 reported it, not counted. */
  put(&f, SP + 0x40 + 32, regexp);
  j = kf_jitframes_new(m, node20());
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, &f.s, out) == 3);
  CHECK_STR(name_of(j, out[1]), "RegExp:(compiled before start)_[j]");
  CHECK_EQ_U64(kf_jitframes_stats(j)->regexp_unnamed + kf_jitframes_stats(j)->regexp_named, 0);
  kf_jitframes_free(j);
  kf_codemap_free(m);
}

static kf_lines_t *lines_of(const uint32_t (*pairs)[2], size_t n) {
  kf_lines_t *l = kf_lines_new();
  CHECK(l != NULL);
  for (size_t i = 0; i < n; i++) CHECK(kf_lines_push(l, pairs[i][0], pairs[i][1]) == 0);
  CHECK(kf_lines_seal(l) == 0);
  return l;
}

static void line_tables(void) {
  /* pushed out of order, as V8 may: sealed tables are sorted by offset */
  static const uint32_t pairs[][2] = {{40, 7}, {0, 5}, {20, 6}};
  kf_lines_t *l = lines_of(pairs, 3);
  int64_t at[3];
  CHECK(kf_lines_at(l, 0, at) == 0 && at[0] == -1 && at[1] == 5 && at[2] == 6);
  CHECK(kf_lines_at(l, 25, at) == 0 && at[0] == 5 && at[1] == 6 && at[2] == 7);
  CHECK(kf_lines_at(l, 9999, at) == 0 && at[1] == 7 && at[2] == -1);
  kf_lines_release(l);
  /* Given up: later pushes do nothing, sealing fails. */
  l = kf_lines_new();
  CHECK(kf_lines_push(l, 0, 1) == 0);
  kf_lines_abandon(l);
  CHECK(kf_lines_push(l, 4, 2) == -ENOMEM && kf_lines_count(l) == 0);
  CHECK(kf_lines_seal(l) == -ENOMEM);
  kf_lines_release(l);
  static const uint32_t late[][2] = {{8, 1}};
  l = lines_of(late, 1);
  CHECK(kf_lines_at(l, 7, at) == -1 && at[1] == -1);
  kf_lines_release(l);

  /* Function positions: exact offsets; one claimed by two functions names
   * neither; script 0 is no script; the cap drops and counts. */
  kf_funcpos_t *f = kf_funcpos_new(5);
  static const uint32_t g[][2] = {{0, 100}, {4, 104}, {9, 110}};
  static const uint32_t h[][2] = {{0, 110}, {3, 120}, {5, 121}, {7, 122}};
  kf_lines_t *lg = lines_of(g, 3), *lh = lines_of(h, 4);
  char name[64];
  CHECK(kf_funcpos_add(f, 3, "g a.js:1:1", lg) == 0);
  CHECK(kf_funcpos_add(f, 3, "h a.js:9:1", lh) == 0);
  CHECK(kf_funcpos_add(f, 0, "x", lg) == 0);
  CHECK(kf_funcpos_find(f, 3, 104, name, sizeof name) == 10);
  CHECK_STR(name, "g a.js:1:1");
  CHECK(kf_funcpos_find(f, 3, 110, name, sizeof name) == -1); /* ambiguous */
  CHECK(kf_funcpos_find(f, 3, 120, name, sizeof name) == 10);
  CHECK(kf_funcpos_find(f, 3, 101, name, sizeof name) == -1); /* not an offset of g */
  CHECK(kf_funcpos_find(f, 4, 104, name, sizeof name) == -1); /* another script */
  CHECK(kf_funcpos_find(f, 3, -1, name, sizeof name) == -1);
  CHECK(kf_funcpos_find(f, 3, 104, name, 4) == 10 && strcmp(name, "g a") == 0);
  /* By id, a window at once: one id per function, -1 where find says none. */
  const int64_t positions[] = {100, 104, 110, 120, 101, -1, 121};
  int64_t owners[7];
  kf_funcpos_owners(f, 3, positions, 7, owners);
  CHECK(owners[0] >= 0 && owners[1] == owners[0] && owners[3] >= 0 && owners[3] != owners[0]);
  CHECK(owners[2] == -1 && owners[4] == -1 && owners[5] == -1 && owners[6] == owners[3]);
  CHECK(kf_funcpos_name(f, owners[3], name, sizeof name) == 10);
  CHECK_STR(name, "h a.js:9:1");
  CHECK(kf_funcpos_name(f, -1, name, sizeof name) == -1 && kf_funcpos_name(f, 99, name, sizeof name) == -1);
  kf_funcpos_owners(f, 0, positions, 7, owners); /* no script */
  CHECK(owners[0] == -1 && owners[1] == -1);
  kf_funcpos_stats_t st;
  kf_funcpos_stats(f, &st);
  CHECK_EQ_U64(st.entries, 5);
  CHECK_EQ_U64(st.dropped, 1); /* h's 122 */
  CHECK_EQ_U64(st.ambiguous, 1);
  CHECK_EQ_U64(st.functions, 2);
  kf_lines_release(lg);
  kf_lines_release(lh);
  kf_funcpos_free(f);
}

static void inlined_functions_named(void) {
  /* hot's optimized code (script 7) inlines sq: offsets 200-208 of its
   * code are at sq's source offsets 30 and 34, the rest at hot's own. */
  kf_codemap_t *m = kf_codemap_new();
  kf_funcpos_t *f = kf_funcpos_new(1000);
  add_named(m, 0x700000, 0x400, "JS:*hot a.js:4:13", 0);
  static const uint32_t code[][2] = {{0, 90}, {100, 95}, {200, 30}, {204, 34}, {300, 99}, {400, 77}};
  kf_lines_t *lines = lines_of(code, 6);
  CHECK(kf_codemap_attach_lines(m, 0x700000, 7, lines) == 0);
  CHECK(kf_codemap_attach_lines(m, 0x900000, 7, lines) == -ENOENT);
  kf_lines_release(lines);
  static const uint32_t sq[][2] = {{0, 30}, {2, 34}, {5, 38}};
  static const uint32_t hot[][2] = {{0, 90}, {2, 95}, {5, 99}};
  kf_lines_t *lsq = lines_of(sq, 3), *lhot = lines_of(hot, 3);
  CHECK(kf_funcpos_add(f, 7, "sq a.js:2:12", lsq) == 0);
  CHECK(kf_funcpos_add(f, 7, "hot a.js:4:13", lhot) == 0);
  /* 77: an offset no function of script 7 has (another script's inlinee) */
  kf_lines_release(lsq);
  kf_lines_release(lhot);

  kf_jitframes_t *j = kf_jitframes_new(m, NULL);
  kf_jitframes_inlining(j, f);
  uint64_t leaf[] = {U, 0x700000 + 202, 0x7000}, out[5];
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, NULL, out) == 4);
  CHECK_STR(name_of(j, out[1]), "sq a.js:2:12_[i]");
  CHECK_STR(name_of(j, out[2]), "hot a.js:4:13_[j]");
  CHECK_STR(kf_jitframes_name(j, out[1], 1), "*sq a.js:2:12_[i]");
  CHECK_EQ_U64(kf_jitframes_stats(j)->inlined, 1);
  /* A return address is looked up one byte before: 205 is sq's call. */
  uint64_t ret[] = {U, 0x7100, 0x700000 + 205, 0x7000};
  CHECK(kf_jitframes_resolve(j, 5, ret, 4, NULL, out) == 5);
  CHECK_STR(name_of(j, out[2]), "sq a.js:2:12_[i]");
  /* hot's own code: one frame. */
  uint64_t own[] = {U, 0x700000 + 150};
  CHECK(kf_jitframes_resolve(j, 5, own, 2, NULL, out) == 2);
  CHECK_STR(name_of(j, out[1]), "hot a.js:4:13_[j]");
  /* At 300 (offset 99, hot's) and 400 (77, nobody's): no inlined frame. */
  uint64_t other[] = {U, 0x700000 + 410};
  CHECK(kf_jitframes_resolve(j, 5, other, 2, NULL, out) == 2);
  /* A lone match is not enough: offset 30 with neighbours that are not
   * sq's. */
  kf_lines_t *lone = lines_of((const uint32_t[][2]){{0, 90}, {10, 30}, {20, 99}}, 3);
  add_named(m, 0x800000, 0x100, "JS:*cold a.js:7:1", 0);
  CHECK(kf_codemap_attach_lines(m, 0x800000, 7, lone) == 0);
  kf_lines_release(lone);
  uint64_t single[] = {U, 0x800000 + 12};
  CHECK(kf_jitframes_resolve(j, 5, single, 2, NULL, out) == 2);
  CHECK_EQ_U64(kf_jitframes_stats(j)->inlined, 2);
  /* A frameless builtin called from inside the inlined sq: both put back. */
  fake_t fk;
  fake_init(&fk, SP + 0x100);
  frame(&fk, SP + 0x100, SP + 0x180, 0x7000);
  put(&fk, SP, 0x700000 + 205);
  add_named(m, 0x400000, 0x100, "Builtin:MultiplySmi_Baseline", 0);
  kf_jitframes_t *js = kf_jitframes_new(m, node20());
  kf_jitframes_inlining(js, f);
  uint64_t b[] = {U, 0x400004, 0x7000};
  CHECK(kf_jitframes_resolve(js, 5, b, 3, &fk.s, out) == 5);
  CHECK_STR(name_of(js, out[2]), "sq a.js:2:12_[i]");
  CHECK_STR(name_of(js, out[3]), "hot a.js:4:13_[j]");
  kf_jitframes_free(js);
  /* Moved code keeps its table. */
  CHECK(kf_codemap_move(m, 0x700000, 0xa00000, 1) == 0);
  uint64_t moved[] = {U, 0xa00000 + 202};
  CHECK(kf_jitframes_resolve(j, 5, moved, 2, NULL, out) == 3);
  CHECK_STR(name_of(j, out[1]), "sq a.js:2:12_[i]");
  kf_jitframes_free(j);
  kf_funcpos_free(f);
  kf_codemap_free(m);
}


/* The address cache keeps an optimized frame's inlined functions only
 * while no bytecode came or went anywhere: they are named from other
 * functions' offsets and bytecode. A function V8 compiles after a sample
 * was resolved names its inlined instructions from then on. */
static void inlined_function_learned_later(void) {
  kf_codemap_t *m = kf_codemap_new();
  kf_funcpos_t *f = kf_funcpos_new(1000);
  add_named(m, 0x700000, 0x400, "JS:*hot a.js:4:13", 0);
  static const uint32_t code[][2] = {{0, 90}, {100, 95}, {200, 30}, {204, 34}, {300, 99}};
  kf_lines_t *lines = lines_of(code, 5);
  CHECK(kf_codemap_attach_lines(m, 0x700000, 7, lines) == 0);
  kf_lines_release(lines);
  kf_jitframes_t *j = kf_jitframes_new(m, NULL);
  kf_jitframes_inlining(j, f);
  uint64_t leaf[] = {U, 0x700000 + 202, 0x7000}, out[5];
  CHECK(kf_jitframes_resolve(j, 5, leaf, 3, NULL, out) == 3); /* sq not known yet */
  CHECK(kf_jitframes_resolve(j, 6, leaf, 3, NULL, out) == 3);
  uint64_t hits = kf_jitframes_stats(j)->cache_hits;
  /* sq's bytecode, far from hot's code: its offsets, then its code. */
  static const uint32_t sq[][2] = {{0, 30}, {2, 34}, {5, 38}};
  kf_lines_t *lsq = lines_of(sq, 3);
  CHECK(kf_funcpos_add(f, 7, "sq a.js:2:12", lsq) == 0);
  kf_lines_release(lsq);
  CHECK(kf_codemap_add(m, 0x5000000, 0x40, "sq a.js:2:12", '~', KF_CODE_BYTECODE, 1, 7) == 0);
  CHECK(kf_jitframes_resolve(j, 8, leaf, 3, NULL, out) == 4);
  CHECK_STR(name_of(j, out[1]), "sq a.js:2:12_[i]");
  CHECK_STR(name_of(j, out[2]), "hot a.js:4:13_[j]");
  CHECK_EQ_U64(kf_jitframes_stats(j)->cache_hits, hits + 2); /* only 0x7000's two */
  /* Code that is not bytecode, elsewhere, leaves the answer cached. */
  add_named(m, 0x6000000, 0x100, "JS:*cold a.js:7:1", 0);
  CHECK(kf_jitframes_resolve(j, 9, leaf, 3, NULL, out) == 4);
  CHECK_EQ_U64(kf_jitframes_stats(j)->cache_hits, hits + 5);
  kf_jitframes_free(j);
  kf_funcpos_free(f);
  kf_codemap_free(m);
}

/* A function inlined into an inlined function: the caller's entries run
 * up to the callee's and on after them, so both come out, nested; a
 * function merely inlined after another (its entries followed by the
 * outer code's) or between two different ones is not taken for a caller.
 * The window of offsets around an address comes from the table. */
static void nested_inlining_named(void) {
  kf_lines_t *w = lines_of((const uint32_t[][2]){{0, 1}, {10, 2}, {20, 3}, {30, 4}}, 4);
  int64_t win[5];
  CHECK(kf_lines_window(w, 25, 2, win) == 0);
  CHECK(win[0] == 1 && win[1] == 2 && win[2] == 3 && win[3] == 4 && win[4] == -1);
  kf_lines_release(w);

  kf_codemap_t *m = kf_codemap_new();
  kf_funcpos_t *f = kf_funcpos_new(1000);
  static const uint32_t inner[][2] = {{0, 30}, {2, 34}, {5, 38}};
  static const uint32_t mid[][2] = {{0, 50}, {2, 52}, {5, 54}};
  static const uint32_t other[][2] = {{0, 60}, {2, 62}};
  static const uint32_t hot[][2] = {{0, 90}, {2, 95}, {5, 99}};
  const struct { const char *name; const uint32_t (*pairs)[2]; size_t n; } fns[] = {
      {"inner a.js:1:1", inner, 3}, {"mid a.js:2:1", mid, 3},
      {"other a.js:3:1", other, 2}, {"hot a.js:4:13", hot, 3}};
  for (size_t i = 0; i < 4; i++) {
    kf_lines_t *l = lines_of(fns[i].pairs, fns[i].n);
    CHECK(kf_funcpos_add(f, 7, fns[i].name, l) == 0);
    kf_lines_release(l);
  }
  /* hot inlines mid, which inlines inner; then sequential inlining; then
   * inner between mid and other. */
  static const uint32_t nested[][2] = {{0, 90}, {100, 50}, {110, 52}, {120, 30}, {124, 34},
                                       {130, 54}, {140, 52}, {200, 99}};
  static const uint32_t after[][2] = {{0, 90}, {100, 50}, {110, 52}, {120, 30}, {124, 34},
                                      {130, 99}};
  static const uint32_t between[][2] = {{0, 90}, {110, 52}, {120, 30}, {124, 34}, {130, 60},
                                        {140, 99}};
  /* mid's and inner's instructions interleaved (code motion in a loop):
   * inner comes back beyond mid's run, so mid is not taken for its caller */
  static const uint32_t interleaved[][2] = {{0, 90}, {110, 52}, {120, 30}, {124, 34},
                                            {130, 54}, {140, 38}, {200, 99}};
  const uint32_t(*tables[])[2] = {nested, after, between, interleaved};
  size_t sizes[] = {8, 6, 6, 7};
  for (size_t i = 0; i < 4; i++) {
    uint64_t start = 0xb00000 + i * 0x1000;
    add_named(m, start, 0x400, "JS:*hot a.js:4:13", 0);
    kf_lines_t *l = lines_of(tables[i], sizes[i]);
    CHECK(kf_codemap_attach_lines(m, start, 7, l) == 0);
    kf_lines_release(l);
  }
  kf_jitframes_t *j = kf_jitframes_new(m, NULL);
  kf_jitframes_inlining(j, f);
  uint64_t out[KF_JITFRAMES_OUT(2)];
  uint64_t in_nested[] = {U, 0xb00000 + 122};
  CHECK(kf_jitframes_resolve(j, 5, in_nested, 2, NULL, out) == 4);
  CHECK_STR(name_of(j, out[1]), "inner a.js:1:1_[i]");
  CHECK_STR(name_of(j, out[2]), "mid a.js:2:1_[i]");
  CHECK_STR(name_of(j, out[3]), "hot a.js:4:13_[j]");
  CHECK_EQ_U64(kf_jitframes_stats(j)->inlined, 2);
  /* In mid's own code, mid alone. */
  uint64_t in_mid[] = {U, 0xb00000 + 112};
  CHECK(kf_jitframes_resolve(j, 5, in_mid, 2, NULL, out) == 3);
  CHECK_STR(name_of(j, out[1]), "mid a.js:2:1_[i]");
  uint64_t in_after[] = {U, 0xb01000 + 122}, in_between[] = {U, 0xb02000 + 122};
  CHECK(kf_jitframes_resolve(j, 5, in_after, 2, NULL, out) == 3);
  CHECK_STR(name_of(j, out[1]), "inner a.js:1:1_[i]");
  CHECK_STR(name_of(j, out[2]), "hot a.js:4:13_[j]");
  CHECK(kf_jitframes_resolve(j, 5, in_between, 2, NULL, out) == 3);
  CHECK_STR(name_of(j, out[1]), "inner a.js:1:1_[i]");
  uint64_t in_interleaved[] = {U, 0xb03000 + 122};
  CHECK(kf_jitframes_resolve(j, 5, in_interleaved, 2, NULL, out) == 3);
  CHECK_STR(name_of(j, out[1]), "inner a.js:1:1_[i]");
  kf_jitframes_free(j);
  kf_funcpos_free(f);
  kf_codemap_free(m);
}

/* V8's position table as V8 encodes it: per entry, the code offset's
 * delta (negated less one for a non-statement) and the SourcePosition's
 * delta (script offset + 1 in bits 1-30, inlining id + 1 in bits 31-46),
 * each zig-zag, 7 bits a byte. */
static size_t put_vlq(uint8_t *p, int64_t v) {
  uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
  size_t n = 0;
  do {
    p[n] = (uint8_t)(z & 0x7f) | (z > 0x7f ? 0x80 : 0);
    z >>= 7;
    n++;
  } while (z);
  return n;
}
static size_t v8_table(uint8_t *out, const int64_t (*e)[3], size_t n) {
  size_t len = 0;
  int64_t code = 0, pos = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t p = (int64_t)(((uint64_t)(e[i][1] + 1) << 1) | ((uint64_t)(e[i][2] + 1) << 31));
    int64_t dcode = e[i][0] - code;
    len += put_vlq(out + len, i % 2 ? dcode : -dcode - 1); /* statements alternate */
    len += put_vlq(out + len, p - pos);
    code = e[i][0];
    pos = p;
  }
  return len;
}

/* Inlining as V8 tells it (v8inline.h): each entry's inlining id, each
 * id's call site. hot inlines mid (id 0), which inlines inner (id 1), and
 * TurboFan scheduled every instruction of mid's own away: the inference
 * from offsets cannot see mid, V8's ids can. An inlined function of
 * another script is left out and counted. */
static void v8_inlining_ids_named(void) {
  static const int64_t entries[][3] = {
      {0, 90, -1}, {100, 30, 1}, {104, 34, 1}, {108, 60, 2}, {120, 99, -1}};
  uint8_t table[64];
  size_t len = v8_table(table, entries, 5);
  kf_lines_t *l = kf_lines_new();
  CHECK(kf_v8inline_decode(table, len, l) == 5);
  const kf_inlining_t in[] = {{.caller_position = 95, .caller = -1},
                              {.caller_position = 52, .caller = 0},
                              {.caller_position = 97, .caller = -1, .other_script = 1,
                               .bytecode = 0xd00036}};
  CHECK(kf_lines_set_inlinings(l, in, 3) == 0 && kf_lines_seal(l) == 0);
  int64_t chain[4];
  CHECK(kf_lines_inlined(l, 102, chain, NULL, 4) == 2 && chain[0] == 30 && chain[1] == 52);
  CHECK(kf_lines_inlined(l, 110, chain, NULL, 4) == 1 && chain[0] == -1);
  CHECK(kf_lines_inlined(l, 125, chain, NULL, 4) == 0);
  CHECK(kf_lines_inlined(l, 102, chain, NULL, 1) == 1 && chain[0] == 30); /* innermost first */
  uint64_t bytecodes[4];
  CHECK(kf_lines_inlined(l, 110, chain, bytecodes, 4) == 1 && bytecodes[0] == 0xd00036);
  CHECK(kf_lines_inlined(l, 102, chain, bytecodes, 4) == 2 && bytecodes[0] == 0 && bytecodes[1] == 0);

  kf_codemap_t *m = kf_codemap_new();
  kf_funcpos_t *f = kf_funcpos_new(1000);
  static const uint32_t inner[][2] = {{0, 30}, {2, 34}};
  static const uint32_t mid[][2] = {{0, 50}, {2, 52}};
  kf_lines_t *fl = lines_of(inner, 2);
  CHECK(kf_funcpos_add(f, 7, "inner a.js:1:1", fl) == 0);
  kf_lines_release(fl);
  fl = lines_of(mid, 2);
  CHECK(kf_funcpos_add(f, 7, "mid a.js:2:1", fl) == 0);
  kf_lines_release(fl);
  add_named(m, 0xc00000, 0x400, "JS:*hot a.js:4:13", 0);
  CHECK(kf_codemap_attach_lines(m, 0xc00000, 7, l) == 0);
  kf_lines_release(l);
  kf_jitframes_t *j = kf_jitframes_new(m, NULL);
  kf_jitframes_inlining(j, f);
  uint64_t out[KF_JITFRAMES_OUT(2)];
  uint64_t at_inner[] = {U, 0xc00000 + 102};
  CHECK(kf_jitframes_resolve(j, 5, at_inner, 2, NULL, out) == 4);
  CHECK_STR(name_of(j, out[1]), "inner a.js:1:1_[i]");
  CHECK_STR(name_of(j, out[2]), "mid a.js:2:1_[i]");
  CHECK_STR(name_of(j, out[3]), "hot a.js:4:13_[j]");
  /* A function whose offsets name nothing here (another script's, or one
   * compiled before the hook was armed, whose line events kflame never
   * saw): named by its bytecode when V8 reported bytecode starting
   * exactly there, else left out and counted. */
  uint64_t at_other[] = {U, 0xc00000 + 110};
  CHECK(kf_jitframes_resolve(j, 5, at_other, 2, NULL, out) == 2);
  CHECK_STR(name_of(j, out[1]), "hot a.js:4:13_[j]");
  add_named(m, 0xd00030, 0x40, "JS:~far b.js:3:1", 1); /* not at its start */
  CHECK(kf_jitframes_resolve(j, 6, at_other, 2, NULL, out) == 2);
  add_named(m, 0xd00036, 0x40, "JS:~far b.js:3:1", 1);
  CHECK(kf_jitframes_resolve(j, 7, at_other, 2, NULL, out) == 3);
  CHECK_STR(name_of(j, out[1]), "far b.js:3:1_[i]");
  CHECK_STR(name_of(j, out[2]), "hot a.js:4:13_[j]");
  /* the same address again comes from the cache, counted alike */
  CHECK(kf_jitframes_resolve(j, 7, at_inner, 2, NULL, out) == 4);
  const kf_jitframes_stats_t *st = kf_jitframes_stats(j);
  CHECK_EQ_U64(st->inlined, 5);
  CHECK_EQ_U64(st->inlined_exact, 5);
  CHECK_EQ_U64(st->inlined_unnamed, 2);
  kf_jitframes_free(j);
  kf_funcpos_free(f);
  kf_codemap_free(m);

  /* Tables that do not decode: cut inside a number, or a VLQ too long. */
  kf_lines_t *bad = kf_lines_new();
  CHECK(kf_v8inline_decode(table, len - 1, bad) == -1);
  const uint8_t endless[12] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  CHECK(kf_v8inline_decode(endless, sizeof endless, bad) == -1);
  kf_lines_release(bad);
  /* Ids that point past the inlinings: no chain, the inference decides. */
  kf_lines_t *odd = kf_lines_new();
  CHECK(kf_lines_push_inlined(odd, 0, 30, 5) == 0);
  CHECK(kf_lines_set_inlinings(odd, in, 1) == 0 && kf_lines_seal(odd) == 0);
  CHECK(kf_lines_inlined(odd, 0, chain, NULL, 4) == -1);
  kf_lines_release(odd);
  /* Outside node, there is no V8 to read. */
  CHECK(kf_v8inline_setup("11.3.244.8-node.38") == 0);
  CHECK(kf_v8inline_read(0xc00000) == NULL);
}

static void long_names_whole(void) {
  /* names longer than any small buffer come out whole */
  kf_codemap_t *m = kf_codemap_new();
  char v8name[600], want[600];
  memset(v8name, 'x', sizeof v8name);
  memcpy(v8name, "JS:*", 4);
  v8name[sizeof v8name - 1] = '\0';
  snprintf(want, sizeof want, "%s_[j]", v8name + 4);
  want[sizeof want - 1] = '\0';
  add_named(m, 0x700000, 0x100, v8name, 0);
  kf_jitframes_t *j = kf_jitframes_new(m, NULL);
  uint64_t ips[] = {U, 0x700010}, out[3];
  CHECK(kf_jitframes_resolve(j, 5, ips, 2, NULL, out) == 2);
  CHECK(strlen(name_of(j, out[1])) == strlen(v8name) - 4 + 4);
  CHECK(strncmp(name_of(j, out[1]), v8name + 4, strlen(v8name) - 4) == 0);
  kf_jitframes_free(j);
  kf_codemap_free(m);
}

/* V8's threads add functions and line tables while the collector looks
 * them up (make TSAN=1 runs this under ThreadSanitizer). */
static kf_codemap_t *shared_map;
static kf_funcpos_t *shared_funcpos;

static void *compile_thread(void *arg) {
  uintptr_t id = (uintptr_t)arg;
  for (uint32_t i = 0; i < 2000; i++) {
    char name[64];
    snprintf(name, sizeof name, "f%lu_%u a.js:1:1", (unsigned long)id, i % 64);
    kf_lines_t *fn = kf_lines_new(), *code = kf_lines_new();
    if (!fn || !code) abort();
    uint32_t base = (uint32_t)(id * 100000 + (i % 64) * 100);
    for (uint32_t k = 0; k < 4; k++) {
      kf_lines_push(fn, k, base + k);
      kf_lines_push(code, k * 8, base + k);
    }
    if (kf_lines_seal(fn) || kf_lines_seal(code)) abort();
    kf_funcpos_add(shared_funcpos, 7, name, fn);
    uint64_t start = 0x1000000 + id * 0x100000 + (i % 256) * 0x100;
    if (kf_codemap_add(shared_map, start, 0x100, "outer a.js:9:1", '*',
                       KF_CODE_JS, id, i + 1) == 0)
      kf_codemap_attach_lines(shared_map, start, 7, code);
    kf_lines_release(fn);
    kf_lines_release(code);
    if (i % 100 == 0) kf_codemap_move(shared_map, start, start + 0x80000, i + 2);
  }
  return NULL;
}

static void *collector_thread(void *arg) {
  kf_jitframes_t *j = kf_jitframes_new(shared_map, NULL);
  if (!j) abort();
  kf_jitframes_inlining(j, shared_funcpos);
  (void)arg;
  for (uint32_t i = 0; i < 20000; i++) {
    uint64_t ips[] = {U, 0x1000000 + (i % 3) * 0x100000 + (i % 256) * 0x100 + 9},
             out[5];
    if (kf_jitframes_resolve(j, i, ips, 2, NULL, out) < 0) abort();
  }
  kf_jitframes_free(j);
  return NULL;
}

static void lines_shared_between_threads(void) {
  shared_map = kf_codemap_new();
  shared_funcpos = kf_funcpos_new(1 << 16);
  kf_codemap_keep_dead(shared_map, 1);
  pthread_t t[4];
  for (uintptr_t i = 0; i < 3; i++)
    CHECK(pthread_create(&t[i], NULL, compile_thread, (void *)i) == 0);
  CHECK(pthread_create(&t[3], NULL, collector_thread, NULL) == 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  kf_funcpos_stats_t st;
  kf_funcpos_stats(shared_funcpos, &st);
  CHECK(st.functions == 3 * 64);
  kf_funcpos_free(shared_funcpos);
  kf_codemap_free(shared_map);
}

static void aliases_of_remapped_code(void) {
  /* node's text, and V8's copy of its embedded builtins (file offset
   * 0x14c4000 of the same file) next to the JIT code. */
  const char *text =
      "00400000-00b6f000 r--p 00000000 fe:00 247823 /usr/bin/node\n"
      "00b72000-025fe000 r-xp 00772000 fe:00 247823 /usr/bin/node\n"
      "7f0000000000-7f0000001000 r-xp 00000000 00:00 0\n"
      "7f6e1fe40000-7f6e1ffd2000 r-xp 014c4000 fe:00 247823 /usr/bin/node\n"
      "7f6e20000000-7f6e20010000 r-xp 00001000 fe:00 999 /lib/libc.so.6\n"
      "7f6e30000000-7f6e3f000000 r-xp 01000000 fe:00 247823 /usr/bin/node\n";
  kf_maps_t maps;
  CHECK(kf_maps_parse(strdup(text), strlen(text), &maps) == 0);
  kf_code_alias_t a[4];
  /* The last mapping reaches past the text it would copy: no alias. */
  CHECK_EQ_U64(kf_maps_code_aliases(&maps, a, 4), 1);
  CHECK_EQ_U64(a[0].start, 0x7f6e1fe40000ULL);
  CHECK_EQ_U64(a[0].end, 0x7f6e1ffd2000ULL);
  CHECK_EQ_U64(a[0].target, 0xb72000ULL + (0x14c4000ULL - 0x772000ULL));
  CHECK_EQ_U64(kf_maps_code_aliases(&maps, a, 0), 0);
  kf_maps_free(&maps);

  /* jitframes looks an alias up at its target. */
  kf_codemap_t *m = kf_codemap_new();
  add_named(m, 0x18c4100, 0x40, "Builtin:StringAdd_CheckNone", 0);
  kf_jitframes_t *j = kf_jitframes_new(m, NULL);
  kf_code_alias_t alias = {0x7f6e1fe40000ULL, 0x7f6e1ffd2000ULL, 0x18c4000};
  kf_jitframes_alias(j, &alias, 1);
  uint64_t ips[] = {U, 0x7f6e1fe40110ULL, 0x7f6e1fe40200ULL}, out[4];
  CHECK(kf_jitframes_resolve(j, 5, ips, 3, NULL, out) == 3);
  CHECK_STR(name_of(j, out[1]), "Builtin:StringAdd_CheckNone_[j]");
  CHECK_EQ_U64(out[2], 0x7f6e1fe40200ULL); /* nothing at its target */
  /* A garbage return address shaped like a token never passes for one. */
  uint64_t odd[] = {U, out[1] + 1};
  CHECK(kf_jitframes_resolve(j, 5, odd, 2, NULL, out) == 2);
  CHECK_EQ_U64(out[1], 0);
  kf_jitframes_free(j);
  kf_codemap_free(m);
}

static const kftest_case_t cases[] = {
    {"userstack: reads only inside the copy", words_in_bounds},
    {"userstack: frames follow the kernel's callchain", frames_follow_the_callchain},
    {"v8frames: layouts by V8 version", layouts_by_version},
    {"v8frames: the BytecodeArray slot of a JS frame", bytecode_slot},
    {"jitframes: interpreter frames named from their bytecode", interpreted_frames_named},
    {"jitframes: the interpreter frames' cache follows the map", interpreted_frame_cache_follows_the_map},
    {"jitframes: the running function put back under a leaf", running_function_put_back},
    {"jitframes: code V8 never reported named from its frame", unreported_code_named_from_its_frame},
    {"jitframes: RegExp code V8 reported unnamed, named by its expression", existing_regexps_named},
    {"jitlines: line tables and small functions' offsets", line_tables},
    {"jitframes: inlined functions named from source offsets", inlined_functions_named},
    {"jitframes: an inlined function compiled later is named", inlined_function_learned_later},
    {"jitframes: functions inlined in inlined functions, nested", nested_inlining_named},
    {"jitframes: V8's own inlining ids", v8_inlining_ids_named},
    {"jitframes: frames the deoptimizer made, named", deoptimized_frames_named},
    {"jitframes: long names come out whole", long_names_whole},
    {"jitlines: tables and offsets shared between threads", lines_shared_between_threads},
    {"procmaps: V8's remapped builtins looked up at their first address", aliases_of_remapped_code},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }

/* libFuzzer target: reading V8 frames off a sample's stack copy, as the
 * collector does (userstack.c, v8frames.c, jitframes.c), against a fixed
 * code map of what a V8 process has (the shared interpreter trampoline, a
 * bytecode handler, JS code with a line table and an inlined function, a
 * builtin, two BytecodeArrays, and generated code it does not know, as
 * on-stack-replacement code compiled before the hook was armed).
 *
 * Input: 8 bytes of bp, 1 byte of callchain length n (at most 64), n
 * 8-byte user ips, then the stack copy (from sp = 0x7ffd0000).
 * Invariants: nothing read outside the copy (ASan), at most one frame
 * added per input frame and two under the leaf, every output entry is an input ip, 0 (for an input that looks like
 * a token) or a token with a name, the frame chain moves up the stack. */
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jit/codemap.h"
#include "jit/jitframes.h"
#include "jit/jitname.h"
#include "unwind/userstack.h"
#include "jit/v8frames.h"
#include "jit/v8heap.h"
#include "jit/v8regexp.h"

#define FUZZ_TARGET "fuzz_unwind"
#include "fuzz.h"

#define SP 0x7ffd0000ULL

static kf_codemap_t *map;
static kf_jitframes_t *jit;
static kf_funcpos_t *funcpos;

static void add(uint64_t start, uint64_t len, const char *v8name, int bytecode) {
  char name[1024], tier;
  kf_jitname(v8name, strlen(v8name), name, sizeof name, &tier);
  enum kf_code_kind kind =
      bytecode ? KF_CODE_BYTECODE : kf_jitname_kind(v8name, strlen(v8name));
  if (kf_codemap_add(map, start, len, name, tier, kind, 1, 0) != 0) abort();
}

/* 0x800000-0x801000: generated code no event named */
static int unreported_jit(void *ctx, uint64_t addr) {
  (void)ctx;
  return addr >= 0x800000 && addr < 0x801000;
}

static void setup(void) {
  map = kf_codemap_new();
  add(0x100000, 0x100, "Builtin:InterpreterEntryTrampoline", 0);
  add(0x200000, 0x100, "BytecodeHandler:Add", 0);
  add(0x300000, 0x100, "JS:*bar b.js:2:2", 0);
  add(0x400000, 0x100, "Builtin:MultiplySmi_Baseline", 0);
  add(0x500036, 0x40, "JS:~foo a.js:1:1", 1);
  add(0x600036, 0x40, "JS:~other a.js:9:1", 1);
  add(0xa00000, 0x200, "RegExp:Regular expression code", 0);
  jit = kf_jitframes_new(map, kf_v8layout_for("11.3.244.8-node.33"));
  funcpos = kf_funcpos_new(1000);
  if (!map || !jit || !funcpos) abort();
  /* bar's optimized code inlines sq (source offsets 30, 34) */
  kf_lines_t *code = kf_lines_new(), *sq = kf_lines_new();
  static const uint32_t at[][2] = {{0, 90}, {16, 30}, {24, 34}, {64, 99}};
  for (size_t i = 0; i < 4; i++) kf_lines_push(code, at[i][0], at[i][1]);
  kf_lines_push(sq, 0, 30);
  kf_lines_push(sq, 2, 34);
  if (kf_lines_seal(code) || kf_lines_seal(sq) ||
      kf_codemap_attach_lines(map, 0x300000, 7, code) ||
      kf_funcpos_add(funcpos, 7, "sq a.js:3:1", sq))
    abort();
  kf_lines_release(code);
  kf_lines_release(sq);
  kf_jitframes_inlining(jit, funcpos);
  /* the function slots of its frames are read as V8 objects: any address
   * the input gives is read, and must never fault */
  static const kf_v8heap_layout_t heap = {.map_type = 8, .function_shared = 24,
                                          .sfi_function_data = 8, .sfi_type = 262,
                                          .code_type = 245, .interpreter_data_type = 159};
  kf_jitframes_unreported(jit, unreported_jit, NULL, &heap);
  /* and the expression slots of RegExp code's frames (0xa00000), with
   * the strings they lead to */
  static const kf_v8regexp_layout_t regexps = {
      .map_type = 8, .regexp_type = 2131, .regexp_source = 32,
      .data_types = {183, 185, 184}, .data_source = 16, .data_flags = 24,
      .first_nonstring_type = 128, .representation_mask = 7, .thin_tag = 5,
      .encoding_mask = 8, .one_byte_tag = 8, .string_length = 12, .seq_chars = 16,
      .thin_actual = 16};
  kf_jitframes_regexps(jit, &regexps);
}

static uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!map) setup();
  if (size < 9) return 0;
  uint64_t bp = le64(data);
  size_t n = data[8] % 65;
  if (size < 9 + n * 8) return 0;
  /* The callchain as the kernel writes it: the user context marker, then
   * the user ips. Exactly sized: ASan sees a read or write past it. */
  uint64_t *ips = malloc((n + 1) * sizeof(uint64_t));
  /* resolve's contract: room for KF_JITFRAMES_OUT(nr), nr = n + 1 with the marker */
  uint64_t *out = malloc(KF_JITFRAMES_OUT(n + 1) * sizeof(uint64_t));
  uint64_t *fps = malloc((n ? n : 1) * sizeof(uint64_t));
  if (!ips || !out || !fps) abort();
  ips[0] = (uint64_t)PERF_CONTEXT_USER;
  for (size_t i = 0; i < n; i++) ips[i + 1] = le64(data + 9 + i * 8);
  size_t len = size - 9 - n * 8;
  unsigned char *copy = malloc(len ? len : 1);
  if (!copy) abort();
  memcpy(copy, data + 9 + n * 8, len);
  kf_userstack_t stack = {.ip = n ? ips[1] : 0, .sp = SP, .bp = bp,
                          .bytes = copy, .len = len};

  size_t known = kf_userstack_frames(&stack, ips + 1, n, fps);
  if (known > n) FAIL("%zu frames known of %zu", known, n);
  for (size_t k = 1; k < known; k++)
    if (fps[k] <= fps[k - 1]) FAIL("frame chain moves down the stack");

  int got = kf_jitframes_resolve(jit, 5, ips, (uint32_t)n + 1, &stack, out);
  if (got < 0) FAIL("resolve failed: %d", got);
  /* each user frame its inlined functions more, the leaf also the running
   * function with its own */
  size_t most = n + 1 + n * KF_JITFRAMES_MAX_INLINED + KF_JITFRAMES_MAX_INLINED + 1;
  if ((size_t)got > most || (size_t)got < n + 1) FAIL("%d entries from %zu", got, n + 1);
  for (int i = 0; i < got; i++) {
    if (!kf_jitframes_is_token(out[i])) {
      int seen = out[i] == 0; /* what a token-shaped input ip becomes */
      for (size_t k = 0; k <= n && !seen; k++) seen = out[i] == ips[k];
      if (!seen) FAIL("entry %d is neither an input ip nor a token", i);
    } else if (!kf_jitframes_name(jit, out[i], 0)) {
      FAIL("token without a name");
    }
  }
  free(copy);
  free(fps);
  free(out);
  free(ips);
  return 0;
}

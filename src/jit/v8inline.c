#define _GNU_SOURCE
#include "jit/v8inline.h"

#include "jit/v8frames.h"
#include "jit/v8heap.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on what a real code object holds: V8's inlining ids are 16 bits,
 * and no optimized code has a position table near this size. */
#define MAX_INLININGS 65535
#define MAX_TABLE_BYTES (4u << 20)
/* V8's InliningPosition: a SourcePosition (8 bytes), then an int, padded. */
#define INLINING_POSITION_BYTES 16

/* Offsets and constants of this V8's objects, written once under
 * setup_lock (isolates arm on their own threads); `on` (atomic, set last
 * with release) says they are all known. */
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int on;
  long code_back;       /* the Code object's tagged pointer sits this far
                           before the instructions */
  long map_type;        /* Map: instance_type (u16) */
  long code_deopt, code_positions; /* Code: deoptimization_data, source_position_table */
  long array_length, array_data;   /* FixedArrayBase: length (Smi); FixedArray: elements */
  long sfi_script;      /* SharedFunctionInfo: script_or_debug_info */
  long sfi_wrapped;     /* SharedFunctionInfoWrapper: shared_info, or -1:
                           the outer function's is not wrapped */
  long deopt_count, deopt_literals, deopt_sfi, deopt_inlinings; /* DeoptimizationData indices */
  long code_type, deopt_type, positions_type, inlinings_type, literals_type, script_type;
  long sfi_type, sfi_wrapper_type, debug_info_type, debug_info_script;
  /* to find an inlined function's bytecode, when heap_on */
  kf_v8heap_layout_t heap;
  long bytecode_header;
  int heap_on;
} v8;

static atomic_ulong nread, nfailed;

static int constant(const char *name, long *out) { return kf_v8heap_constant(name, out); }

static int setup_locked(const char *v8_version);

int kf_v8inline_setup(const char *v8_version) {
  if (__atomic_load_n(&v8.on, __ATOMIC_ACQUIRE)) return 1;
  pthread_mutex_lock(&setup_lock);
  int on = __atomic_load_n(&v8.on, __ATOMIC_RELAXED) || setup_locked(v8_version);
  pthread_mutex_unlock(&setup_lock);
  return on;
}

/* What the postmortem constants do not give, per V8 version checked: how
 * far before the instructions the Code pointer sits (the end of the
 * InstructionStream's header), and from V8 12 the Code fields and the
 * types of the arrays (moved to trusted space; V8 13 also wraps the outer
 * SharedFunctionInfo). A field's offset of -1: from its constant. Each
 * checked against V8's own inlining of a known script. */
typedef struct layout {
  const char *version;   /* prefix of V8's version string */
  long code_back, code_deopt, code_positions;
  const char *deopt_type, *positions_type, *inlinings_type, *literals_type;
  const char *sfi_script;
  const char *deopt_sfi;   /* index of the outer SharedFunctionInfo */
  const char *sfi_wrapped; /* its wrapper's field, or NULL: not wrapped */
  long debug_info_script; /* where a DebugInfo (coverage, breakpoints) in
                             the SharedFunctionInfo's script field keeps the
                             Script, or -1: not there in this V8 */
} layout_t;

#define TYPE(name) "v8dbg_type_" name
static const layout_t LAYOUTS[] = {
    {"11.3.", 8, -1, -1, TYPE("FixedArray__FIXED_ARRAY_TYPE"), TYPE("ByteArray__BYTE_ARRAY_TYPE"),
     TYPE("ByteArray__BYTE_ARRAY_TYPE"), TYPE("WeakFixedArray__WEAK_FIXED_ARRAY_TYPE"),
     "v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject",
     "v8dbg_DeoptimizationDataSharedFunctionInfoIndex", NULL, 24}, /* Node 20 */
    {"12.4.", 24, 8, 16, TYPE("TrustedFixedArray__TRUSTED_FIXED_ARRAY_TYPE"),
     TYPE("TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE"), TYPE("ByteArray__BYTE_ARRAY_TYPE"),
     TYPE("WeakFixedArray__WEAK_FIXED_ARRAY_TYPE"),
     "v8dbg_class_SharedFunctionInfo__script__Tagged_HeapObject_",
     "v8dbg_DeoptimizationDataSharedFunctionInfoIndex", NULL, -1}, /* Node 22 */
    {"13.6.", 24, 8, 16, TYPE("ProtectedFixedArray__PROTECTED_FIXED_ARRAY_TYPE"),
     TYPE("TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE"),
     TYPE("TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE"),
     TYPE("TrustedWeakFixedArray__TRUSTED_WEAK_FIXED_ARRAY_TYPE"),
     "v8dbg_class_SharedFunctionInfo__script__Tagged_HeapObject_",
     "v8dbg_DeoptimizationDataWrappedSharedFunctionInfoIndex",
     "v8dbg_class_SharedFunctionInfoWrapper__shared_info__Tagged_SharedFunctionInfo_",
     -1}, /* Node 24 */
};
#undef TYPE

static int setup_locked(const char *v8_version) {
  const layout_t *l = NULL;
  for (size_t i = 0; v8_version && i < sizeof LAYOUTS / sizeof LAYOUTS[0]; i++)
    if (strncmp(v8_version, LAYOUTS[i].version, strlen(LAYOUTS[i].version)) == 0) l = &LAYOUTS[i];
  if (!l) return 0;
  v8.code_back = l->code_back;
  v8.code_deopt = l->code_deopt;
  v8.code_positions = l->code_positions;
  v8.debug_info_script = l->debug_info_script;
  v8.sfi_wrapped = -1;
  if ((l->debug_info_script >= 0 &&
       constant("v8dbg_type_DebugInfo__DEBUG_INFO_TYPE", &v8.debug_info_type)) ||
      (l->sfi_wrapped &&
       (constant(l->sfi_wrapped, &v8.sfi_wrapped) ||
        constant("v8dbg_type_SharedFunctionInfoWrapper__SHARED_FUNCTION_INFO_WRAPPER_TYPE",
                 &v8.sfi_wrapper_type))))
    return 0;
  long tag = 0, smi_shift = 0;
  if (constant("v8dbg_HeapObjectTag", &tag) || tag != 1 ||
      constant("v8dbg_SmiShiftSize", &smi_shift) || smi_shift != 31 || /* no pointer compression */
      constant("v8dbg_class_Map__instance_type__uint16_t", &v8.map_type) ||
      (l->code_deopt < 0 &&
       constant("v8dbg_class_Code__deoptimization_data__FixedArray", &v8.code_deopt)) ||
      (l->code_positions < 0 &&
       constant("v8dbg_class_Code__source_position_table__ByteArray", &v8.code_positions)) ||
      constant("v8dbg_class_FixedArrayBase__length__SMI", &v8.array_length) ||
      constant("v8dbg_class_FixedArray__data__uintptr_t", &v8.array_data) ||
      constant(l->sfi_script, &v8.sfi_script) ||
      constant("v8dbg_DeoptimizationDataInlinedFunctionCountIndex", &v8.deopt_count) ||
      constant("v8dbg_DeoptimizationDataLiteralArrayIndex", &v8.deopt_literals) ||
      constant(l->deopt_sfi, &v8.deopt_sfi) ||
      constant("v8dbg_DeoptimizationDataInliningPositionsIndex", &v8.deopt_inlinings) ||
      constant("v8dbg_type_Code__CODE_TYPE", &v8.code_type) ||
      constant("v8dbg_type_Script__SCRIPT_TYPE", &v8.script_type) ||
      constant("v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", &v8.sfi_type) ||
      constant(l->deopt_type, &v8.deopt_type) ||
      constant(l->positions_type, &v8.positions_type) ||
      constant(l->inlinings_type, &v8.inlinings_type) ||
      constant(l->literals_type, &v8.literals_type))
    return 0;
  /* Optional: without it inlined functions are named by offset only. */
  const kf_v8layout_t *frames = kf_v8layout_for(v8_version);
  v8.heap_on = frames && kf_v8heap_layout_load(frames->sfi_function_data, &v8.heap) == 0;
  v8.bytecode_header = frames ? frames->bytecode_header : 0;
  __atomic_store_n(&v8.on, 1, __ATOMIC_RELEASE);
  return 1;
}

/* ---- reads that fail instead of faulting (v8heap.h) ------------------- */

static int peek(uintptr_t addr, void *buf, size_t len) { return kf_v8heap_peek(addr, buf, len); }
static int word(uintptr_t addr, uint64_t *out) { return kf_v8heap_word(addr, out); }
static uintptr_t object(uint64_t tagged) { return kf_v8heap_object(tagged); }
static long type_of(uintptr_t obj) { return kf_v8heap_type(obj, v8.map_type); }

/* Field `offset` of obj as an object of instance type `type`, or 0. */
static uintptr_t field(uintptr_t obj, long offset, long type) {
  uint64_t v;
  if (word(obj + (uintptr_t)offset, &v)) return 0;
  uintptr_t o = object(v);
  return o && type_of(o) == type ? o : 0;
}

/* An array's length (a Smi: the value in the upper half), or -1. */
static long length_of(uintptr_t array) {
  uint64_t v;
  if (word(array + (uintptr_t)v8.array_length, &v) || (v & 1)) return -1;
  return (long)((int64_t)v >> 32);
}

/* Element i of a FixedArray or WeakFixedArray (weak references made
 * strong), or 0 for none. */
static uint64_t element(uintptr_t array, long i) {
  uint64_t v;
  if (i < 0 || i >= length_of(array) ||
      word(array + (uintptr_t)v8.array_data + (uintptr_t)i * 8, &v))
    return 0;
  return (v & 3) == 3 ? v - 2 : v;
}

/* ---- the position table ------------------------------------------------- */

/* A zig-zag VLQ integer at *at (7 bits a byte, low first, high bit: more). */
static int vlq(const uint8_t *p, size_t len, size_t *at, int64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*at >= len) return -1;
    uint8_t b = p[(*at)++];
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
      return 0;
    }
  }
  return -1;
}

int kf_v8inline_decode(const uint8_t *table, size_t len, kf_lines_t *into) {
  size_t at = 0;
  int64_t code = 0;
  uint64_t position = 0; /* wraps as V8's int64 would not: a bad table names nothing */
  int pushed = 0;
  while (at < len) {
    int64_t dcode, dpos;
    if (vlq(table, len, &at, &dcode) || vlq(table, len, &at, &dpos)) return -1;
    /* the code offset's delta (code offsets only grow) is negated, less
     * one, when the entry is not a statement */
    int64_t delta = dcode >= 0 ? dcode : -(dcode + 1);
    if (delta > UINT32_MAX || (code += delta) > UINT32_MAX) return -1;
    position += (uint64_t)dpos;
    /* SourcePosition: bit 0 external (a wasm line), bits 1-30 the script
     * offset + 1, bits 31-46 the inlining id + 1. */
    uint64_t v = position;
    if (v & 1) continue;
    int64_t offset = (int64_t)((v >> 1) & 0x3fffffff) - 1;
    int32_t inlining = (int32_t)((v >> 31) & 0xffff) - 1;
    if (offset < 0) continue;
    if (kf_lines_push_inlined(into, (uint32_t)code, (uint32_t)offset, inlining)) return -ENOMEM;
    pushed++;
  }
  return pushed;
}

/* ---- the code's objects -------------------------------------------------- */

/* The Script of a SharedFunctionInfo, or 0 when it cannot be told. With
 * coverage on (NODE_V8_COVERAGE, c8, tap) or a breakpoint set, V8 11 puts a
 * DebugInfo in the field, which holds the Script in turn. */
static uintptr_t script_of(uintptr_t sfi) {
  uint64_t v;
  if (!sfi || word(sfi + (uintptr_t)v8.sfi_script, &v)) return 0;
  uintptr_t o = object(v);
  long type = type_of(o);
  if (type == v8.script_type) return o;
  if (type != v8.debug_info_type || v8.debug_info_script < 0) return 0;
  return field(o, v8.debug_info_script, v8.script_type);
}

/* The script of inlined function `id`'s SharedFunctionInfo is not the
 * outer function's (or cannot be told): its offsets name nothing there. */
static int other_script(uintptr_t literals, long id, uintptr_t outer_script) {
  uintptr_t script = script_of(object(element(literals, id)));
  return !script || script != outer_script;
}

/* The first bytecode of the function of SharedFunctionInfo sfi, the
 * address its BYTE_CODE event gave (V8 reports bytecode when the hook is
 * armed too, unlike the line events that give offsets), or 0. */
static uint64_t bytecode_start(uintptr_t sfi) {
  uintptr_t array = v8.heap_on ? kf_v8heap_bytecode_of(&v8.heap, sfi) : 0;
  return array ? array + (uintptr_t)v8.bytecode_header : 0;
}

/* Sets *inlines to whether the code inlined anything; its table, or NULL
 * (nothing inlined, or not readable). */
static kf_lines_t *read_code(uintptr_t code_start, int *inlines) {
  uint64_t tagged;
  *inlines = 1;
  if (word(code_start - (uintptr_t)v8.code_back, &tagged)) return NULL;
  uintptr_t code = object(tagged);
  if (!code || type_of(code) != v8.code_type) return NULL;
  uintptr_t deopt = field(code, v8.code_deopt, v8.deopt_type);
  if (!deopt) return NULL;
  uint64_t count = element(deopt, v8.deopt_count);
  if ((count & 1) || (int64_t)count >> 32 <= 0) { /* a Smi: inlined nothing */
    *inlines = 0;
    return NULL;
  }
  uintptr_t inlinings = object(element(deopt, v8.deopt_inlinings));
  uintptr_t literals = object(element(deopt, v8.deopt_literals));
  uintptr_t outer = object(element(deopt, v8.deopt_sfi));
  if (v8.sfi_wrapped >= 0) /* V8 13: the SharedFunctionInfo in a trusted wrapper */
    outer = type_of(outer) == v8.sfi_wrapper_type ? field(outer, v8.sfi_wrapped, v8.sfi_type) : 0;
  else if (type_of(outer) != v8.sfi_type)
    outer = 0;
  uintptr_t positions = field(code, v8.code_positions, v8.positions_type);
  if (!inlinings || type_of(inlinings) != v8.inlinings_type || !literals ||
      type_of(literals) != v8.literals_type || !outer || !positions)
    return NULL;
  long inl_bytes = length_of(inlinings), table_bytes = length_of(positions);
  long n = inl_bytes / INLINING_POSITION_BYTES;
  if (inl_bytes < 0 || n > MAX_INLININGS || table_bytes <= 0 || table_bytes > (long)MAX_TABLE_BYTES)
    return NULL;
  uintptr_t outer_script = script_of(outer);
  if (!outer_script) return NULL;

  uint8_t *raw = malloc((size_t)inl_bytes + (size_t)table_bytes + 1);
  kf_inlining_t *in = calloc((size_t)n + 1, sizeof(*in));
  kf_lines_t *lines = kf_lines_new();
  int ok = raw && in && lines &&
           peek(inlinings + (uintptr_t)v8.array_data, raw, (size_t)inl_bytes) == 0 &&
           peek(positions + (uintptr_t)v8.array_data, raw + inl_bytes, (size_t)table_bytes) == 0;
  for (long i = 0; ok && i < n; i++) {
    const uint8_t *e = raw + i * INLINING_POSITION_BYTES;
    uint64_t pos;
    int32_t function;
    memcpy(&pos, e, 8);
    memcpy(&function, e + 8, 4);
    in[i].caller_position = (int64_t)((pos >> 1) & 0x3fffffff) - 1;
    in[i].caller = (int32_t)((pos >> 31) & 0xffff) - 1;
    /* V8 numbers a caller before the functions it inlined */
    if ((pos & 1) || in[i].caller >= i || function < 0) ok = 0;
    else {
      uintptr_t sfi = object(element(literals, function));
      in[i].other_script = other_script(literals, function, outer_script);
      in[i].bytecode = bytecode_start(sfi);
    }
  }
  ok = ok && kf_v8inline_decode(raw + inl_bytes, (size_t)table_bytes, lines) >= 0 &&
       kf_lines_set_inlinings(lines, in, (size_t)n) == 0 && kf_lines_seal(lines) == 0;
  free(raw);
  free(in);
  if (!ok) {
    kf_lines_release(lines);
    return NULL;
  }
  return lines;
}

kf_lines_t *kf_v8inline_read(uintptr_t code_start) {
  if (!__atomic_load_n(&v8.on, __ATOMIC_ACQUIRE)) return NULL;
  int inlines;
  kf_lines_t *lines = read_code(code_start, &inlines);
  if (inlines) atomic_fetch_add(lines ? &nread : &nfailed, 1);
  return lines;
}

void kf_v8inline_stats(kf_v8inline_stats_t *out) {
  out->read = atomic_load(&nread);
  out->failed = atomic_load(&nfailed);
}

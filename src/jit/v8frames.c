#include "jit/v8frames.h"

#include <stdio.h>
#include <string.h>

/* x64, no pointer compression. Context at fp-8, JSFunction at fp-16 and the
 * argument count at fp-24 (StandardFrameConstants since V8 9.0), then the
 * interpreter's BytecodeArray at fp-32 and bytecode offset at fp-40.
 * bytecode_header: where BytecodeArray::GetFirstBytecodeAddress() lies
 * from the untagged array, read off real frames of each node against its
 * BYTE_CODE events (the JS-frame tests check it on every major CI runs):
 * 54 bytes in V8 11.3; 64 once the array became a trusted object (12.x).
 * sfi_function_data: 8 in all three (11.3 exports it as
 * v8dbg_class_SharedFunctionInfo__function_data__Object; 12.4 and 13.6
 * do not, and were read off real functions: the field holds the
 * function's baseline Code, which holds its BytecodeArray).
 * regexp_from_fp: RegExp code is called as a C function whose 9th
 * argument is the expression (JSRegExp, or 13.x's RegExpData): the third
 * passed on the stack, above the return address and the two before it
 * (call origin, isolate): fp+32 on all three, read off real frames. */
static const kf_v8layout_t layouts[] = {
    {11, 3, -8, -16, -32, 54, 8, 32}, /* Node 20 */
    {12, 4, -8, -16, -32, 64, 8, 32}, /* Node 22 */
    {13, 6, -8, -16, -32, 64, 8, 32}, /* Node 24 */
};

const kf_v8layout_t *kf_v8layout_for(const char *version) {
  int major, minor;
  if (!version || sscanf(version, "%d.%d", &major, &minor) != 2) return NULL;
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
    if (layouts[i].major == major && layouts[i].minor == minor)
      return &layouts[i];
  return NULL;
}

/* V8's tagging: heap objects end in binary 01, Smis (and frame type
 * markers, which are Smi-shaped) in 0. */
static int is_heap_object(uint64_t v) { return (v & 3) == 1; }

int kf_v8frames_bytecode(const kf_v8layout_t *l, const kf_userstack_t *s,
                         uint64_t fp, uint64_t *out) {
  uint64_t context, array;
  if (!l || kf_userstack_word(s, fp + (int64_t)l->context_from_fp, &context) ||
      kf_userstack_word(s, fp + (int64_t)l->bytecode_array_from_fp, &array) ||
      !is_heap_object(context) || !is_heap_object(array) ||
      array > UINT64_MAX - l->bytecode_header)
    return -1;
  *out = array - 1 + l->bytecode_header;
  return 0;
}

/* The tagged pointer in the slot `offset` bytes from fp into *out. */
static int heap_object_slot(const kf_userstack_t *s, uint64_t fp, int32_t offset,
                            uint64_t *out) {
  uint64_t value;
  if (kf_userstack_word(s, fp + (int64_t)offset, &value) || !is_heap_object(value))
    return -1;
  *out = value;
  return 0;
}

int kf_v8frames_function(const kf_v8layout_t *l, const kf_userstack_t *s,
                         uint64_t fp, uint64_t *out) {
  return l ? heap_object_slot(s, fp, l->function_from_fp, out) : -1;
}

int kf_v8frames_regexp(const kf_v8layout_t *l, const kf_userstack_t *s,
                       uint64_t fp, uint64_t *out) {
  return l ? heap_object_slot(s, fp, l->regexp_from_fp, out) : -1;
}

uint64_t kf_v8frames_bytecode_array(const kf_v8layout_t *l, uint64_t bytecode) {
  return bytecode - l->bytecode_header + 1;
}

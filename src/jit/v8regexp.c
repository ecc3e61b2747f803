#include "jit/v8regexp.h"

#include <string.h>

#include "jit/v8heap.h"

int kf_v8regexp_layout_load(kf_v8regexp_layout_t *out) {
  static const struct {
    const char *name;
    size_t offset;
  } constants[] = {
#define C(name, field) {name, offsetof(kf_v8regexp_layout_t, field)}
      C("v8dbg_class_Map__instance_type__uint16_t", map_type),
      C("v8dbg_type_JSRegExp__JS_REG_EXP_TYPE", regexp_type),
      C("v8dbg_class_JSRegExp__source__Object", regexp_source),
      C("v8dbg_FirstNonstringType", first_nonstring_type),
      C("v8dbg_StringRepresentationMask", representation_mask),
      C("v8dbg_SeqStringTag", seq_tag),
      C("v8dbg_ThinStringTag", thin_tag),
      C("v8dbg_StringEncodingMask", encoding_mask),
      C("v8dbg_OneByteStringTag", one_byte_tag),
      C("v8dbg_class_String__length__int32_t", string_length),
      C("v8dbg_class_SeqOneByteString__chars__char", seq_chars),
      C("v8dbg_class_ThinString__actual__String", thin_actual),
#undef C
  };
  for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++)
    if (kf_v8heap_constant(constants[i].name, (long *)((char *)out + constants[i].offset)))
      return -1;
  /* Both string kinds keep their characters at one offset. */
  long two_byte_chars;
  if (kf_v8heap_constant("v8dbg_class_SeqTwoByteString__chars__char", &two_byte_chars) ||
      two_byte_chars != out->seq_chars)
    return -1;
  /* RegExpData (V8 13): read only where its source is exported */
  static const char *const data_types[3] = {
      "v8dbg_type_RegExpData__REG_EXP_DATA_TYPE",
      "v8dbg_type_IrRegExpData__IR_REG_EXP_DATA_TYPE",
      "v8dbg_type_AtomRegExpData__ATOM_REG_EXP_DATA_TYPE"};
  out->data_source = out->data_flags = -1;
  for (int i = 0; i < 3; i++) out->data_types[i] = -1;
  if (kf_v8heap_constant("v8dbg_class_RegExpData__source__Tagged_String_", &out->data_source)) {
    out->data_source = -1;
    return 0;
  }
  for (int i = 0; i < 3; i++)
    if (kf_v8heap_constant(data_types[i], &out->data_types[i])) out->data_types[i] = -1;
  /* flags: the Smi between source and wrapper, as regexp-data.tq has it */
  long wrapper;
  if (kf_v8heap_constant("v8dbg_class_RegExpData__wrapper__Tagged_RegExpDataWrapper_", &wrapper) == 0 &&
      wrapper == out->data_source + 16)
    out->data_flags = out->data_source + 8;
  return 0;
}

/* Appends code point c to out[*at..max) as UTF-8 when all of it fits.
 * Returns 0, or -1 when it does not. */
static int put_utf8(char *out, size_t *at, size_t max, uint32_t c) {
  unsigned char b[4];
  size_t n;
  if (c < 0x80) {
    b[0] = (unsigned char)c, n = 1;
  } else if (c < 0x800) {
    b[0] = (unsigned char)(0xc0 | c >> 6), b[1] = (unsigned char)(0x80 | (c & 0x3f)), n = 2;
  } else if (c < 0x10000) {
    b[0] = (unsigned char)(0xe0 | c >> 12), b[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
    b[2] = (unsigned char)(0x80 | (c & 0x3f)), n = 3;
  } else {
    b[0] = (unsigned char)(0xf0 | c >> 18), b[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
    b[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f)), b[3] = (unsigned char)(0x80 | (c & 0x3f));
    n = 4;
  }
  if (*at + n > max) return -1;
  memcpy(out + *at, b, n);
  *at += n;
  return 0;
}

/* The string `tagged` as UTF-8 into out (room for max + 1 bytes), cut at
 * a character's end. Returns its length, or -1. */
static long read_string(const kf_v8regexp_layout_t *l, uint64_t tagged, char *out,
                        size_t max) {
  uintptr_t obj = 0;
  long type = -1;
  /* a thin string points at its internalized copy, which is never thin */
  for (int hop = 0; hop < 2; hop++) {
    obj = kf_v8heap_object(tagged);
    type = kf_v8heap_type(obj, l->map_type);
    if (type < 0 || type >= l->first_nonstring_type) return -1;
    if ((type & l->representation_mask) != l->thin_tag) break;
    if (kf_v8heap_word(obj + (uintptr_t)l->thin_actual, &tagged)) return -1;
  }
  int32_t length;
  if ((type & l->representation_mask) != l->seq_tag ||
      kf_v8heap_peek(obj + (uintptr_t)l->string_length, &length, sizeof length) || length < 0)
    return -1;
  int one_byte = (type & l->encoding_mask) == l->one_byte_tag;
  /* No more characters than fit: each is at least one byte of UTF-8. */
  size_t count = (size_t)length < max ? (size_t)length : max, at = 0;
  uint16_t units[KF_V8REGEXP_SOURCE_MAX];
  if (kf_v8heap_peek(obj + (uintptr_t)l->seq_chars, units, count * (one_byte ? 1 : 2)))
    return -1;
  const unsigned char *bytes = (const unsigned char *)units;
  for (size_t i = 0; i < count; i++) {
    uint32_t c = one_byte ? bytes[i] : units[i];
    if (!one_byte && c >= 0xd800 && c < 0xdc00 && i + 1 < count &&
        units[i + 1] >= 0xdc00 && units[i + 1] < 0xe000) {
      c = 0x10000 + ((c - 0xd800) << 10) + (units[i + 1] - 0xdc00u);
      i++;
    } else if (!one_byte && c >= 0xd800 && c < 0xe000) {
      c = 0xfffd; /* a lone surrogate */
    }
    if (put_utf8(out, &at, max, c)) break;
  }
  out[at] = '\0';
  return (long)at;
}

/* V8's flag characters in the order it writes them, with their bits
 * (REGEXP_FLAG_LIST). */
static const struct {
  char c;
  int bit;
} flag_chars[] = {{'d', 7}, {'g', 0}, {'i', 1}, {'l', 6}, {'m', 2},
                  {'s', 5}, {'u', 4}, {'v', 8}, {'y', 3}};

long kf_v8regexp_source(const kf_v8regexp_layout_t *l, uint64_t regexp,
                        char *source, char flags[16]) {
  uintptr_t obj = kf_v8heap_object(regexp);
  long type = l ? kf_v8heap_type(obj, l->map_type) : -1;
  uint64_t field;
  flags[0] = '\0';
  if (type < 0) return -1;
  if (type == l->regexp_type) {
    if (kf_v8heap_word(obj + (uintptr_t)l->regexp_source, &field)) return -1;
    return read_string(l, field, source, KF_V8REGEXP_SOURCE_MAX);
  }
  if (type != l->data_types[0] && type != l->data_types[1] && type != l->data_types[2])
    return -1;
  if (kf_v8heap_word(obj + (uintptr_t)l->data_source, &field)) return -1;
  long n = read_string(l, field, source, KF_V8REGEXP_SOURCE_MAX);
  uint64_t smi;
  /* a Smi keeps its value in the upper half (no pointer compression) */
  if (n >= 0 && l->data_flags > 0 &&
      kf_v8heap_word(obj + (uintptr_t)l->data_flags, &smi) == 0 && (smi & 1) == 0) {
    uint32_t bits = (uint32_t)(smi >> 32);
    size_t k = 0;
    for (size_t i = 0; i < sizeof flag_chars / sizeof flag_chars[0]; i++)
      if (bits & (1u << flag_chars[i].bit)) flags[k++] = flag_chars[i].c;
    flags[k] = '\0';
  }
  return n;
}

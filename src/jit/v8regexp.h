/*
 * v8regexp: which regular expression a frame of V8's RegExp code runs,
 * read in V8's heap (v8heap.h), for RegExp code V8 reported without it.
 *
 * When a code-event hook is armed, V8 reports the code that exists, and
 * names each RegExp code "Regular expression code": which expression it
 * matches is not said. A server profiled on demand has compiled its hot
 * expressions long before, so their time would be one anonymous frame.
 * The code is called with the expression as an argument on the stack:
 * V8 11 and 12 pass the JSRegExp, V8 13 its RegExpData, both of which
 * keep the source (v8frames.h: regexp_from_fp says where the argument
 * lies). Newer V8 passes neither; then the object is not one of those
 * types, and nothing is named.
 *
 * Offsets come from the postmortem constants node exports (v8dbg_*); the
 * flags' offset in RegExpData is not exported and is the field between
 * source and wrapper (regexp-data.tq: type_tag, source, flags, wrapper).
 * Any thread; every read may fail (a stale pointer), never fault.
 */
#ifndef KF_V8REGEXP_H
#define KF_V8REGEXP_H

#include <stddef.h>
#include <stdint.h>

typedef struct kf_v8regexp_layout {
  long map_type;                   /* Map: instance_type (u16) */
  long regexp_type, regexp_source; /* JSRegExp */
  /* RegExpData and its subtypes (V8 13; -1 when this V8 has none), their
   * source, and flags (-1: not read) */
  long data_types[3], data_source, data_flags;
  /* Strings: sequential ones are read, thin ones followed to their
   * actual string; others (cons, sliced, external) are not read. */
  long first_nonstring_type, representation_mask, seq_tag, thin_tag;
  long encoding_mask, one_byte_tag;
  long string_length, seq_chars, thin_actual;
} kf_v8regexp_layout_t;

/* Fills *out from node's postmortem constants. Returns 0, or -1 when one
 * is missing (not node's V8). */
int kf_v8regexp_layout_load(kf_v8regexp_layout_t *out);

/* The longest source read, in UTF-8 bytes: a frame name is cut shorter. */
#define KF_V8REGEXP_SOURCE_MAX 1024

/* The regular expression `regexp` (tagged: a JSRegExp, or a RegExpData)
 * stands for: its source as UTF-8 into source (room for
 * KF_V8REGEXP_SOURCE_MAX + 1 bytes, NUL-terminated, cut at a character's
 * end), and into flags (room for 16) the flags V8 names its code with,
 * in V8's order ("dgilmsuvy"): a RegExpData's; "" for a JSRegExp, whose
 * code V8 names without them. Returns the source's length, or -1 when
 * `regexp` is neither or anything is unreadable. */
long kf_v8regexp_source(const kf_v8regexp_layout_t *l, uint64_t regexp,
                        char *source, char flags[16]);

#endif

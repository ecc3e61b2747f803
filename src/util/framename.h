/*
 * framename: the one rule that makes any string a frame name of folded
 * text, for every module that writes frame names (the folder, V8's names).
 * Pure; any thread.
 */
#ifndef KF_FRAMENAME_H
#define KF_FRAMENAME_H

#include <stddef.h>

/* Copies name[0..len) to buf with ';' turned into ':' and control
 * characters (bytes below 0x20, and 0x7f) turned into ' ', so a name can
 * never split a frame or a line. Returns len, the bytes written. The one
 * rule for every frame name: the folder's and V8 names' (jitname.c) in C,
 * lib/foldedtext.js's sanitizeFrame in JS (test/foldedtext.test.js checks
 * the two agree). Inline so that any module may apply it without linking
 * the folder. Pure; any thread. */
static inline size_t kf_fold_sanitize(char *buf, const char *name, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)name[i];
    buf[i] = c == ';' ? ':' : (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
  }
  return len;
}

#endif

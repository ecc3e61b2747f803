#include "render/framelabel.h"

#include <string.h>

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Start of the ":DIGITS" that ends s[from..end), or `end` when there is none. */
static size_t digits_suffix(const char *s, size_t from, size_t end) {
  size_t i = end;
  while (i > from && is_digit(s[i - 1])) i--;
  if (i == end || i == from || s[i - 1] != ':') return end;
  return i - 1;
}

void kf_framelabel(const char *name, size_t len, const char *cwd, size_t *head,
                   size_t *tail, size_t *end) {
  size_t e = len;
  if (e >= 4 && name[e - 4] == '_' && name[e - 3] == '[' && name[e - 1] == ']' &&
      memchr("kjiw", name[e - 2], 4))
    e -= 4;
  *head = *tail = *end = e;
  size_t sp = e;
  while (sp > 0 && name[sp - 1] != ' ') sp--;
  if (sp == 0) return; /* no space: not "function location" */
  /* "path:line:column" -> "path:line"; "path:line" stays. */
  size_t last = digits_suffix(name, sp, e);
  if (last == e) return;
  size_t before = digits_suffix(name, sp, last);
  size_t loc_end = before == last ? e : last;
  size_t p = sp;
  if (loc_end - p >= 7 && memcmp(name + p, "file://", 7) == 0) p += 7;
  static const char nm[] = "node_modules/";
  size_t nm_len = sizeof nm - 1, found = 0;
  for (size_t i = p; i + nm_len <= loc_end; i++)
    if (name[i] == 'n' && memcmp(name + i, nm, nm_len) == 0) found = i + nm_len;
  if (found) {
    p = found;
  } else if (cwd && cwd[0] && strcmp(cwd, "/") != 0) {
    size_t c = strlen(cwd);
    if (loc_end - p > c && memcmp(name + p, cwd, c) == 0 && name[p + c] == '/') p += c + 1;
  }
  *head = sp;
  *tail = p;
  *end = loc_end;
}

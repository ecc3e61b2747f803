#include "symbols/kallsyms.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/readfile.h"

static int parse_hex(const char **p, const char *end, unsigned long long *v) {
  const char *s = *p;
  unsigned long long x = 0;
  while (s < end) {
    char c = *s;
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else break;
    x = (x << 4) | (unsigned)d;
    s++;
  }
  if (s == *p) return -1;
  *p = s;
  *v = x;
  return 0;
}

int kf_kallsyms_parse(const char *text, size_t len, kf_symtab_t **out,
                      int *hidden) {
  kf_symtab_t *tab = kf_symtab_new();
  if (!tab) return -ENOMEM;
  const char *p = text, *end = text + len;
  size_t seen = 0, nonzero = 0;
  unsigned long long max_addr = 0;

  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    const char *s = p;
    p = eol < end ? eol + 1 : end;

    unsigned long long addr;
    if (parse_hex(&s, eol, &addr) != 0 || s + 3 > eol || *s != ' ') continue;
    char type = s[1];
    if (s[2] != ' ') continue;
    s += 3;
    /* The name ends at a tab (before "[module]") or at the end of line. */
    const char *name_end = s;
    while (name_end < eol && *name_end != '\t' && *name_end != ' ') name_end++;
    if (name_end == s) continue;
    seen++;
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue;
    if (addr == 0) continue;
    nonzero++;
    if (addr > max_addr) max_addr = addr;
    if (kf_symtab_add(tab, addr, 0, s, (size_t)(name_end - s)) != 0) {
      kf_symtab_free(tab);
      return -ENOMEM;
    }
  }
  /* The last text symbol has no successor; give it a page. */
  kf_symtab_finish(tab, max_addr + 4096);
  *hidden = seen > 0 && nonzero == 0;
  *out = tab;
  return 0;
}

int kf_kallsyms_load(kf_symtab_t **out, int *hidden) {
  char *text;
  size_t len;
  int rc = kf_read_file("/proc/kallsyms", &text, &len);
  if (rc != 0) return rc;
  rc = kf_kallsyms_parse(text, len, out, hidden);
  free(text);
  return rc;
}

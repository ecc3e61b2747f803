#include "symbols/procmaps.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/readfile.h"

static int hex(char **p, uint64_t *v) {
  char *end;
  unsigned long long x = strtoull(*p, &end, 16);
  if (end == *p) return -1;
  *p = end;
  *v = x;
  return 0;
}

static int parse_line(char *line, kf_mapping_t *m) {
  char *p = line;
  uint64_t maj, min;
  if (hex(&p, &m->start) || *p++ != '-' || hex(&p, &m->end) || *p++ != ' ')
    return -1;
  if (strlen(p) < 5) return -1;
  m->read = p[0] == 'r';
  m->write = p[1] == 'w';
  m->exec = p[2] == 'x';
  p += 4;
  if (*p++ != ' ' || hex(&p, &m->offset) || *p++ != ' ') return -1;
  if (hex(&p, &maj) || *p++ != ':' || hex(&p, &min) || *p++ != ' ') return -1;
  m->dev_major = (uint32_t)maj;
  m->dev_minor = (uint32_t)min;
  char *end;
  m->inode = strtoull(p, &end, 10);
  if (end == p) return -1;
  p = end;
  while (*p == ' ') p++;
  m->path = p;
  return m->end > m->start ? 0 : -1;
}

int kf_maps_parse(char *text, size_t len, kf_maps_t *out) {
  memset(out, 0, sizeof(*out));
  size_t lines = 0;
  for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
  out->maps = calloc(lines + 1, sizeof(kf_mapping_t));
  if (!out->maps) {
    free(text);
    return -ENOMEM;
  }
  out->text = text;
  char *p = text, *end = text + len;
  while (p < end) {
    char *eol = memchr(p, '\n', (size_t)(end - p));
    if (eol) *eol = '\0';
    if (parse_line(p, &out->maps[out->count]) == 0) out->count++;
    if (!eol) break;
    p = eol + 1;
  }
  return 0;
}

int kf_maps_load(kf_maps_t *out) {
  char *text;
  size_t len;
  int rc = kf_read_file("/proc/self/maps", &text, &len);
  if (rc != 0) return rc;
  return kf_maps_parse(text, len, out);
}

void kf_maps_free(kf_maps_t *maps) {
  free(maps->maps);
  free(maps->text);
  memset(maps, 0, sizeof(*maps));
}

const kf_mapping_t *kf_maps_find(const kf_maps_t *maps, uint64_t addr) {
  size_t lo = 0, hi = maps->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (maps->maps[mid].start <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  const kf_mapping_t *m = &maps->maps[lo - 1];
  return addr < m->end ? m : NULL;
}

size_t kf_maps_code_aliases(const kf_maps_t *maps, kf_code_alias_t *out,
                            size_t cap) {
  size_t n = 0;
  for (size_t b = 0; b < maps->count && n < cap; b++) {
    const kf_mapping_t *copy = &maps->maps[b];
    if (!copy->exec || copy->inode == 0) continue;
    uint64_t len = copy->end - copy->start;
    for (size_t a = 0; a < maps->count; a++) {
      const kf_mapping_t *first = &maps->maps[a];
      if (a == b || !first->exec || first->inode != copy->inode ||
          first->dev_major != copy->dev_major ||
          first->dev_minor != copy->dev_minor ||
          first->start >= copy->start || copy->offset < first->offset ||
          len > first->end - first->start ||
          copy->offset - first->offset > first->end - first->start - len)
        continue;
      out[n++] = (kf_code_alias_t){
          .start = copy->start,
          .end = copy->end,
          .target = first->start + (copy->offset - first->offset)};
      break;
    }
  }
  return n;
}

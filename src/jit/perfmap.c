#define _GNU_SOURCE
#include "jit/perfmap.h"

#include <stdlib.h>
#include <string.h>

#include "util/safefile.h"

long kf_perfmap_write(kf_codemap_t *map, const char *path) {
  char *text;
  size_t len;
  int rc = kf_codemap_format(map, &text, &len);
  if (rc) return rc;
  long lines = 0;
  for (size_t i = 0; i < len; i++) lines += text[i] == '\n';

  /* 0644: perf runs as another user (or later) and must read it. No fsync:
   * the collector thread rewrites it while rings fill, and a map is
   * worthless after a crash anyway. */
  kf_safefile_t *f;
  rc = kf_safefile_open(path, 0644, &f);
  if (rc == 0 && (rc = kf_safefile_write(f, text, len)) != 0) kf_safefile_abort(f);
  if (rc == 0) {
    kf_safefile_skip_sync(f);
    rc = kf_safefile_commit(f);
  }
  free(text);
  return rc ? rc : lines;
}

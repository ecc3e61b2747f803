#define _GNU_SOURCE
#include "perfmap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "readfile.h"

void kf_perfmap_default_path(char *buf, size_t cap) {
  snprintf(buf, cap, "/tmp/perf-%d.map", (int)getpid());
}

long kf_perfmap_write(kf_codemap_t *map, const char *path) {
  char *text;
  size_t len;
  int rc = kf_codemap_format(map, &text, &len);
  if (rc) return rc;
  long lines = 0;
  for (size_t i = 0; i < len; i++) lines += text[i] == '\n';

  char *tmp = NULL;
  if (asprintf(&tmp, "%s.%d.tmp", path, (int)getpid()) < 0) {
    free(text);
    return -ENOMEM;
  }
  rc = kf_write_file(tmp, text, len);
  if (rc == 0 && rename(tmp, path) != 0) rc = -errno;
  if (rc != 0) unlink(tmp);
  free(tmp);
  free(text);
  return rc ? rc : lines;
}

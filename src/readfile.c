#include "readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int kf_read_file(const char *path, char **text, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t cap = 64 * 1024, n = 0;
  char *buf = malloc(cap + 1);
  int rc = 0;
  if (!buf) {
    rc = -ENOMEM;
    goto out;
  }
  for (;;) {
    if (n == cap) {
      char *bigger = realloc(buf, cap * 2 + 1);
      if (!bigger) {
        rc = -ENOMEM;
        goto out;
      }
      buf = bigger;
      cap *= 2;
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0) {
      if (errno == EINTR) continue;
      rc = -errno;
      goto out;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  buf[n] = '\0';
  *text = buf;
  *len = n;
  buf = NULL;
out:
  free(buf);
  close(fd);
  return rc;
}

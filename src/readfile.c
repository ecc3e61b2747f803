#include "readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int kf_read_file(const char *path, char **text, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  /* A regular file says its size: one allocation, one pass. */
  struct stat st;
  size_t cap = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0
                   ? (size_t)st.st_size + 1
                   : 64 * 1024,
         n = 0;
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

int kf_write_file(const char *path, const char *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -errno;
  int rc = 0;
  while (len && rc == 0) {
    ssize_t w = write(fd, data, len);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      rc = -errno;
    } else {
      data += w;
      len -= (size_t)w;
    }
  }
  if (close(fd) != 0 && rc == 0) rc = -errno;
  return rc;
}

int kf_map_file(const char *path, const char **data, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  int rc = 0;
  *data = NULL;
  *len = 0;
  if (fstat(fd, &st) != 0) {
    rc = -errno;
  } else if (!S_ISREG(st.st_mode)) {
    rc = -EINVAL;
  } else if (st.st_size > 0) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
      rc = -errno;
    } else {
      *data = p;
      *len = (size_t)st.st_size;
    }
  }
  close(fd);
  return rc;
}

void kf_unmap_file(const char *data, size_t len) {
  if (data) munmap((void *)data, len);
}

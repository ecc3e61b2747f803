#define _GNU_SOURCE
#include "util/readfile.h"

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

/* A pipe, FIFO or character device has no size to map: read it to EOF into
 * anonymous memory, grown with mremap, so that kf_unmap_file frees both
 * kinds alike. The caller opened fd with O_NONBLOCK (so that opening a FIFO
 * with no writer does not block); reads block again from here on, and a
 * FIFO with no writer reads as EOF at once. */
static int map_stream(int fd, const char **data, size_t *len) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE), cap = 1 << 20, n = 0;
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) return -errno;
  char *buf = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) return -errno;
  int rc = 0;
  for (;;) {
    if (n == cap) {
      void *bigger = mremap(buf, cap, cap * 2, MREMAP_MAYMOVE);
      if (bigger == MAP_FAILED) {
        rc = -errno;
        goto fail;
      }
      buf = bigger;
      cap *= 2;
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      rc = -errno;
      goto fail;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  if (n == 0) goto fail; /* empty: *data stays NULL, as for an empty file */
  /* Keep the pages that hold the text: kf_unmap_file(data, len) unmaps
   * exactly those. */
  size_t keep = (n + page - 1) / page * page;
  if (keep < cap) munmap(buf + keep, cap - keep);
  mprotect(buf, keep, PROT_READ);
  *data = buf;
  *len = n;
  return 0;
fail:
  munmap(buf, cap);
  return rc;
}

int kf_map_file(const char *path, const char **data, size_t *len) {
  *data = NULL;
  *len = 0;
  /* O_NONBLOCK: open(2) of a FIFO with no writer would wait forever. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0) {
    rc = -errno;
  } else if (S_ISDIR(st.st_mode)) {
    rc = -EISDIR;
  } else if (!S_ISREG(st.st_mode) || st.st_size == 0) {
    /* Pipes (`kflame svg <(cmd)`), FIFOs, /dev/stdin; and regular files
     * that do not know their size (/proc). */
    rc = map_stream(fd, data, len);
  } else {
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

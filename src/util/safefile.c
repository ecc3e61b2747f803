#define _GNU_SOURCE
#include "util/safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

/* Small writes (a folded line, an SVG element) gather here: one write(2)
 * per 64 KiB rather than one per call. */
#define BUF_CAP (64 * 1024)
/* A random name already taken (or planted) is tried again with another;
 * sixteen misses in a row is not chance. */
#define NAME_TRIES 16

struct kf_safefile {
  int dirfd; /* the target's directory, resolved once at open */
  int fd;    /* the temporary file, -1 once closed */
  int err;   /* the first error, sticky */
  int no_sync; /* commit without fsync (kf_safefile_skip_sync) */
  size_t used;
  char *base;                 /* the target's name inside dirfd */
  char tmp[32];               /* ".kflame-<16 hex>.tmp" inside dirfd */
  unsigned char buf[BUF_CAP];
};

/* ".kflame-<16 hex digits>.tmp" from getrandom(2): no other process can
 * guess it, so none can have planted anything there. */
static int random_name(char *out, size_t cap) {
  unsigned char r[8];
  size_t got = 0;
  while (got < sizeof r) {
    ssize_t n = getrandom(r + got, sizeof r - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    got += (size_t)n;
  }
  static const char hex[] = "0123456789abcdef";
  char digits[17];
  for (size_t i = 0; i < sizeof r; i++) {
    digits[2 * i] = hex[r[i] >> 4];
    digits[2 * i + 1] = hex[r[i] & 15];
  }
  digits[16] = '\0';
  size_t len = (size_t)snprintf(out, cap, ".kflame-%s.tmp", digits);
  return len < cap ? 0 : -ENAMETOOLONG;
}

static int write_fully(int fd, const unsigned char *data, size_t len) {
  while (len) {
    ssize_t w = write(fd, data, len);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -errno;
    data += w;
    len -= (size_t)w;
  }
  return 0;
}

static void release(kf_safefile_t *f) {
  if (f->fd >= 0) close(f->fd);
  if (f->tmp[0]) unlinkat(f->dirfd, f->tmp, 0);
  if (f->dirfd >= 0) close(f->dirfd);
  free(f->base);
  free(f);
}

int kf_safefile_open(const char *path, unsigned mode, kf_safefile_t **out) {
  *out = NULL;
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  /* "dir/", "." and ".." name directories: there is no file to replace. */
  if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) return -EISDIR;

  kf_safefile_t *f = malloc(sizeof *f);
  if (!f) return -ENOMEM;
  f->dirfd = f->fd = -1;
  f->err = 0;
  f->no_sync = 0;
  f->used = 0;
  f->tmp[0] = '\0';
  int rc = 0;
  char *dir = NULL;
  if (!(f->base = strdup(base)) ||
      !(dir = slash == path ? strdup("/")
                            : slash ? strndup(path, (size_t)(slash - path))
                                    : strdup("."))) {
    rc = -ENOMEM;
    goto fail;
  }
  /* O_PATH: enough for the *at calls below, and works in a directory we
   * may write and search but not list. */
  f->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (f->dirfd < 0) {
    rc = -errno;
    goto fail;
  }
  for (int i = 0; i < NAME_TRIES; i++) {
    if ((rc = random_name(f->tmp, sizeof f->tmp))) {
      f->tmp[0] = '\0';
      goto fail;
    }
    /* O_EXCL: a new file or nothing; a link or file already at the name
     * (chance, or planted) fails with EEXIST and is never opened. */
    f->fd = openat(f->dirfd, f->tmp,
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (f->fd >= 0) break;
    rc = -errno;
    f->tmp[0] = '\0'; /* not ours: never unlink it */
    if (rc != -EEXIST) goto fail;
  }
  if (f->fd < 0) goto fail;
  free(dir);
  *out = f;
  return 0;
fail:
  free(dir);
  release(f);
  return rc;
}

int kf_safefile_write(kf_safefile_t *f, const void *data, size_t len) {
  if (f->err || !len) return f->err;
  const unsigned char *p = data;
  if (f->used + len > BUF_CAP) {
    if ((f->err = write_fully(f->fd, f->buf, f->used))) return f->err;
    f->used = 0;
    /* Too big to gather: straight through, no copy. */
    if (len >= BUF_CAP) return f->err = write_fully(f->fd, p, len);
  }
  memcpy(f->buf + f->used, p, len);
  f->used += len;
  return 0;
}

int kf_safefile_commit(kf_safefile_t *f) {
  int rc = f->err;
  if (!rc) rc = write_fully(f->fd, f->buf, f->used);
  /* Durable before it is visible: a crash after the rename must not leave
   * an empty or half file under the target's name. */
  if (!rc && !f->no_sync && fsync(f->fd) != 0) rc = -errno;
  if (close(f->fd) != 0 && !rc) rc = -errno;
  f->fd = -1;
  if (rc) goto out;

  /* Only nothing or a regular file may be replaced. A link, FIFO, device,
   * socket or directory at the target is refused, whoever put it there.
   * Between this look and the rename someone who can write the directory
   * may swap in a link (or a FIFO, a device): rename(2) replaces the
   * directory entry itself and never follows or opens what is there, so
   * such a last-moment link is replaced, not written through. */
  struct stat st;
  if (fstatat(f->dirfd, f->base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!S_ISREG(st.st_mode)) rc = -KF_ERR_UNSAFE_PATH;
  } else if (errno != ENOENT) {
    rc = -errno;
  }
  if (!rc && renameat(f->dirfd, f->tmp, f->dirfd, f->base) != 0) rc = -errno;
  if (!rc) f->tmp[0] = '\0'; /* it is the target now */
out:
  release(f);
  return rc;
}

void kf_safefile_skip_sync(kf_safefile_t *f) { f->no_sync = 1; }

void kf_safefile_abort(kf_safefile_t *f) {
  if (f) release(f);
}

int kf_safefile_write_all(const char *path, const void *data, size_t len,
                          unsigned mode) {
  kf_safefile_t *f;
  int rc = kf_safefile_open(path, mode, &f);
  if (rc) return rc;
  if ((rc = kf_safefile_write(f, data, len))) {
    kf_safefile_abort(f);
    return rc;
  }
  return kf_safefile_commit(f);
}

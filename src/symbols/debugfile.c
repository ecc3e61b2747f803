#define _GNU_SOURCE
#include "symbols/debugfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint32_t kf_crc32(uint32_t crc, const void *buf, size_t len) {
  const unsigned char *p = buf;
  crc = ~crc;
  for (size_t i = 0; i < len; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++) crc = crc >> 1 ^ (0xEDB88320u & -(crc & 1));
  }
  return ~crc;
}

/* CRC32 of a whole file; -1 when it cannot be read. */
static int file_crc32(const char *path, uint32_t *out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  unsigned char buf[65536];
  uint32_t crc = 0;
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) crc = kf_crc32(crc, buf, (size_t)n);
  close(fd);
  if (n < 0) return -1;
  *out = crc;
  return 0;
}

/* Loads `path` when it is the debug file of `obj`. 0, -ENOENT, -ENOMEM. */
static int try_candidate(const char *path, const kf_elf_t *obj, kf_elf_t **out) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return -ENOENT;
  if (obj->build_id_len == 0) {
    uint32_t crc;
    if (!obj->debuglink || file_crc32(path, &crc) != 0 || crc != obj->debuglink_crc)
      return -ENOENT;
  }
  kf_elf_t *debug;
  int rc = kf_elf_load(path, &debug);
  if (rc != 0) return rc == -ENOMEM ? rc : -ENOENT;
  int same_build = obj->build_id_len == 0 ||
                   (debug->build_id_len == obj->build_id_len &&
                    memcmp(debug->build_id, obj->build_id, obj->build_id_len) == 0);
  if (!same_build || !debug->from_symtab) {
    kf_elf_free(debug);
    return -ENOENT;
  }
  *out = debug;
  return 0;
}

static int by_build_id(const kf_elf_t *obj, const char *dir, kf_elf_t **out) {
  char path[PATH_MAX];
  int n = snprintf(path, sizeof path, "%s/.build-id/%02x/", dir, obj->build_id[0]);
  for (size_t i = 1; i < obj->build_id_len && n > 0 && (size_t)n < sizeof path; i++)
    n += snprintf(path + n, sizeof path - (size_t)n, "%02x", obj->build_id[i]);
  if (n <= 0 || (size_t)n + sizeof ".debug" > sizeof path) return -ENOENT;
  memcpy(path + n, ".debug", sizeof ".debug");
  return try_candidate(path, obj, out);
}

int kf_debugfile_find(const char *path, const kf_elf_t *obj,
                      const char *const *dirs, size_t ndirs, kf_elf_t **out) {
  int rc = -ENOENT;
  if (obj->build_id_len)
    for (size_t i = 0; i < ndirs && rc == -ENOENT; i++) rc = by_build_id(obj, dirs[i], out);
  if (rc != -ENOENT || !obj->debuglink) return rc;

  /* The object's directory, as mapped (a path from /proc/self/maps). */
  const char *slash = strrchr(path, '/');
  if (!slash) return -ENOENT;
  int objdir_len = (int)(slash - path);
  char candidate[PATH_MAX];
  int n = snprintf(candidate, sizeof candidate, "%.*s/%s", objdir_len, path, obj->debuglink);
  /* The object itself, when the link names it (a debuglink to its own file
   * name is the usual case): skip, it was just read and has no .symtab. */
  if (n > 0 && (size_t)n < sizeof candidate && strcmp(candidate, path) != 0)
    rc = try_candidate(candidate, obj, out);
  if (rc != -ENOENT) return rc;
  n = snprintf(candidate, sizeof candidate, "%.*s/.debug/%s", objdir_len, path, obj->debuglink);
  if (n > 0 && (size_t)n < sizeof candidate) rc = try_candidate(candidate, obj, out);
  for (size_t i = 0; i < ndirs && rc == -ENOENT; i++) {
    n = snprintf(candidate, sizeof candidate, "%s%.*s/%s", dirs[i], objdir_len, path, obj->debuglink);
    if (n > 0 && (size_t)n < sizeof candidate) rc = try_candidate(candidate, obj, out);
  }
  return rc;
}

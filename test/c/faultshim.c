/*
 * faultshim: an LD_PRELOAD library that makes the kernel say no, so the tap
 * tests can walk kflame's error paths for real on a machine that allows
 * everything. Set in the environment of a child node process:
 *
 *   KFLAME_FAULT_PERF=EACCES|EPERM|ENOSYS|EMFILE  perf_event_open fails so
 *   KFLAME_FAULT_PERF_AFTER=N                     ... after N successful opens
 *   KFLAME_FAULT_PERF_CPU_WIDE=EACCES|...  perf_event_open of an event on
 *                                every process of a CPU (pid -1) fails so
 *   KFLAME_FAULT_BPF=EPERM|EINVAL  bpf() fails so
 *   KFLAME_FAULT_PERF_TRACEPOINT=EACCES|...  perf_event_open of a
 *                                tracepoint event fails so
 *   KFLAME_FAULT_MLOCK_PAGES=N   mmap of a perf ring larger than 1+N pages
 *                                fails with EPERM (0: every ring fails)
 *   KFLAME_FAULT_MLOCK_BUDGET=N  perf rings share a budget of N pages, as
 *                                the kernel's perf_event_mlock_kb: a ring
 *                                that does not fit in what the live rings
 *                                left fails with EPERM; munmap gives back
 *   KFLAME_FAULT_STRDUP=TEXT     strdup of exactly TEXT fails with ENOMEM
 *   KFLAME_FAULT_STRDUP_AFTER=N  ... after N successful copies of it (a
 *                                unique perf map path reaches the copy
 *                                stop() makes of it: out of memory there)
 *
 * Test-only: never linked into kflame.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int perf_opens;

static int fault_errno(const char *name) {
  if (!name) return 0;
  if (!strcmp(name, "EACCES")) return EACCES;
  if (!strcmp(name, "EPERM")) return EPERM;
  if (!strcmp(name, "ENOSYS")) return ENOSYS;
  if (!strcmp(name, "EMFILE")) return EMFILE;
  if (!strcmp(name, "EINVAL")) return EINVAL;
  return 0;
}

long syscall(long nr, ...) {
  va_list ap;
  va_start(ap, nr);
  long a[6];
  for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
  va_end(ap);
  int refuse = 0;
  if (nr == SYS_bpf) refuse = fault_errno(getenv("KFLAME_FAULT_BPF"));
  if (nr == SYS_perf_event_open && ((const struct perf_event_attr *)a[0])->type == PERF_TYPE_TRACEPOINT)
    refuse = fault_errno(getenv("KFLAME_FAULT_PERF_TRACEPOINT"));
  if (!refuse && nr == SYS_perf_event_open && (int)a[1] == -1) /* an int, passed as one */
    refuse = fault_errno(getenv("KFLAME_FAULT_PERF_CPU_WIDE"));
  if (refuse) {
    errno = refuse;
    return -1;
  }
  if (nr == SYS_perf_event_open) {
    int e = fault_errno(getenv("KFLAME_FAULT_PERF"));
    const char *after = getenv("KFLAME_FAULT_PERF_AFTER");
    if (e && perf_opens >= (after ? atoi(after) : 0)) {
      errno = e;
      return -1;
    }
    perf_opens++;
  }
  static long (*real)(long, ...);
  if (!real) real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
  return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* The live perf rings, for the shared budget. */
static struct ring_map {
  void *addr;
  size_t len;
} rings[256];
static size_t budget_used; /* bytes */

static int is_perf_fd(int fd) {
  char link[64], target[64] = "";
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  return n > 0 && strstr(target, "perf_event") != NULL;
}

/* node-gyp builds with _FILE_OFFSET_BITS=64, so the addon calls mmap64. */
static void *fault_mmap(const char *sym, void *addr, size_t len, int prot,
                        int flags, int fd, off_t off) {
  void *(*real)(void *, size_t, int, int, int, off_t) =
      (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, sym);
  int ring = fd >= 0 && (flags & MAP_SHARED) && (prot & PROT_WRITE) && is_perf_fd(fd);
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const char *pages = getenv("KFLAME_FAULT_MLOCK_PAGES");
  const char *budget = getenv("KFLAME_FAULT_MLOCK_BUDGET");
  if (ring && ((pages && len > (size_t)(atoi(pages) + 1) * page) ||
               (budget && budget_used + len > (size_t)atoi(budget) * page))) {
    errno = EPERM;
    return MAP_FAILED;
  }
  void *map = real(addr, len, prot, flags, fd, off);
  if (ring && map != MAP_FAILED) {
    for (size_t i = 0; i < sizeof rings / sizeof rings[0]; i++) {
      if (rings[i].addr) continue;
      rings[i] = (struct ring_map){map, len};
      budget_used += len;
      break;
    }
  }
  return map;
}

int munmap(void *addr, size_t len) {
  static int (*real)(void *, size_t);
  if (!real) real = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
  for (size_t i = 0; i < sizeof rings / sizeof rings[0]; i++) {
    if (rings[i].addr != addr) continue;
    budget_used -= rings[i].len;
    rings[i].addr = NULL;
    break;
  }
  return real(addr, len);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  return fault_mmap("mmap", addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  return fault_mmap("mmap64", addr, len, prot, flags, fd, off);
}

static int strdup_matches;

char *strdup(const char *s) {
  const char *fail = getenv("KFLAME_FAULT_STRDUP");
  if (fail && !strcmp(s, fail)) {
    const char *after = getenv("KFLAME_FAULT_STRDUP_AFTER");
    if (strdup_matches++ >= (after ? atoi(after) : 0)) {
      errno = ENOMEM;
      return NULL;
    }
  }
  size_t n = strlen(s) + 1;
  char *copy = malloc(n);
  if (copy) memcpy(copy, s, n);
  return copy;
}

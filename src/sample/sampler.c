#define _GNU_SOURCE
#include "sample/sampler.h"

#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#if defined(__x86_64__)
#include <asm/perf_regs.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sample/pidfilter.h"
#include "sample/switchin.h"
#include "util/error.h"
#include "util/grow.h"
#include "util/readfile.h"

#define MAX_THREAD_SCANS 8

typedef struct cpu_ring {
  int cpu;
  int fd;        /* the event whose mapping is the ring; -1 until mapped */
  void *map;
  size_t map_size;
  kf_ring_t ring;
} cpu_ring_t;

struct kf_sampler {
  struct perf_event_attr attr;
  kf_sampler_info_t info;
  size_t page_size;
  cpu_ring_t *cpus;
  kf_ring_t *rings;     /* copies handed to the collector */
  int *ring_fds;
  int *fds;
  kf_event_owner_t *owners;
  size_t nfds, fds_cap;
  pid_t *tids;
  size_t ntids, tids_cap;
  uint32_t max_switch_rate;
  /* CPU-wide off-CPU: switch-ins stamped by a tracepoint program for the
   * sampled waits only, instead of every switch's PERF_RECORD_SWITCH_CPU_WIDE
   * record; NULL where that could not be set up. */
  kf_switchin_t *switchin;
  int err; /* the errno behind the last kflame code (error.h), taken where
              the call failed: cleanup after it may change errno */
};

static int perf_event_open(struct perf_event_attr *attr, pid_t tid, int cpu) {
  return (int)syscall(SYS_perf_event_open, attr, tid, cpu, -1,
                      PERF_FLAG_FD_CLOEXEC);
}

static int code_for_open_errno(int e) {
  switch (e) {
    case EACCES: return -KF_ERR_PERF_PARANOID;
    case EPERM: return -KF_ERR_PERF_DENIED;
    case ENOSYS: case ENOENT: case EOPNOTSUPP: case ENODEV:
      return -KF_ERR_PERF_UNSUPPORTED;
    case EMFILE: case ENFILE: return -KF_ERR_FD_LIMIT;
    default: return -e;
  }
}

static uint32_t read_sysctl_u32(const char *path, uint32_t fallback) {
  char *text;
  size_t len;
  if (kf_read_file(path, &text, &len) != 0) return fallback;
  unsigned long v = strtoul(text, NULL, 10);
  free(text);
  return v ? (uint32_t)v : fallback;
}

/* Online CPUs from "0-3,5,7-8". */
static int online_cpus(cpu_ring_t **out, uint32_t *n) {
  char *text;
  size_t len;
  int rc = kf_read_file("/sys/devices/system/cpu/online", &text, &len);
  if (rc != 0) return rc;
  size_t cap = 8, count = 0;
  cpu_ring_t *cpus = malloc(cap * sizeof(*cpus));
  char *p = text;
  while (cpus && *p && *p != '\n') {
    char *end;
    long lo = strtol(p, &end, 10), hi = lo;
    if (end == p) break;
    p = end;
    if (*p == '-') hi = strtol(p + 1, &p, 10);
    for (long c = lo; c <= hi && cpus; c++) {
      if (count == cap) {
        cpu_ring_t *bigger = realloc(cpus, (cap *= 2) * sizeof(*cpus));
        if (!bigger) free(cpus);
        cpus = bigger;
        if (!cpus) break;
      }
      cpus[count++] = (cpu_ring_t){.cpu = (int)c, .fd = -1};
    }
    if (*p == ',') p++;
  }
  free(text);
  if (!cpus) return -ENOMEM;
  if (count == 0) {
    free(cpus);
    return -ENOENT;
  }
  *out = cpus;
  *n = (uint32_t)count;
  return 0;
}

static int push_fd(kf_sampler_t *s, int fd, uint32_t tid, uint32_t kind) {
  if (s->nfds == s->fds_cap) {
    size_t cap = s->fds_cap ? s->fds_cap * 2 : 64;
    int *fds = realloc(s->fds, cap * sizeof(int));
    if (!fds) return -ENOMEM;
    s->fds = fds;
    kf_event_owner_t *owners = realloc(s->owners, cap * sizeof(*owners));
    if (!owners) return -ENOMEM;
    s->owners = owners;
    s->fds_cap = cap;
  }
  uint64_t id = 0;
  if (ioctl(fd, PERF_EVENT_IOC_ID, &id) != 0) return -errno;
  s->fds[s->nfds] = fd;
  s->owners[s->nfds] = (kf_event_owner_t){.id = id, .tid = tid, .kind = kind};
  s->nfds++;
  return 0;
}

/* Maps the ring of one CPU at the current size. -KF_ERR_MLOCK when the
 * locked-memory budget refuses it (EPERM or ENOMEM from mmap once
 * perf_event_mlock_kb and RLIMIT_MEMLOCK are used up). */
static int map_ring(kf_sampler_t *s, cpu_ring_t *c, int fd) {
  size_t size = (1 + (size_t)s->info.ring_pages) * s->page_size;
  void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    s->err = errno;
    return s->err == EPERM || s->err == ENOMEM ? -KF_ERR_MLOCK : -s->err;
  }
  int rc = kf_ring_init(&c->ring, map, size, s->page_size);
  if (rc != 0) {
    munmap(map, size);
    return rc;
  }
  c->fd = fd;
  c->map = map;
  c->map_size = size;
  return 0;
}

static void unmap_ring(cpu_ring_t *c) {
  kf_ring_destroy(&c->ring);
  munmap(c->map, c->map_size);
  c->fd = -1;
  c->map = NULL;
  c->map_size = 0;
}

/* Maps one ring per CPU on the first thread's events (fds[i] on CPU i), all
 * of one size. The locked-memory budget is shared by the rings of every CPU
 * (perf_event_mlock_kb times the CPUs, then RLIMIT_MEMLOCK), so a ring
 * that does not fit means they all shrink: every ring is unmapped and the
 * whole set tried again at half the size. Halving only the ring that
 * failed would let the first CPU's ring take the whole budget. */
static int map_rings(kf_sampler_t *s, const int *fds) {
  for (;;) {
    uint32_t mapped = 0;
    int rc = 0;
    while (mapped < s->info.cpus &&
           (rc = map_ring(s, &s->cpus[mapped], fds[mapped])) == 0)
      mapped++;
    if (rc == 0) return 0;
    while (mapped > 0) unmap_ring(&s->cpus[--mapped]);
    if (rc != -KF_ERR_MLOCK || s->info.ring_pages == 1) return rc;
    s->info.ring_pages /= 2;
  }
}

/* Asks each sample for `bytes` of the user stack and the registers that
 * walk it, or (0) for neither. */
static void ask_user_stack(kf_sampler_t *s, uint32_t bytes) {
  struct perf_event_attr *a = &s->attr;
  a->sample_type &= ~(uint64_t)(PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER);
  a->sample_regs_user = 0;
  a->sample_stack_user = 0;
  s->info.stack_bytes = 0;
  s->info.layout.user_regs = 0;
#if defined(__x86_64__)
  bytes &= ~7u;
  if (bytes == 0) return;
  a->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  a->sample_regs_user = 1ULL << PERF_REG_X86_BP | 1ULL << PERF_REG_X86_SP |
                        1ULL << PERF_REG_X86_IP;
  a->sample_stack_user = bytes;
  s->info.stack_bytes = bytes;
  s->info.layout.user_regs = KF_SAMPLER_USER_REGS;
#else
  (void)bytes;
#endif
}

/* The rings of events opened kinds to a CPU from fds[first] on (event k
 * of CPU i is fds[first + i * kinds + k]): each CPU's first event owns its
 * ring (map_rings), the others are redirected into it once it is mapped. */
static int map_rings_of(kf_sampler_t *s, size_t first, uint32_t kinds) {
  int *owners = malloc(s->info.cpus * sizeof(int));
  if (!owners) return -ENOMEM;
  for (uint32_t i = 0; i < s->info.cpus; i++) owners[i] = s->fds[first + i * kinds];
  int rc = map_rings(s, owners);
  free(owners);
  for (uint32_t i = 0; i < s->info.cpus && rc == 0; i++)
    for (uint32_t k = 1; k < kinds && rc == 0; k++)
      if (ioctl(s->fds[first + i * kinds + k], PERF_EVENT_IOC_SET_OUTPUT, s->cpus[i].fd) != 0)
        rc = -errno;
  return rc;
}

/* The attributes of a context-switch event, from the clock event's as the
 * first open settled them. The kernel counts a switch in its own context:
 * with exclude_kernel it would drop every sample, so kernel context is
 * always asked for, and kernel frames are left out of the callchain when
 * they are not wanted. With switchin.h, the event is on the sched_switch
 * tracepoint, and its program picks the switches to sample (every one it
 * returns 1 for: period 1) and stamps the switch-ins. Else the software
 * event, and PERF_RECORD_SWITCH records (context_switch) stamp when the
 * thread comes back; sample_id_all gives them its tid and time. */
static void switch_attr(const kf_sampler_t *s, uint32_t max_rate,
                        struct perf_event_attr *a) {
  *a = s->attr;
  if (s->switchin) {
    a->type = PERF_TYPE_TRACEPOINT;
    a->config = kf_switchin_tracepoint(s->switchin);
    max_rate = 0;
  } else {
    a->config = PERF_COUNT_SW_CONTEXT_SWITCHES;
  }
  if (max_rate) {
    a->freq = 1;
    a->sample_freq = max_rate;
  } else {
    a->freq = 0;
    a->sample_period = 1;
  }
  a->sample_type |= PERF_SAMPLE_PERIOD;
  a->exclude_kernel = 0;
  a->exclude_callchain_kernel = !s->info.kernel;
  a->context_switch = s->switchin == NULL;
  a->sample_id_all = 1;
  a->comm = 0; /* the clock event (or the first switch event) reports it */
}

/* Opens one event on (tid, cpu). The first open also settles what this
 * kernel and these privileges allow: kernel frames (EACCES means no) and
 * inherit_thread (EINVAL before Linux 5.13). Returns an fd, -ESRCH when the
 * thread is gone, or another negative errno; a switch event refused for
 * want of kernel context, -KF_ERR_OFFCPU_PARANOID. */
static int open_event(kf_sampler_t *s, uint32_t kind, pid_t tid, int cpu,
                      int first) {
  for (;;) {
    struct perf_event_attr sw;
    struct perf_event_attr *attr = &s->attr;
    if (kind == KF_KIND_SWITCH) {
      switch_attr(s, s->max_switch_rate, &sw);
      /* Only switch events: this one reports thread names. */
      sw.comm = !(s->info.what & KF_WHAT_CPU);
      attr = &sw;
    }
    int fd = perf_event_open(attr, tid, cpu);
    if (fd >= 0) return fd;
    int e = errno;
    if (kind == KF_KIND_SWITCH && !s->switchin && (e == EACCES || e == EPERM)) {
      s->err = e;
      return -KF_ERR_OFFCPU_PARANOID;
    }
    if (first && e == EACCES && !s->attr.exclude_kernel) {
      s->attr.exclude_kernel = 1;
      s->attr.exclude_callchain_kernel = 1;
      s->info.kernel = 0;
      s->info.kernel_refused = 1;
      continue;
    }
    if (first && e == EINVAL && s->attr.sample_stack_user) {
      /* A kernel without user stack sampling (or refusing this size):
       * sample callchains alone, as before. */
      ask_user_stack(s, 0);
      continue;
    }
    if (first && e == EINVAL && s->attr.inherit_thread) {
      s->attr.inherit_thread = 0;
      s->info.inherit_thread = 0;
      continue;
    }
    return -e;
  }
}

/* Opens the thread's events on every CPU: the clock event, the switch
 * event, or both (s->info.what). The first thread's first event on each
 * CPU owns that CPU's ring (mapped once all are open); every other event
 * writes into it, the first thread's others once the rings are mapped (an
 * event can only be redirected into a mapped ring). */
static int attach_thread(kf_sampler_t *s, pid_t tid) {
  size_t first_fd = s->nfds;
  int owns_rings = s->cpus[0].fd < 0;
  uint32_t kinds = s->info.what == KF_WHAT_BOTH ? 2 : 1;
  uint32_t kind0 = s->info.what & KF_WHAT_CPU ? KF_KIND_CPU : KF_KIND_SWITCH;
  for (uint32_t i = 0; i < s->info.cpus; i++) {
    cpu_ring_t *c = &s->cpus[i];
    for (uint32_t k = 0; k < kinds; k++) {
      int fd = open_event(s, kind0 + k, tid, c->cpu, s->nfds == 0);
      if (fd < 0) {
        if (fd == -ESRCH) goto gone;
        if (fd <= -KF_ERR_BASE) return fd;
        s->err = -fd;
        return code_for_open_errno(-fd);
      }
      int rc = push_fd(s, fd, (uint32_t)tid, kind0 + k);
      if (rc != 0) {
        close(fd);
        return rc;
      }
      if (!owns_rings && ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, c->fd) != 0)
        return -errno;
    }
  }
  if (owns_rings) {
    int rc = map_rings_of(s, first_fd, kinds);
    if (rc != 0) return rc;
  }
  s->info.threads++;
  return 0;
gone:
  /* The thread exited while we attached: forget its events. */
  while (s->nfds > first_fd) close(s->fds[--s->nfds]);
  return 0;
}

/* Unmaps the rings and closes every event opened so far. */
static void close_events(kf_sampler_t *s) {
  for (uint32_t i = 0; i < s->info.cpus; i++)
    if (s->cpus[i].map) unmap_ring(&s->cpus[i]);
  while (s->nfds > 0) close(s->fds[--s->nfds]);
}

/* The events of every CPU, each with the pid filter (`prog`), except the
 * switch events on the tracepoint, whose first holds switchin.h's program;
 * then the rings. 0, or a negative errno (*tracepoint_failed set when a
 * tracepoint event was refused). */
static int open_cpu_events(kf_sampler_t *s, int prog, int *tracepoint_failed) {
  uint32_t kinds = s->info.what == KF_WHAT_BOTH ? 2 : 1;
  uint32_t kind0 = s->info.what & KF_WHAT_CPU ? KF_KIND_CPU : KF_KIND_SWITCH;
  int rc = 0;
  *tracepoint_failed = 0;
  for (uint32_t i = 0; i < s->info.cpus && rc == 0; i++)
    for (uint32_t k = 0; k < kinds && rc == 0; k++) {
      int traced = kind0 + k == KF_KIND_SWITCH && s->switchin;
      int fd = open_event(s, kind0 + k, -1, s->cpus[i].cpu, s->nfds == 0);
      if (fd < 0) {
        *tracepoint_failed = traced;
        rc = fd;
        break;
      }
      rc = !traced ? kf_pidfilter_attach(fd, prog)
           : i == 0 ? kf_switchin_attach(s->switchin, fd) : 0;
      *tracepoint_failed = traced && rc != 0;
      if (rc != 0 || (rc = push_fd(s, fd, KF_OWNER_ANY, kind0 + k)) != 0)
        close(fd);
    }
  return rc == 0 ? map_rings_of(s, 0, kinds) : rc;
}

/* CPU-wide: per CPU (pid -1), the clock event, the context-switch event,
 * or both (s->info.what), for whatever runs there, with the pid filter
 * keeping this process's samples (pidfilter.h), or for switches the
 * tracepoint's program (switchin.h). No thread is attached and none
 * switches an event in or out; a thread is sampled from its first
 * instruction, whoever created it. Without the tracepoint, the software
 * switch event's PERF_RECORD_SWITCH_CPU_WIDE records come for every task
 * (the filter sees samples only): pids and times, no stack, which the
 * collector drops unless they are this process's. Each CPU's first event
 * owns its ring. 0, or a negative errno with nothing left open and the
 * attributes as they were: then the caller attaches per thread. */
static int open_cpu_wide(kf_sampler_t *s) {
  int prog = kf_pidfilter_load();
  if (prog < 0) return prog;
  struct perf_event_attr per_thread = s->attr;
  kf_sampler_info_t info = s->info;
  s->attr.inherit = 0;
  s->attr.inherit_thread = 0;
  s->attr.exclude_idle = 1; /* the idle task is nobody's: skip the filter */
  if (s->info.what & KF_WHAT_OFFCPU) {
    int opened = kf_switchin_open(s->max_switch_rate, &s->switchin);
    if (opened != 0) s->info.switchin_errno = -opened < KF_ERR_BASE ? -opened : 0;
  }
  int tracepoint_failed;
  int rc = open_cpu_events(s, prog, &tracepoint_failed);
  if (rc != 0 && tracepoint_failed) {
    /* Off-CPU from the software event and switch records instead. */
    close_events(s);
    kf_switchin_close(s->switchin);
    s->switchin = NULL;
    s->info.switchin_errno = -rc < KF_ERR_BASE ? -rc : 0;
    rc = open_cpu_events(s, prog, &tracepoint_failed);
  }
  close(prog); /* each event holds it */
  if (rc == 0) {
    s->info.scope = KF_SCOPE_CPUS;
    s->info.inherit_thread = 0;
    s->info.switchins_traced = s->switchin != NULL;
    return 0;
  }
  close_events(s);
  kf_switchin_close(s->switchin);
  s->switchin = NULL;
  s->attr = per_thread;
  s->info = info;
  return rc;
}

static int known_tid(const kf_sampler_t *s, pid_t tid) {
  for (size_t i = 0; i < s->ntids; i++)
    if (s->tids[i] == tid) return 1;
  return 0;
}

/* Attaches every thread in /proc/self/task not attached yet; *added counts
 * them. A thread created after its creator was attached is also covered by
 * inheritance; the collector keeps one source per thread (see collector.c). */
static int scan_threads(kf_sampler_t *s, size_t *added) {
  DIR *dir = opendir("/proc/self/task");
  if (!dir) {
    s->err = errno;
    return s->err == EMFILE || s->err == ENFILE ? -s->err : -KF_ERR_NO_THREADS;
  }
  int rc = 0;
  *added = 0;
  struct dirent *d;
  while ((d = readdir(dir)) != NULL) {
    pid_t tid = (pid_t)atoi(d->d_name);
    if (tid <= 0 || known_tid(s, tid)) continue;
    if (kf_grow((void **)&s->tids, &s->tids_cap, s->ntids + 1, sizeof(pid_t),
                32)) {
      rc = -ENOMEM;
      break;
    }
    s->tids[s->ntids++] = tid;
    if ((rc = attach_thread(s, tid)) != 0) break;
    (*added)++;
  }
  closedir(dir);
  return rc;
}

static int by_id(const void *a, const void *b) {
  const kf_event_owner_t *x = a, *y = b;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* The rings' size at every rate when opts leave it to kflame: 16 pages
 * without stack copies, 64 with them. */
static uint32_t smallest_default_pages(const kf_sampler_opts_t *opts) {
  return opts->stack_bytes ? 64 : 16;
}

/* The rings' size when opts leave it to kflame: the smallest default, and
 * with stack copies more at high rates, so that the collector, woken at
 * half a ring, wakes about 25 times a second per CPU at most: each wake-up
 * can take the sampled thread's CPU from it, and at 999 Hz with the 16 KiB
 * copy 256 pages rather than 64 saved it 0.4-0.7% of its CPU (three runs
 * of alternating windows). At most 256 pages (1 MiB). */
static uint32_t default_ring_pages(const kf_sampler_opts_t *opts, size_t page_size) {
  uint32_t pages = smallest_default_pages(opts);
  if (!opts->stack_bytes) return pages;
  uint64_t bytes_per_second = (uint64_t)(opts->hz ? opts->hz : 99) * (opts->stack_bytes + 1024u);
  while (pages < 256 && (uint64_t)pages * page_size / 2 < bytes_per_second / 25) pages *= 2;
  return pages;
}

int kf_sampler_open(const kf_sampler_opts_t *opts, kf_sampler_t **out,
                    int *sys_errno) {
  *sys_errno = 0;
  kf_sampler_t *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->page_size = (size_t)sysconf(_SC_PAGESIZE);
  s->info.ring_pages = opts->ring_pages ? opts->ring_pages
                                        : default_ring_pages(opts, s->page_size);
  /* A locked-memory budget that cuts a larger default back to the size
   * every rate had before is no loss worth a warning. */
  s->info.ring_pages_asked = opts->ring_pages ? opts->ring_pages : smallest_default_pages(opts);
  s->info.kernel = opts->kernel;
  s->info.inherit_thread = 1;
  s->info.scope = KF_SCOPE_THREADS;
  s->info.what = opts->what ? opts->what : KF_WHAT_CPU;
  s->max_switch_rate = opts->max_switch_rate;
  s->info.max_stack =
      read_sysctl_u32("/proc/sys/kernel/perf_event_max_stack", 127);

  struct perf_event_attr *a = &s->attr;
  a->size = sizeof(*a);
  a->type = PERF_TYPE_SOFTWARE;
  a->config = opts->event == KF_EVENT_TASK_CLOCK ? PERF_COUNT_SW_TASK_CLOCK
                                                 : PERF_COUNT_SW_CPU_CLOCK;
  /* A fixed period in ns of thread CPU time: for the clock events the kernel
   * turns a frequency into exactly this period anyway, and each sample then
   * stands for the same amount of CPU time. */
  a->sample_period = 1000000000ULL / (opts->hz ? opts->hz : 99);
  a->sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID |
                   PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
  a->inherit = 1;
  a->inherit_thread = 1;
  a->exclude_kernel = !opts->kernel;
  a->exclude_callchain_kernel = !opts->kernel;
  a->exclude_hv = 1;
  a->comm = 1;
  a->use_clockid = 1;
  a->clockid = CLOCK_MONOTONIC;
  ask_user_stack(s, opts->stack_bytes);
  /* Wake the collector when a ring is half full: with watermark set and
   * wakeup_watermark 0 the kernel takes half of whatever size the ring got,
   * also when the locked-memory budget made it smaller than asked. */
  a->watermark = 1;

  int rc = online_cpus(&s->cpus, &s->info.cpus);
  if (rc != 0) goto fail;

  if (opts->scope == KF_SCOPE_AUTO) {
    int wide = open_cpu_wide(s);
    s->info.scope_errno = wide < 0 && -wide < KF_ERR_BASE ? -wide : 0;
    if (wide == -KF_ERR_MLOCK || wide == -ENOMEM) {
      rc = wide;
      goto fail;
    }
  }
  /* Threads may start while we attach: scan until a pass finds none new. */
  size_t added = 1;
  for (int pass = 0; s->info.scope == KF_SCOPE_THREADS && added && pass < MAX_THREAD_SCANS; pass++)
    if ((rc = scan_threads(s, &added)) != 0) goto fail;
  if (s->info.scope == KF_SCOPE_THREADS && s->info.threads == 0) {
    rc = -KF_ERR_NO_THREADS;
    goto fail;
  }

  s->info.switch_layout = s->info.layout;
  s->info.switch_layout.periods = 1;
  s->rings = calloc(s->info.cpus, sizeof(kf_ring_t));
  s->ring_fds = calloc(s->info.cpus, sizeof(int));
  if (!s->rings || !s->ring_fds) {
    rc = -ENOMEM;
    goto fail;
  }
  for (uint32_t i = 0; i < s->info.cpus; i++) {
    s->rings[i] = s->cpus[i].ring;
    s->ring_fds[i] = s->cpus[i].fd;
  }
  qsort(s->owners, s->nfds, sizeof(*s->owners), by_id);
  for (size_t i = 0; i < s->nfds; i++) {
    if (ioctl(s->fds[i], PERF_EVENT_IOC_ENABLE, 0) != 0) {
      rc = -errno;
      goto fail;
    }
  }
  *out = s;
  return 0;

fail:
  *sys_errno = rc < 0 && -rc < KF_ERR_BASE ? -rc : s->err;
  kf_sampler_close(s);
  return rc;
}

void kf_sampler_disable(kf_sampler_t *s) {
  for (size_t i = 0; i < s->nfds; i++)
    ioctl(s->fds[i], PERF_EVENT_IOC_DISABLE, 0);
}

void kf_sampler_close(kf_sampler_t *s) {
  if (!s) return;
  for (uint32_t i = 0; s->cpus && i < s->info.cpus; i++) {
    if (s->cpus[i].map) munmap(s->cpus[i].map, s->cpus[i].map_size);
    kf_ring_destroy(&s->cpus[i].ring);
  }
  for (size_t i = 0; i < s->nfds; i++) close(s->fds[i]);
  kf_switchin_close(s->switchin);
  free(s->cpus);
  free(s->rings);
  free(s->ring_fds);
  free(s->fds);
  free(s->owners);
  free(s->tids);
  free(s);
}

const kf_sampler_info_t *kf_sampler_info(const kf_sampler_t *s) {
  return &s->info;
}

size_t kf_sampler_rings(kf_sampler_t *s, kf_ring_t **rings, const int **fds) {
  *rings = s->rings;
  *fds = s->ring_fds;
  return s->info.cpus;
}

kf_switchin_t *kf_sampler_switchin(kf_sampler_t *s) {
  return s->switchin;
}

const kf_event_owner_t *kf_sampler_owners(const kf_sampler_t *s, size_t *n) {
  *n = s->nfds;
  return s->owners;
}

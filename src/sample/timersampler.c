#define _GNU_SOURCE
#include "sample/timersampler.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/grow.h"
#include "symbols/procmaps.h"
#include "util/readfile.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

/* The smallest ring a thread gets: room for two of the largest records. */
#define MIN_RING_PAGES 16
/* The default with stack copies: a deep JS stack's record (16 KiB of stack
 * and the chain) fits seven times, so a burst of signals at the tick rate
 * does not fill it before the collector wakes at half. */
#define DEFAULT_RING_PAGES_WITH_STACK 32
/* Bytes copied from sp on even when the frame chain ends at once: the
 * return address a frameless handler or builtin left at sp names the JS
 * function it runs for (jitframes.c). */
#define MIN_STACK_COPY 256
/* A signal that stands for more periods than this is clamped: the count
 * comes from the kernel, but a record must not claim an hour of CPU. */
#define MAX_PERIODS 100000
#define MATCHED 0x80000000u

typedef struct slot {
  /* Set before the slot is published, then read-only. */
  uint32_t tid;
  uint32_t index;                    /* in kf_timer.slots */
  struct perf_event_mmap_page *meta; /* the ring, laid out as perf's */
  unsigned char *data;
  uint64_t data_size;
  /* Shared with the handler (atomics). */
  uint64_t bounds;   /* pack_bounds() of the thread's stack; 0: unknown */
  uint64_t hint_sp;  /* an sp the handler found outside the bounds */
  uint64_t lost, unwalked, over_handler;
  uint32_t wake_sent; /* the handler woke the collector; it clears this */
  uint32_t hint_sent; /* the handler woke it for hint_sp; it clears this */
  /* Collector only. */
  timer_t timer;
  int armed;
  kf_ring_t ring;     /* the reader */
  size_t map_size;
  struct slot *next_dead;
} slot_t;

struct kf_timer {
  kf_sampler_info_t info;
  kf_timer_stats_t stats; /* slots' counts once they are freed */
  uint64_t period_ns;
  uint64_t record_max;    /* bytes, the largest record the handler writes */
  uint64_t copy_max;      /* stack bytes per record */
  size_t page_size;
  uint32_t pid;
  int wake_fd;
  int installed;          /* the handler is in place */
  struct sigaction old_action;
  slot_t *slots[KF_TIMER_MAX_THREADS]; /* read by the handler */
  uint32_t nslots;        /* slots[] in use are below this */
  slot_t *dead;           /* out of slots[], freed once no handler can hold
                             one (see free_dead) */
  uint32_t *tids;         /* scan scratch */
  size_t ntids, tids_cap;
};

/* What the handler reads: the sampler running now, and how many handlers
 * are under way (a grace period for what they may hold: see free_dead). */
static kf_timer_t *active;
static int inflight;

static uint32_t current_tid(void) { return (uint32_t)syscall(SYS_gettid); }

/* The clock of a thread's CPU time as the kernel encodes it
 * (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)). pthread_getcpuclockid gives
 * the same, but needs a pthread_t, which a scan of /proc does not give. */
static clockid_t thread_cpu_clock(uint32_t tid) {
  return (clockid_t)((~tid << 3) | 6u);
}

/* A thread's stack [lo, hi) in one word, so the handler reads both at once:
 * hi's page number (44 bits, enough for 56-bit addresses) and the size in
 * 4 KiB pages (20 bits; a bigger stack is trimmed from below, which only
 * narrows what is read). */
static uint64_t pack_bounds(uint64_t lo, uint64_t hi) {
  uint64_t pages = (hi - lo) >> 12;
  if (pages >= 1u << 20) pages = (1u << 20) - 1;
  return (hi >> 12) << 20 | pages;
}

static void unpack_bounds(uint64_t w, uint64_t *lo, uint64_t *hi) {
  *hi = (w >> 20) << 12;
  *lo = *hi - ((w & ((1u << 20) - 1)) << 12);
}

/* ---- the signal handler ------------------------------------------------ */

typedef struct writer {
  unsigned char *data;
  uint64_t mask;
  uint64_t pos; /* free-running, as data_head */
} writer_t;

/* Records are u64 words from an 8-byte aligned head in a ring whose size is
 * a multiple of 8: a word never straddles the end. */
static void put(writer_t *w, uint64_t v) {
  *(uint64_t *)(void *)(w->data + (w->pos & w->mask)) = v;
  w->pos += 8;
}

/* A word of the interrupted thread's stack, inside the bounds the caller
 * checked. Not instrumented: the frames it reads through are not ours, and
 * their redzones (under ASan) are not errors here. */
__attribute__((no_sanitize_address, no_sanitize_thread)) static uint64_t
stack_word(uint64_t addr) {
  return *(volatile const uint64_t *)(uintptr_t)addr;
}

static int context_regs(const void *ucontext, uint64_t *ip, uint64_t *sp,
                        uint64_t *bp) {
#if defined(__x86_64__)
  const mcontext_t *mc = &((const ucontext_t *)ucontext)->uc_mcontext;
  *ip = (uint64_t)mc->gregs[REG_RIP];
  *sp = (uint64_t)mc->gregs[REG_RSP];
  *bp = (uint64_t)mc->gregs[REG_RBP];
  return 0;
#else
  (void)ucontext, (void)ip, (void)sp, (void)bp;
  return -1;
#endif
}

/* Another signal handler's frame, set up just before ours: two signals
 * pending at once (both came while the thread waited for a CPU, as on a
 * busy machine) are delivered lowest number first, so another handler's
 * frame (V8's profiler's SIGPROF, say) is built, then ours on top of it
 * before any of that handler's instructions ran. A sample there would be
 * of the other handler's first instruction, over a signal frame no walk
 * crosses, with the app's own function lost. Its frame holds the app's
 * context: the kernel's rt_sigframe, whose return address (the restorer
 * every handler installed through libc returns to, as ours does) is at
 * the handler's sp, and the ucontext follows it. Returns that ucontext, or
 * ucontext when the interrupted sp holds no restorer (the common case, and
 * a handler past its first instruction). At most a few levels. The
 * registers of the context taken into *ip, *sp, *bp: returns 0, 1 when
 * it was another handler's frame's, or -1 when they cannot be read. */
static int app_regs(const void *ucontext, uint64_t restorer, uint64_t *ip,
                    uint64_t *sp, uint64_t *bp) {
  int unwrapped = 0;
  for (int level = 0;; level++) {
    if (context_regs(ucontext, ip, sp, bp) != 0) return -1;
    if (level == 4 || *sp == 0 || (*sp & 7) != 0 || stack_word(*sp) != restorer)
      return unwrapped;
    ucontext = (const void *)(uintptr_t)(*sp + 8);
    unwrapped = 1;
  }
}

/* Writes one sample of the interrupted context into the thread's ring. */
static void take_sample(kf_timer_t *t, slot_t *s, uint64_t periods,
                        const void *ucontext, uint64_t restorer) {
  uint64_t ip, sp, bp;
  int unwrapped = app_regs(ucontext, restorer, &ip, &sp, &bp);
  if (unwrapped < 0) return;
  if (unwrapped) __atomic_add_fetch(&s->over_handler, 1, __ATOMIC_RELAXED);
  struct perf_event_mmap_page *meta = s->meta;
  uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_RELAXED);
  uint64_t tail = __atomic_load_n(&meta->data_tail, __ATOMIC_ACQUIRE);
  if (s->data_size - (head - tail) < t->record_max) {
    __atomic_add_fetch(&s->lost, periods, __ATOMIC_RELAXED);
    return;
  }
  uint64_t lo, hi;
  unpack_bounds(__atomic_load_n(&s->bounds, __ATOMIC_ACQUIRE), &lo, &hi);
  int walkable = sp >= lo && sp < hi && (sp & 7) == 0;
  if (!walkable) {
    __atomic_store_n(&s->hint_sp, sp, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->unwalked, 1, __ATOMIC_RELAXED);
    /* Have the collector find this stack now, not at its next scan: a
     * busy thread's samples are walked from the next one on. */
    if (!__atomic_exchange_n(&s->hint_sent, 1, __ATOMIC_ACQ_REL)) {
      uint64_t one = 1;
      ssize_t w = write(t->wake_fd, &one, sizeof one);
      (void)w;
    }
  }

  writer_t w = {.data = s->data, .mask = s->data_size - 1, .pos = head + 8};
  put(&w, s->tid);                                  /* id */
  put(&w, (uint64_t)s->tid << 32 | t->pid);         /* pid, tid */
  put(&w, kf_now_ns());                             /* time */
  put(&w, periods);
  uint64_t nr_at = w.pos;
  put(&w, 0);                                       /* nr, set below */
  put(&w, (uint64_t)PERF_CONTEXT_USER);
  put(&w, ip);
  uint64_t nr = 2, chain_end = sp;
  int whole_chain = 0; /* the walk reached the thread's first frame */
  /* The frame-pointer chain as the kernel's perf callchain walks it, but
   * only up the stack and only inside it: every link is read from within
   * [sp, hi) and each one must be above the last. */
  for (uint64_t fp = bp; walkable && nr < KF_TIMER_MAX_FRAMES;) {
    if (fp < chain_end || (fp & 7) != 0 || fp > hi - 16) {
      /* A thread's first frame links to 0. A leaf without a frame pointer
       * (glibc's memmove) may hold 0 in bp for its own use: a chain of the
       * leaf alone is never taken for a whole one. */
      whole_chain = fp == 0 && nr > 2;
      break;
    }
    uint64_t next = stack_word(fp), ret = stack_word(fp + 8);
    put(&w, ret);
    nr++;
    chain_end = fp + 16;
    fp = next;
  }
  *(uint64_t *)(void *)(w.data + (nr_at & w.mask)) = nr;

  if (t->info.layout.user_regs) {
    put(&w, PERF_SAMPLE_REGS_ABI_64);
    put(&w, bp); /* in KF_REG_* order */
    put(&w, sp);
    put(&w, ip);
    uint64_t copy = 0;
    if (walkable) {
      /* To the end of the chain, when it ended where a thread's chain does
       * (a frame pointer of 0). A chain cut short by a frame without a
       * frame pointer gets the whole copy: the collector unwinds it with
       * DWARF and walks on from where frame pointers are kept again. */
      uint64_t end = !whole_chain ? sp + t->copy_max
                     : chain_end > sp + MIN_STACK_COPY ? chain_end : sp + MIN_STACK_COPY;
      if (end > sp + t->copy_max) end = sp + t->copy_max;
      if (end > hi) end = hi;
      copy = (end - sp) & ~(uint64_t)7;
    }
    put(&w, copy);
    if (copy) {
      for (uint64_t a = sp; a < sp + copy; a += 8) put(&w, stack_word(a));
      put(&w, copy); /* dyn_size */
    }
  }
  struct perf_event_header h = {.type = PERF_RECORD_SAMPLE,
                                .misc = PERF_RECORD_MISC_USER,
                                .size = (uint16_t)(w.pos - head)};
  uint64_t word;
  memcpy(&word, &h, 8);
  *(uint64_t *)(void *)(w.data + (head & w.mask)) = word;
  /* Release: the record's bytes before the head that covers them. */
  __atomic_store_n(&meta->data_head, w.pos, __ATOMIC_RELEASE);
  if (w.pos - tail >= s->data_size / 2 &&
      !__atomic_exchange_n(&s->wake_sent, 1, __ATOMIC_ACQ_REL)) {
    uint64_t one = 1;
    ssize_t n = write(t->wake_fd, &one, sizeof one);
    (void)n; /* a full eventfd is awake already */
  }
}

static void on_signal(int signo, siginfo_t *si, void *ucontext) {
  (void)signo;
  int saved_errno = errno;
  /* Counted before `active` is read: disable() clears `active`, then waits
   * for the count to reach zero, so no handler still holds what it frees. */
  __atomic_add_fetch(&inflight, 1, __ATOMIC_SEQ_CST);
  kf_timer_t *t = __atomic_load_n(&active, __ATOMIC_SEQ_CST);
  /* Only our timers' signals: sigqueue() and kill() of the same number by
   * someone else carry another si_code, and the slot must be this thread's. */
  if (t && si->si_code == SI_TIMER) {
    unsigned index = (unsigned)si->si_value.sival_int;
    slot_t *s = index < KF_TIMER_MAX_THREADS
                    ? __atomic_load_n(&t->slots[index], __ATOMIC_ACQUIRE)
                    : NULL;
    if (s && s->tid == current_tid()) {
      int overrun = si->si_overrun;
      uint64_t periods = 1 + (overrun > 0 ? (uint64_t)overrun : 0);
      /* The kernel entered this handler as a call from the restorer. */
      uint64_t restorer = (uint64_t)(uintptr_t)__builtin_return_address(0);
      take_sample(t, s, periods < MAX_PERIODS ? periods : MAX_PERIODS, ucontext, restorer);
    }
  }
  __atomic_sub_fetch(&inflight, 1, __ATOMIC_SEQ_CST);
  errno = saved_errno;
}

/* ---- slots ------------------------------------------------------------- */

static void add_slot_stats(kf_timer_stats_t *st, const slot_t *s) {
  st->lost += __atomic_load_n(&s->lost, __ATOMIC_RELAXED);
  st->unwalked += __atomic_load_n(&s->unwalked, __ATOMIC_RELAXED);
  st->over_handler += __atomic_load_n(&s->over_handler, __ATOMIC_RELAXED);
  st->corrupt += s->ring.corrupt;
}

static void free_slot(kf_timer_t *t, slot_t *s) {
  add_slot_stats(&t->stats, s);
  kf_ring_destroy(&s->ring);
  if (s->meta) munmap(s->meta, s->map_size);
  free(s);
}

/* Frees the slots of ended threads once every handler that began before
 * they left slots[] has returned: one moment with none under way is enough,
 * as a handler counts itself before it reads slots[]. */
static void free_dead(kf_timer_t *t) {
  if (!t->dead || __atomic_load_n(&inflight, __ATOMIC_SEQ_CST) != 0) return;
  while (t->dead) {
    slot_t *s = t->dead;
    t->dead = s->next_dead;
    free_slot(t, s);
  }
}

static void delete_timer(slot_t *s) {
  if (!s->armed) return;
  timer_delete(s->timer);
  s->armed = 0;
}

/* The thread ended: no more samples can come from it. */
static void retire(kf_timer_t *t, slot_t *s) {
  delete_timer(s);
  __atomic_store_n(&t->slots[s->index], NULL, __ATOMIC_SEQ_CST);
  s->next_dead = t->dead;
  t->dead = s;
}

/* Gives `tid` a ring and a timer. Returns 0, 1 when the thread is gone, or
 * -errno. */
static int arm(kf_timer_t *t, uint32_t tid, uint64_t hint_sp) {
  uint32_t index = 0;
  while (index < t->nslots && t->slots[index]) index++;
  if (index == KF_TIMER_MAX_THREADS) return -EAGAIN;
  slot_t *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->tid = tid;
  s->index = index;
  s->hint_sp = hint_sp;
  s->data_size = (uint64_t)t->info.ring_pages * t->page_size;
  s->map_size = t->page_size + s->data_size;
  /* Populated: the handler should not take page faults in the ring. */
  void *map = mmap(NULL, s->map_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (map == MAP_FAILED) {
    free(s);
    return -errno;
  }
  s->meta = map;
  s->meta->data_offset = t->page_size;
  s->meta->data_size = s->data_size;
  s->data = (unsigned char *)map + t->page_size;
  int rc = kf_ring_init(&s->ring, map, s->map_size, t->page_size);
  if (rc != 0) {
    free_slot(t, s);
    return rc;
  }
  __atomic_store_n(&t->slots[index], s, __ATOMIC_RELEASE);
  if (index == t->nslots) t->nslots++;

  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = t->stats.signo;
  ev.sigev_value.sival_int = (int)index;
  ev.sigev_notify_thread_id = (pid_t)tid;
  if (timer_create(thread_cpu_clock(tid), &ev, &s->timer) != 0) {
    int e = errno;
    __atomic_store_n(&t->slots[index], NULL, __ATOMIC_SEQ_CST);
    s->next_dead = t->dead; /* a handler may have read it: the grace rule */
    t->dead = s;
    /* EINVAL: the thread's clock is gone with the thread. */
    return e == EINVAL || e == ESRCH ? 1 : -e;
  }
  s->armed = 1;
  struct itimerspec its = {
      .it_interval = {.tv_sec = (time_t)(t->period_ns / 1000000000ULL),
                      .tv_nsec = (long)(t->period_ns % 1000000000ULL)}};
  its.it_value = its.it_interval;
  if (timer_settime(s->timer, 0, &its, NULL) != 0) {
    int e = errno;
    retire(t, s);
    return -e;
  }
  t->stats.armed++;
  return 0;
}

/* The sp of a thread blocked in the kernel, from /proc/self/task/TID/syscall
 * ("nr args... sp pc", or "-1 sp pc"; "running" for a running thread), or 0. */
static uint64_t blocked_sp(uint32_t tid) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/self/task/%u/syscall", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char *words[10];
  int count = 0;
  for (char *save = NULL, *w = strtok_r(buf, " \n", &save); w && count < 10;
       w = strtok_r(NULL, " \n", &save))
    words[count++] = w;
  if (count != 3 && count != 9) return 0;
  return strtoull(words[count - 2], NULL, 16);
}

static int by_value(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a & ~MATCHED, y = *(const uint32_t *)b & ~MATCHED;
  return x < y ? -1 : x > y;
}

/* The threads of /proc/self/task into t->tids, sorted. */
static int list_threads(kf_timer_t *t) {
  DIR *dir = opendir("/proc/self/task");
  if (!dir) return errno == EMFILE || errno == ENFILE ? -errno : -KF_ERR_NO_THREADS;
  t->ntids = 0;
  int rc = 0;
  struct dirent *d;
  while ((d = readdir(dir)) != NULL) {
    long tid = atol(d->d_name);
    if (tid <= 0 || tid >= (long)MATCHED) continue;
    if (kf_grow((void **)&t->tids, &t->tids_cap, t->ntids + 1, sizeof(uint32_t), 64)) {
      rc = -ENOMEM;
      break;
    }
    t->tids[t->ntids++] = (uint32_t)tid;
  }
  closedir(dir);
  qsort(t->tids, t->ntids, sizeof(uint32_t), by_value);
  return rc;
}

/* Stack bounds for the threads whose handler (or blocked_sp) left an sp. */
static void find_stacks(kf_timer_t *t) {
  kf_maps_t maps;
  int loaded = 0;
  for (uint32_t i = 0; i < t->nslots; i++) {
    slot_t *s = t->slots[i];
    uint64_t sp = s ? __atomic_exchange_n(&s->hint_sp, 0, __ATOMIC_RELAXED) : 0;
    if (!sp) continue;
    __atomic_store_n(&s->hint_sent, 0, __ATOMIC_RELEASE);
    if (!loaded && kf_maps_load(&maps) != 0) return; /* tried again next scan */
    loaded = 1;
    const kf_mapping_t *m = kf_maps_find(&maps, sp);
    if (m && m->read && m->write)
      __atomic_store_n(&s->bounds, pack_bounds(m->start, m->end), __ATOMIC_RELEASE);
  }
  if (loaded) kf_maps_free(&maps);
}

/* Arms every listed thread without a slot, retires every slot whose thread
 * is no longer listed. Returns 0 or the error of the first thread that could
 * not be armed (the others are still tried). */
static int scan(kf_timer_t *t) {
  int rc = list_threads(t);
  if (rc != 0) return rc;
  for (uint32_t i = 0; i < t->nslots; i++) {
    slot_t *s = t->slots[i];
    if (!s) continue;
    uint32_t *found = bsearch(&s->tid, t->tids, t->ntids, sizeof(uint32_t), by_value);
    if (found) *found |= MATCHED;
    else retire(t, s);
  }
  uint32_t self = current_tid();
  int first_error = 0;
  for (size_t i = 0; i < t->ntids; i++) {
    uint32_t tid = t->tids[i];
    if (tid & MATCHED) continue;
    /* This thread is running, so /proc has no sp for it: a local's address
     * is in its stack. */
    uint64_t sp = tid == self ? (uint64_t)(uintptr_t)&sp : blocked_sp(tid);
    int armed = arm(t, tid, sp);
    if (armed < 0) {
      t->stats.unarmed++;
      t->stats.arm_errno = -armed;
      if (!first_error) first_error = armed;
    }
  }
  find_stacks(t);
  return first_error;
}

/* ---- the signal ---------------------------------------------------------- */

/* The highest real-time signal nobody handles, ignores or queued: glibc keeps
 * the lowest ones for itself (below SIGRTMIN), and libraries that take one
 * tend to take SIGRTMIN + n. */
static int reserve_signal(kf_timer_t *t) {
  for (int sig = SIGRTMAX; sig >= SIGRTMIN; sig--) {
    struct sigaction old;
    if (sigaction(sig, NULL, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    /* V8's profiler (SIGPROF) then samples the app, not this handler. */
    sigaddset(&sa.sa_mask, SIGPROF);
    if (sigaction(sig, &sa, NULL) != 0) return -errno;
    t->old_action = old;
    t->stats.signo = sig;
    t->installed = 1;
    return 0;
  }
  return -KF_ERR_NO_SIGNAL;
}

/* ---- the interface ------------------------------------------------------- */

int kf_timer_open(const kf_sampler_opts_t *opts, kf_timer_t **out,
                  int *sys_errno) {
  *sys_errno = 0;
#if !defined(__x86_64__)
  (void)opts, (void)out;
  *sys_errno = ENOSYS; /* the handler reads x86-64 registers only */
  return -KF_ERR_TIMER;
#else
  if (__atomic_load_n(&active, __ATOMIC_SEQ_CST)) return -KF_ERR_RUNNING;
  kf_timer_t *t = calloc(1, sizeof(*t));
  if (!t) return -ENOMEM;
  t->wake_fd = -1;
  t->page_size = (size_t)sysconf(_SC_PAGESIZE);
  t->pid = (uint32_t)getpid();
  t->period_ns = 1000000000ULL / (opts->hz ? opts->hz : 99);
  uint32_t pages = opts->ring_pages ? opts->ring_pages
                 : opts->stack_bytes ? DEFAULT_RING_PAGES_WITH_STACK : MIN_RING_PAGES;
  t->info.ring_pages = pages < MIN_RING_PAGES ? MIN_RING_PAGES : pages;
  t->info.ring_pages_asked = t->info.ring_pages;
  t->info.max_stack = KF_TIMER_MAX_FRAMES;
  t->info.cpus = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
  t->info.layout.periods = 1;
  /* header, id, pid/tid, time, periods, nr, then the callchain (the user
   * marker and ip among its KF_TIMER_MAX_FRAMES entries) */
  uint64_t fixed = 6 * 8 + KF_TIMER_MAX_FRAMES * 8;
  uint32_t stack_bytes = opts->stack_bytes & ~7u;
  if (stack_bytes) {
    uint64_t half = (uint64_t)t->info.ring_pages * t->page_size / 2;
    fixed += 4 * 8 + 2 * 8; /* abi, 3 registers, size, dyn_size */
    t->copy_max = stack_bytes;
    if (t->copy_max > half - fixed) t->copy_max = (half - fixed) & ~7ULL;
    t->info.stack_bytes = stack_bytes;
    t->info.layout.user_regs = KF_SAMPLER_USER_REGS;
  }
  t->record_max = fixed + t->copy_max;

  int rc;
  t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (t->wake_fd < 0) {
    rc = -errno;
    goto fail;
  }
  if ((rc = reserve_signal(t)) != 0) goto fail;
  __atomic_store_n(&active, t, __ATOMIC_SEQ_CST);
  rc = scan(t);
  t->info.threads = (uint32_t)t->stats.armed;
  if (t->stats.armed == 0) {
    if (rc == 0) rc = -KF_ERR_NO_THREADS;
    goto fail;
  }
  *out = t;
  return 0;
fail:
  if (rc < 0 && -rc < KF_ERR_BASE) {
    *sys_errno = -rc;
    if (rc == -EMFILE || rc == -ENFILE) rc = -KF_ERR_FD_LIMIT;
    /* timer_create or sigaction refused (a seccomp filter, the
     * RLIMIT_SIGPENDING that each timer counts against) */
    else if (rc != -ENOMEM) rc = -KF_ERR_TIMER;
  }
  kf_timer_close(t);
  return rc;
#endif
}

const kf_sampler_info_t *kf_timer_info(const kf_timer_t *t) { return &t->info; }

int kf_timer_wake_fd(const kf_timer_t *t) { return t->wake_fd; }

void kf_timer_scan(kf_timer_t *t) {
  if (t->installed) scan(t);
}

void kf_timer_find_stacks(kf_timer_t *t) {
  if (t->installed) find_stacks(t);
}

static size_t drain_list(slot_t *s, kf_ring_record_fn fn, void *ctx) {
  size_t n = 0;
  for (; s; s = s->next_dead) n += kf_ring_drain(&s->ring, fn, ctx);
  return n;
}

size_t kf_timer_drain(kf_timer_t *t, kf_ring_record_fn fn, void *ctx) {
  uint64_t v;
  ssize_t r = read(t->wake_fd, &v, sizeof v); /* reset; may be empty */
  (void)r;
  size_t n = 0;
  for (uint32_t i = 0; i < t->nslots; i++) {
    slot_t *s = t->slots[i];
    if (!s) continue;
    /* Cleared first: a ring that fills again while we drain wakes us again. */
    __atomic_store_n(&s->wake_sent, 0, __ATOMIC_RELEASE);
    n += kf_ring_drain(&s->ring, fn, ctx);
  }
  n += drain_list(t->dead, fn, ctx);
  free_dead(t);
  return n;
}

void kf_timer_disable(kf_timer_t *t) {
  if (!t->installed) return;
  for (uint32_t i = 0; i < t->nslots; i++)
    if (t->slots[i]) delete_timer(t->slots[i]);
  /* Ignoring a signal drops every instance still pending, on every thread
   * (POSIX; Linux does so in sigaction): none can reach the previous
   * action, which for a real-time signal is usually to end the process. */
  struct sigaction ignore;
  memset(&ignore, 0, sizeof ignore);
  ignore.sa_handler = SIG_IGN;
  sigaction(t->stats.signo, &ignore, NULL);
  __atomic_store_n(&active, NULL, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&inflight, __ATOMIC_SEQ_CST) != 0) sched_yield();
  sigaction(t->stats.signo, &t->old_action, NULL);
  t->installed = 0;
}

void kf_timer_stats(const kf_timer_t *t, kf_timer_stats_t *out) {
  *out = t->stats;
  for (uint32_t i = 0; i < t->nslots; i++)
    if (t->slots[i]) add_slot_stats(out, t->slots[i]);
  for (const slot_t *s = t->dead; s; s = s->next_dead) add_slot_stats(out, s);
}

void kf_timer_close(kf_timer_t *t) {
  if (!t) return;
  kf_timer_disable(t);
  for (uint32_t i = 0; i < t->nslots; i++)
    if (t->slots[i]) free_slot(t, t->slots[i]);
  while (t->dead) {
    slot_t *s = t->dead;
    t->dead = s->next_dead;
    free_slot(t, s);
  }
  if (t->wake_fd >= 0) close(t->wake_fd);
  free(t->tids);
  free(t);
}

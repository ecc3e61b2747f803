/* The timer sampler (timersampler.c) for real: its timers, its signal and
 * its handler, in this process, with threads that burn CPU. The test's main
 * thread plays the collector (scan, drain, disable). Also run under ASan,
 * UBSan and TSan (scripts/test.sh). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "unwind/dwarfunwind.h"
#include "util/error.h"
#include "sample/ring.h"
#include "sample/timersampler.h"
#include "kftest.h"

#define MAX_TIDS 64

/* What the drained samples said, per thread. */
typedef struct seen {
  const kf_ring_layout_t *layout;
  uint32_t pid;
  uint32_t tids[MAX_TIDS];
  uint64_t periods[MAX_TIDS], records_of[MAX_TIDS];
  uint64_t via_spinner[MAX_TIDS]; /* samples whose chain reaches spinner */
  uint64_t records, bad, stack_copies;
} seen_t;

static int stop_spinning; /* atomics: the spinners read it */
static uint64_t sink; /* keeps the spinning; atomic: threads share it */

__attribute__((noinline)) static uint64_t spin_inner(uint64_t x) {
  for (int i = 0; i < 1000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  __asm__ volatile("" ::: "memory");
  return x;
}

__attribute__((noinline)) static void spin_outer(void) {
  uint64_t x = 1;
  while (!__atomic_load_n(&stop_spinning, __ATOMIC_RELAXED)) x = spin_inner(x);
  __atomic_store_n(&sink, x, __ATOMIC_RELAXED);
}

static uint32_t gettid_(void) { return (uint32_t)syscall(SYS_gettid); }

/* arg: where to put the thread's tid, or NULL */
static void *spinner(void *arg) {
  if (arg) __atomic_store_n((uint32_t *)arg, gettid_(), __ATOMIC_RELEASE);
  spin_outer();
  return NULL;
}

static void on_record(const struct perf_event_header *h, void *ctx) {
  seen_t *s = ctx;
  s->records++;
  kf_ring_sample_t rs;
  if (h->type != PERF_RECORD_SAMPLE || kf_ring_parse_sample(h, s->layout, &rs) != 0 ||
      rs.pid != s->pid || rs.nr < 2 || rs.ips[0] != (uint64_t)PERF_CONTEXT_USER) {
    s->bad++;
    return;
  }
  if (rs.stack_len) s->stack_copies++;
  int i = 0;
  while (i < MAX_TIDS && s->tids[i] && s->tids[i] != rs.tid) i++;
  if (i == MAX_TIDS) return;
  s->tids[i] = rs.tid;
  s->periods[i] += rs.periods;
  s->records_of[i]++;
  /* The return address into spinner, after its call of spin_outer: found
   * by walking spin_outer's frame (spin_inner, a leaf, keeps none). */
  for (uint32_t k = 2; k < rs.nr; k++)
    if (rs.ips[k] > (uint64_t)(uintptr_t)spinner &&
        rs.ips[k] < (uint64_t)(uintptr_t)spinner + 256)
      s->via_spinner[i]++;
}

static int index_of(const seen_t *s, uint32_t tid) {
  for (int i = 0; i < MAX_TIDS; i++)
    if (s->tids[i] == tid) return i;
  return -1;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Runs the collector's loop for `ms`, scanning every 10 ms. */
static void collect(kf_timer_t *t, seen_t *s, long ms) {
  for (long waited = 0; waited < ms; waited += 10) {
    sleep_ms(10);
    kf_timer_scan(t);
    kf_timer_drain(t, on_record, s);
  }
}

static uint64_t thread_cpu_ns(pthread_t th) {
  clockid_t clock;
  struct timespec ts;
  CHECK(pthread_getcpuclockid(th, &clock) == 0);
  CHECK(clock_gettime(clock, &ts) == 0);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static kf_timer_t *open_timer(uint32_t hz, uint32_t stack_bytes) {
  kf_sampler_opts_t o = {.hz = hz, .ring_pages = 16, .stack_bytes = stack_bytes};
  kf_timer_t *t = NULL;
  int sys_errno = 0;
  int rc = kf_timer_open(&o, &t, &sys_errno);
  if (rc != 0) fprintf(stderr, "  kf_timer_open: %d (%s)\n", rc, strerror(sys_errno));
  CHECK(rc == 0 && t);
  return t;
}

static void busy_threads_sampled(void) {
  __atomic_store_n(&stop_spinning, 0, __ATOMIC_RELAXED);
  pthread_t th[2];
  uint32_t tids[2] = {0, 0};
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, spinner, &tids[i]) == 0);
  sleep_ms(20); /* both running when the timers are armed */
  uint64_t cpu0[2] = {thread_cpu_ns(th[0]), thread_cpu_ns(th[1])};
  kf_timer_t *t = open_timer(499, 4096);
  const kf_sampler_info_t *info = kf_timer_info(t);
  CHECK(info->threads >= 3 && info->layout.periods == 1 && info->layout.user_regs == 3);
  seen_t s = {.layout = &info->layout, .pid = (uint32_t)getpid()};
  collect(t, &s, 600);
  kf_timer_disable(t);
  uint64_t cpu[2] = {thread_cpu_ns(th[0]) - cpu0[0], thread_cpu_ns(th[1]) - cpu0[1]};
  kf_timer_drain(t, on_record, &s);
  __atomic_store_n(&stop_spinning, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  kf_timer_stats_t st;
  kf_timer_stats(t, &st);
  CHECK_EQ_U64(s.bad, 0);
  CHECK_EQ_U64(st.corrupt, 0);
  CHECK_EQ_U64(st.lost, 0);
  CHECK(s.stack_copies > 0);
  for (int k = 0; k < 2; k++) {
    int i = index_of(&s, tids[k]);
    CHECK(i >= 0);
    /* The periods stand for the thread's CPU time (within 20%: the first
     * and last periods are partial), and the frame chain is walked through
     * spinner's frame in most samples. */
    uint64_t expected = cpu[k] * 499 / 1000000000ULL;
    CHECK(s.periods[i] * 10 >= expected * 8 && s.periods[i] * 10 <= expected * 12);
    CHECK(s.via_spinner[i] * 2 >= s.records_of[i]);
  }
  kf_timer_close(t);
}

static int short_spinner_go; /* atomic: set once the thread's timer is armed */

static void *short_spinner(void *arg) {
  uint32_t *tid = arg;
  __atomic_store_n(tid, gettid_(), __ATOMIC_RELEASE);
  /* Its CPU time counts from when it is armed: on a loaded machine the
   * scan that arms it may come late. */
  while (!__atomic_load_n(&short_spinner_go, __ATOMIC_ACQUIRE)) sched_yield();
  uint64_t x = 1, until = 0;
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  until = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec + 150000000ULL;
  for (;;) {
    x = spin_inner(x);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    if ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec > until) break;
  }
  __atomic_store_n(&sink, x, __ATOMIC_RELAXED);
  return NULL;
}

static int count_timers(void) {
  FILE *f = fopen("/proc/self/timers", "r");
  if (!f) return -1;
  char line[256];
  int n = 0;
  while (fgets(line, sizeof line, f)) n += strncmp(line, "ID:", 3) == 0;
  fclose(f);
  return n;
}

static void later_threads_armed_ended_let_go(void) {
  kf_timer_t *t = open_timer(999, 1024);
  seen_t s = {.layout = &kf_timer_info(t)->layout, .pid = (uint32_t)getpid()};
  int timers_before = count_timers();
  uint32_t tid = 0;
  pthread_t th;
  __atomic_store_n(&short_spinner_go, 0, __ATOMIC_RELAXED);
  CHECK(pthread_create(&th, NULL, short_spinner, &tid) == 0);
  for (int k = 0; k < 500 && count_timers() <= timers_before; k++) {
    sleep_ms(2);
    kf_timer_scan(t);
  }
  __atomic_store_n(&short_spinner_go, 1, __ATOMIC_RELEASE);
  collect(t, &s, 100);
  int timers_during = count_timers();
  CHECK(timers_during > timers_before);
  pthread_join(th, NULL);
  collect(t, &s, 30);
  CHECK(count_timers() < timers_during); /* its timer deleted */
  int i = index_of(&s, __atomic_load_n(&tid, __ATOMIC_ACQUIRE));
  CHECK(i >= 0 && s.periods[i] >= 50); /* ~150 ms of CPU at 999 Hz */
  kf_timer_close(t);
  CHECK(count_timers() == 0);
}

static int count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return -1;
  int n = 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

/* Bytes of address space mapped. Not a count of lines: malloc splits and
 * joins its own mappings as it goes, and the kernel merges neighbours. */
static uint64_t mapped_bytes(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  uint64_t total = 0;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2) total += hi - lo;
  }
  fclose(f);
  return total;
}

static int handler_is_default(int sig) {
  struct sigaction sa;
  CHECK(sigaction(sig, NULL, &sa) == 0);
  return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL;
}

static void cycles_leave_nothing(void) {
  __atomic_store_n(&stop_spinning, 0, __ATOMIC_RELAXED);
  pthread_t th;
  CHECK(pthread_create(&th, NULL, spinner, NULL) == 0); /* signals in flight */
  int fds = count_dir("/proc/self/fd"), threads = count_dir("/proc/self/task");
  uint64_t mapped = 0, ring_bytes = 0;
  seen_t s = {.pid = (uint32_t)getpid()};
  int cycles = getenv("KFLAME_TIMER_CYCLES") ? atoi(getenv("KFLAME_TIMER_CYCLES")) : 1000;
  for (int i = 0; i < cycles; i++) {
    kf_timer_t *t = open_timer(999, 1024);
    s.layout = &kf_timer_info(t)->layout;
    ring_bytes = (kf_timer_info(t)->ring_pages + 1) * (uint64_t)getpagesize();
    if (i % 50 == 0) sleep_ms(2);
    kf_timer_scan(t);
    kf_timer_drain(t, on_record, &s);
    kf_timer_close(t);
    if (i == 9) mapped = mapped_bytes(); /* after malloc settles */
  }
  /* On a loaded machine the spinner may not have run long enough in the
   * short cycles for a timer to fire: a few longer ones, so the cycles
   * above are known to have run with signals about. */
  for (int k = 0; s.records == 0 && k < 100; k++) {
    kf_timer_t *t = open_timer(999, 1024);
    s.layout = &kf_timer_info(t)->layout;
    sleep_ms(20);
    kf_timer_scan(t);
    kf_timer_drain(t, on_record, &s);
    kf_timer_close(t);
  }
  __atomic_store_n(&stop_spinning, 1, __ATOMIC_RELAXED);
  pthread_join(th, NULL);
  CHECK_EQ_U64(s.bad, 0);
  CHECK(s.records > 0);
  CHECK_EQ_U64(count_dir("/proc/self/fd"), fds);
  CHECK_EQ_U64(count_dir("/proc/self/task"), threads - 1);
  CHECK_EQ_U64(count_timers(), 0);
  CHECK(handler_is_default(SIGRTMAX));
  uint64_t mapped_after = mapped_bytes();
#if !defined(__SANITIZE_THREAD__) /* TSan maps shadow memory as it goes */
  /* One ring left behind per cycle would be hundreds of MiB; allow malloc
   * a few rings' worth of slack. */
  if (mapped_after > mapped + 8 * ring_bytes)
    fprintf(stderr, "  mapped %llu bytes at cycle 10, %llu after\n",
            (unsigned long long)mapped, (unsigned long long)mapped_after);
  CHECK(mapped_after <= mapped + 8 * ring_bytes); /* no ring left mapped */
#else
  (void)mapped_after, (void)mapped, (void)ring_bytes;
#endif
}

static volatile sig_atomic_t got[4];
static void on_app_signal(int sig) {
  if (sig == SIGRTMAX) got[0]++;
  else if (sig == SIGRTMAX - 2) got[1]++;
  else if (sig == SIGPROF) got[2]++;
}

static void install(int sig) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_app_signal;
  CHECK(sigaction(sig, &sa, NULL) == 0);
}

static void neighbours_untouched(void) {
  install(SIGRTMAX);     /* taken: the sampler must pick another */
  install(SIGRTMAX - 2); /* a neighbour */
  install(SIGPROF);      /* V8's profiler's */
  __atomic_store_n(&stop_spinning, 0, __ATOMIC_RELAXED);
  pthread_t th;
  CHECK(pthread_create(&th, NULL, spinner, NULL) == 0);
  kf_timer_t *t = open_timer(999, 0);
  kf_timer_stats_t st;
  kf_timer_stats(t, &st);
  CHECK(st.signo == SIGRTMAX - 1);
  seen_t s = {.layout = &kf_timer_info(t)->layout, .pid = (uint32_t)getpid()};
  for (int i = 0; i < 20; i++) {
    raise(SIGRTMAX);
    raise(SIGRTMAX - 2);
    raise(SIGPROF);
    /* Someone else's signal of our number is not a sample. */
    union sigval v = {.sival_int = 0};
    sigqueue(getpid(), SIGRTMAX - 1, v);
    collect(t, &s, 10);
  }
  kf_timer_close(t);
  __atomic_store_n(&stop_spinning, 1, __ATOMIC_RELAXED);
  pthread_join(th, NULL);
  CHECK(got[0] == 20 && got[1] == 20 && got[2] == 20);
  CHECK(s.records > 0 && s.bad == 0);
  CHECK(handler_is_default(SIGRTMAX - 1));
  struct sigaction sa;
  CHECK(sigaction(SIGRTMAX, NULL, &sa) == 0 && sa.sa_handler == on_app_signal);
}

/* Two signals pending at once come lowest number first, each on top of the
 * last before any handler runs: a sample whose signal lands on another
 * handler's first instruction is of the context that handler's frame
 * holds, not of the handler. A thread holds back its timer's signal and a
 * SIGPROF until both are pending, then lets them in with one call. */
static void other_handler(int sig) {
  (void)sig;
  __atomic_add_fetch(&got[3], 1, __ATOMIC_RELAXED);
}

static int held_signo;
static int held_go; /* atomic: 1 once the timer is armed, 2 to end */

static void *held_signals(void *arg) {
  uint32_t *tid = arg;
  sigset_t both, old, pending;
  sigemptyset(&both);
  sigaddset(&both, SIGPROF);
  sigaddset(&both, held_signo);
  pthread_sigmask(SIG_BLOCK, &both, &old);
  __atomic_store_n(tid, gettid_(), __ATOMIC_RELEASE);
  while (!__atomic_load_n(&held_go, __ATOMIC_ACQUIRE)) {}
  for (int round = 0; round < 5; round++) {
    uint64_t x = 1;
    do {
      x = spin_inner(x);
      sigpending(&pending);
    } while (!sigismember(&pending, held_signo));
    __atomic_store_n(&sink, x, __ATOMIC_RELAXED);
    syscall(SYS_tgkill, getpid(), gettid_(), SIGPROF);
    pthread_sigmask(SIG_SETMASK, &old, NULL); /* both come in here */
    pthread_sigmask(SIG_BLOCK, &both, NULL);
  }
  return NULL;
}

static void on_held_record(const struct perf_event_header *h, void *ctx) {
  seen_t *s = ctx;
  kf_ring_sample_t rs;
  if (h->type == PERF_RECORD_SAMPLE && kf_ring_parse_sample(h, s->layout, &rs) == 0 &&
      rs.nr >= 2 && rs.ips[1] >= (uint64_t)(uintptr_t)other_handler &&
      rs.ips[1] < (uint64_t)(uintptr_t)other_handler + 16)
    s->bad++; /* a sample of the other handler's entry */
  on_record(h, ctx);
}

static void sample_over_another_handler(void) {
  struct sigaction sa, old_sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = other_handler;
  CHECK(sigaction(SIGPROF, &sa, &old_sa) == 0);
  __atomic_store_n(&held_go, 0, __ATOMIC_RELAXED);
  kf_timer_stats_t st;
  /* The signal the sampler will take: open once to learn it. */
  kf_timer_t *probe = open_timer(999, 0);
  kf_timer_stats(probe, &st);
  kf_timer_close(probe);
  held_signo = st.signo;
  uint32_t tid = 0;
  pthread_t th;
  CHECK(pthread_create(&th, NULL, held_signals, &tid) == 0);
  while (!__atomic_load_n(&tid, __ATOMIC_ACQUIRE)) {}
  kf_timer_t *t = open_timer(999, 0);
  kf_timer_stats(t, &st);
  CHECK(st.signo == held_signo);
  __atomic_store_n(&held_go, 1, __ATOMIC_RELEASE);
  seen_t s = {.layout = &kf_timer_info(t)->layout, .pid = (uint32_t)getpid()};
  pthread_join(th, NULL);
  kf_timer_drain(t, on_held_record, &s);
  kf_timer_stats(t, &st);
  kf_timer_close(t);
  CHECK(sigaction(SIGPROF, &old_sa, NULL) == 0);
  CHECK(__atomic_load_n(&got[3], __ATOMIC_RELAXED) == 5);
  CHECK(s.records_of[index_of(&s, tid) < 0 ? 0 : index_of(&s, tid)] >= 5);
  CHECK_EQ_U64(s.bad, 0);
#if !defined(__SANITIZE_THREAD__)
  /* TSan holds signals back and calls handlers from its own frames: no
   * kernel frame of another handler is ever under ours there. */
  CHECK_EQ_U64(st.over_handler, 5);
#endif
}

static void *churn(void *arg) {
  (void)arg;
  /* allocation-heavy: a signal lands inside malloc and free */
  for (int i = 0; i < 2000; i++) {
    void *p[16];
    for (int k = 0; k < 16; k++) p[k] = malloc(64 + (size_t)k * 512);
    for (int k = 0; k < 16; k++) free(p[k]);
  }
  return NULL;
}

static void stress_threads_and_allocation(void) {
  kf_timer_t *t = open_timer(999, 2048);
  seen_t s = {.layout = &kf_timer_info(t)->layout, .pid = (uint32_t)getpid()};
  for (int round = 0; round < 40; round++) {
    pthread_t th[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&th[i], NULL, churn, NULL) == 0);
    if (round % 2) kf_timer_scan(t);
    kf_timer_drain(t, on_record, &s);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  }
  kf_timer_disable(t);
  kf_timer_drain(t, on_record, &s);
  kf_timer_stats_t st;
  kf_timer_stats(t, &st);
  kf_timer_close(t);
  CHECK_EQ_U64(s.bad, 0);
  CHECK_EQ_U64(st.corrupt, 0);
  CHECK(st.armed > 4);
  CHECK(count_timers() == 0);
}

static void second_open_refused(void) {
  kf_timer_t *t = open_timer(99, 0), *u = NULL;
  kf_sampler_opts_t o = {.hz = 99};
  int e;
  CHECK(kf_timer_open(&o, &u, &e) == -KF_ERR_RUNNING && !u);
  kf_timer_close(t);
}

/* glibc's memmove keeps no frame pointer: a frame-pointer walk from inside
 * it skips copier, its caller. */
static unsigned char copy_src[1 << 20], copy_dst[1 << 20];

__attribute__((noinline)) static void copier(void) {
  unsigned char *dst = copy_dst, *src = copy_src;
  __asm__ volatile("" : "+r"(dst), "+r"(src)::"memory"); /* a real call */
  memmove(dst, src, sizeof copy_src);
  __asm__ volatile("" ::"r"(dst) : "memory");
}

static void *copy_spinner(void *arg) {
  __atomic_store_n((uint32_t *)arg, gettid_(), __ATOMIC_RELEASE);
  while (!__atomic_load_n(&stop_spinning, __ATOMIC_RELAXED)) copier();
  return NULL;
}

/* What a spinner's samples are read with: the first member of the
 * drains' contexts below. */
typedef struct spin_seen {
  const kf_ring_layout_t *layout;
  kf_dwarf_t *dwarf;
  uint32_t tid;
} spin_seen_t;

/* Runs `spinner` (given where to put its tid) on a thread of its own for
 * 400 ms under a 999 Hz timer sampler copying `stack_bytes`, handing its
 * records to on_record(seen): `seen` starts with a spin_seen_t, filled
 * here (its dwarf for the caller to free). */
static void sample_spinner(void *(*spinner)(void *), uint32_t stack_bytes,
                           kf_ring_record_fn on_record, spin_seen_t *seen) {
  __atomic_store_n(&stop_spinning, 0, __ATOMIC_RELAXED);
  uint32_t tid = 0;
  pthread_t th;
  CHECK(pthread_create(&th, NULL, spinner, &tid) == 0);
  kf_timer_t *t = open_timer(999, stack_bytes);
  seen->layout = &kf_timer_info(t)->layout;
  seen->dwarf = kf_dwarf_new();
  CHECK(seen->dwarf != NULL);
  for (int i = 0; i < 40; i++) {
    sleep_ms(10);
    seen->tid = __atomic_load_n(&tid, __ATOMIC_ACQUIRE);
    kf_timer_scan(t);
    kf_timer_drain(t, on_record, seen);
  }
  kf_timer_close(t);
  __atomic_store_n(&stop_spinning, 1, __ATOMIC_RELAXED);
  pthread_join(th, NULL);
}

typedef struct dwarf_seen {
  spin_seen_t head;
  uint64_t in_libc, copier_back, copier_in_chain;
} dwarf_seen_t;

static int in_copier(uint64_t a) {
  return a > (uint64_t)(uintptr_t)copier && a < (uint64_t)(uintptr_t)copier + 64;
}

static void on_copy_record(const struct perf_event_header *h, void *ctx) {
  dwarf_seen_t *s = ctx;
  kf_ring_sample_t rs;
  if (h->type != PERF_RECORD_SAMPLE || kf_ring_parse_sample(h, s->head.layout, &rs) != 0 ||
      rs.tid != s->head.tid || rs.nr < 3 || !rs.regs || !rs.stack_len)
    return;
  const uint64_t *user = rs.ips + 1;
  /* leaf outside this test binary: in glibc */
  if (user[0] >= (uint64_t)(uintptr_t)copier - (1 << 20) && user[0] < (uint64_t)(uintptr_t)copier + (1 << 20))
    return;
  s->in_libc++;
  for (uint32_t k = 1; k < rs.nr - 1; k++) s->copier_in_chain += in_copier(user[k]);
  kf_userstack_t st = {.ip = rs.regs[KF_REG_IP], .sp = rs.regs[KF_REG_SP], .bp = rs.regs[KF_REG_BP],
                       .bytes = rs.stack, .len = rs.stack_len};
  kf_dwarf_fix_t fix;
  if (kf_dwarf_fix(s->head.dwarf, &st, user, rs.nr - 1, &fix) && !fix.restart)
    for (size_t i = 0; i < fix.n; i++) s->copier_back += in_copier(fix.frames[i]);
}

static void dwarf_puts_back_memmoves_caller(void) {
#if defined(__SANITIZE_THREAD__)
  /* TSan's own memmove (with a frame pointer) stands in for glibc's. */
  fprintf(stderr, "  skipped under TSan: memmove is intercepted\n");
  return;
#endif
  dwarf_seen_t s = {0};
  sample_spinner(copy_spinner, 2048, on_copy_record, &s.head);
  const kf_dwarf_stats_t *ds = kf_dwarf_stats(s.head.dwarf);
  fprintf(stderr, "  %llu samples in glibc: copier in the walked chain %llu, put back %llu (tried %llu, broke %llu)\n",
          (unsigned long long)s.in_libc, (unsigned long long)s.copier_in_chain,
          (unsigned long long)s.copier_back, (unsigned long long)ds->tried, (unsigned long long)ds->broke);
  CHECK(s.in_libc >= 20);
  CHECK(s.copier_in_chain * 10 < s.in_libc); /* the walk skips it */
  CHECK(s.copier_back * 100 >= s.in_libc * 95); /* DWARF puts it back */
  kf_dwarf_free(s.head.dwarf);
}

#if defined(__x86_64__)
/* A leaf without a frame pointer that holds 0 in rbp for its own use (as
 * glibc's functions may): spins `n` times with rbp = 0, its unwind tables
 * saying where the caller's rbp and return address are. */
__asm__(".text\n"
        ".type zero_bp_spin, @function\n"
        "zero_bp_spin:\n"
        ".cfi_startproc\n"
        "  push %rbp\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  .cfi_rel_offset %rbp, 0\n"
        "  xor %ebp, %ebp\n"
        "1: dec %rdi\n"
        "  jnz 1b\n"
        "  pop %rbp\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  .cfi_restore %rbp\n"
        "  ret\n"
        ".cfi_endproc\n"
        ".size zero_bp_spin, .-zero_bp_spin\n");
void zero_bp_spin(uint64_t n);

__attribute__((noinline)) static void zero_bp_caller(void) {
  zero_bp_spin(1000000);
  __asm__ volatile("" ::: "memory"); /* a real call, not a tail jump */
}

static void *zero_bp_spinner(void *arg) {
  __atomic_store_n((uint32_t *)arg, gettid_(), __ATOMIC_RELEASE);
  while (!__atomic_load_n(&stop_spinning, __ATOMIC_RELAXED)) zero_bp_caller();
  return NULL;
}

typedef struct zero_bp_seen {
  spin_seen_t head;
  uint64_t in_leaf, whole_copy, caller_back;
} zero_bp_seen_t;

static int in_zero_bp_caller(uint64_t a) {
  return a > (uint64_t)(uintptr_t)zero_bp_caller && a < (uint64_t)(uintptr_t)zero_bp_caller + 64;
}

static void on_zero_bp_record(const struct perf_event_header *h, void *ctx) {
  zero_bp_seen_t *s = ctx;
  kf_ring_sample_t rs;
  if (h->type != PERF_RECORD_SAMPLE || kf_ring_parse_sample(h, s->head.layout, &rs) != 0 ||
      rs.tid != s->head.tid || rs.nr < 2 || !rs.regs || !rs.stack_len)
    return; /* (no copy: taken before the thread's stack was found) */
  const uint64_t *user = rs.ips + 1;
  /* in the loop, rbp already 0 */
  if (rs.regs[KF_REG_BP] != 0 || user[0] < (uint64_t)(uintptr_t)zero_bp_spin ||
      user[0] >= (uint64_t)(uintptr_t)zero_bp_spin + 16)
    return;
  s->in_leaf++;
  s->whole_copy += rs.stack_len >= 2048;
  kf_userstack_t st = {.ip = rs.regs[KF_REG_IP], .sp = rs.regs[KF_REG_SP], .bp = 0,
                       .bytes = rs.stack, .len = rs.stack_len};
  kf_dwarf_fix_t fix;
  int back = 0;
  /* The caller, in the main program (this binary), comes back as the
   * frame the walk restarts from, or among the frames put back. */
  if (kf_dwarf_fix(s->head.dwarf, &st, user, rs.nr - 1, &fix)) {
    back = fix.restart && in_zero_bp_caller(fix.tail.ip);
    for (size_t i = 0; i < fix.n; i++) back |= in_zero_bp_caller(fix.frames[i]);
  }
  s->caller_back += back;
}
#endif

/* A chain of the leaf alone, ended by rbp 0, is not a thread's whole chain:
 * the sample keeps the whole copy, and DWARF finds the caller in it (with
 * the short copy a whole chain gets, the leaf was all the profile had). */
static void zero_bp_leaf_keeps_its_copy(void) {
#if !defined(__x86_64__)
  fprintf(stderr, "  skipped: x86-64 only\n");
#else
  zero_bp_seen_t s = {0};
  sample_spinner(zero_bp_spinner, 4096, on_zero_bp_record, &s.head);
  fprintf(stderr, "  %llu samples in the leaf with rbp 0: whole copy %llu, caller put back %llu\n",
          (unsigned long long)s.in_leaf, (unsigned long long)s.whole_copy,
          (unsigned long long)s.caller_back);
  CHECK(s.in_leaf >= 20);
  CHECK(s.whole_copy == s.in_leaf);
#if !defined(__SANITIZE_THREAD__) /* under TSan the unwind finds no caller here (not looked into) */
  CHECK(s.caller_back * 100 >= s.in_leaf * 95);
#endif
  kf_dwarf_free(s.head.dwarf);
#endif
}

static const kftest_case_t cases[] = {
    {"dwarf: the caller a frame-pointer walk skips under memmove put back", dwarf_puts_back_memmoves_caller},
    {"timer: a leaf holding 0 in rbp keeps the whole stack copy", zero_bp_leaf_keeps_its_copy},
    {"timer: busy threads sampled by their CPU time, frame chains walked", busy_threads_sampled},
    {"timer: threads started later armed, ended ones let go", later_threads_armed_ended_let_go},
    {"timer: open/close cycles leave no timer, fd, thread, mapping or handler", cycles_leave_nothing},
    {"timer: the app's handlers of other signals still run; the previous action comes back", neighbours_untouched},
    {"timer: a signal on top of another handler's frame samples the app's context", sample_over_another_handler},
    {"timer: stress: signals in malloc, threads starting and ending", stress_threads_and_allocation},
    {"timer: one sampler at a time", second_open_refused},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }

/*
 * switchcost: what perf events on a thread cost it at a context switch.
 * Two threads pinned to CPU 0 pass a byte back and forth through pipes
 * (each round trip is two context switches) for `seconds`, with the events
 * of `mode` open: none; a per-thread dummy event (one per thread and CPU,
 * as kflame and perf record -p open them); a per-thread cpu-clock event; a
 * per-thread cpu-clock event opened on any CPU (cpu -1); one cpu-clock
 * event per CPU (pid -1, needs root or CAP_PERFMON); for off-CPU profiles
 * per CPU (root): one context-switch event per CPU at 200 samples a second
 * (their rings drained by a third thread on another CPU), with a
 * PERF_RECORD_SWITCH_CPU_WIDE record per switch (kflame without tracefs),
 * or without records (what the event alone costs); or kflame's way, one
 * sched_switch tracepoint event per CPU whose program
 * (src/sample/switchin.c) samples 200 of this process's switches a second
 * and stamps their switch-ins. Prints the mean round trip in ns. Built and
 * run by bench/switchcost.js.
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sample/switchin.h"

static int to_peer[2], from_peer[2];
static pid_t peer_tid;

static void pin(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof set, &set);
}

static void *peer(void *arg) {
  (void)arg;
  pin();
  peer_tid = (pid_t)syscall(SYS_gettid);
  char c;
  while (read(to_peer[0], &c, 1) == 1 && c != 'q') {
    if (write(from_peer[1], &c, 1) != 1) break;
  }
  return NULL;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Opens one sampling event at 99 Hz and maps its ring, or exits 2. */
static void open_event(unsigned config, pid_t tid, int cpu) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = config;
  a.sample_period = config == PERF_COUNT_SW_DUMMY ? 1 : 1000000000 / 99;
  a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.watermark = 1;
  int fd = (int)syscall(SYS_perf_event_open, &a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    perror("perf_event_open");
    exit(2);
  }
  if (mmap(NULL, 17 * (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED) {
    perror("mmap");
    exit(2);
  }
}

/* The records' rings, kept empty as a collector would. */
static struct perf_event_mmap_page *record_rings[64];
static int nrecord_rings;

static void *drain_records(void *arg) {
  (void)arg;
  for (;;) {
    for (int i = 0; i < nrecord_rings; i++)
      __atomic_store_n(&record_rings[i]->data_tail,
                       __atomic_load_n(&record_rings[i]->data_head, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
    usleep(1000);
  }
  return NULL;
}

/* Opens a per-CPU event (pid -1) of `a`, with the samples' times on
 * CLOCK_MONOTONIC, and maps its ring for drain_records; with `ins`, the
 * first one opened gets switchin.c's program. Exits 2 on failure. */
static void open_ring_event(struct perf_event_attr *a, int cpu, kf_switchin_t *ins) {
  a->size = sizeof *a;
  a->sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  a->use_clockid = 1;
  a->clockid = CLOCK_MONOTONIC;
  a->watermark = 1;
  int fd = (int)syscall(SYS_perf_event_open, a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0 || (ins && nrecord_rings == 0 && kf_switchin_attach(ins, fd) != 0)) {
    perror("perf_event_open");
    exit(2);
  }
  void *m = mmap(NULL, 65 * (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    perror("mmap");
    exit(2);
  }
  record_rings[nrecord_rings++] = m;
}

static void open_switch_events(int cpu, int records) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CONTEXT_SWITCHES;
  a.freq = 1;
  a.sample_freq = 200;
  a.context_switch = records;
  a.sample_id_all = 1;
  open_ring_event(&a, cpu, NULL);
}

/* kflame's off-CPU events per CPU: the sched_switch tracepoint, sampled
 * where switchin.c's program says (it holds the first). */
static void open_tracepoint_events(int cpu, kf_switchin_t *ins) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_TRACEPOINT;
  a.config = kf_switchin_tracepoint(ins);
  a.sample_period = 1;
  open_ring_event(&a, cpu, ins);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: switchcost none|dummy|clock|clock-any|percpu|switch-records|switch-events|switch-tracepoint SECONDS\n");
    return 1;
  }
  const char *mode = argv[1];
  double seconds = atof(argv[2]);
  if (pipe(to_peer) || pipe(from_peer)) return 1;
  pin();
  pthread_t t;
  if (pthread_create(&t, NULL, peer, NULL)) return 1;
  while (!__atomic_load_n(&peer_tid, __ATOMIC_ACQUIRE)) usleep(1000);
  pid_t tids[2] = {(pid_t)syscall(SYS_gettid), peer_tid};
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  for (int th = 0; th < 2; th++) {
    if (!strcmp(mode, "clock-any")) open_event(PERF_COUNT_SW_CPU_CLOCK, tids[th], -1);
    for (int cpu = 0; cpu < ncpu; cpu++) {
      if (!strcmp(mode, "dummy")) open_event(PERF_COUNT_SW_DUMMY, tids[th], cpu);
      if (!strcmp(mode, "clock")) open_event(PERF_COUNT_SW_CPU_CLOCK, tids[th], cpu);
    }
  }
  if (!strcmp(mode, "percpu"))
    for (int cpu = 0; cpu < ncpu; cpu++) open_event(PERF_COUNT_SW_CPU_CLOCK, -1, cpu);
  int records = !strcmp(mode, "switch-records");
  kf_switchin_t *ins = NULL;
  if (!strcmp(mode, "switch-tracepoint")) {
    int rc = kf_switchin_open(200, &ins);
    if (rc != 0) {
      fprintf(stderr, "switchin: %s\n", strerror(-rc));
      return 2;
    }
  }
  if (records || ins || !strcmp(mode, "switch-events")) {
    for (int cpu = 0; cpu < ncpu && cpu < 64; cpu++) {
      if (ins) open_tracepoint_events(cpu, ins);
      else open_switch_events(cpu, records);
    }
    pthread_t drainer;
    if (pthread_create(&drainer, NULL, drain_records, NULL)) return 1;
  }
  char c = 'x';
  long rounds = 0;
  double t0 = now(), t1;
  do {
    for (int i = 0; i < 1000; i++)
      if (write(to_peer[1], &c, 1) != 1 || read(from_peer[0], &c, 1) != 1) return 1;
    rounds += 1000;
  } while ((t1 = now()) - t0 < seconds);
  printf("%.0f\n", (t1 - t0) / (double)rounds * 1e9);
  c = 'q';
  if (write(to_peer[1], &c, 1) != 1) return 1;
  pthread_join(t, NULL);
  kf_switchin_close(ins);
  return 0;
}

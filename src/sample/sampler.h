/*
 * sampler: opens the perf events that sample this process.
 *
 * Where the kernel allows it (root, or CAP_PERFMON and CAP_BPF): one clock
 * event per online CPU for every process, with a BPF program that drops
 * other processes' samples in the kernel (pidfilter.h); for off-CPU
 * profiles one event per CPU on the sched_switch tracepoint, whose program
 * (switchin.h) samples this process's switch-outs and stamps their
 * switch-ins (without tracefs: a context-switch event per CPU with the pid
 * filter, and switch records). Else:
 * one cpu-clock (or task-clock) event per existing thread and online CPU,
 * and for off-CPU profiles one context-switch event beside it,
 * found in /proc/self/task, each with inherit=1 so threads created later are
 * sampled from their first instruction by events the kernel clones for them
 * (inherit_thread=1 keeps those clones out of fork()ed children). Per-CPU
 * events, unlike cpu=-1 ones, may be inherited and still be mmap'd; all the
 * events of one CPU write into that CPU's single ring (PERF_EVENT_IOC_SET_OUTPUT),
 * so the locked-memory cost is one ring per CPU, not per thread.
 *
 * open, disable and close are called by the profiler on the thread that
 * starts or stops the session (any isolate's JS thread; stop's outside the
 * binding's mutex), one at a time; disable comes before the collector's
 * last drain. While the collector thread runs it reads the rings and the
 * owners, which stay fixed from open to close. Every fd is CLOEXEC.
 */
#ifndef KF_SAMPLER_H
#define KF_SAMPLER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sample/ring.h"
#include "sample/switchin.h"

typedef enum { KF_EVENT_CPU_CLOCK = 0, KF_EVENT_TASK_CLOCK = 1 } kf_event_t;

/* What is sampled: CPU time (the clock event), off-CPU time (context
 * switches: a sample with the callchain when a thread is switched out,
 * PERF_RECORD_SWITCH records or switchin.h's records for when it is
 * switched back in), or both. */
enum { KF_WHAT_CPU = 1, KF_WHAT_OFFCPU = 2, KF_WHAT_BOTH = 3 };

/* The kind of an opened event (kf_event_owner_t). */
enum { KF_KIND_CPU = 0, KF_KIND_SWITCH = 1 };

/* Where the events are opened: AUTO tries one per CPU (of each kind) and
 * falls back to THREADS; THREADS attaches each thread. */
enum { KF_SCOPE_AUTO = 0, KF_SCOPE_THREADS = 1, KF_SCOPE_CPUS = 2 };

/* The tid of a CPU-wide event's owner: every sample names its own thread. */
#define KF_OWNER_ANY 0

typedef struct kf_sampler_opts {
  uint32_t hz;          /* samples per second of thread CPU time */
  kf_event_t event;
  int kernel;           /* 1: try kernel frames; falls back to user-only */
  uint32_t ring_pages;  /* data pages per CPU ring, a power of two; 0: 64
                           with stack copies (up to 256 at high rates:
                           default_ring_pages), else 16 (timer: per
                           thread, 32 with stack copies, else 16) */
  /* Bytes of each sampled user stack to copy from its stack pointer on,
   * with the registers that walk it (PERF_SAMPLE_REGS_USER and
   * PERF_SAMPLE_STACK_USER, see KF_SAMPLER_USER_REGS); 0: none. A multiple
   * of 8 below 64 KiB. Ignored where kflame cannot read the registers
   * (not x86-64). */
  uint32_t stack_bytes;
  uint32_t what;        /* KF_WHAT_*; 0 is KF_WHAT_CPU */
  /* Off-CPU: switched-out samples with callchains per thread and second at
   * most, per CPU on the tracepoint (perf's frequency mode; each sample then
   * stands for the switches of its period). 0: every switch. */
  uint32_t max_switch_rate;
  uint32_t scope;       /* KF_SCOPE_AUTO or KF_SCOPE_THREADS */
} kf_sampler_opts_t;

/* The user registers a sample carries when stack_bytes is set, in this
 * order (the kernel's: by register number). */
enum { KF_REG_BP, KF_REG_SP, KF_REG_IP, KF_SAMPLER_USER_REGS };

typedef struct kf_sampler_info {
  int kernel;            /* kernel frames are being sampled */
  int kernel_refused;    /* kernel frames were asked for but not allowed */
  int inherit_thread;    /* 0: kernel < 5.13, children of fork() inherit too */
  uint32_t ring_pages;   /* what the locked-memory budget allowed */
  uint32_t ring_pages_asked; /* opts', or the smallest default (64 with
                                stack copies, else 16): cut below it by the
                                locked-memory limit is a warning */
  uint32_t scope;        /* KF_SCOPE_THREADS or KF_SCOPE_CPUS */
  int scope_errno;       /* AUTO: why CPU-wide events were not used (0:
                            not tried, or in use) */
  uint32_t threads;      /* threads attached directly (0 CPU-wide) */
  uint32_t cpus;
  uint32_t max_stack;    /* kernel.perf_event_max_stack */
  uint32_t stack_bytes;  /* user stack bytes copied per sample; 0: none */
  kf_ring_layout_t layout; /* of the sample records */
  uint32_t what;         /* KF_WHAT_* being sampled */
  /* Off-CPU, CPU-wide: 1 when the switch events are on the tracepoint,
   * with switchin.h's program (else context-switch events and
   * PERF_RECORD_SWITCH records), and why not when it could not be set up
   * (0: not tried). */
  int switchins_traced;
  int switchin_errno;
  /* Of the switch events' samples: as `layout`, with PERF_SAMPLE_PERIOD
   * (the switches a sample stands for; 1 on the tracepoint, whose program
   * says it in a record of its own). Their other records (the
   * PERF_RECORD_SWITCH ones) end with { u32 pid, tid; u64 time; u64 id }. */
  kf_ring_layout_t switch_layout;
} kf_sampler_info_t;

/* The thread an opened event was attached to, by perf event id: samples
 * carry the id (of the opened event, also for inherited clones). */
typedef struct kf_event_owner {
  uint64_t id;
  uint32_t tid;
  uint32_t kind; /* KF_KIND_* */
} kf_event_owner_t;

typedef struct kf_sampler kf_sampler_t;

/* Opens, maps and enables everything. On failure returns a negative code
 * (error.h), sets *sys_errno to the errno behind it, and leaves nothing open. */
int kf_sampler_open(const kf_sampler_opts_t *opts, kf_sampler_t **out,
                    int *sys_errno);

/* Stops sampling on every event (inherited clones included). */
void kf_sampler_disable(kf_sampler_t *s);

/* Unmaps every ring, closes every fd, frees s. */
void kf_sampler_close(kf_sampler_t *s);

const kf_sampler_info_t *kf_sampler_info(const kf_sampler_t *s);

/* The CPU rings and the fd to poll for each. */
size_t kf_sampler_rings(kf_sampler_t *s, kf_ring_t **rings, const int **fds);

/* The tracepoint program of CPU-wide off-CPU sampling, or NULL: the
 * collector drains its records (switch-ins, the bound's weights) with the
 * rings. */
kf_switchin_t *kf_sampler_switchin(kf_sampler_t *s);

/* Sorted by id. */
const kf_event_owner_t *kf_sampler_owners(const kf_sampler_t *s, size_t *n);

#endif

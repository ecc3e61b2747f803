/*
 * pidfilter: a BPF program that keeps, of a CPU-wide perf event's samples,
 * only this process's, in the kernel, before the sample is written.
 *
 * A per-thread perf event costs its thread at every context switch: the
 * kernel schedules the thread's event context out and in, and for the
 * clock events stops and restarts an hrtimer (about 2.6 us per switch on a
 * 2-core KVM guest, Linux 6.18: bench/switchcost.js, bench/offcpu.js).
 * A server that switches 40,000 times a second pays it in full. An event
 * per CPU (pid -1) is never switched; it sees every process on its CPU, and
 * this program, run by the kernel at each overflow (PERF_EVENT_IOC_SET_BPF,
 * BPF_PROG_TYPE_PERF_EVENT), drops the sample of any other process before
 * it is written: nothing of theirs reaches the ring. (The kernel prepares
 * the sample before it runs the program, since Linux 6.3: the callchain is
 * walked into its own per-CPU buffer either way; the user stack is copied
 * only into the ring, so never for a dropped sample.)
 *
 * The process is named by its tgid in its own pid namespace
 * (bpf_get_ns_current_pid_tgid, Linux 5.7), so it holds in containers.
 * Loading needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); the CPU-wide
 * events themselves CAP_PERFMON or perf_event_paranoid <= 0.
 *
 * Called by the sampler on the thread that opens it; no state of its own.
 */
#ifndef KF_PIDFILTER_H
#define KF_PIDFILTER_H

#include <stdint.h>

/* Loads the program for the calling process. Returns the program's fd
 * (CLOEXEC; the caller closes it once every event holds it), or a negative
 * errno. */
int kf_pidfilter_load(void);

/* Attaches the program to a perf event: 0 or a negative errno. */
int kf_pidfilter_attach(int perf_fd, int prog_fd);

/* Our pid namespace as bpf_get_ns_current_pid_tgid takes it (switchin.h's
 * program asks it too): 0 or a negative errno. */
int kf_pidfilter_ns(uint64_t *dev, uint64_t *ino);

#endif

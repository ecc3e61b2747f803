/*
 * switchin: the off-CPU samples of CPU-wide events, taken and stamped by
 * one BPF program on the sched:sched_switch tracepoint.
 *
 * An off-CPU sample is a thread's stack when it is switched out, weighed by
 * how long it stayed out, so its switch-in time is needed too. The sampler
 * opens one perf event per CPU on the tracepoint, with the callchain and
 * stack copy of its other samples; this program, held by one of them, runs
 * at every switch of every CPU (the kernel keeps a tracepoint's programs
 * with the tracepoint) and decides, before the kernel writes anything:
 *   - the task switched in: if it is a thread whose switch-out was sampled
 *     (marked in an LRU hash of global tid to our tid), a record
 *     { u32 tid; u32 0; u64 time } goes to a BPF ring buffer (time on
 *     CLOCK_MONOTONIC, the clock of the samples) and the mark is cleared;
 *   - the task switched out (the current one): if it is one of this
 *     process's threads (its tgid in our pid namespace,
 *     bpf_get_ns_current_pid_tgid), and, with a rate bound, the first of
 *     this CPU's switches of ours since 1/max_rate seconds, the program
 *     returns 1 and the CPU's event samples it (the kernel walks the stack
 *     of the task switching out); with a bound, a record
 *     { u32 tid; u32 switches; u64 time } first says how many of this
 *     CPU's switches of ours it stands for (itself and those skipped since
 *     the last one). The thread is marked. Any other switch returns 0: the
 *     kernel writes nothing.
 * So what every switch of the machine costs is one tracepoint, one hash
 * lookup and, for ours, one pid lookup; where a software context-switch
 * event per CPU (counted at every switch, its samples filtered by
 * pidfilter.h) and a program only stamping switch-ins cost two hooks per
 * switch (bench/switchcost.js). And the bound counts this process's
 * switches only, not every process's on the CPU.
 *
 * Needs what CPU-wide events need (CAP_PERFMON and CAP_BPF, or
 * CAP_SYS_ADMIN) and tracefs mounted (/sys/kernel/tracing, or under
 * /sys/kernel/debug): the tracepoint's id and layout are read from there.
 * Without it the sampler takes the software event and switch records.
 *
 * Opened and closed by the sampler on the thread that starts or stops the
 * session (which also opens and closes the events); drained by the
 * collector thread only.
 */
#ifndef KF_SWITCHIN_H
#define KF_SWITCHIN_H

#include <stddef.h>
#include <stdint.h>

typedef struct kf_switchin kf_switchin_t;

/* Loads the program for the calling process, its maps and ring:
 * max_rate switch-outs sampled per CPU and second at most, 0 for every one.
 * Returns 0, or a negative errno with nothing left open (ENOENT: no tracefs
 * with the tracepoint). */
int kf_switchin_open(uint32_t max_rate, kf_switchin_t **out);
/* Closes the program and maps; the events holding the program are the
 * sampler's to close (closing the one that holds it waits for the kernel to
 * retire the program, RCU grace periods: 60-75 ms here, the bulk of a
 * stop()). */
void kf_switchin_close(kf_switchin_t *t);

/* The tracepoint's perf id (PERF_TYPE_TRACEPOINT's config). */
uint64_t kf_switchin_tracepoint(const kf_switchin_t *t);
/* Gives the program to one of the tracepoint's events: 0 or a negative
 * errno. One is enough, and more would run it more than once a switch. */
int kf_switchin_attach(const kf_switchin_t *t, int perf_fd);

/* Hands each record since the last call to fn: `switches` 0 for a
 * switch-in at `time`, else the count the switch-out sampled at `time`
 * stands for. */
typedef void (*kf_switchin_fn)(void *ctx, uint32_t tid, uint64_t time,
                               uint32_t switches);
void kf_switchin_drain(kf_switchin_t *t, kf_switchin_fn fn, void *ctx);

/* Times the ring was found out of sync (the rest skipped), and records of
 * the wrong size: counted by the collector as corrupt. */
uint64_t kf_switchin_corrupt(const kf_switchin_t *t);

/* The byte offset of next_pid in the tracepoint's record, from the text of
 * its tracefs `format` file; -1 when the file does not have it as a
 * 4-byte field at an offset from 8 to 4096. Pure, linear in n. */
int kf_switchin_next_pid_offset(const char *format, size_t n);

#endif

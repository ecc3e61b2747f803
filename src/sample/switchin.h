/*
 * switchin: when a thread whose switch-out was sampled comes back on a CPU,
 * stamped in the kernel, for the off-CPU profile's CPU-wide switch events.
 *
 * An off-CPU sample is weighed by how long its thread stayed switched out,
 * so its switch-in time is needed. PERF_RECORD_SWITCH_CPU_WIDE records give
 * it, for every switch of every task: on a server switching 40,000 times a
 * second they cost ~3 us a switch (bench/offcpu.js), whatever the sampling
 * rate. Here only the sampled waits are followed: the switch events' pid
 * filter marks the thread whose switch-out it keeps (pidfilter.h, a map of
 * global tid to our tid), and a BPF program on the sched:sched_switch
 * tracepoint (one perf event holds it; it runs on every CPU) looks up each incoming task in that
 * map: a marked thread gets a record { u32 tid; u32 0; u64 time } in a BPF
 * ring buffer (time on CLOCK_MONOTONIC, the clock of the samples) and its
 * mark is cleared. So the records follow the sampling rate; what every
 * switch of the machine costs is one tracepoint and one hash lookup.
 *
 * Needs what CPU-wide events need (CAP_PERFMON and CAP_BPF, or
 * CAP_SYS_ADMIN) and tracefs mounted (/sys/kernel/tracing, or under
 * /sys/kernel/debug): the tracepoint's id and layout are read from there.
 * Without it the sampler asks for the switch records instead.
 *
 * Opened and closed by the sampler on the thread that starts or stops the
 * session; drained by the collector thread only.
 */
#ifndef KF_SWITCHIN_H
#define KF_SWITCHIN_H

#include <stddef.h>
#include <stdint.h>

typedef struct kf_switchin kf_switchin_t;

/* Opens it (the tracepoint's perf event on `cpu`, an online one; the
 * program runs on all). Returns 0, or a negative errno with nothing left
 * open (ENOENT: no tracefs with the tracepoint). */
int kf_switchin_open(int cpu, kf_switchin_t **out);
/* Closing the tracepoint's event waits for the kernel to retire the
 * program (RCU grace periods): 60-75 ms here, the bulk of a stop(). */
void kf_switchin_close(kf_switchin_t *t);

/* The map the switch events' filter marks threads in (pidfilter.h). */
int kf_switchin_mark_map(const kf_switchin_t *t);

/* Hands each switch-in recorded since the last call to fn. */
typedef void (*kf_switchin_fn)(void *ctx, uint32_t tid, uint64_t time);
void kf_switchin_drain(kf_switchin_t *t, kf_switchin_fn fn, void *ctx);

/* Times the ring was found out of sync (the rest skipped), and records of
 * the wrong size: counted by the collector as corrupt. */
uint64_t kf_switchin_corrupt(const kf_switchin_t *t);

/* The byte offset of next_pid in the tracepoint's record, from the text of
 * its tracefs `format` file; -1 when the file does not have it as a
 * 4-byte field at an offset from 8 to 4096. Pure, linear in n. */
int kf_switchin_next_pid_offset(const char *format, size_t n);

#endif

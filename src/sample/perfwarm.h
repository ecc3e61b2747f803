/*
 * perfwarm: keeps the kernel's perf scheduler hooks switched on while
 * kflame is loaded, so that start() does not wait for them.
 *
 * The first per-thread perf event on the whole machine (none open, and none
 * closed in the last second) makes the kernel enable its perf_sched_events
 * static key and wait out an RCU grace period (account_event() in
 * kernel/events/core.c): 5-16 ms asleep inside perf_event_open(), measured
 * on Linux 6.18 on a 2-core VM. Whether a given start() pays it depends on
 * what else on the machine has perf events open. kf_perfwarm_begin() pays
 * it once, off the JS thread: a thread of its own ("kflame-warm") opens one
 * disabled dummy event on itself and then sleeps for the life of the
 * process with every signal blocked. It never runs again, so the event
 * costs no context switch; while the key is on, every context switch on
 * the machine takes perf's (cheap) hook, as whenever any perf event is open.
 *
 * Called from the binding's load on the JS thread; the first call in the
 * process does the work, the others nothing. KFLAME_PERF_WARM=off skips it.
 * Failures are silent: start() then pays the wait as before.
 */
#ifndef KF_PERFWARM_H
#define KF_PERFWARM_H

/* Starts the holder thread once per process. */
void kf_perfwarm_begin(void);

/* 1 once the holder's event is open (any thread). */
int kf_perfwarm_ready(void);

#endif

/*
 * parked: runs a job (a thread's body: the collector's loop) on a thread
 * that kflame keeps parked between jobs, so that start() creates no thread.
 *
 * Why: a thread created while the app's threads are busy costs the JS thread
 * for the next tens of milliseconds: the kernel counts a new task as busy
 * until its load average decays, and places other threads' wake-ups by it.
 * On the 2-core test machine, with V8's helpers compiling after a GC, a
 * probe that only created a thread that then slept raised the JS thread's
 * run-queue wait in the next 50 ms from 2.3 to 4.6 ms; waking a parked
 * thread left it at 2.4. Profiles of 150 ms at 99 Hz cost +4.1% of wall
 * time with a collector thread per profile, +0.8% with this one
 * (bench/timermode.js, fresh-99 against perf-99; docs/benchmarks.md).
 *
 * Contract:
 * - kf_parked_start() runs fn(arg) on the parked thread when it is idle,
 *   else (a job still runs there: the C tests run collectors side by side;
 *   or park is 0) on a thread of its own, ended by the join. The parked
 *   thread is made by the first job (with its caller's signal mask, as that
 *   job's own thread would have had) and lasts as long as the process,
 *   asleep on a condition variable between jobs. Either thread has the job's name by the time
 *   kf_parked_start returns.
 * - kf_parked_join() returns once fn has returned; once per started job.
 * - After fork() the child has no parked thread (its first job makes one);
 *   a job that was running in the parent counts as done in the child, so
 *   its join returns instead of waiting for a thread that is not there.
 * Any thread may start and join jobs.
 */
#ifndef KF_PARKED_H
#define KF_PARKED_H

#include <pthread.h>

typedef struct kf_parked_job {
  void *(*fn)(void *);
  void *arg;
  char name[16];
  int on_parked; /* 1: on the parked thread; 0: on `own` */
  int done;      /* on the parked thread: fn returned (under the module's lock) */
  pthread_t own;
} kf_parked_job_t;

/* Returns 0, or the errno of pthread_create (then nothing runs). */
int kf_parked_start(kf_parked_job_t *job, void *(*fn)(void *), void *arg,
                    const char *name, int park);
void kf_parked_join(kf_parked_job_t *job);

#endif

#define _GNU_SOURCE
#include "util/parked.h"

#include <stdio.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Broadcast when a job is handed over and when one is done. */
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int parked_made;          /* the parked thread exists */
static pthread_t parked;
static char parked_name[16];     /* the name it was last given */
static kf_parked_job_t *current; /* its job, NULL while it is idle */
static pthread_once_t fork_hooks = PTHREAD_ONCE_INIT;

static void *park(void *arg) {
  (void)arg;
  pthread_mutex_lock(&lock);
  for (;;) {
    while (!current) pthread_cond_wait(&changed, &lock);
    kf_parked_job_t *job = current;
    pthread_mutex_unlock(&lock);
    job->fn(job->arg);
    pthread_mutex_lock(&lock);
    job->done = 1; /* the joiner may free it from here on */
    current = NULL;
    pthread_cond_broadcast(&changed);
  }
  return NULL;
}

/* A job's own thread. It names itself before the job runs, and its creator
 * names it before kf_parked_start returns (whichever comes first). */
static void *run_own(void *arg) {
  kf_parked_job_t *job = arg;
  pthread_setname_np(pthread_self(), job->name);
  return job->fn(job->arg);
}

/* Under `lock`. */
static int make_parked(void) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return -1;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&parked, &attr, park, NULL);
  pthread_attr_destroy(&attr);
  parked_name[0] = '\0';
  return rc;
}

static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&lock); }
static void after_fork_child(void) {
  /* Only the forking thread goes on in the child. */
  if (current) current->done = 1;
  current = NULL;
  parked_made = 0;
  pthread_cond_init(&changed, NULL);
  pthread_mutex_unlock(&lock);
}
static void install_fork_hooks(void) {
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

int kf_parked_start(kf_parked_job_t *job, void *(*fn)(void *), void *arg,
                    const char *name, int park) {
  job->fn = fn;
  job->arg = arg;
  snprintf(job->name, sizeof job->name, "%s", name);
  job->done = 0;
  pthread_once(&fork_hooks, install_fork_hooks);
  pthread_mutex_lock(&lock);
  if (park && !parked_made) parked_made = make_parked() == 0;
  job->on_parked = park && parked_made && !current;
  if (job->on_parked) {
    /* Named before start returns, so whoever lists threads sees the job's. */
    if (strcmp(parked_name, job->name) != 0) {
      memcpy(parked_name, job->name, sizeof parked_name);
      pthread_setname_np(parked, parked_name);
    }
    current = job;
    pthread_cond_broadcast(&changed);
  }
  pthread_mutex_unlock(&lock);
  if (job->on_parked) return 0;
  int rc = pthread_create(&job->own, NULL, run_own, job);
  if (rc == 0) pthread_setname_np(job->own, job->name);
  return rc;
}

void kf_parked_join(kf_parked_job_t *job) {
  if (!job->on_parked) {
    pthread_join(job->own, NULL);
    return;
  }
  pthread_mutex_lock(&lock);
  while (!job->done) pthread_cond_wait(&changed, &lock);
  pthread_mutex_unlock(&lock);
}

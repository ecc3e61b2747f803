/* Parked thread: jobs in turn run on one thread that outlives them, a job
 * started while another runs gets a thread of its own, a join waits for its
 * job, and a forked child makes its own parked thread (and does not wait for
 * a job its parent was running). Under `make TSAN=1` the hand-over is
 * checked for races. */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/parked.h"
#include "kftest.h"

typedef struct run {
  pid_t tid;
  char name[16];
  int gate[2]; /* the job waits for a byte here when gated */
  int gated;
  int ran;
} run_t;

static void *job_body(void *arg) {
  run_t *r = arg;
  r->tid = (pid_t)syscall(SYS_gettid);
  pthread_getname_np(pthread_self(), r->name, sizeof r->name);
  if (r->gated) {
    char b;
    CHECK(read(r->gate[0], &b, 1) == 1);
  }
  r->ran = 1;
  return NULL;
}

static void gate(run_t *r) {
  CHECK(pipe(r->gate) == 0);
  r->gated = 1;
}
static void open_gate(run_t *r) {
  CHECK(write(r->gate[1], "x", 1) == 1);
}

static int thread_exists(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
  return access(path, F_OK) == 0;
}

/* A joined thread can stay listed for a moment: the kernel wakes the joiner
 * as the thread leaves its memory, before it is reaped. */
static int thread_gone(pid_t tid) {
  for (int i = 0; i < 1000 && thread_exists(tid); i++) usleep(1000);
  return !thread_exists(tid);
}

static void parked_jobs_share_one_thread(void) {
  run_t a = {0}, b = {0};
  kf_parked_job_t ja, jb;
  CHECK(kf_parked_start(&ja, job_body, &a, "kf-first", 1) == 0);
  CHECK(ja.on_parked);
  kf_parked_join(&ja);
  CHECK(a.ran && a.tid != (pid_t)syscall(SYS_gettid));
  CHECK_STR(a.name, "kf-first");
  CHECK(thread_exists(a.tid)); /* parked, not ended */
  CHECK(kf_parked_start(&jb, job_body, &b, "kf-second", 1) == 0);
  kf_parked_join(&jb);
  CHECK(b.ran && jb.on_parked);
  CHECK_EQ_U64(b.tid, a.tid);
  CHECK_STR(b.name, "kf-second"); /* each job's name */
}

static void parked_busy_means_a_thread_of_its_own(void) {
  run_t a = {0}, b = {0};
  kf_parked_job_t ja, jb;
  gate(&a);
  CHECK(kf_parked_start(&ja, job_body, &a, "kf-long", 1) == 0);
  CHECK(kf_parked_start(&jb, job_body, &b, "kf-side", 1) == 0);
  CHECK(ja.on_parked && !jb.on_parked);
  kf_parked_join(&jb);
  CHECK(b.ran && !a.ran);
  CHECK_STR(b.name, "kf-side");
  CHECK(thread_gone(b.tid)); /* joined: gone */
  open_gate(&a);
  kf_parked_join(&ja);
  CHECK(a.ran);
  CHECK(b.tid != a.tid);
}

static void parked_not_asked_for(void) {
  run_t a = {0}, b = {0};
  kf_parked_job_t ja, jb;
  CHECK(kf_parked_start(&ja, job_body, &a, "kf-parked", 1) == 0);
  kf_parked_join(&ja);
  CHECK(kf_parked_start(&jb, job_body, &b, "kf-own", 0) == 0);
  CHECK(!jb.on_parked); /* though the parked thread is idle */
  kf_parked_join(&jb);
  CHECK(b.ran && b.tid != a.tid && thread_gone(b.tid));
  CHECK_STR(b.name, "kf-own");
}

static void parked_join_waits_for_the_job(void) {
  for (int i = 0; i < 200; i++) {
    run_t r = {0};
    kf_parked_job_t j;
    CHECK(kf_parked_start(&j, job_body, &r, "kf-loop", 1) == 0);
    kf_parked_join(&j);
    CHECK(r.ran); /* set by the job, read after the join */
  }
}

/* ThreadSanitizer does not let a child forked from threads start threads. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

static void parked_after_fork(void) {
#ifdef UNDER_TSAN
  fprintf(stderr, "  skipped under ThreadSanitizer\n");
  return;
#endif
  run_t a = {0};
  kf_parked_job_t ja;
  gate(&a);
  CHECK(kf_parked_start(&ja, job_body, &a, "kf-parent", 1) == 0);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    kf_parked_join(&ja); /* its thread is not in the child: no wait */
    run_t c = {0};
    kf_parked_job_t jc;
    CHECK(kf_parked_start(&jc, job_body, &c, "kf-child", 1) == 0);
    CHECK(jc.on_parked); /* a new parked thread, not the parent's */
    kf_parked_join(&jc);
    CHECK(c.ran && thread_exists(c.tid));
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  open_gate(&a);
  kf_parked_join(&ja);
  CHECK(a.ran);
}

static const kftest_case_t cases[] = {
    {"parked: jobs in turn run on one thread that stays", parked_jobs_share_one_thread},
    {"parked: a job while another runs gets its own thread", parked_busy_means_a_thread_of_its_own},
    {"parked: park 0 gives a thread of its own", parked_not_asked_for},
    {"parked: join returns after the job", parked_join_waits_for_the_job},
    {"parked: a forked child makes its own thread", parked_after_fork},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }

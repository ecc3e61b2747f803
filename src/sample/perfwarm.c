#define _GNU_SOURCE
#include "sample/perfwarm.h"

#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ready; /* atomic */

static void *hold(void *arg) {
  (void)arg;
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_DUMMY;
  a.disabled = 1;
  a.exclude_kernel = 1; /* allowed at perf_event_paranoid 2 */
  a.exclude_hv = 1;
  /* On this thread only (pid 0, no inherit): it never runs again. */
  int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return NULL; /* refused here: nothing to keep */
  __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
  /* Every signal is blocked (the mask came from the creator), so pause()
   * never returns: the thread and its event last as long as the process. */
  for (;;) pause();
  return NULL;
}

static void begin(void) {
  const char *env = getenv("KFLAME_PERF_WARM");
  if (env && strcmp(env, "off") == 0) return;
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return;
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  if (pthread_create(&t, &attr, hold, NULL) == 0) pthread_setname_np(t, "kflame-warm");
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
}

void kf_perfwarm_begin(void) { pthread_once(&once, begin); }

int kf_perfwarm_ready(void) { return __atomic_load_n(&ready, __ATOMIC_ACQUIRE); }

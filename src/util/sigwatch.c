#include "util/sigwatch.h"

#include <errno.h>
#include <signal.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

static struct sigaction previous[NSIG];
static volatile sig_atomic_t arrived;

static void on_signal(int signo, siginfo_t *info, void *context) {
  arrived = signo;
  const struct sigaction *p = &previous[signo];
  if (p->sa_flags & SA_SIGINFO) {
    if (p->sa_sigaction) p->sa_sigaction(signo, info, context);
  } else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
    p->sa_handler(signo);
  }
}

int kf_sigwatch_add(int signo) {
  if (signo <= 0 || signo >= NSIG) return -EINVAL;
  struct sigaction now;
  if (sigaction(signo, NULL, &now) != 0) return -errno;
  /* Nothing to chain to: with the default action the signal ends the
   * process by itself, and an ignored one is not ours to see. */
  if (!(now.sa_flags & SA_SIGINFO) &&
      (now.sa_handler == SIG_DFL || now.sa_handler == SIG_IGN))
    return 0;
  /* Already ours: installing again would make us our own previous. */
  if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_signal) return 0;
  previous[signo] = now;
  struct sigaction sa = now;
  sa.sa_flags = (now.sa_flags | SA_SIGINFO) & ~SA_RESETHAND;
  sa.sa_sigaction = on_signal;
  return sigaction(signo, &sa, NULL) == 0 ? 0 : -errno;
}

int kf_sigwatch_arrived(void) { return arrived; }

int kf_sigwatch_die(int signo) {
  if (signo <= 0 || signo >= NSIG) return -EINVAL;
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  if (sigaction(signo, &dfl, NULL) != 0 ||
      pthread_sigmask(SIG_UNBLOCK, &set, NULL) != 0 || raise(signo) != 0)
    return -errno;
  return 0;
}

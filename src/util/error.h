/*
 * error: kflame's error codes. The core returns 0 or a negative code; codes
 * above the errno range are kflame's own (like libbpf), anything else is
 * -errno. kf_error_name() gives the stable string that becomes `err.code` in
 * JS; kf_error_advice() says what went wrong and how to fix it.
 */
#ifndef KF_ERROR_H
#define KF_ERROR_H

enum {
  KF_ERR_BASE = 4000,
  KF_ERR_RUNNING,          /* start() while a profile runs */
  KF_ERR_NOT_RUNNING,      /* stop() with none running */
  KF_ERR_PERF_PARANOID,    /* perf_event_open: EACCES */
  KF_ERR_PERF_DENIED,      /* perf_event_open: EPERM (seccomp, capabilities) */
  KF_ERR_PERF_UNSUPPORTED, /* perf_event_open: ENOSYS/ENOENT/EOPNOTSUPP */
  KF_ERR_MLOCK,            /* no locked memory left for even one ring page */
  KF_ERR_FD_LIMIT,         /* EMFILE/ENFILE */
  KF_ERR_NO_THREADS,       /* /proc/self/task unreadable or empty */
  KF_ERR_THREAD,           /* could not start the collector thread */
  KF_ERR_PERF_MAP,         /* could not write a perf map file */
  KF_ERR_READ,             /* could not read an input file */
  KF_ERR_WRITE,            /* could not write an output file */
  KF_ERR_UNSAFE_PATH,      /* a link, device, FIFO, socket or directory at
                              the target of a write (see safefile.h) */
  KF_ERR_TIMER,            /* timer sampler: timer_create/sigaction refused */
  KF_ERR_NO_SIGNAL,        /* timer sampler: every real-time signal is taken */
  KF_ERR_OFFCPU_PARANOID,  /* off-CPU: context-switch samples need kernel
                              context (perf_event_paranoid <= 1 or root) */
  KF_ERR_OFFCPU_TIMER,     /* off-CPU asked of the timer sampler */
  KF_ERR_MAX
};

/* Stable name such as "KFLAME_ERR_PERF_PARANOID", or "KFLAME_ERR_SYSTEM" for
 * a plain -errno. Never NULL. */
const char *kf_error_name(int err);

/* One or two sentences: the cause and the fix. Written into buf. */
void kf_error_advice(int err, int sys_errno, char *buf, unsigned len);

#endif

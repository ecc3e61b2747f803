#include "util/error.h"

#include <stdio.h>
#include <string.h>

const char *kf_error_name(int err) {
  switch (-err) {
    case KF_ERR_RUNNING: return "KFLAME_ERR_RUNNING";
    case KF_ERR_NOT_RUNNING: return "KFLAME_ERR_NOT_RUNNING";
    case KF_ERR_PERF_PARANOID: return "KFLAME_ERR_PERF_PARANOID";
    case KF_ERR_PERF_DENIED: return "KFLAME_ERR_PERF_DENIED";
    case KF_ERR_PERF_UNSUPPORTED: return "KFLAME_ERR_PERF_UNSUPPORTED";
    case KF_ERR_MLOCK: return "KFLAME_ERR_MLOCK";
    case KF_ERR_FD_LIMIT: return "KFLAME_ERR_FD_LIMIT";
    case KF_ERR_NO_THREADS: return "KFLAME_ERR_NO_THREADS";
    case KF_ERR_THREAD: return "KFLAME_ERR_THREAD";
    case KF_ERR_PERF_MAP: return "KFLAME_ERR_PERF_MAP";
    case KF_ERR_READ: return "KFLAME_ERR_READ";
    case KF_ERR_WRITE: return "KFLAME_ERR_WRITE";
    case KF_ERR_UNSAFE_PATH: return "KFLAME_ERR_UNSAFE_PATH";
    case KF_ERR_TIMER: return "KFLAME_ERR_TIMER";
    case KF_ERR_NO_SIGNAL: return "KFLAME_ERR_NO_SIGNAL";
    case KF_ERR_OFFCPU_PARANOID: return "KFLAME_ERR_OFFCPU_PARANOID";
    case KF_ERR_OFFCPU_TIMER: return "KFLAME_ERR_OFFCPU_TIMER";
    default: return "KFLAME_ERR_SYSTEM";
  }
}

void kf_error_advice(int err, int sys_errno, char *buf, unsigned len) {
  const char *why = sys_errno ? strerror(sys_errno) : "";
  switch (-err) {
    case KF_ERR_RUNNING:
      snprintf(buf, len, "a profile is already running: call stop() first");
      break;
    case KF_ERR_NOT_RUNNING:
      snprintf(buf, len, "no profile is running: call start() first");
      break;
    case KF_ERR_PERF_PARANOID:
      snprintf(buf, len,
               "perf_event_open was refused (EACCES): kernel.perf_event_paranoid "
               "forbids sampling even this process's own threads. Fix: `sysctl "
               "kernel.perf_event_paranoid=2` (or lower), or grant CAP_PERFMON "
               "(`setcap cap_perfmon+ep $(which node)`, Linux >= 5.8)");
      break;
    case KF_ERR_PERF_DENIED:
      snprintf(buf, len,
               "perf_event_open was refused (EPERM): a seccomp filter or missing "
               "capability blocks it, as Docker's default seccomp profile does. "
               "Fix: run the container with `--cap-add PERFMON` (Docker >= 20.10) "
               "or a seccomp profile that allows perf_event_open, or lower "
               "kernel.perf_event_paranoid on the host");
      break;
    case KF_ERR_PERF_UNSUPPORTED:
      snprintf(buf, len,
               "perf_event_open is not available (%s): the kernel lacks "
               "CONFIG_PERF_EVENTS or the cpu-clock/task-clock software event, "
               "or a seccomp filter answers ENOSYS for it (some container "
               "runtimes do). Fix: allow perf_event_open in the container's "
               "seccomp profile, or use a kernel built with perf events", why);
      break;
    case KF_ERR_MLOCK:
      snprintf(buf, len,
               "no locked memory left for a perf ring buffer (%s): this user's "
               "perf buffers already use kernel.perf_event_mlock_kb and `ulimit "
               "-l`. Fix: stop other perf users, raise `ulimit -l`, or `sysctl "
               "kernel.perf_event_mlock_kb=2048`", why);
      break;
    case KF_ERR_FD_LIMIT:
      snprintf(buf, len,
               "out of file descriptors (%s): kflame needs one per thread and "
               "CPU. Fix: raise `ulimit -n`", why);
      break;
    case KF_ERR_NO_THREADS:
      snprintf(buf, len,
               "cannot list this process's threads in /proc/self/task (%s). "
               "Fix: mount /proc", why);
      break;
    case KF_ERR_THREAD:
      snprintf(buf, len, "cannot start the collector thread (%s)", why);
      break;
    case KF_ERR_READ:
      snprintf(buf, len, "cannot read the input file (%s). Fix: check the path and its permissions", why);
      break;
    case KF_ERR_WRITE:
      snprintf(buf, len,
               "cannot write the output file (%s). Fix: pick a path in a writable "
               "directory, on a file system with room", why);
      break;
    case KF_ERR_UNSAFE_PATH:
      snprintf(buf, len,
               "the target is not a regular file but a symbolic link, device, "
               "FIFO, socket or directory, which kflame never writes through "
               "or replaces (another user may have planted it). Fix: remove it, "
               "or choose another path");
      break;
    case KF_ERR_TIMER:
      snprintf(buf, len,
               "cannot arm a CPU-time timer for the timer sampler (%s): a "
               "seccomp filter refuses timer_create, or this user's queued "
               "signals are used up (each timer holds one). Fix: allow "
               "timer_create, or raise `ulimit -i` (RLIMIT_SIGPENDING)", why);
      break;
    case KF_ERR_NO_SIGNAL:
      snprintf(buf, len,
               "every real-time signal (SIGRTMIN to SIGRTMAX) already has a "
               "handler, so the timer sampler has none to reserve. Fix: free "
               "one, or use mode 'perf'");
      break;
    case KF_ERR_OFFCPU_PARANOID:
      snprintf(buf, len,
               "off-CPU profiles sample context switches, which the kernel "
               "counts in its own context, and this user may not sample kernel "
               "context (kernel.perf_event_paranoid is above 1). Fix: run as "
               "root or with CAP_PERFMON, or `sysctl kernel.perf_event_paranoid=1`; "
               "or profile CPU time only (what: 'cpu')");
      break;
    case KF_ERR_OFFCPU_TIMER:
      snprintf(buf, len,
               "the timer sampler counts CPU time only and cannot see a thread "
               "that waits, so it cannot take an off-CPU profile. Fix: use "
               "mode 'perf' (or 'auto' where perf_event_open is allowed), or "
               "what: 'cpu'");
      break;
    case KF_ERR_PERF_MAP:
      snprintf(buf, len,
               "cannot write the perf map (%s). Fix: pass a path in a "
               "writable directory, on a file system with room", why);
      break;
    default:
      snprintf(buf, len, "system error: %s", strerror(err < 0 ? -err : err));
      break;
  }
}

/*
 * noperf: runs a command with perf_event_open refused, the way the default
 * seccomp profiles of Docker and Podman refuse it, so the tests can run the
 * timer sampler where it is needed without a container:
 *
 *   noperf EPERM|ENOSYS command [args...]
 *
 * A seccomp filter (with no_new_privs, so any user may install it) makes
 * perf_event_open fail with the errno named; every other system call is
 * allowed. The filter is inherited by the command and its threads.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int err = argc > 2 && strcmp(argv[1], "EPERM") == 0    ? EPERM
            : argc > 2 && strcmp(argv[1], "ENOSYS") == 0 ? ENOSYS
                                                         : 0;
  if (!err) {
    fprintf(stderr, "usage: noperf EPERM|ENOSYS command [args...]\n");
    return 2;
  }
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0],
                            .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("noperf: installing the seccomp filter");
    return 2;
  }
  execvp(argv[2], argv + 2);
  perror("noperf: exec");
  return 127;
}

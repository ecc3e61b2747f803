#define _GNU_SOURCE
#include "sample/pidfilter.h"

#include "sample/bpf.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

int kf_pidfilter_ns(uint64_t *dev, uint64_t *ino) {
  struct stat ns;
  if (stat("/proc/self/ns/pid", &ns) != 0) return -errno;
  /* The helper compares the kernel's dev_t (major << 20 | minor), not the
   * encoding stat() hands out. */
  *dev = (uint64_t)major(ns.st_dev) << 20 | minor(ns.st_dev);
  *ino = ns.st_ino;
  return 0;
}

int kf_pidfilter_load(void) {
  uint64_t dev, ino;
  int rc = kf_pidfilter_ns(&dev, &ino);
  if (rc != 0) return rc;
  int32_t pid = (int32_t)getpid();
  /* r0 = 1 keeps the sample, 0 drops it. The helper fills the 8 bytes under
   * the frame pointer (r10) with { u32 pid; u32 tgid; } of the current task
   * as seen from our namespace, and fails for a task outside it. */
  struct bpf_insn prog[16];
  size_t n = 0;
  n += kf_bpf_load_u64(&prog[n], BPF_REG_1, dev);
  n += kf_bpf_load_u64(&prog[n], BPF_REG_2, ino);
  n += kf_bpf_stack_addr(&prog[n], BPF_REG_3, -8);
  prog[n++] = KF_INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_4, 0, 0, 8);
  prog[n++] = KF_INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_ns_current_pid_tgid);
  size_t failed = n++; /* jumps to drop, written once its place is known */
  prog[n++] = KF_INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_0, BPF_REG_10, -4, 0); /* tgid */
  size_t not_us = n++;
  prog[n++] = KF_INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1);
  prog[n++] = KF_INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
  size_t drop = n;
  prog[n++] = KF_INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);
  prog[n++] = KF_INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
  /* the helper failed, or the task is not one of ours: drop */
  prog[failed] = KF_INSN(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_0, 0, (int16_t)(drop - failed - 1), 0);
  prog[not_us] = KF_INSN(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_0, 0, (int16_t)(drop - not_us - 1), pid);
  return kf_bpf_prog_load(BPF_PROG_TYPE_PERF_EVENT, prog, n);
}

int kf_pidfilter_attach(int perf_fd, int prog_fd) {
  return ioctl(perf_fd, PERF_EVENT_IOC_SET_BPF, prog_fd) == 0 ? 0 : -errno;
}

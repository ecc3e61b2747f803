#define _GNU_SOURCE
#include "sample/pidfilter.h"

#include <errno.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define INSN(op, dst, src, offset, immediate)                              \
  ((struct bpf_insn){.code = (op), .dst_reg = (dst), .src_reg = (src),     \
                     .off = (offset), .imm = (immediate)})
/* A 64-bit immediate takes two instructions. */
#define LOAD_U64(dst, value)                                               \
  INSN(BPF_LD | BPF_DW | BPF_IMM, dst, 0, 0, (int32_t)(uint32_t)(value)),  \
      INSN(0, 0, 0, 0, (int32_t)(uint32_t)((uint64_t)(value) >> 32))

int kf_pidfilter_load(void) {
  struct stat ns;
  if (stat("/proc/self/ns/pid", &ns) != 0) return -errno;
  /* The helper compares the kernel's dev_t (major << 20 | minor), not the
   * encoding stat() hands out. */
  uint64_t dev = (uint64_t)major(ns.st_dev) << 20 | minor(ns.st_dev);
  uint64_t ino = ns.st_ino;
  int32_t pid = (int32_t)getpid();
  /* r0 = 1 keeps the sample, 0 drops it. The helper fills the 8 bytes under
   * the frame pointer (r10) with { u32 pid; u32 tgid; } of the current task
   * as seen from our namespace, and fails for a task outside it. */
  struct bpf_insn prog[] = {
      LOAD_U64(BPF_REG_1, dev),
      LOAD_U64(BPF_REG_2, ino),
      INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_3, BPF_REG_10, 0, 0),
      INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_3, 0, 0, -8),
      INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_4, 0, 0, 8),
      INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_ns_current_pid_tgid),
      INSN(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_0, 0, 4, 0), /* failed: drop */
      INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_0, BPF_REG_10, -4, 0), /* tgid */
      INSN(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_0, 0, 2, pid), /* not us: drop */
      INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1),
      INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
      INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0),
      INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
  };
  union bpf_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.prog_type = BPF_PROG_TYPE_PERF_EVENT;
  attr.insns = (uint64_t)(uintptr_t)prog;
  attr.insn_cnt = sizeof prog / sizeof prog[0];
  /* kflame's licence; the program calls no GPL-only helper. */
  attr.license = (uint64_t)(uintptr_t) "MIT";
  /* The kernel makes every BPF fd CLOEXEC. */
  int fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr);
  return fd >= 0 ? fd : -errno;
}

int kf_pidfilter_attach(int perf_fd, int prog_fd) {
  return ioctl(perf_fd, PERF_EVENT_IOC_SET_BPF, prog_fd) == 0 ? 0 : -errno;
}

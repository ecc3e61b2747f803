#define _GNU_SOURCE
#include "sample/bpf.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int kf_bpf_prog_load(uint32_t type, const struct bpf_insn *insns, size_t n) {
  union bpf_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.prog_type = type;
  attr.insns = (uint64_t)(uintptr_t)insns;
  attr.insn_cnt = (uint32_t)n;
  attr.license = (uint64_t)(uintptr_t) "MIT";
  int fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr);
  return fd >= 0 ? fd : -errno;
}

int kf_bpf_map_create(uint32_t type, uint32_t key_size, uint32_t value_size,
                      uint32_t max_entries) {
  union bpf_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.map_type = type;
  attr.key_size = key_size;
  attr.value_size = value_size;
  attr.max_entries = max_entries;
  int fd = (int)syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
  return fd >= 0 ? fd : -errno;
}

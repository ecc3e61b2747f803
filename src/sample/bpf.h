/*
 * bpf: the few bpf(2) calls kflame makes (no libbpf), and macros to write
 * programs as instruction arrays. Used by pidfilter.c and switchin.c on
 * the thread that opens the sampler. Every fd the kernel returns for BPF
 * objects is CLOEXEC.
 */
#ifndef KF_BPF_H
#define KF_BPF_H

#include <linux/bpf.h>
#include <stddef.h>
#include <stdint.h>

#define KF_INSN(op, dst, src, offset, immediate)                           \
  ((struct bpf_insn){.code = (op), .dst_reg = (dst), .src_reg = (src),     \
                     .off = (offset), .imm = (immediate)})
/* Writes the two instructions that load a 64-bit value into `dst`;
 * returns 2. */
static inline size_t kf_bpf_load_u64(struct bpf_insn *at, int dst, uint64_t value) {
  at[0] = KF_INSN(BPF_LD | BPF_DW | BPF_IMM, dst, 0, 0, (int32_t)(uint32_t)value);
  at[1] = KF_INSN(0, 0, 0, 0, (int32_t)(uint32_t)(value >> 32));
  return 2;
}

/* Writes the two instructions that load a map, by its fd, into `dst` (a
 * helper's argument); returns 2. */
static inline size_t kf_bpf_load_map(struct bpf_insn *at, int dst, int map_fd) {
  at[0] = KF_INSN(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, map_fd);
  at[1] = KF_INSN(0, 0, 0, 0, 0);
  return 2;
}

/* Writes the two instructions that set `dst` to the address `offset`
 * bytes from the frame pointer (r10): a helper's pointer into the
 * program's stack; returns 2. */
static inline size_t kf_bpf_stack_addr(struct bpf_insn *at, int dst, int16_t offset) {
  at[0] = KF_INSN(BPF_ALU64 | BPF_MOV | BPF_X, dst, BPF_REG_10, 0, 0);
  at[1] = KF_INSN(BPF_ALU64 | BPF_ADD | BPF_K, dst, 0, 0, offset);
  return 2;
}

/* Loads a program. The licence is kflame's; these programs call no
 * GPL-only helper. Returns its fd or a negative errno. */
int kf_bpf_prog_load(uint32_t type, const struct bpf_insn *insns, size_t n);

/* Creates a map. Returns its fd or a negative errno. */
int kf_bpf_map_create(uint32_t type, uint32_t key_size, uint32_t value_size,
                      uint32_t max_entries);

#endif

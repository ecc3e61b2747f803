/*
 * elfsyms: function symbols of one ELF object (executable or shared
 * library), from .symtab when present, else .dynsym, read with libelf.
 *
 * Addresses in the table are the object's link-time virtual addresses; use
 * kf_elf_vaddr() to turn a file offset (what /proc/self/maps gives) into one.
 * Built on the JS thread at stop(); read-only afterwards.
 */
#ifndef KF_ELFSYMS_H
#define KF_ELFSYMS_H

#include <stddef.h>
#include <stdint.h>

#include "symtab.h"

#define KF_ELF_MAX_LOADS 16

typedef struct kf_elf {
  kf_symtab_t *syms;
  int from_symtab;       /* 1: .symtab, 0: .dynsym only (stripped object) */
  size_t nloads;
  struct {
    uint64_t offset, vaddr, filesz;
  } loads[KF_ELF_MAX_LOADS]; /* PT_LOAD segments */
} kf_elf_t;

/* Reads an ELF image from memory (the parser a fuzzer can drive).
 * Returns 0, -ENOEXEC for something that is not a usable ELF, or -ENOMEM. */
int kf_elf_parse(const void *image, size_t size, kf_elf_t **out);

/* Maps the file at `path` and parses it. Returns 0 or a negative errno. */
int kf_elf_load(const char *path, kf_elf_t **out);

void kf_elf_free(kf_elf_t *elf);

/* Link-time address of a byte at `file_offset`; -1 when no PT_LOAD holds it. */
int kf_elf_vaddr(const kf_elf_t *elf, uint64_t file_offset, uint64_t *vaddr);

#endif

/*
 * elfsyms: function symbols of one ELF object (executable or shared
 * library), from .symtab when present, else .dynsym and the MiniDebugInfo
 * of .gnu_debugdata (an xz-compressed ELF with the other functions' symbols),
 * read with libelf. Also what finds the object's separate debug file
 * (debugfile.h): its build-id and .gnu_debuglink.
 *
 * Addresses in the table are the object's link-time virtual addresses; use
 * kf_elf_vaddr() to turn a file offset (what /proc/self/maps gives) into one.
 * Built on the JS thread at stop(); read-only afterwards.
 */
#ifndef KF_ELFSYMS_H
#define KF_ELFSYMS_H

#include <stddef.h>
#include <stdint.h>

#include "symbols/symtab.h"

#define KF_ELF_MAX_LOADS 16
#define KF_ELF_MAX_BUILD_ID 64
/* MiniDebugInfo larger than this once decompressed is left alone. */
#define KF_ELF_MAX_DEBUGDATA (64u << 20)

/* Where an object's symbols came from, best first. */
typedef enum {
  KF_SYMS_SYMTAB = 0,   /* its own .symtab */
  KF_SYMS_DEBUG_FILE,   /* a separate debug file's .symtab (debugfile.h) */
  KF_SYMS_MINIDEBUG,    /* .dynsym and .gnu_debugdata's .symtab */
  KF_SYMS_DYNSYM        /* .dynsym only, or nothing: a stripped object */
} kf_syms_from_t;

typedef struct kf_elf {
  kf_symtab_t *syms;
  int from_symtab;       /* 1: .symtab, 0: .dynsym only (stripped object) */
  kf_syms_from_t syms_from;
  unsigned char build_id[KF_ELF_MAX_BUILD_ID]; /* NT_GNU_BUILD_ID */
  size_t build_id_len;   /* 0: none */
  char *debuglink;       /* .gnu_debuglink's file name, or NULL */
  uint32_t debuglink_crc; /* its CRC32 of the debug file */
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

/* Takes the symbols of `debug` (a separate debug file of the object whose
 * build-id, or debuglink CRC, the caller checked) in place of elf's own;
 * frees debug. */
void kf_elf_adopt_symbols(kf_elf_t *elf, kf_elf_t *debug);

/* Link-time address of a byte at `file_offset`; -1 when no PT_LOAD holds it. */
int kf_elf_vaddr(const kf_elf_t *elf, uint64_t file_offset, uint64_t *vaddr);

#endif

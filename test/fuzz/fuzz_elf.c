/* libFuzzer target: the ELF symbol reader (elfsyms.c over libelf, feeding
 * symtab.c), driven through its memory entry point kf_elf_parse().
 *
 * libelf itself is the system's, not instrumented: the fuzzer sees the
 * coverage of kflame's code only, and ASan checks kflame's reads. After a
 * parse, addresses taken from the input are looked up and each answer is
 * checked: the symbol holds the address, and its name is readable, non-empty
 * and NUL-free. A violation aborts. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/elfsyms.h"

#define FUZZ_TARGET "fuzz_elf"
#include "fuzz.h"

static void check_lookup(const kf_elf_t *elf, uint64_t addr) {
  const kf_sym_t *s = kf_symtab_lookup(elf->syms, addr);
  if (!s) return;
  if (addr < s->start || addr - s->start >= s->size)
    FAIL("lookup(%llx) gave [%llx, +%llx)", (unsigned long long)addr,
         (unsigned long long)s->start, (unsigned long long)s->size);
  const char *name = kf_symtab_name(elf->syms, s);
  if (s->name_len == 0) FAIL("empty name");
  if (memchr(name, '\0', s->name_len)) FAIL("NUL in a name");
  if (kf_symtab_lookup(elf->syms, s->start) != s) FAIL("lookup of a symbol's start");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A copy of exactly `size` bytes, as kf_elf_load's mapping would be. */
  unsigned char *image = malloc(size ? size : 1);
  if (!image) return 0;
  memcpy(image, data, size);
  kf_elf_t *elf = NULL;
  int rc = kf_elf_parse(image, size, &elf);
  if (rc == 0) {
    if (!elf || !elf->syms) FAIL("parsed, yet no table");
    if (elf->nloads > KF_ELF_MAX_LOADS) FAIL("%zu loads", elf->nloads);
    /* Every 8 bytes of the input as an address, and as a file offset. */
    for (size_t i = 0; i + 8 <= size && i < 4096; i += 8) {
      uint64_t v;
      memcpy(&v, image + i, 8);
      check_lookup(elf, v);
      uint64_t vaddr;
      if (kf_elf_vaddr(elf, v, &vaddr) == 0) check_lookup(elf, vaddr);
    }
    for (size_t i = 0; i < elf->nloads; i++) {
      check_lookup(elf, elf->loads[i].vaddr);
      uint64_t vaddr;
      if (kf_elf_vaddr(elf, elf->loads[i].offset, &vaddr) == 0) check_lookup(elf, vaddr);
    }
    kf_elf_free(elf);
  } else if (rc != -ENOEXEC && rc != -ENOMEM) {
    FAIL("unexpected code %d", rc);
  }
  free(image);
  return 0;
}

/*
 * symtab: one sorted address -> name table, the common shape of every symbol
 * source (kallsyms, ELF .symtab/.dynsym). Build it with add() in any order,
 * seal it with finish(), then look addresses up. A sealed table is read-only
 * and may be read from any thread; building it is single-threaded.
 */
#ifndef KF_SYMTAB_H
#define KF_SYMTAB_H

#include <stddef.h>
#include <stdint.h>

typedef struct kf_symtab kf_symtab_t;

typedef struct kf_sym {
  uint64_t start;
  uint64_t size;        /* 0 on input means "until the next symbol" */
  uint32_t name_off;    /* into the table's string pool */
  uint32_t name_len;
} kf_sym_t;

kf_symtab_t *kf_symtab_new(void);
void kf_symtab_free(kf_symtab_t *tab);

/* Copies name[0..len). Returns 0 or -ENOMEM. */
int kf_symtab_add(kf_symtab_t *tab, uint64_t start, uint64_t size,
                  const char *name, size_t len);

/* Sorts, drops duplicate starts (the sized, first-added one wins) and gives
 * every zero-size symbol the gap to the next symbol, the last one the gap to
 * `end` (or 1 byte if end is not above it). */
void kf_symtab_finish(kf_symtab_t *tab, uint64_t end);

/* The symbol whose [start, start+size) holds addr, or NULL. */
const kf_sym_t *kf_symtab_lookup(const kf_symtab_t *tab, uint64_t addr);

/* The symbol's name; not NUL-terminated, length in sym->name_len. */
const char *kf_symtab_name(const kf_symtab_t *tab, const kf_sym_t *sym);

size_t kf_symtab_count(const kf_symtab_t *tab);

/* Bytes the table holds. */
size_t kf_symtab_bytes(const kf_symtab_t *tab);

#endif

#include "symbols/symtab.h"

#include "util/grow.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct kf_symtab {
  kf_sym_t *syms;
  size_t count, cap;
  char *pool;
  size_t pool_len, pool_cap;
};

kf_symtab_t *kf_symtab_new(void) { return calloc(1, sizeof(kf_symtab_t)); }

void kf_symtab_free(kf_symtab_t *tab) {
  if (!tab) return;
  free(tab->syms);
  free(tab->pool);
  free(tab);
}

int kf_symtab_add(kf_symtab_t *tab, uint64_t start, uint64_t size,
                  const char *name, size_t len) {
  if (len > UINT32_MAX || tab->pool_len + len > UINT32_MAX) return -ENOMEM;
  if (kf_grow((void **)&tab->syms, &tab->cap, tab->count + 1, sizeof(kf_sym_t), 256) ||
      kf_grow((void **)&tab->pool, &tab->pool_cap, tab->pool_len + len, 1, 4096))
    return -ENOMEM;
  memcpy(tab->pool + tab->pool_len, name, len);
  tab->syms[tab->count++] = (kf_sym_t){
      .start = start,
      .size = size,
      .name_off = (uint32_t)tab->pool_len,
      .name_len = (uint32_t)len,
  };
  tab->pool_len += len;
  return 0;
}

/* Order by address; at one address the sized symbol first, then the one
 * added first (name_off grows with insertion order), so finish() is stable. */
static int by_start(const void *a, const void *b) {
  const kf_sym_t *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  if ((x->size == 0) != (y->size == 0)) return x->size == 0 ? 1 : -1;
  return x->name_off < y->name_off ? -1 : x->name_off > y->name_off;
}

void kf_symtab_finish(kf_symtab_t *tab, uint64_t end) {
  if (tab->count == 0) return;
  qsort(tab->syms, tab->count, sizeof(kf_sym_t), by_start);
  size_t out = 0;
  for (size_t i = 0; i < tab->count; i++) {
    if (out > 0 && tab->syms[out - 1].start == tab->syms[i].start) continue;
    tab->syms[out++] = tab->syms[i];
  }
  tab->count = out;
  for (size_t i = 0; i < out; i++) {
    kf_sym_t *s = &tab->syms[i];
    if (s->size != 0) continue;
    uint64_t limit = i + 1 < out ? tab->syms[i + 1].start : end;
    s->size = limit > s->start ? limit - s->start : 1;
  }
}

const kf_sym_t *kf_symtab_lookup(const kf_symtab_t *tab, uint64_t addr) {
  /* Find the last symbol starting at or below addr. */
  size_t lo = 0, hi = tab->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (tab->syms[mid].start <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  const kf_sym_t *s = &tab->syms[lo - 1];
  return addr - s->start < s->size ? s : NULL;
}

const char *kf_symtab_name(const kf_symtab_t *tab, const kf_sym_t *sym) {
  return tab->pool + sym->name_off;
}

size_t kf_symtab_count(const kf_symtab_t *tab) { return tab->count; }

size_t kf_symtab_bytes(const kf_symtab_t *tab) {
  return tab ? sizeof(*tab) + tab->cap * sizeof(kf_sym_t) + tab->pool_cap : 0;
}

#define _GNU_SOURCE
#include "unwind/dwarfunwind.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <libunwind.h>
#include <link.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/grow.h"
#include "util/hash.h"

/* libunwind's search of an .eh_frame_hdr table (exported, not declared in
 * its public headers; perf declares it the same way). */
extern int UNW_OBJ(dwarf_search_unwind_table)(unw_addr_space_t as, unw_word_t ip,
                                              unw_dyn_info_t *di,
                                              unw_proc_info_t *pi,
                                              int need_unwind_info, void *arg);

#define RELOAD_NS 100000000ULL
#define KNOWN_ENDS 1024 /* a power of two; half full: no more are noted */
#define MAX_SEGMENTS 8

/* .eh_frame_hdr encodings (DW_EH_PE_*) kflame reads: the table is always
 * datarel|sdata4 in what the GNU and LLVM linkers write. */
#define EH_PE_udata4 0x03
#define EH_PE_sdata4 0x0b
#define EH_PE_udata8 0x04
#define EH_PE_sdata8 0x0c
#define EH_PE_datarel_sdata4 0x3b

typedef struct object {
  uint64_t text_lo, text_hi;   /* executable segments, [lo, hi) */
  /* read-only loaded segments: text, .eh_frame, .eh_frame_hdr (a garbage
   * CFA never reads the object's writable data as a stack) */
  uint64_t seg_lo[MAX_SEGMENTS], seg_hi[MAX_SEGMENTS];
  size_t nsegs;
  uint64_t eh_hdr;             /* .eh_frame_hdr, 0: none usable */
  uint64_t table;              /* its binary-search table */
  uint64_t fde_count;
  int main_program;            /* keeps frame pointers (node's builds) */
} object_t;

struct kf_dwarf {
  unw_addr_space_t as;
  object_t *objects;
  size_t nobjects, cap;
  uint64_t loaded_at;
  uint64_t adds, subs; /* glibc's load counts when loaded (0: unknown) */
  kf_dwarf_stats_t stats;
  struct {
    uint64_t ip; /* 0: empty (open addressing) */
    size_t n;
    uint64_t frames[KF_DWARF_MAX_END_FRAMES];
  } ends[KNOWN_ENDS]; /* see kf_dwarf_ends */
  size_t nends;
};

/* What the accessors see of one unwind. */
typedef struct unwind_ctx {
  kf_dwarf_t *d;
  const kf_userstack_t *stack;
} unwind_ctx_t;

/* ---- objects ---------------------------------------------------------- */

static int in_segments(const object_t *o, uint64_t addr, size_t len) {
  for (size_t i = 0; i < o->nsegs; i++)
    if (addr >= o->seg_lo[i] && addr <= o->seg_hi[i] && len <= o->seg_hi[i] - addr)
      return 1;
  return 0;
}

/* The table of an .eh_frame_hdr at `hdr` (inside the object's segments). */
static void read_eh_hdr(object_t *o, uint64_t hdr) {
  if (!in_segments(o, hdr, 4)) return;
  const unsigned char *p = (const unsigned char *)(uintptr_t)hdr;
  if (p[0] != 1 || p[3] != EH_PE_datarel_sdata4) return;
  size_t ptr_size = (p[1] & 0x0f) == EH_PE_udata4 || (p[1] & 0x0f) == EH_PE_sdata4 ? 4
                    : (p[1] & 0x0f) == EH_PE_udata8 || (p[1] & 0x0f) == EH_PE_sdata8 ? 8
                                                                                        : 0;
  if (!ptr_size || (p[2] != EH_PE_udata4 && p[2] != EH_PE_sdata4)) return;
  uint64_t count_at = hdr + 4 + ptr_size;
  if (!in_segments(o, count_at, 4)) return;
  uint32_t count;
  memcpy(&count, (const void *)(uintptr_t)count_at, 4);
  uint64_t table = count_at + 4;
  if (count == 0 || !in_segments(o, table, (size_t)count * 8)) return;
  o->eh_hdr = hdr;
  o->table = table;
  o->fde_count = count;
}

/* glibc's counts of the objects it has loaded and unloaded, given with
 * every object dl_iterate_phdr reports (older C libraries give none). */
static int load_counts(const struct dl_phdr_info *info, size_t size,
                       uint64_t *adds, uint64_t *subs) {
  if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) return -1;
  *adds = info->dlpi_adds;
  *subs = info->dlpi_subs;
  return 0;
}

static int first_load_counts(struct dl_phdr_info *info, size_t size, void *arg) {
  uint64_t *counts = arg;
  if (load_counts(info, size, &counts[0], &counts[1]) != 0) counts[0] = counts[1] = 0;
  return 1; /* the first object says it */
}

/* Whether an object was loaded or unloaded since load_objects: one
 * callback, where reading every object's headers again would take a
 * hundred (asked for addresses in no object, JS code among them, at most
 * every RELOAD_NS). */
static int objects_changed(const kf_dwarf_t *d) {
  uint64_t counts[2] = {0, 0};
  dl_iterate_phdr(first_load_counts, counts);
  return counts[0] == 0 || d->adds == 0 || counts[0] != d->adds || counts[1] != d->subs;
}

static int add_object(struct dl_phdr_info *info, size_t size, void *arg) {
  kf_dwarf_t *d = arg;
  if (load_counts(info, size, &d->adds, &d->subs) != 0) d->adds = d->subs = 0;
  if (kf_grow((void **)&d->objects, &d->cap, d->nobjects + 1, sizeof(object_t), 32)) {
    d->adds = d->subs = 0; /* some are missing: look again next time */
    return 1;
  }
  object_t o = {.text_lo = UINT64_MAX, .main_program = info->dlpi_name[0] == '\0'};
  uint64_t eh = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uint64_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (ph->p_type == PT_GNU_EH_FRAME) eh = lo;
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R)) continue;
    if (o.nsegs < MAX_SEGMENTS && !(ph->p_flags & PF_W)) {
      o.seg_lo[o.nsegs] = lo;
      /* Only what the file backs: the rest of p_memsz (.bss) may be
       * unmapped past the last page the kernel filled. */
      o.seg_hi[o.nsegs++] = lo + ph->p_filesz;
    }
    if (ph->p_flags & PF_X) {
      if (lo < o.text_lo) o.text_lo = lo;
      if (hi > o.text_hi) o.text_hi = hi;
    }
  }
  if (o.text_lo >= o.text_hi) return 0;
  if (eh) read_eh_hdr(&o, eh);
  d->objects[d->nobjects++] = o;
  return 0;
}

static int by_text(const void *a, const void *b) {
  const object_t *x = a, *y = b;
  return x->text_lo < y->text_lo ? -1 : x->text_lo > y->text_lo;
}

/* The objects' text ranges, to tell whether a reload changed anything. */
static uint64_t text_ranges_hash(const kf_dwarf_t *d) {
  uint64_t h = KF_FNV_OFFSET ^ d->nobjects;
  for (size_t i = 0; i < d->nobjects; i++)
    h = kf_fnv_word(kf_fnv_word(h, d->objects[i].text_lo), d->objects[i].text_hi);
  return h;
}

/* Sorted by text, for object_at's binary search. libunwind's cache is
 * flushed only when the objects changed: JIT addresses miss every time, and
 * reload (at most every RELOAD_NS) for nothing new. */
static void load_objects(kf_dwarf_t *d) {
  uint64_t before = text_ranges_hash(d);
  d->nobjects = 0;
  dl_iterate_phdr(add_object, d);
  qsort(d->objects, d->nobjects, sizeof(object_t), by_text);
  d->loaded_at = kf_now_ns();
  if (text_ranges_hash(d) != before) unw_flush_cache(d->as, 0, 0);
}

static const object_t *find_object(const kf_dwarf_t *d, uint64_t ip) {
  size_t lo = 0, hi = d->nobjects;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (d->objects[mid].text_hi <= ip) lo = mid + 1;
    else hi = mid;
  }
  return lo < d->nobjects && ip >= d->objects[lo].text_lo ? &d->objects[lo] : NULL;
}

static const object_t *object_at(kf_dwarf_t *d, uint64_t ip) {
  const object_t *o = find_object(d, ip);
  /* A library loaded since: look again, but not for every stray address. */
  if (!o && kf_now_ns() - d->loaded_at >= RELOAD_NS) {
    if (objects_changed(d)) {
      load_objects(d);
      o = find_object(d, ip);
    } else {
      d->loaded_at = kf_now_ns();
    }
  }
  return o;
}

/* ---- libunwind's accessors -------------------------------------------- */

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
                          int need_unwind_info, void *arg) {
  unwind_ctx_t *ctx = arg;
  const object_t *o = object_at(ctx->d, ip);
  if (!o || !o->eh_hdr) return -UNW_ENOINFO;
  unw_dyn_info_t di;
  memset(&di, 0, sizeof di);
  di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
  di.start_ip = o->text_lo;
  di.end_ip = o->text_hi;
  di.u.rti.segbase = o->eh_hdr;
  di.u.rti.table_data = o->table;
  di.u.rti.table_len = o->fde_count * 8 / sizeof(unw_word_t);
  return UNW_OBJ(dwarf_search_unwind_table)(as, ip, &di, pi, need_unwind_info, arg);
}

/* libunwind frees what dwarf_search_unwind_table gave (UNW_INFO_FORMAT_TABLE
 * proc info, from its own pool); this is only asked for dynamic info. */
static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg) {
  (void)as, (void)pi, (void)arg;
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *addr, void *arg) {
  (void)as, (void)addr, (void)arg;
  return -UNW_ENOINFO;
}

/* A word of a loaded object's read-only memory, inside a segment the
 * caller checked. Not instrumented: under ASan an object's own rodata has
 * redzones between its globals, which a garbage CFA may point at. */
__attribute__((no_sanitize_address)) static uint64_t object_word(uint64_t addr) {
  return *(volatile const uint64_t *)(uintptr_t)addr;
}

/* The stack copy, else the read-only loaded segments of a known object
 * (unwind tables, and code libunwind looks at for signal frames); nothing
 * else. */
static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val,
                      int write, void *arg) {
  (void)as;
  unwind_ctx_t *ctx = arg;
  if (write) return -UNW_EINVAL;
  uint64_t word;
  if (kf_userstack_word(ctx->stack, addr, &word) == 0) {
    *val = word;
    return 0;
  }
  kf_dwarf_t *d = ctx->d;
  for (size_t i = 0; i < d->nobjects; i++) {
    if (in_segments(&d->objects[i], addr, 8)) {
      *val = object_word(addr);
      return 0;
    }
  }
  return -UNW_EINVAL;
}

/* What a sample carries: ip, sp and bp. Unwinding needs no other register
 * for code that follows the x86-64 ABI's CFA rules. */
static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val,
                      int write, void *arg) {
  (void)as;
  const kf_userstack_t *s = ((unwind_ctx_t *)arg)->stack;
  if (write) return -UNW_EINVAL;
  switch (reg) {
    case UNW_X86_64_RIP: *val = s->ip; return 0;
    case UNW_X86_64_RSP: *val = s->sp; return 0;
    case UNW_X86_64_RBP: *val = s->bp; return 0;
    default: return -UNW_EBADREG;
  }
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val,
                        int write, void *arg) {
  (void)as, (void)reg, (void)val, (void)write, (void)arg;
  return -UNW_EBADREG;
}

static int resume(unw_addr_space_t as, unw_cursor_t *c, void *arg) {
  (void)as, (void)c, (void)arg;
  return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf,
                         size_t len, unw_word_t *off, void *arg) {
  (void)as, (void)addr, (void)buf, (void)len, (void)off, (void)arg;
  return -UNW_EINVAL;
}

static unw_accessors_t accessors = {
    .find_proc_info = find_proc_info,
    .put_unwind_info = put_unwind_info,
    .get_dyn_info_list_addr = get_dyn_info_list_addr,
    .access_mem = access_mem,
    .access_reg = access_reg,
    .access_fpreg = access_fpreg,
    .resume = resume,
    .get_proc_name = get_proc_name,
};

/* ---- the interface -------------------------------------------------------- */

void kf_dwarf_init_library(void) {
  kf_dwarf_t none = {0};
  kf_userstack_t empty = {0};
  unwind_ctx_t ctx = {.d = &none, .stack = &empty};
  unw_addr_space_t as = unw_create_addr_space(&accessors, 0);
  if (!as) return;
  unw_cursor_t cursor;
  unw_init_remote(&cursor, as, &ctx); /* runs libunwind's one-time set-up */
  unw_destroy_addr_space(as);
}

kf_dwarf_t *kf_dwarf_new(void) {
  kf_dwarf_t *d = calloc(1, sizeof(*d));
  if (!d) return NULL;
  d->as = unw_create_addr_space(&accessors, 0);
  if (!d->as) {
    free(d);
    return NULL;
  }
  unw_set_caching_policy(d->as, UNW_CACHE_GLOBAL);
  load_objects(d);
  return d;
}

void kf_dwarf_free(kf_dwarf_t *d) {
  if (!d) return;
  unw_destroy_addr_space(d->as);
  free(d->objects);
  free(d);
}

const kf_dwarf_stats_t *kf_dwarf_stats(const kf_dwarf_t *d) { return &d->stats; }

static size_t end_slot(uint64_t ip) { return kf_hash_fib(ip, KNOWN_ENDS); }

int kf_dwarf_ends(const kf_dwarf_t *d, uint64_t ip, uint64_t *out) {
  for (size_t i = end_slot(ip); d->ends[i].ip; i = (i + 1) & (KNOWN_ENDS - 1)) {
    if (d->ends[i].ip != ip) continue;
    memcpy(out, d->ends[i].frames, d->ends[i].n * sizeof(uint64_t));
    return (int)d->ends[i].n;
  }
  return -1;
}

void kf_dwarf_note_end(kf_dwarf_t *d, uint64_t ip, const uint64_t *frames, size_t n) {
  uint64_t seen[KF_DWARF_MAX_END_FRAMES];
  if (!ip || n > KF_DWARF_MAX_END_FRAMES || d->nends >= KNOWN_ENDS / 2 ||
      kf_dwarf_ends(d, ip, seen) >= 0)
    return;
  size_t i = end_slot(ip);
  while (d->ends[i].ip) i = (i + 1) & (KNOWN_ENDS - 1);
  d->ends[i].ip = ip;
  d->ends[i].n = n;
  memcpy(d->ends[i].frames, frames, n * sizeof(uint64_t));
  d->nends++;
}

int kf_dwarf_object_kind(kf_dwarf_t *d, uint64_t ip) {
  const object_t *o = object_at(d, ip);
  return !o ? KF_DWARF_NO_OBJECT : o->main_program ? KF_DWARF_MAIN_PROGRAM : KF_DWARF_LIBRARY;
}

/* The frame `cursor` stands at as a sample of its own: its registers and
 * the part of the copy from its sp on. 0, or -1 when its sp or rbp do not
 * fit the copy, or its rbp is not the start of a frame-pointer chain (a
 * frame record in the copy whose link moves up or ends): some functions
 * of the main program keep no frame pointer either (parts of libuv). */
static int frame_as_sample(unw_cursor_t *cursor, const kf_userstack_t *stack,
                           uint64_t ip, kf_userstack_t *out) {
  unw_word_t sp, bp;
  if (unw_get_reg(cursor, UNW_REG_SP, &sp) != 0 ||
      unw_get_reg(cursor, UNW_X86_64_RBP, &bp) != 0 || sp < stack->sp ||
      sp - stack->sp >= stack->len || bp < sp || (bp & 7) != 0)
    return -1;
  uint64_t skip = sp - stack->sp, link, ret;
  *out = (kf_userstack_t){.ip = ip, .sp = sp, .bp = bp,
                          .bytes = stack->bytes + skip, .len = stack->len - skip};
  if (kf_userstack_word(out, bp, &link) != 0 || kf_userstack_word(out, bp + 8, &ret) != 0 ||
      (link != 0 && link <= bp))
    return -1;
  return 0;
}

int kf_dwarf_fix(kf_dwarf_t *d, const kf_userstack_t *stack,
                 const uint64_t *user, size_t nuser, kf_dwarf_fix_t *fix) {
  if (nuser < 1 || !stack->len || user[0] != stack->ip) return 0;
  const object_t *leaf = object_at(d, stack->ip);
  if (!leaf) return 0;
  uint64_t next = nuser > 1 ? user[1] : 0; /* the walk's caller of the leaf */
  /* The main program keeps frame pointers, but not in its assembly (the
   * OpenSSL node links in): there, only a walk that went nowhere (no
   * caller, or one in no object) is worth an unwind. */
  if (leaf->main_program && next && object_at(d, next)) return 0;
  d->stats.tried++;

  /* Steps up from the leaf. At frame n (n >= 1): met the walked chain
   * (its ip is user[1]); or in the main program with the sample's rbp
   * still in place (the walk went through this frame: one more step meets
   * it, or fails in code without tables, V8's builtins); or in the main
   * program with another rbp (the walk was misled: restart from here). */
  unwind_ctx_t ctx = {.d = d, .stack = stack};
  unw_cursor_t cursor;
  size_t n = 0;
  int same_bp = 1;
  memset(fix, 0, sizeof *fix);
  if (unw_init_remote(&cursor, d->as, &ctx) != 0) goto broke;
  for (;;) {
    int stepped = unw_step(&cursor);
    if (stepped == 0 && n > 0 && !same_bp) {
      /* The thread's outermost frame: the unwind is the whole chain. */
      fix->restart = 1;
      fix->tail = (kf_userstack_t){0};
      break;
    }
    if (stepped <= 0) {
      /* Stopped in a frame without unwind tables. With the sample's rbp
       * still in place the walk's next frame is this frame's caller. */
      if (same_bp && n > 0) break;
      goto broke;
    }
    unw_word_t ip, bp;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) goto broke;
    if (next && ip == next) break; /* met the chain */
    same_bp = same_bp && unw_get_reg(&cursor, UNW_X86_64_RBP, &bp) == 0 && bp == stack->bp;
    const object_t *o = object_at(d, ip);
    if (o && o->main_program && !same_bp &&
        frame_as_sample(&cursor, stack, ip, &fix->tail) == 0) {
      fix->restart = 1;
      break;
    }
    if (n == KF_DWARF_MAX_FRAMES) goto broke;
    fix->frames[n++] = ip;
  }
  fix->n = n;
  if (n == 0 && !fix->restart) return 0; /* nothing was missing */
  d->stats.recovered++;
  d->stats.frames += n;
  return 1;
broke:
  d->stats.broke++;
  return 0;
}

void kf_dwarf_count_sample(kf_dwarf_t *d, const kf_dwarf_stats_t *before) {
  kf_dwarf_stats_t *s = &d->stats;
  int tried = s->tried > before->tried, recovered = s->recovered > before->recovered;
  s->tried = before->tried + (uint64_t)tried;
  s->recovered = before->recovered + (uint64_t)recovered;
  s->broke = before->broke + (uint64_t)(tried && !recovered);
}

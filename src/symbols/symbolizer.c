#define _GNU_SOURCE
#include "symbols/symbolizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "symbols/debugfile.h"
#include "symbols/elfsyms.h"
#include "util/grow.h"
#include "util/hash.h"
#include "symbols/kallsyms.h"
#include "symbols/procmaps.h"

/* From libstdc++ (the C++ ABI); linked in for the addon and the tests. */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len,
                            int *status);

typedef struct object {
  uint32_t dev_major, dev_minor;
  uint64_t inode;
  char *path;
  kf_elf_t *elf; /* NULL when the file could not be read as ELF */
} object_t;

typedef struct named {
  uint64_t key; /* ip << 1 | kernel; 0 = empty slot */
  char *name;
} named_t;

struct kf_symbolizer {
  kf_maps_t maps;
  object_t *objects; /* per (device, inode), kept across profiles */
  size_t nobjects, objects_cap;
  kf_elf_t *vdso;
  int vdso_tried;
  kf_symtab_t *kernel;
  int kernel_tried, kernel_hidden;
  named_t *names; /* hash: per profile */
  size_t nnames, names_cap;
  kf_symbolizer_stats_t stats; /* per profile */
  char *debug_dirs_text;       /* KFLAME_DEBUG_DIRS, split at ':' */
  const char *debug_dirs[8];
  size_t ndebug_dirs;
};

/* Debug directories: KFLAME_DEBUG_DIRS (colon-separated absolute paths,
 * at most 8; empty: none), else /usr/lib/debug. */
static int read_debug_dirs(kf_symbolizer_t *s) {
  const char *env = getenv("KFLAME_DEBUG_DIRS");
  if (!env) {
    s->debug_dirs[s->ndebug_dirs++] = "/usr/lib/debug";
    return 0;
  }
  if (!(s->debug_dirs_text = strdup(env))) return -ENOMEM;
  char *save = NULL;
  for (char *d = strtok_r(s->debug_dirs_text, ":", &save); d && s->ndebug_dirs < 8;
       d = strtok_r(NULL, ":", &save))
    if (d[0] == '/') s->debug_dirs[s->ndebug_dirs++] = d;
  return 0;
}

kf_symbolizer_t *kf_symbolizer_new(void) {
  kf_symbolizer_t *s = calloc(1, sizeof(kf_symbolizer_t));
  if (s && read_debug_dirs(s) != 0) {
    free(s);
    return NULL;
  }
  return s;
}

static void forget_names(kf_symbolizer_t *s) {
  for (size_t i = 0; i < s->names_cap; i++) free(s->names[i].name);
  free(s->names);
  s->names = NULL;
  s->nnames = s->names_cap = 0;
}

void kf_symbolizer_drop(kf_symbolizer_t *s) {
  forget_names(s);
  kf_maps_free(&s->maps);
  for (size_t i = 0; i < s->nobjects; i++) {
    free(s->objects[i].path);
    kf_elf_free(s->objects[i].elf);
  }
  free(s->objects);
  s->objects = NULL;
  s->nobjects = s->objects_cap = 0;
  kf_elf_free(s->vdso);
  s->vdso = NULL;
  s->vdso_tried = 0;
  kf_symtab_free(s->kernel);
  s->kernel = NULL;
  s->kernel_tried = s->kernel_hidden = 0;
}

void kf_symbolizer_cache(const kf_symbolizer_t *s, kf_symbolizer_cache_t *out) {
  memset(out, 0, sizeof(*out));
  for (size_t i = 0; i < s->nobjects; i++) {
    const kf_elf_t *elf = s->objects[i].elf;
    out->objects++;
    if (!elf) continue;
    out->symbols += kf_symtab_count(elf->syms);
    out->bytes += kf_symtab_bytes(elf->syms);
  }
  if (s->kernel) {
    out->symbols += kf_symtab_count(s->kernel);
    out->bytes += kf_symtab_bytes(s->kernel);
  }
  for (size_t i = 0; i < s->names_cap; i++)
    if (s->names[i].name) out->bytes += strlen(s->names[i].name) + 1;
  out->bytes += s->names_cap * sizeof(named_t);
}

void kf_symbolizer_free(kf_symbolizer_t *s) {
  if (!s) return;
  kf_symbolizer_drop(s);
  free(s->debug_dirs_text);
  free(s);
}

int kf_symbolizer_begin(kf_symbolizer_t *s) {
  forget_names(s);
  memset(&s->stats, 0, sizeof s->stats);
  kf_maps_free(&s->maps);
  return kf_maps_load(&s->maps);
}

static const char *basename_of(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

static object_t *object_for(kf_symbolizer_t *s, const kf_mapping_t *m) {
  for (size_t i = 0; i < s->nobjects; i++) {
    object_t *o = &s->objects[i];
    if (o->inode == m->inode && o->dev_major == m->dev_major &&
        o->dev_minor == m->dev_minor && strcmp(o->path, m->path) == 0)
      return o;
  }
  if (kf_grow((void **)&s->objects, &s->objects_cap, s->nobjects + 1,
              sizeof(object_t), 16))
    return NULL;
  char *path = strdup(m->path);
  if (!path) return NULL;
  object_t *o = &s->objects[s->nobjects++];
  *o = (object_t){.dev_major = m->dev_major, .dev_minor = m->dev_minor,
                  .inode = m->inode, .path = path};
  if (kf_elf_load(path, &o->elf) != 0) o->elf = NULL;
  kf_elf_t *debug;
  if (o->elf && o->elf->syms_from != KF_SYMS_SYMTAB &&
      kf_debugfile_find(path, o->elf, s->debug_dirs, s->ndebug_dirs, &debug) == 0)
    kf_elf_adopt_symbols(o->elf, debug);
  return o;
}

static kf_elf_t *vdso_elf(kf_symbolizer_t *s, const kf_mapping_t *m) {
  if (!s->vdso_tried) {
    s->vdso_tried = 1;
    void *image = (void *)getauxval(AT_SYSINFO_EHDR);
    if (image && (uint64_t)image == m->start &&
        kf_elf_parse(image, m->end - m->start, &s->vdso) != 0)
      s->vdso = NULL;
  }
  return s->vdso;
}

/* Symbol name of a user address, demangled, or "[object]". */
static char *user_name(kf_symbolizer_t *s, uint64_t ip) {
  const kf_mapping_t *m = kf_maps_find(&s->maps, ip);
  if (!m) return strdup("[unknown]");
  if (m->path[0] == '\0' || strncmp(m->path, "[anon", 5) == 0)
    return strdup("[jit]_[j]");

  kf_elf_t *elf = NULL;
  if (strcmp(m->path, "[vdso]") == 0) elf = vdso_elf(s, m);
  else if (m->path[0] == '/') {
    object_t *o = object_for(s, m);
    elf = o ? o->elf : NULL;
  }
  uint64_t file_off = ip - m->start + m->offset, vaddr;
  if (elf && kf_elf_vaddr(elf, file_off, &vaddr) == 0) {
    const kf_sym_t *sym = kf_symtab_lookup(elf->syms, vaddr);
    if (sym) {
      if (elf->syms_from == KF_SYMS_DEBUG_FILE || elf->syms_from == KF_SYMS_MINIDEBUG)
        s->stats.from_debug++;
      char *raw = strndup(kf_symtab_name(elf->syms, sym), sym->name_len);
      if (!raw) return NULL;
      int status = -1;
      char *pretty = raw[0] == '_' && raw[1] == 'Z'
                         ? __cxa_demangle(raw, NULL, NULL, &status)
                         : NULL;
      if (pretty && status == 0) {
        free(raw);
        return pretty;
      }
      free(pretty);
      return raw;
    }
  }
  /* perf and FlameGraph's way: one frame for all of the object's unnamed
   * code, not one per address (a hot function of a stripped library would
   * split into slivers). */
  s->stats.folded++;
  char *out;
  if (asprintf(&out, "[%s]", basename_of(m->path)) < 0) return NULL;
  return out;
}

static void load_kernel(kf_symbolizer_t *s) {
  if (s->kernel_tried) return;
  s->kernel_tried = 1;
  if (kf_kallsyms_load(&s->kernel, &s->kernel_hidden) != 0) {
    s->kernel = NULL;
    s->kernel_hidden = 1;
  }
}

void kf_symbolizer_preload(kf_symbolizer_t *s, int kernel) {
  if (kf_symbolizer_begin(s) != 0) return;
  for (size_t i = 0; i < s->maps.count; i++) {
    const kf_mapping_t *m = &s->maps.maps[i];
    if (m->exec && m->path[0] == '/') object_for(s, m);
  }
  if (kernel) load_kernel(s);
}

static char *kernel_name(kf_symbolizer_t *s, uint64_t ip) {
  load_kernel(s);
  if (s->kernel_hidden || !s->kernel) return strdup("[kernel]_[k]");
  const kf_sym_t *sym = kf_symtab_lookup(s->kernel, ip);
  if (!sym) return strdup("[unknown]_[k]");
  char *out;
  if (asprintf(&out, "%.*s_[k]", (int)sym->name_len,
               kf_symtab_name(s->kernel, sym)) < 0)
    return NULL;
  return out;
}

static int grow_names(kf_symbolizer_t *s) {
  size_t cap = s->names_cap ? s->names_cap * 2 : 4096;
  named_t *t = calloc(cap, sizeof(named_t));
  if (!t) return -ENOMEM;
  for (size_t i = 0; i < s->names_cap; i++) {
    if (!s->names[i].key) continue;
    size_t j = kf_hash_fib(s->names[i].key, cap);
    while (t[j].key) j = (j + 1) & (cap - 1);
    t[j] = s->names[i];
  }
  free(s->names);
  s->names = t;
  s->names_cap = cap;
  return 0;
}

const char *kf_symbolizer_frame(kf_symbolizer_t *s, uint64_t ip, int kernel) {
  uint64_t key = ip << 1 | (kernel ? 1 : 0);
  if (key == 0) key = 2; /* ip 0 never maps; keep 0 for "empty" */
  if ((s->nnames + 1) * 2 > s->names_cap && grow_names(s) != 0)
    return "[unknown]";
  size_t j = kf_hash_fib(key, s->names_cap);
  for (; s->names[j].key; j = (j + 1) & (s->names_cap - 1))
    if (s->names[j].key == key) return s->names[j].name;
  char *name = kernel ? kernel_name(s, ip) : user_name(s, ip);
  if (!name) return "[unknown]";
  s->names[j] = (named_t){.key = key, .name = name};
  s->nnames++;
  return name;
}

int kf_symbolizer_in_libc(kf_symbolizer_t *s, uint64_t ip) {
  const kf_mapping_t *m = kf_maps_find(&s->maps, ip);
  if (!m) return 0;
  const char *base = basename_of(m->path);
  return strncmp(base, "libc.so", 7) == 0 || strncmp(base, "libc-", 5) == 0 ||
         strncmp(base, "libpthread", 10) == 0;
}

void kf_symbolizer_stats(const kf_symbolizer_t *s, kf_symbolizer_stats_t *out) {
  *out = s->stats;
}

int kf_symbolizer_kernel_hidden(kf_symbolizer_t *s) {
  return s->kernel_tried && (s->kernel_hidden || !s->kernel);
}

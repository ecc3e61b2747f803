/*
 * procmaps: the process's memory mappings, from /proc/self/maps, to tell
 * which object (and which file offset) an instruction address belongs to.
 * Built and read on the JS thread at stop().
 */
#ifndef KF_PROCMAPS_H
#define KF_PROCMAPS_H

#include <stddef.h>
#include <stdint.h>

typedef struct kf_mapping {
  uint64_t start, end; /* [start, end) */
  uint64_t offset;     /* file offset of start */
  uint64_t inode;
  uint32_t dev_major, dev_minor;
  int read, write;     /* 'r', 'w' in the permissions */
  int exec;            /* 'x' in the permissions */
  const char *path;    /* "" for anonymous; "[vdso]" etc. for specials */
} kf_mapping_t;

typedef struct kf_maps {
  kf_mapping_t *maps; /* sorted by start, as the kernel lists them */
  size_t count;
  char *text;         /* owns the path strings */
} kf_maps_t;

/* Parses maps text such as
 *   00400000-00b6f000 r--p 00000000 fe:01 1234   /usr/bin/node
 *   7f0c8c000000-7f0c8c021000 rw-p 00000000 00:00 0
 * taking ownership of `text` (malloc'd, NUL-terminated). Malformed lines are
 * skipped. Returns 0 or -ENOMEM (text is freed either way). */
int kf_maps_parse(char *text, size_t len, kf_maps_t *out);

/* Reads /proc/self/maps. Returns 0 or -errno. */
int kf_maps_load(kf_maps_t *out);

void kf_maps_free(kf_maps_t *maps);

/* Code mapped twice. V8 copies its embedded builtins next to its JIT code
 * ("short builtin calls") by mapping pages of the executable a second time;
 * its code events give the builtins' first addresses, samples the copy's.
 * Addresses [start, end) run the code at target + (addr - start). */
typedef struct kf_code_alias {
  uint64_t start, end, target;
} kf_code_alias_t;

/* The aliases among `maps`: an executable mapping of a file whose pages
 * an executable mapping at a lower address (the object as loaded) already
 * maps. Writes at most cap; returns how many. */
size_t kf_maps_code_aliases(const kf_maps_t *maps, kf_code_alias_t *out,
                            size_t cap);

/* The mapping holding addr, or NULL. */
const kf_mapping_t *kf_maps_find(const kf_maps_t *maps, uint64_t addr);

#endif

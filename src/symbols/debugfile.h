/*
 * debugfile: finds an object's separate debug file where perf and gdb look
 * for it, and takes it only when it belongs to that very build:
 *
 *   DIR/.build-id/xx/rest.debug       for each debug directory DIR
 *   OBJDIR/LINK, OBJDIR/.debug/LINK,  LINK from .gnu_debuglink
 *   DIR/OBJDIR/LINK
 *
 * A candidate counts only when its build-id equals the object's, or, for an
 * object without one, when its CRC32 equals the debuglink's: a stale debug
 * file (an older build left behind) never names anything. Debug directories
 * default to /usr/lib/debug (Debian's -dbg and -dbgsym packages); the
 * KFLAME_DEBUG_DIRS environment variable (colon-separated, read by the
 * symbolizer) replaces them. Files are only read. Called on the thread that
 * loads symbols.
 */
#ifndef KF_DEBUGFILE_H
#define KF_DEBUGFILE_H

#include <stddef.h>
#include <stdint.h>

#include "symbols/elfsyms.h"

/* The debug file of the object at `path`, parsed (`obj` is that object,
 * already parsed, for its build-id and debuglink). Returns 0 and *out, or
 * -ENOENT when there is none that matches, or -ENOMEM. */
int kf_debugfile_find(const char *path, const kf_elf_t *obj,
                      const char *const *dirs, size_t ndirs, kf_elf_t **out);

/* The CRC32 (the zlib and .gnu_debuglink one) of `len` bytes, continuing
 * from `crc` (0 to start). Pure. */
uint32_t kf_crc32(uint32_t crc, const void *buf, size_t len);

#endif

/*
 * perfmap: writes the code map's live set as a perf map (the file
 * `perf report`/`perf script` read for JIT names: /tmp/perf-PID.map),
 * through safefile.h: a temporary file beside it, renamed over it, so a
 * reader sees the old map or the new one, never half of one, and a link,
 * FIFO or device that someone planted at the path is refused, never
 * written through. The map is mode 0644 (perf reads it, often as another
 * user).
 * Any thread; does I/O, so never on V8's event path.
 */
#ifndef KF_PERFMAP_H
#define KF_PERFMAP_H

#include <stddef.h>

#include "jit/codemap.h"

/* Returns the number of lines written, -KF_ERR_UNSAFE_PATH (something other
 * than a regular file is at `path`), or -errno (nothing is left behind on
 * failure). */
long kf_perfmap_write(kf_codemap_t *map, const char *path);

#endif

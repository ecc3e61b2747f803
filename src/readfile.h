/*
 * readfile: whole files in and out of memory: reads that work for /proc
 * files whose size stat() does not tell, writes that finish or fail whole.
 * Any thread.
 */
#ifndef KF_READFILE_H
#define KF_READFILE_H

#include <stddef.h>

/* On success *text is a malloc'd, NUL-terminated buffer of *len bytes.
 * Returns 0, -ENOMEM or -errno of open/read. */
int kf_read_file(const char *path, char **text, size_t *len);

/* Maps a whole regular file read-only (MAP_POPULATE: no copy into a
 * buffer, no fault per page). *data is NULL for an empty file. Returns 0 or
 * -errno; undo with kf_unmap_file. */
int kf_map_file(const char *path, const char **data, size_t *len);
void kf_unmap_file(const char *data, size_t len);

/* Creates or truncates `path` (mode 0644) and writes len bytes. Returns 0
 * or -errno; a failed write leaves a partial file (callers that need
 * atomicity write a temporary file and rename it). */
int kf_write_file(const char *path, const char *data, size_t len);

#endif

/*
 * readfile: whole files into memory: reads that work for /proc files whose
 * size stat() does not tell, and for pipes. (Files are written through
 * safefile.h.)
 * Any thread.
 */
#ifndef KF_READFILE_H
#define KF_READFILE_H

#include <stddef.h>

/* On success *text is a malloc'd, NUL-terminated buffer of *len bytes.
 * Returns 0, -ENOMEM or -errno of open/read. */
int kf_read_file(const char *path, char **text, size_t *len);

/* Maps a whole file read-only: a regular file with MAP_POPULATE (no copy
 * into a buffer, no fault per page); a pipe, FIFO, character device or a
 * file whose size stat() does not tell is read to EOF instead (a FIFO with
 * no writer reads as empty: opening it never blocks). *data is NULL when it
 * is empty. Returns 0, -EISDIR, or -errno; undo with kf_unmap_file. */
int kf_map_file(const char *path, const char **data, size_t *len);
void kf_unmap_file(const char *data, size_t len);

#endif

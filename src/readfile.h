/*
 * readfile: reads a whole file into memory, for /proc files whose size stat()
 * does not tell. Any thread.
 */
#ifndef KF_READFILE_H
#define KF_READFILE_H

#include <stddef.h>

/* On success *text is a malloc'd, NUL-terminated buffer of *len bytes.
 * Returns 0, -ENOMEM or -errno of open/read. */
int kf_read_file(const char *path, char **text, size_t *len);

#endif

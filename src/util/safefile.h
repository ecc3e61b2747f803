/*
 * safefile: the one way kflame's C core writes a file (perf maps, SVGs,
 * anything streamed later), so that no other user can steer the write, even
 * when kflame runs as root and the target's directory is shared (/tmp, a
 * world-writable KFLAME_OUT):
 *
 *  - the bytes go to a temporary file in the target's directory, named
 *    ".kflame-<16 random hex digits>.tmp" (getrandom(2), not pid or time, so
 *    no one can plant a link there in advance), created with
 *    O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC: it is a new inode of ours
 *    or the open fails, a link at that name is never followed;
 *  - commit fsyncs it, then looks at what the target is (lstat, no
 *    following): nothing or a regular file -> rename(2) over it; a symbolic
 *    link, device, FIFO, socket or directory -> the temporary file is
 *    removed and the target left as it was (-KF_ERR_UNSAFE_PATH);
 *  - on any failure nothing is left behind, and the target is untouched.
 *
 * Readers see the old file or the whole new one, never half of one. A
 * hard link to someone else's file at the target is a regular file: rename
 * replaces the directory entry, the other file's bytes stay as they were.
 *
 * The directory part of the path is resolved once, at open, and may go
 * through symbolic links (a symlinked output directory is a legitimate
 * setup); every later step (create, look, rename) is relative to that
 * directory's descriptor, so swapping a path component afterwards changes
 * nothing. Who may write into that directory is the caller's concern
 * (lib/safefile.js checks the directories it creates).
 *
 * Any thread; handles are not shared between threads. Does blocking I/O
 * (fsync), so never on V8's event path.
 */
#ifndef KF_SAFEFILE_H
#define KF_SAFEFILE_H

#include <stddef.h>

typedef struct kf_safefile kf_safefile_t;

/* Creates the temporary file for `path`, mode `mode` (as open(2): the
 * umask applies). Returns 0 and *out, or -errno (-EISDIR for a path that
 * ends in '/', "." or ".."; -EEXIST if 16 random names were all taken).
 * The target is not looked at yet: that is commit's job. */
int kf_safefile_open(const char *path, unsigned mode, kf_safefile_t **out);

/* Appends len bytes (buffered; large writes go straight through). Returns
 * 0 or -errno; an error sticks: later writes and the commit return it. */
int kf_safefile_write(kf_safefile_t *f, const void *data, size_t len);

/* Flushes, fsyncs, checks the target and renames the temporary file over
 * it. Always ends the handle (frees it; on failure removes the temporary
 * file). Returns 0, -KF_ERR_UNSAFE_PATH (something other than a regular
 * file is at the target), or -errno. */
int kf_safefile_commit(kf_safefile_t *f);

/* Commit without fsync: for a file rewritten often and worthless after a
 * crash (the perf map, on the collector thread, which must not wait for a
 * disk). The rename still makes it appear whole or not at all to readers. */
void kf_safefile_skip_sync(kf_safefile_t *f);

/* Removes the temporary file and frees the handle. NULL is a no-op. */
void kf_safefile_abort(kf_safefile_t *f);

/* open + one write + commit. */
int kf_safefile_write_all(const char *path, const void *data, size_t len,
                          unsigned mode);

#endif

/*
 * xz: decompresses one .xz stream held in memory, with a bound on what it
 * may produce, for MiniDebugInfo (the .gnu_debugdata section: an
 * xz-compressed ELF with the symbols .dynsym lacks, as Fedora ships).
 * A thin wrapper over liblzma (xz-utils' library, on Debian a dependency of
 * libunwind and of systemd). Pure: memory in, memory out; any thread.
 */
#ifndef KF_XZ_H
#define KF_XZ_H

#include <stddef.h>

/* Decompresses `in` into a new buffer of at most `max_out` bytes (*out,
 * free() it; *out_len its length). Returns 0, -ENOMEM, -EFBIG when the
 * result would pass max_out, or -EBADMSG for data that is not a whole,
 * valid .xz stream. Time and memory are linear in the input and output. */
int kf_xz_decode(const void *in, size_t in_len, size_t max_out, void **out,
                 size_t *out_len);

#endif

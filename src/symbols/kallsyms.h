/*
 * kallsyms: kernel text symbols from /proc/kallsyms.
 *
 * Unprivileged readers (kptr_restrict) see every address as zero; that is
 * reported as `hidden` so callers can name kernel frames `[kernel]` instead
 * of guessing. Called from the JS thread at stop().
 */
#ifndef KF_KALLSYMS_H
#define KF_KALLSYMS_H

#include <stddef.h>

#include "symbols/symtab.h"

/* Parses kallsyms text, keeping text symbols (types t, T, w, W):
 *   ffffffff81000000 T _stext
 *   ffffffffc0a01000 t nf_hook_slow	[nf_tables]
 * Lines that do not parse are skipped. On success *out is a sealed table
 * (possibly empty) and *hidden is 1 when every address read was zero.
 * Returns 0 or -ENOMEM. */
int kf_kallsyms_parse(const char *text, size_t len, kf_symtab_t **out,
                      int *hidden);

/* Reads and parses /proc/kallsyms. Returns 0, -ENOMEM or -errno of the read. */
int kf_kallsyms_load(kf_symtab_t **out, int *hidden);

#endif

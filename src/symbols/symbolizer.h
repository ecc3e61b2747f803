/*
 * symbolizer: names instruction addresses of this process.
 *
 *   kernel address  -> kallsyms name + "_[k]"; "[kernel]_[k]" when the
 *                      addresses are hidden (kptr_restrict) or unreadable
 *   file mapping    -> ELF symbol (C++ demangled) from the object's .symtab,
 *                      its separate debug file (debugfile.h), MiniDebugInfo
 *                      or .dynsym; an address none of them covers folds
 *                      into the object's frame, "[libfoo.so]"
 *   [vdso]          -> the vDSO's own ELF symbols, read from memory
 *   anonymous code  -> "[jit]_[j]" (V8's code space; named by the code map)
 *   nothing mapped  -> "[unknown]"
 *
 * ELF tables and kallsyms are loaded on first use (or by preload) and kept
 * across profiles; the address map is re-read by begin(). Used by one
 * thread at a time: the JS thread, or the preload thread while the JS
 * thread leaves the symbolizer alone (the profiler joins it first).
 */
#ifndef KF_SYMBOLIZER_H
#define KF_SYMBOLIZER_H

#include <stdint.h>

typedef struct kf_symbolizer kf_symbolizer_t;

kf_symbolizer_t *kf_symbolizer_new(void);
void kf_symbolizer_free(kf_symbolizer_t *s);

/* Snapshots /proc/self/maps and forgets names handed out before. Returns 0
 * or a negative errno. */
int kf_symbolizer_begin(kf_symbolizer_t *s);

/* Loads the ELF tables of every executable file mapped now, and kallsyms
 * when `kernel`, so that naming at stop() finds them ready. Errors are
 * left for naming to meet (and fall back from) again. */
void kf_symbolizer_preload(kf_symbolizer_t *s, int kernel);

/* The frame's name, valid until the next begin(). Never NULL (an
 * out-of-memory condition yields "[unknown]"). */
const char *kf_symbolizer_frame(kf_symbolizer_t *s, uint64_t ip, int kernel);

/* 1 when the address lies in the C library (thread start-up frames). */
int kf_symbolizer_in_libc(kf_symbolizer_t *s, uint64_t ip);

/* Distinct user addresses named since begin(): from a separate debug file
 * or MiniDebugInfo (symbols the object itself lacks), and folded into an
 * object's "[name]" frame for want of any symbol. */
typedef struct kf_symbolizer_stats {
  uint64_t from_debug, folded;
} kf_symbolizer_stats_t;
void kf_symbolizer_stats(const kf_symbolizer_t *s, kf_symbolizer_stats_t *out);

/* What the tables kept across profiles hold (ELF symbols of every object
 * seen, kallsyms): objects and bytes. */
typedef struct kf_symbolizer_cache {
  uint64_t objects, symbols, bytes;
} kf_symbolizer_cache_t;
void kf_symbolizer_cache(const kf_symbolizer_t *s, kf_symbolizer_cache_t *out);

/* Frees those tables (the next profile loads them again). */
void kf_symbolizer_drop(kf_symbolizer_t *s);

/* 1 when kernel frames could not be named (addresses hidden). */
int kf_symbolizer_kernel_hidden(kf_symbolizer_t *s);

#endif

/*
 * jithook: the process's one JIT code map, fed by V8's code events through
 * jit_shim.cc (the only C++ and the only file that includes <v8.h>).
 *
 * One map serves every isolate (main thread and workers): code addresses
 * are process-wide. kf_jithook_added/moved are called by the shim on V8's
 * threads (JS threads compile, GC helper threads move code); they take no
 * lock but the map's, do no I/O and never fail loudly: out of memory, an
 * event is dropped and counted.
 */
#ifndef KF_JITHOOK_H
#define KF_JITHOOK_H

#include <stddef.h>
#include <stdint.h>

#include "jit/codemap.h"
#include "jit/jitlines.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The map, created on first use; NULL when out of memory. Any thread. */
kf_codemap_t *kf_jithook_map(void);

/* The index of small functions' source offsets (jitlines.h), created with
 * the map; NULL when out of memory. Any thread. */
kf_funcpos_t *kf_jithook_funcpos(void);

/* Code events, from the shim. `bytecode`: a BytecodeArray (start is its
 * first bytecode), not executable code. `existing`: reported while the
 * handler was being installed (the code has been there since before any
 * sample). `script`: V8's script id + 1 (0: none). `lines`: the code's
 * source offsets when V8 reported them just before (sealed; this call
 * consumes the reference), or NULL: a small function's bytecode offsets go
 * into the funcpos index, optimized code keeps its table in the map. */
void kf_jithook_added(uintptr_t isolate, uintptr_t start, size_t len,
                      const char *v8name, size_t name_len, int bytecode,
                      int existing, uint32_t script, kf_lines_t *lines);

/* V8's line events, which come before the code's CODE_ADDED on the same
 * thread: begin returns a table to fill (NULL when out of memory), add
 * appends to it (`bytecode`: the code is a BytecodeArray, whose table is
 * given up past the size V8 inlines), end seals it (NULL when building
 * failed or was given up). */
kf_lines_t *kf_jithook_lines_begin(void);
void kf_jithook_lines_add(kf_lines_t *lines, size_t code_offset,
                          size_t position, int bytecode);
kf_lines_t *kf_jithook_lines_end(kf_lines_t *lines);
void kf_jithook_moved(uintptr_t from, uintptr_t to);
/* The isolate went away: its code is dead. */
void kf_jithook_forget(uintptr_t isolate);

/* How many copies of the addon armed `isolate`: retain counts one more
 * and returns the new count, release one fewer (the handler goes when it
 * reaches 0). Called on the isolate's thread. */
int kf_jithook_retain(uintptr_t isolate);
int kf_jithook_release(uintptr_t isolate);

/* Events dropped for lack of memory. */
uint64_t kf_jithook_dropped(void);

/* In jit_shim.cc. Both run on the isolate's own JS thread.
 * arm: installs the handler on the current isolate and reports the code
 * that already exists (once per isolate however many copies of the addon
 * arm it); returns the isolate, or 0 when there is none.
 * disarm: when the last copy disarms, removes it and forgets the isolate's
 * code. */
uintptr_t kf_jit_shim_arm(void);
void kf_jit_shim_disarm(uintptr_t isolate);
/* V8's version string ("11.3.244.8-node.33"). Any thread. */
const char *kf_jit_shim_v8_version(void);

#ifdef __cplusplus
}
#endif

#endif

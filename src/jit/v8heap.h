/*
 * v8heap: reads of V8's heap objects from any thread, that fail instead of
 * faulting: every read goes through process_vm_readv on this process, so a
 * stale pointer (an object GC moved, a page V8 gave back) gives an error,
 * never a signal. What is read is checked by its map's instance type.
 *
 * Used where an object's address comes from outside V8's own bookkeeping:
 * the code objects V8 reports (v8inline.c) and the function slot of a
 * sampled frame (kf_v8heap_runs_bytecode, on the collector thread).
 * x64 without pointer compression, as node ships.
 */
#ifndef KF_V8HEAP_H
#define KF_V8HEAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* len bytes at addr into buf. Returns 0, or -1 when not all are readable. */
int kf_v8heap_peek(uintptr_t addr, void *buf, size_t len);
int kf_v8heap_word(uintptr_t addr, uint64_t *out);

/* A strong tagged pointer's object address (tag off), or 0. */
uintptr_t kf_v8heap_object(uint64_t tagged);

/* The instance type of the object at obj (untagged) whose map keeps it
 * map_type bytes in, or -1. */
long kf_v8heap_type(uintptr_t obj, long map_type);

/* A postmortem constant node exports (v8dbg_*, as llnode reads them).
 * Returns 0, or -1 when this process has none by that name. */
int kf_v8heap_constant(const char *name, long *out);

/* Where this V8 keeps what kf_v8heap_runs_bytecode follows. */
typedef struct kf_v8heap_layout {
  long map_type;          /* Map: instance_type (u16) */
  long function_shared;   /* JSFunction: shared (a SharedFunctionInfo) */
  long sfi_function_data; /* SharedFunctionInfo: its function data */
  long sfi_type, code_type, interpreter_data_type, bytecode_type;
} kf_v8heap_layout_t;

/* Fills *out from the postmortem constants node exports (v8dbg_*) and
 * sfi_function_data (v8frames.h: per V8 version). Returns 0, or -1 when
 * one is missing (not node's V8, or a V8 that does not export them). */
int kf_v8heap_layout_load(long sfi_function_data, kf_v8heap_layout_t *out);

/* The BytecodeArray (untagged) of the SharedFunctionInfo at sfi
 * (untagged): its function data is the array, or an object that holds it
 * (the function's baseline Code, an InterpreterData), or one of those
 * holding it in turn. 0 when it has none (not compiled, or flushed) or
 * anything is unreadable. */
uintptr_t kf_v8heap_bytecode_of(const kf_v8heap_layout_t *l, uintptr_t sfi);

/* Whether the JSFunction `function` (tagged) runs the BytecodeArray
 * `bytecode_array` (tagged): it is its SharedFunctionInfo's. Only the
 * function's own code refers to its bytecode, so a yes is never another
 * function's. Returns 1 or 0; 0 also when anything is unreadable. */
int kf_v8heap_runs_bytecode(const kf_v8heap_layout_t *l, uint64_t function,
                            uint64_t bytecode_array);

#ifdef __cplusplus
}
#endif

#endif

/*
 * v8frames: what V8's own frames say about the function running in them,
 * read from a sample's copy of the stack (userstack.h).
 *
 * An interpreter frame (and a Sparkplug frame, laid out the same) holds the
 * BytecodeArray of its function at a fixed offset from its frame pointer.
 * The code that owns such a frame does not name the function when it is
 * shared: the InterpreterEntryTrampoline of functions compiled before
 * --interpreted-frames-native-stack was on, and the bytecode handlers,
 * which run inside the frame of the function whose bytecode they execute,
 * usually without a frame of their own (so the frame-pointer callchain
 * skips that function entirely). The BytecodeArray, named by V8's
 * BYTE_CODE code events (by its first bytecode), names it.
 *
 * The offsets are V8's (InterpreterFrameConstants, StandardFrameConstants,
 * BytecodeArray::kHeaderSize) for x64 builds without pointer compression,
 * as node ships; they are kept per V8 major.minor below, and an unknown V8
 * gets no layout: its frames are left as the kernel gave them.
 *
 * Pure; any thread.
 */
#ifndef KF_V8FRAMES_H
#define KF_V8FRAMES_H

#include <stdint.h>

#include "unwind/userstack.h"

typedef struct kf_v8layout {
  int major, minor;          /* V8 version, for stats and tests */
  int32_t context_from_fp;   /* a tagged Context in JS frames; a Smi frame
                                type marker in typed (stub) frames */
  int32_t function_from_fp;  /* the JSFunction */
  int32_t bytecode_array_from_fp;
  uint32_t bytecode_header;  /* first bytecode minus the array's address */
  int32_t sfi_function_data; /* SharedFunctionInfo: its function data
                                (v8heap.h kf_v8heap_runs_bytecode) */
  int32_t regexp_from_fp;    /* RegExp code's frame: the expression it
                                matches (v8regexp.h), an argument passed
                                on the stack */
} kf_v8layout_t;

/* The layout of the V8 whose version string (v8::V8::GetVersion(),
 * "11.3.244.8-node.33") is `version`, or NULL when kflame does not know
 * it. */
const kf_v8layout_t *kf_v8layout_for(const char *version);

/* The first bytecode of the BytecodeArray held by the interpreter frame at
 * `fp` into *out: the address BYTE_CODE events named. Returns 0, or -1
 * when the frame is not in the copy or does not look like a JS frame (its
 * context slot holds no tagged pointer, or its bytecode slot none). The
 * caller still checks that V8 reported bytecode starting exactly there. */
int kf_v8frames_bytecode(const kf_v8layout_t *l, const kf_userstack_t *s,
                         uint64_t fp, uint64_t *out);

/* The JSFunction (tagged) a JS frame at `fp` holds. Returns 0, or -1
 * when the slot is not in the copy or holds no tagged pointer. */
int kf_v8frames_function(const kf_v8layout_t *l, const kf_userstack_t *s,
                         uint64_t fp, uint64_t *out);

/* The tagged object passed to the RegExp code whose frame is at `fp` as
 * the expression it matches (v8regexp.h checks what it is). Returns 0, or
 * -1 when the slot is not in the copy or holds no tagged pointer. */
int kf_v8frames_regexp(const kf_v8layout_t *l, const kf_userstack_t *s,
                       uint64_t fp, uint64_t *out);

/* The BytecodeArray (tagged) whose first bytecode is at `bytecode`. */
uint64_t kf_v8frames_bytecode_array(const kf_v8layout_t *l, uint64_t bytecode);

#endif

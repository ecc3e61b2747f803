#define _GNU_SOURCE
#include "jit/v8heap.h"

#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

int kf_v8heap_peek(uintptr_t addr, void *buf, size_t len) {
  struct iovec local = {buf, len}, remote = {(void *)addr, len};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

int kf_v8heap_word(uintptr_t addr, uint64_t *out) {
  return kf_v8heap_peek(addr, out, sizeof *out);
}

uintptr_t kf_v8heap_object(uint64_t tagged) {
  return (tagged & 3) == 1 && tagged > 4096 ? (uintptr_t)(tagged - 1) : 0;
}

long kf_v8heap_type(uintptr_t obj, long map_type) {
  uint64_t map;
  uint16_t type;
  uintptr_t m;
  if (!obj || kf_v8heap_word(obj, &map) || !(m = kf_v8heap_object(map)) ||
      kf_v8heap_peek(m + (uintptr_t)map_type, &type, 2))
    return -1;
  return type;
}

int kf_v8heap_constant(const char *name, long *out) {
  const int *p = dlsym(RTLD_DEFAULT, name);
  if (!p) return -1;
  *out = *p;
  return 0;
}

int kf_v8heap_layout_load(long sfi_function_data, kf_v8heap_layout_t *out) {
  out->sfi_function_data = sfi_function_data;
  if (sfi_function_data <= 0 ||
      kf_v8heap_constant("v8dbg_class_Map__instance_type__uint16_t", &out->map_type) ||
      kf_v8heap_constant("v8dbg_class_JSFunction__shared__SharedFunctionInfo", &out->function_shared) ||
      kf_v8heap_constant("v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", &out->sfi_type) ||
      kf_v8heap_constant("v8dbg_type_Code__CODE_TYPE", &out->code_type) ||
      kf_v8heap_constant("v8dbg_type_InterpreterData__INTERPRETER_DATA_TYPE",
                         &out->interpreter_data_type) ||
      kf_v8heap_constant("v8dbg_type_BytecodeArray__BYTECODE_ARRAY_TYPE", &out->bytecode_type))
    return -1;
  return 0;
}

/* Fields of a holder that may keep the bytecode: baseline Code keeps it
 * (or an InterpreterData) 8 (V8 12+) or 16 (11.3) bytes in, an
 * InterpreterData 8 bytes in; the next field too, for what moves. */
#define HOLDER_FIELDS 3

static uintptr_t bytecode_in(const kf_v8heap_layout_t *l, uint64_t value, int depth) {
  uintptr_t obj = kf_v8heap_object(value);
  long type = kf_v8heap_type(obj, l->map_type);
  if (type == l->bytecode_type) return obj;
  if (depth == 0 || (type != l->code_type && type != l->interpreter_data_type)) return 0;
  for (int i = 1; i <= HOLDER_FIELDS; i++) {
    uint64_t field;
    uintptr_t found;
    if (kf_v8heap_word(obj + (uintptr_t)i * 8, &field) == 0 &&
        (found = bytecode_in(l, field, depth - 1)))
      return found;
  }
  return 0;
}

uintptr_t kf_v8heap_bytecode_of(const kf_v8heap_layout_t *l, uintptr_t sfi) {
  uint64_t data;
  if (!l || kf_v8heap_type(sfi, l->map_type) != l->sfi_type ||
      kf_v8heap_word(sfi + (uintptr_t)l->sfi_function_data, &data))
    return 0;
  /* the array itself, or a holder of it, or a holder's holder (baseline
   * Code keeping an InterpreterData) */
  return bytecode_in(l, data, 2);
}

int kf_v8heap_runs_bytecode(const kf_v8heap_layout_t *l, uint64_t function,
                            uint64_t bytecode_array) {
  uintptr_t fn = kf_v8heap_object(function), array = kf_v8heap_object(bytecode_array);
  uint64_t shared;
  if (!l || !fn || !array || kf_v8heap_word(fn + (uintptr_t)l->function_shared, &shared))
    return 0;
  return kf_v8heap_bytecode_of(l, kf_v8heap_object(shared)) == array;
}

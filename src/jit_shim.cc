// jit_shim: V8's JIT code events into kflame's code map. The only C++ file
// and the only one that includes <v8.h>; everything else is C (jithook.c).
// The handler allocates nothing on the V8 heap, does no I/O, throws
// nothing, and ignores event types it does not know.
#include <v8.h>

#include "jithook.h"

namespace {

// Set while SetJitCodeEventHandler enumerates the code that already exists;
// those events arrive synchronously on the arming thread.
thread_local bool enumerating = false;

void OnCodeEvent(const v8::JitCodeEvent* event) {
  uintptr_t isolate = reinterpret_cast<uintptr_t>(event->isolate);
  switch (event->type) {
    case v8::JitCodeEvent::CODE_ADDED:
      // A BYTE_CODE event gives a BytecodeArray's first bytecode: never
      // executed, but interpreter frames hold the array, so it names them.
      kf_jithook_added(isolate, reinterpret_cast<uintptr_t>(event->code_start),
                       event->code_len, event->name.str, event->name.len,
                       event->code_type == v8::JitCodeEvent::BYTE_CODE,
                       enumerating);
      break;
    case v8::JitCodeEvent::CODE_MOVED:
      kf_jithook_moved(reinterpret_cast<uintptr_t>(event->code_start),
                       reinterpret_cast<uintptr_t>(event->new_code_start));
      break;
    default:
      break;
  }
}

}  // namespace

extern "C" uintptr_t kf_jit_shim_arm(void) {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate == nullptr) return 0;
  uintptr_t id = reinterpret_cast<uintptr_t>(isolate);
  // A second copy of the addon in this isolate (a worker that requires
  // kflame and is also armed through the inspector) shares the handler.
  if (kf_jithook_retain(id) > 1) return id;
  enumerating = true;
  isolate->SetJitCodeEventHandler(v8::kJitCodeEventEnumExisting, OnCodeEvent);
  enumerating = false;
  return id;
}

extern "C" void kf_jit_shim_disarm(uintptr_t isolate) {
  if (kf_jithook_release(isolate) > 0) return;
  reinterpret_cast<v8::Isolate*>(isolate)->SetJitCodeEventHandler(
      v8::kJitCodeEventDefault, nullptr);
  kf_jithook_forget(isolate);
}

extern "C" const char* kf_jit_shim_v8_version(void) {
  return v8::V8::GetVersion();
}

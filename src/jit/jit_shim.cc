// jit_shim: V8's JIT code events into kflame's code map. The only C++ file
// and the only one that includes <v8.h>; everything else is C (jithook.c).
// The handler allocates nothing on the V8 heap, does no I/O, throws
// nothing, and ignores event types it does not know.
#include <string.h>
#include <v8.h>

#include "jit/jithook.h"
#include "jit/v8inline.h"

namespace {

// Set while SetJitCodeEventHandler enumerates the code that already exists;
// those events arrive synchronously on the arming thread.
thread_local bool enumerating = false;

// V8 reports a piece of code's source offsets (line events) before its
// CODE_ADDED, on the same thread, but not always right before: a function's
// bytecode has its line events, then its trampoline copy is added, then the
// bytecode. The sealed tables wait here, a few at most, by code address.
struct Pending {
  uintptr_t start;
  kf_lines_t* lines;
};

class PendingLines {
 public:
  ~PendingLines() {  // the thread ends (a worker): nothing left behind
    for (Pending& slot : slots_) kf_lines_release(slot.lines);
  }

  void Park(uintptr_t start, kf_lines_t* lines) {
    Pending& slot = slots_[next_];
    kf_lines_release(slot.lines);  // the oldest: its code never came
    slot = {start, lines};
    next_ = (next_ + 1) % kSlots;
  }

  kf_lines_t* Claim(uintptr_t start) {
    for (Pending& slot : slots_) {
      if (slot.lines && slot.start == start) {
        kf_lines_t* lines = slot.lines;
        slot = {0, nullptr};
        return lines;
      }
    }
    return nullptr;
  }

 private:
  static constexpr int kSlots = 4;
  Pending slots_[kSlots] = {};
  int next_ = 0;
};

thread_local PendingLines pending;

// TurboFan's and Maglev's code: V8 marks their names "*" and "+" after
// the "JS:" or "LazyCompile:" prefix ("^" is Sparkplug's, which inlines
// nothing).
bool IsOptimized(const v8::JitCodeEvent* event) {
  const char* name = event->name.str;
  size_t len = event->name.len;
  const char* colon = name ? static_cast<const char*>(memchr(name, ':', len)) : nullptr;
  if (colon == nullptr || colon + 1 >= name + len) return false;
  return colon[1] == '*' || colon[1] == '+';
}

void OnCodeEvent(const v8::JitCodeEvent* event) {
  uintptr_t isolate = reinterpret_cast<uintptr_t>(event->isolate);
  switch (event->type) {
    case v8::JitCodeEvent::CODE_ADDED: {
      // A BYTE_CODE event gives a BytecodeArray's first bytecode: never
      // executed, but interpreter frames hold the array, so it names them.
      uintptr_t start = reinterpret_cast<uintptr_t>(event->code_start);
      kf_lines_t* lines = pending.Claim(start);
      // Optimized code: V8's own inlining, where kflame can read it, in
      // place of the line events' offsets (the same entries, without ids).
      if (event->code_type == v8::JitCodeEvent::JIT_CODE && IsOptimized(event)) {
        if (kf_lines_t* exact = kf_v8inline_read(start)) {
          kf_lines_release(lines);
          lines = exact;
        }
      }
      uint32_t script =
          event->script.IsEmpty() ? 0 : static_cast<uint32_t>(event->script->GetId()) + 1;
      kf_jithook_added(isolate, start, event->code_len, event->name.str,
                       event->name.len,
                       event->code_type == v8::JitCodeEvent::BYTE_CODE,
                       enumerating, script, lines);
      break;
    }
    case v8::JitCodeEvent::CODE_START_LINE_INFO_RECORDING:
      // The event is V8's own struct; user_data is the embedder's to set.
      const_cast<v8::JitCodeEvent*>(event)->user_data = kf_jithook_lines_begin();
      break;
    case v8::JitCodeEvent::CODE_ADD_LINE_POS_INFO:
      // Statement positions repeat an expression position at the same offset.
      if (event->line_info.position_type == v8::JitCodeEvent::POSITION)
        kf_jithook_lines_add(static_cast<kf_lines_t*>(event->user_data),
                             event->line_info.offset, event->line_info.pos,
                             event->code_type == v8::JitCodeEvent::BYTE_CODE);
      break;
    case v8::JitCodeEvent::CODE_END_LINE_INFO_RECORDING:
      pending.Park(reinterpret_cast<uintptr_t>(event->code_start),
           kf_jithook_lines_end(static_cast<kf_lines_t*>(event->user_data)));
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
  kf_v8inline_setup(v8::V8::GetVersion());
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

/*
 * binding: the only file that speaks Node-API. Turns JS calls into profiler
 * calls and core error codes into Errors with a stable `code`. Arguments
 * arrive already checked by lib/; this file only refuses what would be
 * unsafe for C. One profiler per process (perf events are per process), so a
 * worker thread's copy of the addon shares it, under a mutex.
 */
#include <errno.h>
#include <node_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "unwind/dwarfunwind.h"
#include "util/error.h"
#include "jit/jithook.h"
#include "collect/labels.h"
#include "jit/perfmap.h"
#include "sample/perfwarm.h"
#include "util/clock.h"
#include "profiler.h"
#include "util/readfile.h"
#include "util/safefile.h"
#include "util/sigwatch.h"
#include "render/svg.h"
#include "render/flamehtml.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kf_profiler_t *profiler;

/* The running session as start() was asked for it, under `lock`: what
 * status() tells any isolate (lib/session.js), whichever started it. `id`
 * counts starts, so a caller knows whether the profile running is still the
 * one it started; `owner` is lib/'s tag for who started it. */
typedef struct session_note {
  uint32_t id;
  char owner[32];
  uint32_t hz, mode, what, max_switch_rate;
  int task_clock, kernel, source_maps;
  double wall_start_ms;
  char perf_map[4096]; /* "" without one */
} session_note_t;
static session_note_t session;

/* Per isolate (main thread, each worker): whether its JIT code events feed
 * the code map. Instance data, so it goes away with the isolate. */
typedef struct isolate_hook {
  uintptr_t isolate; /* 0 while not armed */
} isolate_hook_t;

static void arm(isolate_hook_t *hook) {
  if (!hook->isolate) hook->isolate = kf_jit_shim_arm();
}

static void unhook(isolate_hook_t *hook) {
  if (hook->isolate) kf_jit_shim_disarm(hook->isolate);
  hook->isolate = 0;
}

static void disarm(napi_env env, void *data, void *hint) {
  (void)env, (void)hint;
  isolate_hook_t *hook = data;
  unhook(hook);
  free(hook);
}

static isolate_hook_t *hook_of(napi_env env) {
  void *data = NULL;
  return napi_get_instance_data(env, &data) == napi_ok ? data : NULL;
}

/* Arms the calling isolate when it was not armed at load (KFLAME_JIT). */
static void arm_env(napi_env env) {
  isolate_hook_t *hook = hook_of(env);
  if (hook) arm(hook);
}

#define CHECK(env, call)                                                  \
  do {                                                                    \
    if ((call) != napi_ok) {                                              \
      const napi_extended_error_info *info = NULL;                        \
      if (napi_get_last_error_info((env), &info) != napi_ok) info = NULL; \
      napi_throw_error((env), "KFLAME_ERR_NAPI",                          \
                       info && info->error_message ? info->error_message  \
                                                   : "Node-API call failed"); \
      return NULL;                                                        \
    }                                                                     \
  } while (0)

static napi_value throw_code(napi_env env, int rc, int sys_errno) {
  char advice[512];
  kf_error_advice(rc, sys_errno, advice, sizeof advice);
  napi_throw_error(env, kf_error_name(rc), advice);
  return NULL;
}

/* obj[key] into *v: 1 when set, 0 when undefined (the default stays), -1
 * when it cannot be read. */
static int get_prop(napi_env env, napi_value obj, const char *key,
                    napi_value *v) {
  napi_valuetype t;
  if (napi_get_named_property(env, obj, key, v) != napi_ok ||
      napi_typeof(env, *v, &t) != napi_ok)
    return -1;
  return t != napi_undefined;
}

static int get_u32(napi_env env, napi_value obj, const char *key,
                   uint32_t *out) {
  napi_value v;
  int set = get_prop(env, obj, key, &v);
  if (set <= 0) return set;
  return napi_get_value_uint32(env, v, out) == napi_ok ? 0 : -1;
}

static int get_double(napi_env env, napi_value obj, const char *key,
                      double *out) {
  napi_value v;
  int set = get_prop(env, obj, key, &v);
  if (set <= 0) return set;
  return napi_get_value_double(env, v, out) == napi_ok ? 0 : -1;
}

static int get_bool(napi_env env, napi_value obj, const char *key, int *out) {
  napi_value v;
  bool b;
  int set = get_prop(env, obj, key, &v);
  if (set <= 0) return set;
  if (napi_get_value_bool(env, v, &b) != napi_ok) return -1;
  *out = b;
  return 0;
}

/* A string property into buf; *set says whether it was there. */
static int get_str(napi_env env, napi_value obj, const char *key, char *buf,
                   size_t cap, int *set) {
  napi_value v;
  size_t len;
  *set = get_prop(env, obj, key, &v);
  if (*set <= 0) return *set < 0 ? -1 : 0;
  if (napi_get_value_string_utf8(env, v, buf, cap, &len) != napi_ok ||
      len + 1 >= cap)
    return -1;
  return 0;
}

/* A path argument into buf: 0, or -1 when it is not a string, too long, or
 * holds a NUL (napi_get_value_string_utf8 copies past one, and C would
 * then open a shorter path than the caller named). */
static int get_path(napi_env env, napi_value v, char *buf, size_t cap) {
  size_t len;
  if (napi_get_value_string_utf8(env, v, buf, cap, &len) != napi_ok ||
      len + 1 >= cap || strlen(buf) != len || len == 0)
    return -1;
  return 0;
}

/* Records a session that just started; under `lock`. */
static void note_session(const kf_profile_opts_t *opts, const char *owner,
                         const char *perf_map) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  session.id++;
  snprintf(session.owner, sizeof session.owner, "%s", owner);
  session.hz = opts->sampler.hz;
  session.mode = opts->mode;
  session.what = opts->sampler.what;
  session.max_switch_rate = opts->sampler.max_switch_rate;
  session.task_clock = opts->sampler.event == KF_EVENT_TASK_CLOCK;
  session.kernel = opts->sampler.kernel;
  session.source_maps = opts->source_maps;
  session.wall_start_ms = (double)now.tv_sec * 1e3 + (double)now.tv_nsec / 1e6;
  snprintf(session.perf_map, sizeof session.perf_map, "%s", perf_map);
}

/* start({ hz, mode, taskClock, kernel, ringPages, stackBytes, timeline, jit,
 *         tiers, perfScope, perfMap, owner }) -> the session's id (status());
 * mode: 0 auto, 1 perf, 2 timer (kf_mode_t); perfScope: 0 auto, 1 threads
 * (KF_SCOPE_*); timeline: samples kept with
 * their times (timeline.h); owner: lib/'s tag for who starts it */
static napi_value js_start(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  kf_profile_opts_t opts = {.sampler = {.hz = 99, .event = KF_EVENT_CPU_CLOCK,
                                        .kernel = 1, .ring_pages = 0,
                                        .what = KF_WHAT_CPU}};
  kf_sampler_opts_t *so = &opts.sampler;
  int task_clock = 0, jit = 1, perf_map = 0, owner_set = 0;
  uint32_t mode = KF_MODE_AUTO, timeline_max = KF_TIMELINE_DEFAULT_MAX;
  char owner[sizeof session.owner] = "application";
  opts.dwarf = 1;
  opts.park = 1;
  char perf_map_path[4096];
  napi_value perf_map_v;
  if (argc < 1 || get_u32(env, argv[0], "hz", &so->hz) ||
      get_u32(env, argv[0], "mode", &mode) || mode > KF_MODE_TIMER ||
      get_u32(env, argv[0], "ringPages", &so->ring_pages) ||
      get_u32(env, argv[0], "stackBytes", &so->stack_bytes) ||
      get_u32(env, argv[0], "timeline", &timeline_max) ||
      get_bool(env, argv[0], "kernel", &so->kernel) ||
      get_bool(env, argv[0], "taskClock", &task_clock) ||
      get_bool(env, argv[0], "jit", &jit) ||
      get_bool(env, argv[0], "tiers", &opts.keep_tiers) ||
      get_bool(env, argv[0], "park", &opts.park) ||
      get_bool(env, argv[0], "dwarf", &opts.dwarf) ||
      get_u32(env, argv[0], "what", &so->what) || so->what < KF_WHAT_CPU || so->what > KF_WHAT_BOTH ||
      get_u32(env, argv[0], "maxSwitchRate", &so->max_switch_rate) ||
      get_u32(env, argv[0], "perfScope", &so->scope) || so->scope > KF_SCOPE_THREADS ||
      get_bool(env, argv[0], "sourceMaps", &opts.source_maps) ||
      (perf_map = get_prop(env, argv[0], "perfMap", &perf_map_v)) < 0 ||
      (perf_map && get_path(env, perf_map_v, perf_map_path, sizeof perf_map_path)) ||
      get_str(env, argv[0], "owner", owner, sizeof owner, &owner_set) ||
      so->hz == 0 || (so->ring_pages & (so->ring_pages - 1))) {
    napi_throw_type_error(env, "KFLAME_ERR_INVALID_ARG",
                          "start() takes { hz, mode, ringPages, stackBytes, "
                          "timeline, kernel, taskClock, jit, tiers, dwarf, what, "
                          "maxSwitchRate, perfScope, sourceMaps, perfMap, park, owner }");
    return NULL;
  }
  opts.timeline_max = timeline_max;
  so->event = task_clock ? KF_EVENT_TASK_CLOCK : KF_EVENT_CPU_CLOCK;
  opts.mode = (kf_mode_t)mode;
  if (jit) {
    /* Unless KFLAME_JIT=load armed it at load, the first start() on this
     * isolate pays for V8 reporting the code that exists. */
    uint64_t armed_at = kf_now_ns();
    arm_env(env);
    opts.jit_arm_ns = kf_now_ns() - armed_at;
    opts.codemap = kf_jithook_map();
    opts.v8layout = kf_v8layout_for(kf_jit_shim_v8_version());
    opts.funcpos = kf_jithook_funcpos();
  } else {
    so->stack_bytes = 0; /* only V8's frames are read off the copy */
  }
  if (perf_map) opts.perf_map = perf_map_path;

  pthread_mutex_lock(&lock);
  int rc = 0, sys_errno = 0;
  if (!profiler && !(profiler = kf_profiler_new())) rc = -ENOMEM;
  if (rc == 0) rc = kf_profiler_start(profiler, &opts, &sys_errno);
  if (rc == 0) {
    kf_labels_begin();
    note_session(&opts, owner, perf_map ? perf_map_path : "");
    session.mode = (uint32_t)kf_profiler_mode(profiler); /* what 'auto' chose */
  }
  uint32_t id = session.id;
  pthread_mutex_unlock(&lock);
  if (rc != 0) return throw_code(env, rc, sys_errno);
  napi_value v;
  CHECK(env, napi_create_uint32(env, id, &v));
  return v;
}

static napi_status set_num(napi_env env, napi_value obj, const char *key,
                           double value) {
  napi_value v;
  napi_status s = napi_create_double(env, value, &v);
  return s == napi_ok ? napi_set_named_property(env, obj, key, v) : s;
}

static napi_status set_bool(napi_env env, napi_value obj, const char *key,
                            int value) {
  napi_value v;
  napi_status s = napi_get_boolean(env, value != 0, &v);
  return s == napi_ok ? napi_set_named_property(env, obj, key, v) : s;
}

static napi_status set_str(napi_env env, napi_value obj, const char *key,
                          const char *value) {
  napi_value v;
  napi_status s = napi_create_string_utf8(env, value, NAPI_AUTO_LENGTH, &v);
  return s == napi_ok ? napi_set_named_property(env, obj, key, v) : s;
}

/* mode, and for AUTO's fallback why perf was refused (code and advice) */
static napi_status set_mode(napi_env env, napi_value o,
                            const kf_profile_stats_t *st) {
  napi_status s = set_str(env, o, "mode", st->mode == KF_MODE_TIMER ? "timer" : "perf");
  if (s != napi_ok || !st->perf_refused) return s;
  char advice[512];
  kf_error_advice(st->perf_refused, st->perf_refused_errno, advice, sizeof advice);
  s = set_str(env, o, "perfRefused", kf_error_name(st->perf_refused));
  return s == napi_ok ? set_str(env, o, "perfRefusedAdvice", advice) : s;
}

static napi_value make_stats(napi_env env, const kf_profile_stats_t *st) {
  napi_value o;
  CHECK(env, napi_create_object(env, &o));
  CHECK(env, set_mode(env, o, st));
  if (st->mode == KF_MODE_PERF) {
    CHECK(env, set_str(env, o, "perfScope", st->scope == KF_SCOPE_CPUS ? "cpus" : "threads"));
    if (st->scope_errno)
      CHECK(env, set_str(env, o, "perfScopeError", strerror(st->scope_errno)));
  }
  if (st->mode == KF_MODE_TIMER) {
    const kf_timer_stats_t *ts = &st->timer;
    CHECK(env, set_num(env, o, "timerSignal", ts->signo));
    CHECK(env, set_num(env, o, "timerThreads", (double)ts->armed));
    CHECK(env, set_num(env, o, "timerUnarmed", (double)ts->unarmed));
    if (ts->unarmed)
      CHECK(env, set_str(env, o, "timerArmError", strerror(ts->arm_errno)));
    CHECK(env, set_num(env, o, "timerUnwalked", (double)ts->unwalked));
    CHECK(env, set_num(env, o, "timerOverHandler", (double)ts->over_handler));
  }
  CHECK(env, set_num(env, o, "samples", (double)st->samples));
  CHECK(env, set_num(env, o, "lost", (double)st->lost));
  CHECK(env, set_num(env, o, "duplicates", (double)st->duplicates));
  CHECK(env, set_num(env, o, "foreign", (double)st->foreign));
  CHECK(env, set_num(env, o, "corrupt", (double)st->corrupt));
  CHECK(env, set_num(env, o, "noMemory", (double)st->no_memory));
  CHECK(env, set_num(env, o, "threads", st->threads));
  CHECK(env, set_num(env, o, "durationMs", (double)st->duration_ns / 1e6));
  CHECK(env, set_num(env, o, "startUs", (double)st->started_ns / 1e3));
  CHECK(env, set_num(env, o, "wallStartMs", (double)st->wall_start_ms));
  CHECK(env, set_num(env, o, "hz", st->hz));
  CHECK(env, set_str(env, o, "what", st->what == KF_WHAT_BOTH ? "both"
                                     : st->what == KF_WHAT_OFFCPU ? "offcpu" : "cpu"));
  CHECK(env, set_num(env, o, "maxSwitchRate", st->max_switch_rate));
  CHECK(env, set_bool(env, o, "sourceMaps", st->source_maps));
  CHECK(env, set_num(env, o, "switchSamples", (double)st->switch_samples));
  CHECK(env, set_num(env, o, "switchPaired", (double)st->switch_paired));
  CHECK(env, set_num(env, o, "switchUnpaired", (double)st->switch_unpaired));
  CHECK(env, set_num(env, o, "offCpuMs", (double)st->offcpu_ns / 1e6));
  CHECK(env, set_num(env, o, "offCpuSamples", (double)st->offcpu_samples));
  if (st->mode == KF_MODE_PERF && st->what != KF_WHAT_CPU) {
    CHECK(env, set_str(env, o, "switchIns", st->switchins_traced ? "tracepoint" : "records"));
    if (st->switchin_errno)
      CHECK(env, set_str(env, o, "switchInsError", strerror(st->switchin_errno)));
  }
  CHECK(env, set_bool(env, o, "taskClock", st->event == KF_EVENT_TASK_CLOCK));
  CHECK(env, set_bool(env, o, "kernel", st->kernel));
  CHECK(env, set_bool(env, o, "kernelRefused", st->kernel_refused));
  CHECK(env, set_bool(env, o, "kernelHidden", st->kernel_hidden));
  CHECK(env, set_bool(env, o, "inheritThread", st->inherit_thread));
  CHECK(env, set_num(env, o, "ringPages", st->ring_pages));
  CHECK(env, set_num(env, o, "ringPagesAsked", st->ring_pages_asked));
  CHECK(env, set_num(env, o, "attached", st->attached));
  CHECK(env, set_num(env, o, "cpus", st->cpus));
  CHECK(env, set_num(env, o, "jitFrames", (double)st->jit_frames));
  CHECK(env, set_num(env, o, "interpretedNamed", (double)st->interpreted_named));
  CHECK(env, set_num(env, o, "interpretedUnnamed",
                     (double)st->interpreted_unnamed));
  CHECK(env, set_num(env, o, "runningAdded", (double)st->running_added));
  CHECK(env, set_num(env, o, "unreportedNamed", (double)st->unreported_named));
  CHECK(env, set_num(env, o, "unreportedUnnamed", (double)st->unreported_unnamed));
  CHECK(env, set_num(env, o, "regexpNamed", (double)st->regexp_named));
  CHECK(env, set_num(env, o, "regexpUnnamed", (double)st->regexp_unnamed));
  CHECK(env, set_num(env, o, "inlinedFrames", (double)st->inlined));
  CHECK(env, set_num(env, o, "inlinedExact", (double)st->inlined_exact));
  CHECK(env, set_num(env, o, "inlinedUnnamed", (double)st->inlined_unnamed));
  CHECK(env, set_num(env, o, "inliningRead", (double)st->inlining_read));
  CHECK(env, set_num(env, o, "inliningFailed", (double)st->inlining_failed));
  CHECK(env, set_num(env, o, "nativeFromDebug", (double)st->native_from_debug));
  CHECK(env, set_num(env, o, "nativeFolded", (double)st->native_folded));
  CHECK(env, set_num(env, o, "dwarfTried", (double)st->dwarf.tried));
  CHECK(env, set_num(env, o, "dwarfRecovered", (double)st->dwarf.recovered));
  CHECK(env, set_num(env, o, "dwarfFrames", (double)st->dwarf.frames));
  CHECK(env, set_num(env, o, "dwarfBroke", (double)st->dwarf.broke));
  CHECK(env, set_num(env, o, "stackBytes", st->stack_bytes));
  CHECK(env, set_num(env, o, "stackCopies", (double)st->stack_copies));
  CHECK(env, set_num(env, o, "stackCopyBytes", (double)st->stack_copy_bytes));
  CHECK(env, set_num(env, o, "stackCopiesShort", (double)st->stack_copies_short));
  CHECK(env, set_bool(env, o, "v8Layout", st->v8_layout));
  CHECK(env, set_num(env, o, "codeEntries", (double)st->code_live));
  CHECK(env, set_num(env, o, "codeBytes", (double)st->code_bytes));
  CHECK(env, set_num(env, o, "codeEvicted", (double)st->code_evicted));
  CHECK(env, set_num(env, o, "codeMoved", (double)st->code_moved));
  CHECK(env, set_num(env, o, "codeLockWaits", (double)st->code_lock_waits));
  CHECK(env, set_num(env, o, "codeLockWaitMs", (double)st->code_lock_wait_ns / 1e6));
  CHECK(env, set_num(env, o, "codeEventsDropped",
                     (double)st->code_events_dropped));
  CHECK(env, set_num(env, o, "perfMapLines", (double)st->perf_map_lines));
  CHECK(env, set_num(env, o, "timelineSamples", (double)st->timeline_samples));
  CHECK(env, set_num(env, o, "timelineDropped", (double)st->timeline_dropped));
  CHECK(env, set_num(env, o, "timelineBytes", (double)st->timeline_bytes));
  CHECK(env, set_num(env, o, "symbolCacheBytes", (double)st->symbol_cache_bytes));
  CHECK(env, set_num(env, o, "namedStacks", (double)st->named_stacks));
  CHECK(env, set_num(env, o, "namedFrames", (double)st->named_frames));
  CHECK(env, set_num(env, o, "aggregateBytes", (double)st->aggregate_bytes));
  CHECK(env, set_num(env, o, "stopMs", (double)st->stop_ns / 1e6));
  CHECK(env, set_num(env, o, "startMs", (double)st->start.total_ns / 1e6));
  CHECK(env, set_num(env, o, "startSamplerMs", (double)st->start.sampler_ns / 1e6));
  CHECK(env, set_num(env, o, "startCollectorMs", (double)st->start.collector_ns / 1e6));
  CHECK(env, set_num(env, o, "startJitMs", (double)st->start.jit_ns / 1e6));
  CHECK(env, set_num(env, o, "startOffCpuMs", (double)st->start.off_cpu_ns / 1e6));
  CHECK(env, set_num(env, o, "stopDrainMs", (double)st->stop_drain_ns / 1e6));
  CHECK(env, set_num(env, o, "stopNameMs", (double)st->stop_name_ns / 1e6));
  CHECK(env, set_num(env, o, "stopFoldMs", (double)st->stop_fold_ns / 1e6));
  CHECK(env, set_num(env, o, "stopTrimMs", (double)st->stop_trim_ns / 1e6));
  CHECK(env, set_num(env, o, "perfMapWrites", (double)st->perf_map_writes));
  CHECK(env, set_num(env, o, "perfMapErrors", (double)st->perf_map_errors));
  return o;
}

/* Sets obj[key] to a new Uint32Array (u32) or Float64Array of n elements;
 * *data is its memory (NULL when n is 0). Returns 0, or -1 with an
 * exception pending. */
static int add_typed_array(napi_env env, napi_value obj, const char *key,
                           int u32, size_t n, void **data) {
  napi_value ab, arr;
  if (napi_create_arraybuffer(env, n * (u32 ? 4 : 8), data, &ab) != napi_ok ||
      napi_create_typedarray(env, u32 ? napi_uint32_array : napi_float64_array,
                             n, ab, 0, &arr) != napi_ok ||
      napi_set_named_property(env, obj, key, arr) != napi_ok) {
    napi_throw_error(env, "KFLAME_ERR_NAPI", "out of memory building the profile");
    return -1;
  }
  return 0;
}

/* Every sample the timeline kept, tied to its line of the folded text:
 * { line: Uint32Array, time: Float64Array (µs, CLOCK_MONOTONIC),
 *   tid: Uint32Array }. */
static napi_value make_samples(napi_env env, const kf_profile_t *p) {
  size_t n = p->timeline ? (size_t)kf_timeline_count(p->timeline) : 0;
  napi_value o;
  CHECK(env, napi_create_object(env, &o));
  uint32_t *line, *tid;
  double *time;
  if (add_typed_array(env, o, "line", 1, n, (void **)&line) ||
      add_typed_array(env, o, "time", 0, n, (void **)&time) ||
      add_typed_array(env, o, "tid", 1, n, (void **)&tid))
    return NULL;
  kf_timeline_iter_t it;
  kf_sample_t s;
  if (p->timeline) kf_timeline_iter(p->timeline, &it);
  for (size_t i = 0; i < n && kf_timeline_next(&it, &s); i++) {
    line[i] = p->line_of[s.stack];
    time[i] = (double)s.time / 1e3;
    tid[i] = s.tid;
  }
  return o;
}

/* The label log as { tid, start, end (µs), name } typed arrays, names[] and
 * dropped. */
static napi_value make_labels(napi_env env, const kf_labels_t *log) {
  size_t n = log->count;
  napi_value o, names, s;
  CHECK(env, napi_create_object(env, &o));
  uint32_t *tid, *name;
  double *start, *end;
  if (add_typed_array(env, o, "tid", 1, n, (void **)&tid) ||
      add_typed_array(env, o, "start", 0, n, (void **)&start) ||
      add_typed_array(env, o, "end", 0, n, (void **)&end) ||
      add_typed_array(env, o, "name", 1, n, (void **)&name))
    return NULL;
  for (size_t i = 0; i < n; i++) {
    const kf_label_t *l = &log->labels[i];
    tid[i] = l->tid;
    start[i] = (double)l->start_ns / 1e3;
    end[i] = (double)l->end_ns / 1e3;
    name[i] = l->name;
  }
  CHECK(env, napi_create_array_with_length(env, log->nnames, &names));
  for (size_t i = 0; i < log->nnames; i++) {
    CHECK(env, napi_create_string_utf8(env, log->names[i], NAPI_AUTO_LENGTH, &s));
    CHECK(env, napi_set_element(env, names, (uint32_t)i, s));
  }
  CHECK(env, napi_set_named_property(env, o, "names", names));
  CHECK(env, set_num(env, o, "dropped", (double)log->dropped));
  return o;
}

/* The longest string V8 makes (String::kMaxLength on 64-bit, V8 6.2 and
 * later): folded text or an SVG past it cannot become a JS string. */
#define JS_STRING_MAX ((size_t)(1u << 29) - 24)

/* A stopped profile stays in C, owned by a JS external, until the Profile
 * is collected: stop() costs the naming, not a copy; the folded text and
 * the samples become JS values only when asked, and a text too large for a
 * JS string is still written out (profileWrite). This is the external's
 * finalizer; `hint` is the bytes reported to V8 for it (profile_result),
 * given back. */
static void free_profile(napi_env env, void *data, void *hint) {
  int64_t bytes = (int64_t)(intptr_t)hint, total;
  napi_status status = bytes && env ? napi_adjust_external_memory(env, -bytes, &total) : napi_ok;
  /* A finalizer has no caller to tell: should the accounting fail, V8 only
   * believes the heap a little larger than it is; the memory is freed. */
  (void)status;
  kf_profile_free(data);
  free(data);
}

/* The call's arguments (want of them; missing ones undefined) with argv[0]
 * the profile an external holds; NULL with a TypeError pending when it is
 * not one. */
static kf_profile_t *profile_args(napi_env env, napi_callback_info info,
                                  size_t want, napi_value *argv) {
  size_t argc = want;
  void *data = NULL;
  napi_valuetype t;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok ||
      argc < 1 || napi_typeof(env, argv[0], &t) != napi_ok ||
      t != napi_external || napi_get_value_external(env, argv[0], &data) != napi_ok ||
      !data) {
    napi_throw_type_error(env, "KFLAME_ERR_INVALID_ARG", "not a kflame profile");
    return NULL;
  }
  return data;
}

/* A C string as a JS string, or KFLAME_ERR_TOO_LARGE naming what to do. */
static napi_value js_string_of(napi_env env, const char *text, size_t len,
                               const char *what, const char *instead) {
  napi_value v;
  if (len <= JS_STRING_MAX && napi_create_string_utf8(env, text, len, &v) == napi_ok)
    return v;
  bool pending = false;
  if (napi_is_exception_pending(env, &pending) == napi_ok && pending) return NULL;
  char msg[512];
  if (len > JS_STRING_MAX)
    snprintf(msg, sizeof msg,
             "the %s is %zu MB, more than a JS string can hold (%zu MB); "
             "nothing is lost: %s", what, len >> 20, JS_STRING_MAX >> 20, instead);
  else
    snprintf(msg, sizeof msg,
             "the %s (%zu MB) could not become a JS string (out of memory?); "
             "nothing is lost: %s", what, len >> 20, instead);
  napi_throw_range_error(env, "KFLAME_ERR_TOO_LARGE", msg);
  return NULL;
}

/* { profile (external), labels, stats } of a profile stop() or
 * takeWindow() made; the external owns the profile from here, also when a
 * call fails. */
static napi_value profile_result(napi_env env, kf_profile_t *profile, kf_labels_t *labels_in) {
  kf_labels_t labels = *labels_in;
  napi_value result, external;
  /* What the profile holds in C, so V8's GC counts it: windows of a
   * continuous profile let go of are collected without waiting for the JS
   * heap to grow by itself. */
  int64_t held = (int64_t)(profile->folded_len + profile->stats.named_stacks * sizeof(uint32_t) +
                           profile->stats.timeline_bytes), total;
  if (napi_create_external(env, profile, free_profile, (void *)(intptr_t)held, &external) != napi_ok) {
    free_profile(env, profile, NULL);
    kf_labels_free(&labels);
    CHECK(env, napi_generic_failure);
  }
  CHECK(env, napi_adjust_external_memory(env, held, &total));
  napi_value labels_v = make_labels(env, &labels);
  kf_labels_free(&labels);
  if (!labels_v) return NULL;
  napi_value stats = make_stats(env, &profile->stats);
  if (!stats) return NULL;
  if (profile->perf_map) {
    napi_value path;
    CHECK(env, napi_create_string_utf8(env, profile->perf_map, NAPI_AUTO_LENGTH, &path));
    CHECK(env, napi_set_named_property(env, stats, "perfMap", path));
  }
  long map_rc = profile->stats.perf_map_error;
  if (map_rc < 0) { /* why the last write (at stop or before) failed */
    char advice[512];
    int sys_errno = map_rc <= -KF_ERR_BASE ? 0 : (int)-map_rc;
    kf_error_advice(map_rc <= -KF_ERR_BASE ? (int)map_rc : -KF_ERR_PERF_MAP, sys_errno,
                    advice, sizeof advice);
    CHECK(env, set_str(env, stats, "perfMapError", advice));
    CHECK(env, set_num(env, stats, "perfMapErrno", sys_errno));
  }
  CHECK(env, set_num(env, stats, "foldedBytes", (double)profile->folded_len));
  CHECK(env, napi_create_object(env, &result));
  CHECK(env, napi_set_named_property(env, result, "profile", external));
  CHECK(env, napi_set_named_property(env, result, "labels", labels_v));
  CHECK(env, napi_set_named_property(env, result, "stats", stats));
  return result;
}

/* The optional session id of stop(id) and cut(id): 1 and *id when given, 0
 * when not, -1 (thrown) when it is not a number. */
static int session_arg(napi_env env, napi_callback_info info, uint32_t *id) {
  size_t argc = 1;
  napi_value argv[1];
  napi_valuetype t;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok ||
      (argc >= 1 && napi_typeof(env, argv[0], &t) != napi_ok)) {
    napi_throw_error(env, "KFLAME_ERR_NAPI", "cannot read the arguments");
    return -1;
  }
  if (argc < 1 || t == napi_undefined) return 0;
  if (napi_get_value_uint32(env, argv[0], id) != napi_ok) {
    napi_throw_type_error(env, "KFLAME_ERR_INVALID_ARG", "the session id is a number status() gave");
    return -1;
  }
  return 1;
}

/* Another session than the caller's runs (or none): it is left alone. */
static const char NOT_OWN[] =
    "the profile this caller started is no longer running: it was stopped "
    "elsewhere (kflame.stop(), or another thread), and any profile running now "
    "is not its own";

/* An Error with `code` and `message`, into *err (not thrown). */
static napi_status error_of(napi_env env, const char *code, const char *message,
                            napi_value *err) {
  napi_value c, m;
  napi_status st = napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &c);
  if (st == napi_ok) st = napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &m);
  return st == napi_ok ? napi_create_error(env, c, m, err) : st;
}

/* Whether a call made with session id `id` (has_id: one was given) is
 * about another session than the running one, or none. Under the lock. */
static int other_session(int has_id, uint32_t id) {
  int running = profiler && kf_profiler_running(profiler);
  return has_id && (!running || session.id != id);
}

/* The session stop(id?) and stopAsync(id?) end, taken out under the lock
 * (labels end with it, whatever becomes of its naming); NULL when none
 * runs, or when *other: it is not the caller's. */
static kf_session_t *take_session(int has_id, uint32_t id, kf_labels_t *labels, int *other) {
  pthread_mutex_lock(&lock);
  *other = other_session(has_id, id);
  kf_session_t *taken = !*other && profiler ? kf_profiler_take(profiler) : NULL;
  if (taken) kf_labels_end(labels);
  pthread_mutex_unlock(&lock);
  return taken;
}

/* The message of KFLAME_ERR_NOT_RUNNING when no session was taken. */
static const char *not_taken_message(int other, char advice[512]) {
  if (other) return NOT_OWN;
  kf_error_advice(-KF_ERR_NOT_RUNNING, 0, advice, 512);
  return advice;
}

/* Ends a taken session into a new profile: drained, named and folded
 * without the lock (another isolate's calls need not wait), its tables
 * handed back under it. Any thread. */
static int stop_taken(kf_session_t *taken, kf_profile_t **out) {
  kf_profile_t *profile = calloc(1, sizeof(*profile));
  int rc = profile ? kf_session_stop(taken, profile) : -ENOMEM;
  pthread_mutex_lock(&lock);
  kf_profiler_give_back(profiler, taken);
  pthread_mutex_unlock(&lock);
  *out = profile;
  return rc;
}

static napi_value throw_not_taken(napi_env env, int other) {
  char advice[512];
  napi_throw_error(env, "KFLAME_ERR_NOT_RUNNING", not_taken_message(other, advice));
  return NULL;
}

/* stop(id?) -> { profile (external), labels, stats }; with an id, only
 * that session is stopped. */
static napi_value js_stop(napi_env env, napi_callback_info info) {
  uint32_t id = 0;
  int has_id = session_arg(env, info, &id);
  if (has_id < 0) return NULL;
  kf_labels_t labels = {0};
  int other;
  kf_session_t *taken = take_session(has_id, id, &labels, &other);
  if (!taken) return throw_not_taken(env, other);
  kf_profile_t *profile;
  int rc = stop_taken(taken, &profile);
  if (rc != 0) {
    kf_labels_free(&labels);
    if (profile) free_profile(env, profile, NULL);
    return throw_code(env, rc, 0);
  }
  return profile_result(env, profile, &labels);
}

/* stopAsync(id?): stop() with the draining, naming and folding on libuv's
 * thread pool, so the event loop goes on meanwhile: the session is taken
 * out at the call (sampling ends then, as with stop()), the promise
 * settles with stop()'s result or its error. */
typedef struct stop_job {
  napi_async_work work;
  napi_deferred deferred;
  kf_session_t *taken;
  kf_labels_t labels;
  kf_profile_t *profile;
  int rc;
  int stopped; /* the session was ended (stop_taken) */
} stop_job_t;

static void stop_job_execute(napi_env env, void *data) {
  (void)env;
  stop_job_t *job = data;
  job->rc = stop_taken(job->taken, &job->profile);
  job->stopped = 1;
}

static void stop_job_complete(napi_env env, napi_status status, void *data) {
  stop_job_t *job = data;
  (void)status;
  /* Cancelled, or queued nowhere: the session ends here, never left taken. */
  if (!job->stopped) stop_job_execute(env, job);
  napi_value value = NULL;
  int resolved = 0;
  if (job->rc == 0) {
    /* profile_result owns the profile and labels from here, even when it
     * fails (then with an exception pending, which becomes the rejection) */
    value = profile_result(env, job->profile, &job->labels);
    resolved = value != NULL;
    if (!resolved && napi_get_and_clear_last_exception(env, &value) != napi_ok) value = NULL;
  } else {
    kf_labels_free(&job->labels);
    if (job->profile) free_profile(env, job->profile, NULL);
    char advice[512];
    kf_error_advice(job->rc, 0, advice, sizeof advice);
    if (error_of(env, kf_error_name(job->rc), advice, &value) != napi_ok) value = NULL;
  }
  if (!value) napi_get_undefined(env, &value);
  /* Nothing is left to report a failure to: the promise settles or not. */
  if (resolved) (void)napi_resolve_deferred(env, job->deferred, value);
  else (void)napi_reject_deferred(env, job->deferred, value);
  (void)napi_delete_async_work(env, job->work);
  free(job);
}

static napi_value js_stop_async(napi_env env, napi_callback_info info) {
  uint32_t id = 0;
  int has_id = session_arg(env, info, &id);
  if (has_id < 0) return NULL;
  stop_job_t *job = calloc(1, sizeof(*job));
  if (!job) return throw_code(env, -ENOMEM, 0);
  napi_value promise, name;
  /* Everything that can fail before the session is taken out. */
  if (napi_create_string_utf8(env, "kflame.stopAsync", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_async_work(env, NULL, name, stop_job_execute, stop_job_complete, job,
                             &job->work) != napi_ok) {
    free(job);
    CHECK(env, napi_generic_failure);
  }
  if (napi_create_promise(env, &job->deferred, &promise) != napi_ok) {
    (void)napi_delete_async_work(env, job->work);
    free(job);
    CHECK(env, napi_generic_failure);
  }
  int other;
  job->taken = take_session(has_id, id, &job->labels, &other);
  if (!job->taken) {
    napi_value err;
    char advice[512];
    napi_status st = error_of(env, "KFLAME_ERR_NOT_RUNNING", not_taken_message(other, advice), &err);
    if (st == napi_ok) st = napi_reject_deferred(env, job->deferred, err);
    (void)napi_delete_async_work(env, job->work);
    free(job);
    CHECK(env, st);
    return promise;
  }
  /* Without the pool, the job runs here (complete ends the session). */
  if (napi_queue_async_work(env, job->work) != napi_ok) stop_job_complete(env, napi_ok, job);
  return promise;
}

/* cut(id?) -> true, or false while the last cut's window is not taken */
static napi_value js_cut(napi_env env, napi_callback_info info) {
  uint32_t id = 0;
  int has_id = session_arg(env, info, &id);
  if (has_id < 0) return NULL;
  pthread_mutex_lock(&lock);
  int other = other_session(has_id, id);
  int rc = other ? 0 : profiler ? kf_profiler_cut(profiler) : -KF_ERR_NOT_RUNNING;
  pthread_mutex_unlock(&lock);
  if (other) return throw_not_taken(env, 1);
  if (rc != 0 && rc != -EBUSY) return throw_code(env, rc, 0);
  napi_value v;
  CHECK(env, napi_get_boolean(env, rc == 0, &v));
  return v;
}

/* takeWindow(timeoutMs) -> stop()'s shape for the window the last cut
 * made, or null when it is not made yet */
static napi_value js_take_window(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  uint32_t timeout_ms = 0;
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1 || napi_get_value_uint32(env, argv[0], &timeout_ms) != napi_ok ||
      timeout_ms > 1000) {
    napi_throw_type_error(env, "KFLAME_ERR_INVALID_ARG", "takeWindow(timeoutMs) takes 0 to 1000 ms");
    return NULL;
  }
  kf_profile_t *profile = calloc(1, sizeof(*profile));
  kf_labels_t labels = {0};
  if (!profile) return throw_code(env, -ENOMEM, 0);
  pthread_mutex_lock(&lock);
  int rc = profiler ? kf_profiler_take_window(profiler, (int)timeout_ms, profile)
                    : -KF_ERR_NOT_RUNNING;
  pthread_mutex_unlock(&lock);
  if (rc != 0) {
    free_profile(env, profile, NULL);
    if (rc != -EAGAIN) return throw_code(env, rc, 0);
    napi_value null;
    CHECK(env, napi_get_null(env, &null));
    return null;
  }
  return profile_result(env, profile, &labels);
}

/* profileFolded(profile) -> the folded text as a string */
static napi_value js_profile_folded(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  kf_profile_t *p = profile_args(env, info, 1, argv);
  if (!p) return NULL;
  return js_string_of(env, p->folded, p->folded_len, "folded text",
                      "write it to a file with profile.write(path)");
}

/* profileSamples(profile) -> { line, time, tid } */
static napi_value js_profile_samples(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  kf_profile_t *p = profile_args(env, info, 1, argv);
  return p ? make_samples(env, p) : NULL;
}

static napi_value js_running(napi_env env, napi_callback_info info) {
  (void)info;
  pthread_mutex_lock(&lock);
  int running = profiler && kf_profiler_running(profiler);
  pthread_mutex_unlock(&lock);
  napi_value v;
  CHECK(env, napi_get_boolean(env, running, &v));
  return v;
}

/* status() -> null while no profile runs, else the running session as it
 * was started: { id, owner, hz, mode: 'perf' | 'timer' (the sampler in use:
 * 'auto' resolved), what, event, kernel, maxSwitchRate, sourceMaps, perfMap
 * (or null), wallStartMs }. */
static napi_value js_status(napi_env env, napi_callback_info info) {
  (void)info;
  static const char *const modes[] = {"auto", "perf", "timer"};
  static const char *const whats[] = {"cpu", "cpu", "offcpu", "both"};
  pthread_mutex_lock(&lock);
  int running = profiler && kf_profiler_running(profiler);
  session_note_t s = session;
  pthread_mutex_unlock(&lock);
  napi_value o;
  if (!running) {
    CHECK(env, napi_get_null(env, &o));
    return o;
  }
  CHECK(env, napi_create_object(env, &o));
  CHECK(env, set_num(env, o, "id", s.id));
  CHECK(env, set_str(env, o, "owner", s.owner));
  CHECK(env, set_num(env, o, "hz", s.hz));
  CHECK(env, set_str(env, o, "mode", modes[s.mode <= KF_MODE_TIMER ? s.mode : 0]));
  CHECK(env, set_str(env, o, "what", whats[s.what <= KF_WHAT_BOTH ? s.what : 1]));
  CHECK(env, set_str(env, o, "event", s.task_clock ? "task-clock" : "cpu-clock"));
  CHECK(env, set_bool(env, o, "kernel", s.kernel));
  CHECK(env, set_num(env, o, "maxSwitchRate", s.max_switch_rate));
  CHECK(env, set_bool(env, o, "sourceMaps", s.source_maps));
  napi_value map;
  if (s.perf_map[0]) CHECK(env, napi_create_string_utf8(env, s.perf_map, NAPI_AUTO_LENGTH, &map));
  else CHECK(env, napi_get_null(env, &map));
  CHECK(env, napi_set_named_property(env, o, "perfMap", map));
  CHECK(env, set_num(env, o, "wallStartMs", s.wall_start_ms));
  return o;
}

/* dropCaches() -> { objects, symbols, bytes } of the symbol tables freed */
static napi_value js_drop_caches(napi_env env, napi_callback_info info) {
  (void)info;
  kf_symbolizer_cache_t dropped = {0};
  pthread_mutex_lock(&lock);
  int rc = profiler ? kf_profiler_drop_caches(profiler, &dropped) : 0;
  pthread_mutex_unlock(&lock);
  if (rc != 0) return throw_code(env, rc, 0);
  napi_value o;
  CHECK(env, napi_create_object(env, &o));
  CHECK(env, set_num(env, o, "objects", (double)dropped.objects));
  CHECK(env, set_num(env, o, "symbols", (double)dropped.symbols));
  CHECK(env, set_num(env, o, "bytes", (double)dropped.bytes));
  return o;
}

/* Like throw_code, with the path in front: "cannot write PATH: advice"
 * ("cannot read" for KF_ERR_READ). A core error
 * (KF_ERR_UNSAFE_PATH) keeps its own code; -errno becomes `fallback`. */
static napi_value throw_path_code(napi_env env, int rc, int fallback,
                                  const char *path) {
  char advice[512], message[4096 + 600];
  int code = rc <= -KF_ERR_BASE ? rc : fallback;
  kf_error_advice(code, rc <= -KF_ERR_BASE ? 0 : -rc, advice, sizeof advice);
  snprintf(message, sizeof message, "cannot %s %s: %s",
           fallback == -KF_ERR_READ ? "read" : "write", path, advice);
  napi_throw_error(env, kf_error_name(code), message);
  return NULL;
}

/* writePerfMap(path) -> lines written */
static napi_value js_write_perf_map(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], result;
  char path[4096];
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1 || get_path(env, argv[0], path, sizeof path)) {
    napi_throw_type_error(env, "KFLAME_ERR_INVALID_ARG",
                          "writePerfMap(path): path must be a non-empty string "
                          "without NUL characters");
    return NULL;
  }
  arm_env(env);
  kf_codemap_t *map = kf_jithook_map();
  long lines = map ? kf_perfmap_write(map, path) : -ENOMEM;
  if (lines < 0) return throw_path_code(env, (int)lines, -KF_ERR_PERF_MAP, path);
  CHECK(env, napi_create_double(env, (double)lines, &result));
  return result;
}

/* SVG options as lib/svg.js checked them; titles are copied into t. */
typedef struct svg_texts {
  char title[1024], subtitle[1024], cwd[4096];
} svg_texts_t;

static int get_svg_opts(napi_env env, napi_value obj, kf_svg_opts_t *o,
                        svg_texts_t *t) {
  int has_title = 0, has_subtitle = 0, has_cwd = 0;
  uint32_t width = 1200;
  *o = (kf_svg_opts_t){.minwidth = 0.1};
  if (get_str(env, obj, "title", t->title, sizeof t->title, &has_title) ||
      get_str(env, obj, "subtitle", t->subtitle, sizeof t->subtitle, &has_subtitle) ||
      get_str(env, obj, "cwd", t->cwd, sizeof t->cwd, &has_cwd) ||
      get_u32(env, obj, "width", &width) ||
      get_double(env, obj, "minwidth", &o->minwidth) ||
      get_bool(env, obj, "inverted", &o->inverted) ||
      get_bool(env, obj, "reverse", &o->reverse) ||
      get_bool(env, obj, "idle", &o->show_idle))
    return -1;
  o->width = width;
  if (has_title) o->title = t->title;
  if (has_subtitle) o->subtitle = t->subtitle;
  if (has_cwd) o->cwd = t->cwd;
  return 0;
}

static napi_value svg_stats(napi_env env, const kf_svg_stats_t *st) {
  napi_value stats;
  CHECK(env, napi_create_object(env, &stats));
  CHECK(env, set_num(env, stats, "lines", (double)st->lines));
  CHECK(env, set_num(env, stats, "badLines", (double)st->bad_lines));
  CHECK(env, set_num(env, stats, "samples", (double)st->samples));
  CHECK(env, set_num(env, stats, "frames", (double)st->frames));
  CHECK(env, set_num(env, stats, "drawn", (double)st->drawn));
  CHECK(env, set_num(env, stats, "mergedFrames", (double)st->merged_frames));
  CHECK(env, set_num(env, stats, "mergedSamples", (double)st->merged_samples));
  CHECK(env, set_num(env, stats, "idleSamples", (double)st->idle_samples));
  return stats;
}

/* kf_svg_render or kf_flamehtml_data: same arguments, same stats. */
typedef int (*renderer_t)(const char *, size_t, const kf_svg_opts_t *, char **, size_t *,
                          kf_svg_stats_t *);

/* { svg, stats } (or { data, stats } of the HTML flame graph) of
 * folded[0..len): rendered in C, the result a JS string. */
static napi_value render_result(napi_env env, const char *folded, size_t len,
                                const kf_svg_opts_t *o, int html) {
  char *text_c = NULL;
  size_t text_len = 0;
  kf_svg_stats_t st;
  renderer_t render = html ? kf_flamehtml_data : kf_svg_render;
  int rc = render(folded, len, o, &text_c, &text_len, &st);
  if (rc) return throw_code(env, rc, 0);
  napi_value text = js_string_of(env, text_c, text_len, html ? "HTML flame graph's data" : "SVG",
                                 html ? "write the folded text with profile.write(path) and "
                                        "render a smaller part of it"
                                      : "write it to a file with profile.write(path) "
                                        "or renderSvgFile(in, out)");
  free(text_c);
  if (!text) return NULL;
  napi_value result, stats;
  CHECK(env, napi_create_object(env, &result));
  CHECK(env, napi_set_named_property(env, result, html ? "data" : "svg", text));
  if (!(stats = svg_stats(env, &st))) return NULL;
  CHECK(env, napi_set_named_property(env, result, "stats", stats));
  return result;
}

static napi_value render_string(napi_env env, napi_callback_info info, int html) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  kf_svg_opts_t o;
  svg_texts_t texts;
  size_t len;
  if (argc < 2 || napi_get_value_string_utf8(env, argv[0], NULL, 0, &len) != napi_ok ||
      get_svg_opts(env, argv[1], &o, &texts)) {
    napi_throw_type_error(env, "KFLAME_ERR_INVALID_ARG",
                          html ? "htmlData(folded, options) takes a string and options"
                               : "renderSvg(folded, options) takes a string and options");
    return NULL;
  }
  char *folded = malloc(len + 1);
  if (!folded) return throw_code(env, -ENOMEM, 0);
  if (napi_get_value_string_utf8(env, argv[0], folded, len + 1, &len) != napi_ok) {
    free(folded);
    CHECK(env, napi_generic_failure);
  }
  napi_value result = render_result(env, folded, len, &o, html);
  free(folded);
  return result;
}

/* renderSvg(folded, { title, subtitle, width, minwidth, inverted, reverse,
 * cwd }) -> { svg, stats }. Options arrive checked by lib/. */
static napi_value js_render_svg(napi_env env, napi_callback_info info) {
  return render_string(env, info, 0);
}

/* htmlData(folded, options) -> { data, stats }: src/render/flamehtml.h's JSON. */
static napi_value js_html_data(napi_env env, napi_callback_info info) {
  return render_string(env, info, 1);
}

static napi_value render_profile(napi_env env, napi_callback_info info, int html) {
  napi_value argv[2];
  kf_svg_opts_t o;
  svg_texts_t texts;
  kf_profile_t *p = profile_args(env, info, 2, argv);
  if (!p) return NULL;
  if (get_svg_opts(env, argv[1], &o, &texts)) {
    napi_throw_type_error(env, "KFLAME_ERR_INVALID_ARG",
                          html ? "profileHtmlData(profile, options)" : "profileSvg(profile, options)");
    return NULL;
  }
  return render_result(env, p->folded ? p->folded : "", p->folded_len, &o, html);
}

/* profileSvg(profile, options) -> { svg, stats }: straight from the C text. */
static napi_value js_profile_svg(napi_env env, napi_callback_info info) {
  return render_profile(env, info, 0);
}

/* profileHtmlData(profile, options) -> { data, stats }. */
static napi_value js_profile_html_data(napi_env env, napi_callback_info info) {
  return render_profile(env, info, 1);
}

/* Renders folded[0..len) into the file `path` (src/util/safefile.h's rules;
 * 0644, as any file a user writes: the SVG is for others to open) ->
 * stats, or NULL with an error thrown. */
static napi_value svg_to_file(napi_env env, const char *folded, size_t len,
                              const kf_svg_opts_t *o, const char *path) {
  char *svg = NULL;
  size_t svg_len = 0;
  kf_svg_stats_t st;
  int rc = kf_svg_render(folded, len, o, &svg, &svg_len, &st);
  if (rc) return throw_code(env, rc, 0);
  rc = kf_safefile_write_all(path, svg, svg_len, 0644);
  free(svg);
  if (rc) return throw_path_code(env, rc, -KF_ERR_WRITE, path);
  return svg_stats(env, &st);
}

/* renderSvgFile(inPath, outPath, options) -> stats: file to file in C, so
 * a big profile never becomes a JS string. */
static napi_value js_render_svg_file(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  char in[4096], out[4096];
  kf_svg_opts_t o;
  svg_texts_t texts;
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 3 || get_path(env, argv[0], in, sizeof in) ||
      get_path(env, argv[1], out, sizeof out) ||
      get_svg_opts(env, argv[2], &o, &texts)) {
    napi_throw_type_error(env, "KFLAME_ERR_INVALID_ARG",
                          "renderSvgFile(inPath, outPath, options) takes two paths "
                          "(non-empty, without NUL characters) and options");
    return NULL;
  }
  const char *folded = NULL;
  size_t folded_len = 0;
  int rc = kf_map_file(in, &folded, &folded_len);
  if (rc) return throw_path_code(env, rc, -KF_ERR_READ, in);
  napi_value stats = svg_to_file(env, folded ? folded : "", folded_len, &o, out);
  kf_unmap_file(folded, folded_len);
  return stats;
}

/* profileWrite(profile, path): the folded text, C to file, at any size. */
static napi_value js_profile_write(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  char path[4096];
  kf_profile_t *p = profile_args(env, info, 2, argv);
  if (!p) return NULL;
  if (get_path(env, argv[1], path, sizeof path)) {
    napi_throw_type_error(env, "KFLAME_ERR_INVALID_ARG",
                          "profileWrite(profile, path): path must be a non-empty "
                          "string without NUL characters");
    return NULL;
  }
  int rc = kf_safefile_write_all(path, p->folded, p->folded_len, 0644);
  if (rc) return throw_path_code(env, rc, -KF_ERR_WRITE, path);
  return NULL;
}

/* profileSvgFile(profile, path, options) -> stats: rendered from the C
 * text into a file, neither ever a JS string. */
static napi_value js_profile_svg_file(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  char path[4096];
  kf_svg_opts_t o;
  svg_texts_t texts;
  kf_profile_t *p = profile_args(env, info, 3, argv);
  if (!p) return NULL;
  if (get_path(env, argv[1], path, sizeof path) || get_svg_opts(env, argv[2], &o, &texts)) {
    napi_throw_type_error(env, "KFLAME_ERR_INVALID_ARG",
                          "profileSvgFile(profile, path, options) takes a path "
                          "(non-empty, without NUL characters) and options");
    return NULL;
  }
  return svg_to_file(env, p->folded ? p->folded : "", p->folded_len, &o, path);
}

/* labelOpen(name) -> handle, or -1 when no profile runs (the cheap path). */
static napi_value js_label_open(napi_env env, napi_callback_info info) {
  size_t argc = 1, len = 0;
  napi_value argv[1], v;
  char name[KF_LABEL_NAME_MAX + 4];
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1 ||
      napi_get_value_string_utf8(env, argv[0], name, sizeof name, &len) != napi_ok) {
    napi_throw_type_error(env, "KFLAME_ERR_INVALID_ARG", "labelOpen(name): name must be a string");
    return NULL;
  }
  CHECK(env, napi_create_double(env, (double)kf_labels_open(name, len), &v));
  return v;
}

/* labelClose(handle) */
static napi_value js_label_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  double handle = -1;
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc >= 1 && napi_get_value_double(env, argv[0], &handle) == napi_ok)
    kf_labels_close((int64_t)handle);
  return NULL;
}

/* Calls fn(signo) with the signal number argv[0]; its error thrown. */
static napi_value with_signal(napi_env env, napi_callback_info info,
                              int (*fn)(int), const char *usage) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t signo = 0;
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1 || napi_get_value_int32(env, argv[0], &signo) != napi_ok) {
    napi_throw_type_error(env, "KFLAME_ERR_INVALID_ARG", usage);
    return NULL;
  }
  int rc = fn(signo);
  if (rc) return throw_code(env, rc, -rc);
  return NULL;
}

/* watchSignal(signo): see kf_sigwatch_add. */
static napi_value js_watch_signal(napi_env env, napi_callback_info info) {
  return with_signal(env, info, kf_sigwatch_add, "watchSignal(signo)");
}

/* dieOfSignal(signo): see kf_sigwatch_die; returns only when it did not. */
static napi_value js_die_of_signal(napi_env env, napi_callback_info info) {
  return with_signal(env, info, kf_sigwatch_die, "dieOfSignal(signo)");
}

/* signalArrived() -> the watched signal number that arrived last, or 0 */
static napi_value js_signal_arrived(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value v;
  CHECK(env, napi_create_int32(env, kf_sigwatch_arrived(), &v));
  return v;
}

/* threadCpuNs(): the calling thread's CPU time in ns, for the tests' and
 * benches' truth: clock_gettime(CLOCK_THREAD_CPUTIME_ID) is exact, where
 * /proc/thread-self/schedstat moves only at the scheduler's tick (every
 * 4 ms at HZ=250) while the thread runs. Internal, not in the API. */
static napi_value js_thread_cpu_ns(napi_env env, napi_callback_info info) {
  (void)info;
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  napi_value v;
  CHECK(env, napi_create_double(env, (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec, &v));
  return v;
}

/* Whether this isolate's code events feed the code map. */
static napi_value js_jit_armed(napi_env env, napi_callback_info info) {
  (void)info;
  isolate_hook_t *hook = hook_of(env);
  napi_value v;
  CHECK(env, napi_get_boolean(env, hook && hook->isolate, &v));
  return v;
}

/* arm(): install the code-event hook on this isolate now. */
static napi_value js_arm(napi_env env, napi_callback_info info) {
  (void)info;
  arm_env(env);
  return NULL;
}

/* disarm(): take this isolate's hook off again (KFLAME_JIT=profile, once
 * no profile runs): V8 stops building names and positions for what it
 * compiles, and the code map forgets this isolate's code (the next arm
 * has V8 report what then exists). */
static napi_value js_disarm(napi_env env, napi_callback_info info) {
  (void)info;
  isolate_hook_t *hook = hook_of(env);
  if (hook) unhook(hook);
  return NULL;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_property_descriptor props[] = {
      {"start", NULL, js_start, NULL, NULL, NULL, napi_default, NULL},
      {"stop", NULL, js_stop, NULL, NULL, NULL, napi_default, NULL},
      {"stopAsync", NULL, js_stop_async, NULL, NULL, NULL, napi_default, NULL},
      {"cut", NULL, js_cut, NULL, NULL, NULL, napi_default, NULL},
      {"takeWindow", NULL, js_take_window, NULL, NULL, NULL, napi_default, NULL},
      {"running", NULL, js_running, NULL, NULL, NULL, napi_default, NULL},
      {"status", NULL, js_status, NULL, NULL, NULL, napi_default, NULL},
      {"dropCaches", NULL, js_drop_caches, NULL, NULL, NULL, napi_default, NULL},
      {"profileFolded", NULL, js_profile_folded, NULL, NULL, NULL, napi_default, NULL},
      {"profileSamples", NULL, js_profile_samples, NULL, NULL, NULL, napi_default, NULL},
      {"profileSvg", NULL, js_profile_svg, NULL, NULL, NULL, napi_default, NULL},
      {"profileHtmlData", NULL, js_profile_html_data, NULL, NULL, NULL, napi_default, NULL},
      {"htmlData", NULL, js_html_data, NULL, NULL, NULL, napi_default, NULL},
      {"profileWrite", NULL, js_profile_write, NULL, NULL, NULL, napi_default, NULL},
      {"profileSvgFile", NULL, js_profile_svg_file, NULL, NULL, NULL, napi_default, NULL},
      {"watchSignal", NULL, js_watch_signal, NULL, NULL, NULL, napi_default, NULL},
      {"signalArrived", NULL, js_signal_arrived, NULL, NULL, NULL, napi_default, NULL},
      {"dieOfSignal", NULL, js_die_of_signal, NULL, NULL, NULL, napi_default, NULL},
      {"writePerfMap", NULL, js_write_perf_map, NULL, NULL, NULL,
       napi_default, NULL},
      {"jitArmed", NULL, js_jit_armed, NULL, NULL, NULL, napi_default, NULL},
      {"threadCpuNs", NULL, js_thread_cpu_ns, NULL, NULL, NULL, napi_default, NULL},
      {"arm", NULL, js_arm, NULL, NULL, NULL, napi_default, NULL},
      {"disarm", NULL, js_disarm, NULL, NULL, NULL, napi_default, NULL},
      {"labelOpen", NULL, js_label_open, NULL, NULL, NULL, napi_default, NULL},
      {"labelClose", NULL, js_label_close, NULL, NULL, NULL, napi_default, NULL},
      {"renderSvg", NULL, js_render_svg, NULL, NULL, NULL, napi_default, NULL},
      {"renderSvgFile", NULL, js_render_svg_file, NULL, NULL, NULL, napi_default,
       NULL},
  };
  if (napi_define_properties(env, exports, sizeof props / sizeof props[0],
                             props) != napi_ok)
    return NULL;
  kf_dwarf_init_library();
  kf_perfwarm_begin(); /* off this thread: see perfwarm.h */
  /* labels.js reads whether labels record straight from this word, so a
   * label costs no native call while no profile runs. Where external
   * buffers are not allowed (V8's sandbox), it calls labelOpen instead. */
  napi_value word_ab, word, ignored;
  if (napi_create_external_arraybuffer(env, (void *)kf_labels_recording_word(),
                                       sizeof(int), NULL, NULL,
                                       &word_ab) != napi_ok ||
      napi_create_typedarray(env, napi_int32_array, 1, word_ab, 0, &word) != napi_ok ||
      napi_set_named_property(env, exports, "labelsRecording", word) != napi_ok) {
    /* labels.js falls back to labelOpen: nothing to report, and nothing
     * may stay pending, or loading the addon would throw. */
    bool pending = false;
    if (napi_is_exception_pending(env, &pending) == napi_ok && pending &&
        napi_get_and_clear_last_exception(env, &ignored) != napi_ok)
      return NULL;
  }
  isolate_hook_t *hook = calloc(1, sizeof(*hook));
  if (!hook || napi_set_instance_data(env, hook, disarm, NULL) != napi_ok) {
    free(hook);
    napi_throw_error(env, "KFLAME_ERR_NAPI", "out of memory loading kflame");
    return NULL;
  }
  /* KFLAME_JIT=load arms at load; by default the first start() or
   * writePerfMap() on the isolate does; off: never (lib/session.js). */
  const char *mode = getenv("KFLAME_JIT");
  if (mode && strcmp(mode, "load") == 0) arm(hook);
  return exports;
}

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
#include <string.h>

#include "error.h"
#include "profiler.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kf_profiler_t *profiler;

#define CHECK(env, call)                                                  \
  do {                                                                    \
    if ((call) != napi_ok) {                                              \
      const napi_extended_error_info *info = NULL;                        \
      napi_get_last_error_info((env), &info);                             \
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

static int get_u32(napi_env env, napi_value obj, const char *key,
                   uint32_t *out) {
  napi_value v;
  napi_valuetype t;
  if (napi_get_named_property(env, obj, key, &v) != napi_ok ||
      napi_typeof(env, v, &t) != napi_ok)
    return -1;
  if (t == napi_undefined) return 0;
  return napi_get_value_uint32(env, v, out) == napi_ok ? 0 : -1;
}

static int get_bool(napi_env env, napi_value obj, const char *key, int *out) {
  napi_value v;
  napi_valuetype t;
  bool b;
  if (napi_get_named_property(env, obj, key, &v) != napi_ok ||
      napi_typeof(env, v, &t) != napi_ok)
    return -1;
  if (t == napi_undefined) return 0;
  if (napi_get_value_bool(env, v, &b) != napi_ok) return -1;
  *out = b;
  return 0;
}

/* start({ hz, taskClock, kernel, ringPages }) */
static napi_value js_start(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  kf_sampler_opts_t opts = {.hz = 99, .event = KF_EVENT_CPU_CLOCK,
                            .kernel = 1, .ring_pages = 16};
  int task_clock = 0;
  if (argc < 1 || get_u32(env, argv[0], "hz", &opts.hz) ||
      get_u32(env, argv[0], "ringPages", &opts.ring_pages) ||
      get_bool(env, argv[0], "kernel", &opts.kernel) ||
      get_bool(env, argv[0], "taskClock", &task_clock) || opts.hz == 0 ||
      opts.ring_pages == 0 || (opts.ring_pages & (opts.ring_pages - 1))) {
    napi_throw_type_error(env, "KFLAME_ERR_INVALID_ARG",
                          "start() takes { hz, ringPages, kernel, taskClock }");
    return NULL;
  }
  opts.event = task_clock ? KF_EVENT_TASK_CLOCK : KF_EVENT_CPU_CLOCK;

  pthread_mutex_lock(&lock);
  int rc = 0, sys_errno = 0;
  if (!profiler && !(profiler = kf_profiler_new())) rc = -ENOMEM;
  if (rc == 0) rc = kf_profiler_start(profiler, &opts, &sys_errno);
  pthread_mutex_unlock(&lock);
  if (rc != 0) return throw_code(env, rc, sys_errno);
  return NULL;
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

static napi_value make_stats(napi_env env, const kf_profile_stats_t *st) {
  napi_value o;
  CHECK(env, napi_create_object(env, &o));
  CHECK(env, set_num(env, o, "samples", (double)st->samples));
  CHECK(env, set_num(env, o, "lost", (double)st->lost));
  CHECK(env, set_num(env, o, "duplicates", (double)st->duplicates));
  CHECK(env, set_num(env, o, "foreign", (double)st->foreign));
  CHECK(env, set_num(env, o, "corrupt", (double)st->corrupt));
  CHECK(env, set_num(env, o, "noMemory", (double)st->no_memory));
  CHECK(env, set_num(env, o, "threads", st->threads));
  CHECK(env, set_num(env, o, "durationMs", (double)st->duration_ns / 1e6));
  CHECK(env, set_num(env, o, "hz", st->hz));
  CHECK(env, set_bool(env, o, "taskClock", st->event == KF_EVENT_TASK_CLOCK));
  CHECK(env, set_bool(env, o, "kernel", st->kernel));
  CHECK(env, set_bool(env, o, "kernelRefused", st->kernel_refused));
  CHECK(env, set_bool(env, o, "kernelHidden", st->kernel_hidden));
  CHECK(env, set_bool(env, o, "inheritThread", st->inherit_thread));
  CHECK(env, set_num(env, o, "ringPages", st->ring_pages));
  CHECK(env, set_num(env, o, "ringPagesAsked", st->ring_pages_asked));
  CHECK(env, set_num(env, o, "attached", st->attached));
  CHECK(env, set_num(env, o, "cpus", st->cpus));
  return o;
}

/* stop() -> { folded, stats } */
static napi_value js_stop(napi_env env, napi_callback_info info) {
  (void)info;
  kf_profile_t profile;
  pthread_mutex_lock(&lock);
  int rc = profiler ? kf_profiler_stop(profiler, &profile)
                    : -KF_ERR_NOT_RUNNING;
  pthread_mutex_unlock(&lock);
  if (rc != 0) {
    if (profiler) kf_profile_free(&profile);
    return throw_code(env, rc, 0);
  }
  napi_value result = NULL, folded, stats;
  if (napi_create_object(env, &result) != napi_ok ||
      napi_create_string_utf8(env, profile.folded, profile.folded_len,
                              &folded) != napi_ok ||
      napi_set_named_property(env, result, "folded", folded) != napi_ok) {
    kf_profile_free(&profile);
    CHECK(env, napi_generic_failure);
  }
  kf_profile_free(&profile);
  if (!(stats = make_stats(env, &profile.stats))) return NULL;
  CHECK(env, napi_set_named_property(env, result, "stats", stats));
  return result;
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

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_property_descriptor props[] = {
      {"start", NULL, js_start, NULL, NULL, NULL, napi_default, NULL},
      {"stop", NULL, js_stop, NULL, NULL, NULL, napi_default, NULL},
      {"running", NULL, js_running, NULL, NULL, NULL, napi_default, NULL},
  };
  if (napi_define_properties(env, exports, 3, props) != napi_ok) return NULL;
  return exports;
}

#define _GNU_SOURCE
#include "profiler.h"

#include "jit/v8inline.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "collect/collector.h"
#include "util/error.h"
#include "render/folded.h"
#include "jit/jitframes.h"
#include "jit/jithook.h"
#include "jit/perfmap.h"
#include "symbols/symbolizer.h"
#include "collect/threadrole.h"

/* The symbol tables kept across sessions (ELF tables are costly to load),
 * and the session running. A session owns the tables while it runs and
 * while it is stopped (named) outside the caller's lock; the profiler has
 * them back once the stop is done. */
struct kf_profiler {
  kf_symbolizer_t *symbolizer; /* NULL while a session has them */
  int preloaded;               /* they hold the ELF tables and kallsyms */
  kf_session_t *session;       /* the one running, or NULL */
};

struct kf_session {
  kf_symbolizer_t *symbolizer;
  /* A session whose tables are not loaded yet loads them on a thread of
   * its own while it samples, so its stop() only names. */
  pthread_t preload;
  int preloading, preloaded;
  int symbols_ready; /* set by the preload thread when done (atomic) */
  int preload_kernel; /* read by the preload thread: kallsyms too */
  kf_sampler_t *sampler;  /* one of the two samplers, while running */
  kf_timer_t *timer;
  int perf_refused, perf_refused_errno; /* why AUTO chose the timer */
  kf_collector_t *collector;
  kf_profile_opts_t opts;
  char *perf_map; /* opts.perf_map, owned */
  kf_codemap_stats_t code_at_start;
  uint64_t started_ns;
  uint64_t wall_start_ms;
  kf_start_phases_t start_phases;
};

typedef struct root {
  uint32_t tid;
  char *name;
} root_t;

typedef struct fold_ctx {
  const kf_aggregate_t *agg;
  root_t *roots;
  size_t nroots;
} fold_ctx_t;

kf_profiler_t *kf_profiler_new(void) {
  kf_profiler_t *p = calloc(1, sizeof(*p));
  if (p && !(p->symbolizer = kf_symbolizer_new())) {
    free(p);
    return NULL;
  }
  return p;
}

static void *preload_symbols(void *arg) {
  kf_session_t *s = arg;
  kf_symbolizer_preload(s->symbolizer, s->preload_kernel);
  /* The collector may name stacks from here on. */
  __atomic_store_n(&s->symbols_ready, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* Hands the symbolizer back to the thread that stops the session. */
static void join_preload(kf_session_t *s) {
  if (!s->preloading) return;
  pthread_join(s->preload, NULL);
  s->preloading = 0;
  s->preloaded = 1;
}

/* Runs first on the collector's thread (its on_start), for a session whose
 * tables are not loaded: created from the JS thread, the preload thread,
 * busy for 100 ms and more, could take the rest of the JS thread's time
 * slice inside start() (3-7 ms measured, on a 2-core machine with the other
 * core busy). s->preload_kernel was set before the collector started; the
 * stopping thread reads s->preloading only after joining the collector. */
static void start_preload(void *arg) {
  kf_session_t *s = arg;
  /* Without a thread, the collector loads the tables as it names. */
  if (pthread_create(&s->preload, NULL, preload_symbols, s) == 0) {
    pthread_setname_np(s->preload, "kflame-symbols");
    s->preloading = 1;
  } else {
    __atomic_store_n(&s->symbols_ready, 1, __ATOMIC_RELEASE);
  }
}

/* Closes what the session opened; its symbol tables stay (give_back). */
static void end_session(kf_session_t *s) {
  if (s->collector) kf_collector_free(s->collector);
  if (s->sampler) kf_sampler_close(s->sampler);
  kf_timer_close(s->timer);
  if (s->opts.codemap) kf_codemap_keep_dead(s->opts.codemap, 0);
  free(s->perf_map);
  join_preload(s);
  s->collector = NULL;
  s->sampler = NULL;
  s->timer = NULL;
  s->perf_map = NULL;
  s->opts.codemap = NULL;
}

void kf_profiler_give_back(kf_profiler_t *p, kf_session_t *s) {
  if (!s) return;
  end_session(s); /* a no-op after kf_session_stop */
  if (!p->symbolizer) {
    p->symbolizer = s->symbolizer;
    p->preloaded = s->preloaded;
  } else {
    kf_symbolizer_free(s->symbolizer); /* a later session's are kept */
  }
  free(s);
}

int kf_profiler_running(const kf_profiler_t *p) { return p->session != NULL; }

int kf_profiler_mode(const kf_profiler_t *p) {
  if (!p->session) return KF_MODE_AUTO;
  return p->session->sampler ? KF_MODE_PERF : KF_MODE_TIMER;
}

/* perf_event_open refused or unusable here, where timers may still work. */
static int timer_may_help(int rc) {
  return rc == -KF_ERR_PERF_PARANOID || rc == -KF_ERR_PERF_DENIED ||
         rc == -KF_ERR_PERF_UNSUPPORTED || rc == -KF_ERR_MLOCK ||
         rc == -KF_ERR_FD_LIMIT;
}

/* Opens the sampler the mode asks for: AUTO tries perf, then the timers. */
static int open_sampler(kf_session_t *s, const kf_profile_opts_t *opts,
                        int *sys_errno) {
  int rc = -KF_ERR_PERF_UNSUPPORTED;
  /* Only perf events see a thread that waits: no fallback to the timer. */
  int offcpu = (opts->sampler.what & KF_WHAT_OFFCPU) != 0;
  if (offcpu && opts->mode == KF_MODE_TIMER) return -KF_ERR_OFFCPU_TIMER;
  if (offcpu) {
    rc = kf_sampler_open(&opts->sampler, &s->sampler, sys_errno);
    if (rc == -EMFILE || rc == -ENFILE) rc = -KF_ERR_FD_LIMIT;
    if (rc != 0) s->sampler = NULL;
    return rc;
  }
  if (opts->mode != KF_MODE_TIMER) {
    rc = kf_sampler_open(&opts->sampler, &s->sampler, sys_errno);
    /* Out of descriptors is the same advice wherever it struck: in
     * perf_event_open or in reading /sys or /proc before it. */
    if (rc == -EMFILE || rc == -ENFILE) rc = -KF_ERR_FD_LIMIT;
    if (rc != 0) s->sampler = NULL;
    if (rc == 0 || opts->mode == KF_MODE_PERF || !timer_may_help(rc)) return rc;
    s->perf_refused = rc;
    s->perf_refused_errno = *sys_errno;
  }
  rc = kf_timer_open(&opts->sampler, &s->timer, sys_errno);
  if (rc != 0) s->timer = NULL;
  return rc;
}

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int kf_profiler_start(kf_profiler_t *p, const kf_profile_opts_t *opts,
                      int *sys_errno) {
  *sys_errno = 0;
  if (p->session) return -KF_ERR_RUNNING;
  uint64_t t0 = kf_now_ns(), cpu0 = thread_cpu_ns();
  kf_session_t *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  kf_start_phases_t *ph = &s->start_phases;
  /* The tables kept from the last session, or new ones while a stop in
   * another thread still names with those. */
  s->symbolizer = p->symbolizer ? p->symbolizer : kf_symbolizer_new();
  s->preloaded = p->symbolizer ? p->preloaded : 0;
  if (!s->symbolizer) {
    free(s);
    return -ENOMEM;
  }
  p->symbolizer = NULL;
  s->opts = *opts;
  int rc = opts->perf_map && !(s->perf_map = strdup(opts->perf_map)) ? -ENOMEM : 0;
  s->opts.perf_map = s->perf_map;
  s->opts.codemap = NULL; /* set once dead code is kept, for close_session */
  s->started_ns = kf_now_ns();
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  s->wall_start_ms = (uint64_t)wall.tv_sec * 1000 + (uint64_t)wall.tv_nsec / 1000000;
  /* Dead code is kept from before the first sample on. */
  if (rc == 0 && opts->codemap) {
    kf_codemap_keep_dead(opts->codemap, 1);
    kf_codemap_stats(opts->codemap, &s->code_at_start);
    s->opts.codemap = opts->codemap;
  }
  uint64_t t1 = kf_now_ns();
  if (rc == 0) rc = open_sampler(s, opts, sys_errno);
  uint64_t t2 = kf_now_ns();
  ph->sampler_ns = t2 - t1;
  if (rc == 0) {
    /* A session whose tables are not loaded names once the preload is done. */
    __atomic_store_n(&s->symbols_ready, s->preloaded, __ATOMIC_RELEASE);
    kf_collector_opts_t copts = {.codemap = opts->codemap,
                                 .perf_map = s->perf_map,
                                 .v8layout = opts->v8layout,
                                 .funcpos = opts->funcpos,
                                 .timer = s->timer,
                                 .dwarf = opts->dwarf,
                                 .symbolizer = s->symbolizer,
                                 .symbols_ready = &s->symbols_ready,
                                 .keep_tiers = opts->keep_tiers,
                                 .park = opts->park,
                                 .timeline_max = opts->timeline_max,
                                 .started_ns = s->started_ns,
                                 .offcpu_period_ns = 1000000000ULL /
                                     (opts->sampler.hz ? opts->sampler.hz : 99)};
    if (!s->preloaded) {
      s->preload_kernel = s->sampler && kf_sampler_info(s->sampler)->kernel;
      copts.on_start = start_preload;
      copts.on_start_arg = s;
    }
    rc = kf_collector_start(s->sampler, &copts, &s->collector, sys_errno);
    if (rc == -EMFILE || rc == -ENFILE) rc = -KF_ERR_FD_LIMIT;
    if (rc != 0) s->collector = NULL;
  }
  if (rc != 0) {
    kf_profiler_give_back(p, s);
    return rc;
  }
  uint64_t t3 = kf_now_ns(), cpu = thread_cpu_ns() - cpu0;
  ph->collector_ns = t3 - t2;
  ph->off_cpu_ns = t3 - t0 > cpu ? t3 - t0 - cpu : 0;
  ph->jit_ns = opts->jit_arm_ns;
  ph->total_ns = t3 - t0 + ph->jit_ns;
  p->session = s;
  return 0;
}

/* The main thread's comm now, for a profile in which it has no sample
 * (it waited while workers ran): the comm threads inherit from it. */
static const char *read_main_comm(char buf[16]) {
  memset(buf, 0, 16);
  int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC); /* the leader's */
  if (fd < 0) return NULL;
  ssize_t len = read(fd, buf, 15);
  close(fd);
  if (len <= 0) return NULL;
  if (buf[len - 1] == '\n') buf[len - 1] = '\0';
  return buf;
}

/* Each thread's root frame, from what the namer settled (namer.h). */
static int make_roots(const kf_aggregate_t *agg, fold_ctx_t *ctx) {
  size_t n;
  const kf_agg_thread_t *threads = kf_aggregate_threads(agg, &n);
  uint32_t pid = (uint32_t)getpid();
  char main_buf[16];
  const char *main_comm = NULL;
  for (size_t i = 0; i < n && !main_comm; i++)
    if (threads[i].tid == pid && threads[i].comm[0]) main_comm = threads[i].comm;
  if (!main_comm) main_comm = read_main_comm(main_buf);
  ctx->roots = calloc(n ? n : 1, sizeof(root_t));
  if (!ctx->roots) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    const kf_agg_thread_t *t = &threads[i];
    root_t *r = &ctx->roots[ctx->nroots++];
    r->tid = t->tid;
    r->name = kf_thread_root(t->tid, pid, t->comm[0] ? t->comm : NULL, main_comm,
                             t->settled ? t->routine : NULL);
    if (!r->name) return -ENOMEM;
  }
  return 0;
}

static const char *frame_name(void *c, uint64_t id, int kernel) {
  (void)kernel; /* the namer named it in its context */
  const char *name = kf_aggregate_frame_name(((fold_ctx_t *)c)->agg, id);
  return name ? name : "[unknown]";
}

static const char *thread_name(void *c, uint32_t tid) {
  fold_ctx_t *ctx = c;
  for (size_t i = 0; i < ctx->nroots; i++)
    if (ctx->roots[i].tid == tid) return ctx->roots[i].name;
  return "[thread]";
}

/* The session's tables are freed; what they took from malloc's heaps (the
 * collector thread's arena above all) would stay in the process, free but
 * counted in its RSS, unless handed back. */
static void give_back_heap(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

/* The stats that say how the session samples, for its result and for each
 * window of it: set at start, safe to read while the collector runs. */
static void settings_stats(const kf_session_t *s, const kf_sampler_info_t *info,
                           kf_profile_stats_t *st) {
  st->hz = s->opts.sampler.hz;
  st->what = s->sampler ? info->what : KF_WHAT_CPU;
  st->max_switch_rate = s->opts.sampler.max_switch_rate;
  st->source_maps = s->opts.source_maps;
  st->mode = s->sampler ? KF_MODE_PERF : KF_MODE_TIMER;
  st->perf_refused = s->perf_refused;
  st->perf_refused_errno = s->perf_refused_errno;
  st->event = s->opts.sampler.event;
  st->kernel = info->kernel;
  st->kernel_refused = info->kernel_refused;
  st->inherit_thread = info->inherit_thread;
  st->scope = info->scope;
  st->scope_errno = info->scope_errno;
  st->switchins_traced = info->switchins_traced;
  st->switchin_errno = info->switchin_errno;
  st->ring_pages = info->ring_pages;
  st->ring_pages_asked = info->ring_pages_asked;
  st->attached = info->threads;
  st->cpus = info->cpus;
  st->stack_bytes = info->stack_bytes;
  st->v8_layout = s->opts.v8layout != NULL;
  st->code_events_dropped = kf_jithook_dropped();
  st->start = s->start_phases;
}

/* The folded text, roots and timeline of a named profile (a session's or
 * a window's) into out, with the counts of out->stats that come from it. */
static int profile_of(kf_aggregate_t *agg, uint32_t max_frames, kf_profile_t *out) {
  kf_profile_stats_t *st = &out->stats;
  kf_aggregate_stats_t as;
  kf_aggregate_stats(agg, &as);
  st->samples = as.samples;
  st->named_stacks = kf_stacks_count(kf_aggregate_stacks(agg));
  st->named_frames = as.frames;
  st->aggregate_bytes = as.bytes;
  fold_ctx_t ctx = {.agg = agg};
  int rc = make_roots(agg, &ctx);
  if (rc == 0) {
    const kf_stacks_t *stacks = kf_aggregate_stacks(agg);
    st->threads = (uint32_t)ctx.nroots;
    kf_fold_names_t names = {.frame = frame_name,
                             .thread = thread_name,
                             .ctx = &ctx,
                             .max_frames = max_frames};
    out->line_of = malloc((kf_stacks_count(stacks) + 1) * sizeof(*out->line_of));
    rc = out->line_of ? kf_fold(stacks, &names, &out->folded, &out->folded_len, out->line_of)
                      : -ENOMEM;
  }
  if (rc == 0) {
    out->timeline = kf_aggregate_take_timeline(agg);
    st->timeline_samples = kf_timeline_count(out->timeline);
    st->timeline_dropped = kf_timeline_dropped(out->timeline);
    st->timeline_bytes = kf_timeline_bytes(out->timeline);
  }
  for (size_t i = 0; i < ctx.nroots; i++) free(ctx.roots[i].name);
  free(ctx.roots);
  return rc;
}

kf_session_t *kf_profiler_take(kf_profiler_t *p) {
  kf_session_t *s = p->session;
  p->session = NULL;
  return s;
}

int kf_session_stop(kf_session_t *s, kf_profile_t *out) {
  memset(out, 0, sizeof(*out));
  uint64_t t0 = kf_now_ns();
  if (s->sampler) kf_sampler_disable(s->sampler);
  kf_collector_stop(s->collector);

  kf_profile_stats_t *st = &out->stats;
  st->stop_drain_ns = kf_now_ns() - t0;
  const kf_sampler_info_t *info =
      s->sampler ? kf_sampler_info(s->sampler) : kf_timer_info(s->timer);
  const kf_collector_stats_t *cs = kf_collector_stats(s->collector);
  settings_stats(s, info, st);
  st->duplicates = cs->duplicates;
  st->foreign = cs->foreign;
  st->corrupt = cs->corrupt;
  st->timer = cs->timer;
  st->dwarf = cs->dwarf;
  st->jit_frames = cs->jit.named;
  st->interpreted_named = cs->jit.interpreted_named;
  st->interpreted_unnamed = cs->jit.interpreted_unnamed;
  st->running_added = cs->jit.running_added;
  st->unreported_named = cs->jit.unreported_named;
  st->unreported_unnamed = cs->jit.unreported_unnamed;
  st->regexp_named = cs->jit.regexp_named;
  st->regexp_unnamed = cs->jit.regexp_unnamed;
  st->inlined = cs->jit.inlined;
  st->inlined_exact = cs->jit.inlined_exact;
  st->inlined_unnamed = cs->jit.inlined_unnamed;
  kf_v8inline_stats_t vs;
  kf_v8inline_stats(&vs);
  st->inlining_read = vs.read;
  st->inlining_failed = vs.failed;
  st->stack_copies_short = cs->jit.copy_short;
  st->stack_copies = cs->stack_copies;
  st->stack_copy_bytes = cs->stack_bytes;
  st->perf_map_writes = cs->perf_map_writes;
  st->perf_map_errors = cs->perf_map_errors;
  st->perf_map_error = cs->perf_map_error;
  kf_offcpu_stats_t os;
  kf_collector_offcpu_stats(s->collector, &os);
  st->switch_samples = os.outs;
  st->switch_paired = os.paired;
  st->switch_unpaired = os.unpaired;
  st->offcpu_ns = os.weighted_ns;
  st->offcpu_samples = os.samples;
  if (s->opts.codemap) {
    kf_codemap_stats_t ms;
    kf_codemap_stats(s->opts.codemap, &ms);
    st->code_live = ms.live;
    st->code_bytes = ms.bytes;
    st->code_evicted = ms.evicted - s->code_at_start.evicted;
    st->code_moved = ms.moved - s->code_at_start.moved;
    st->code_lock_waits = ms.lock_waits - s->code_at_start.lock_waits;
    st->code_lock_wait_ns = ms.lock_wait_ns - s->code_at_start.lock_wait_ns;
    if (s->perf_map) st->perf_map_lines = kf_perfmap_write(s->opts.codemap, s->perf_map);
    if (st->perf_map_lines < 0) st->perf_map_error = st->perf_map_lines;
  }
  /* The session's settings travel with its result: stop() may be called from
   * another isolate than start() (a worker), which knows nothing of them. */
  int rc = 0;
  if (s->perf_map && !(out->perf_map = strdup(s->perf_map))) rc = -ENOMEM;

  /* The rings are drained: give the fds and locked memory back before the
   * slow part. The collector's tables stay until naming is done. */
  uint32_t max_frames = info->max_stack;
  kf_sampler_close(s->sampler);
  s->sampler = NULL;
  kf_timer_close(s->timer);
  s->timer = NULL;

  /* The collector named all but its last second or so (namer.h). */
  join_preload(s);
  uint64_t t1 = kf_now_ns();
  kf_collector_finish(s->collector); /* what it could not name is counted */
  st->stop_name_ns = kf_now_ns() - t1;
  /* Since the last window a continuous profile took, if any. */
  kf_window_stats_t ws;
  kf_collector_window(s->collector, &ws);
  st->started_ns = ws.start;
  /* Sampling ended when stop() began, not once the rest was done (closing
   * off-CPU's tracepoint waits ~60 ms for the kernel: switchin.h). */
  st->duration_ns = t0 > ws.start ? t0 - ws.start : 0;
  st->wall_start_ms = s->wall_start_ms + (ws.start - s->started_ns) / 1000000;
  st->lost = ws.lost;
  st->no_memory = ws.no_memory;
  uint64_t t2 = kf_now_ns();
  if (rc == 0) rc = profile_of(kf_collector_aggregate(s->collector), max_frames, out);
  st->stop_fold_ns = kf_now_ns() - t2;
  st->kernel_hidden = st->kernel && kf_symbolizer_kernel_hidden(s->symbolizer);
  kf_symbolizer_stats_t ss;
  kf_collector_names_stats(s->collector, &ss);
  st->native_from_debug = ss.from_debug;
  st->native_folded = ss.folded;
  kf_symbolizer_cache_t cache;
  kf_symbolizer_cache(s->symbolizer, &cache); /* the collector has joined */
  st->symbol_cache_bytes = cache.bytes;
  end_session(s);
  uint64_t t3 = kf_now_ns();
  give_back_heap();
  st->stop_trim_ns = kf_now_ns() - t3;
  st->stop_ns = kf_now_ns() - t0;
  return rc;
}

void kf_profile_free(kf_profile_t *profile) {
  free(profile->perf_map);
  profile->perf_map = NULL;
  free(profile->folded);
  free(profile->line_of);
  kf_timeline_free(profile->timeline);
  profile->folded = NULL;
  profile->line_of = NULL;
  profile->timeline = NULL;
}

int kf_profiler_drop_caches(kf_profiler_t *p, kf_symbolizer_cache_t *dropped) {
  memset(dropped, 0, sizeof(*dropped));
  if (p->session) return -KF_ERR_RUNNING;
  /* A stop still naming in another thread has them: it keeps them. */
  if (!p->symbolizer) return 0;
  kf_symbolizer_cache(p->symbolizer, dropped);
  kf_symbolizer_drop(p->symbolizer);
  give_back_heap();
  p->preloaded = 0; /* the next session loads them on its own thread again */
  return 0;
}

int kf_profiler_cut(kf_profiler_t *p) {
  if (!p->session) return -KF_ERR_NOT_RUNNING;
  return kf_collector_cut(p->session->collector);
}

int kf_profiler_take_window(kf_profiler_t *p, int timeout_ms, kf_profile_t *out) {
  memset(out, 0, sizeof(*out));
  kf_session_t *s = p->session;
  if (!s) return -KF_ERR_NOT_RUNNING;
  kf_aggregate_t *agg;
  kf_window_stats_t ws;
  int rc = kf_collector_take_window(s->collector, timeout_ms, &agg, &ws);
  if (rc != 0) return rc;
  kf_profile_stats_t *st = &out->stats;
  const kf_sampler_info_t *info = s->sampler ? kf_sampler_info(s->sampler) : kf_timer_info(s->timer);
  settings_stats(s, info, st);
  st->started_ns = ws.start;
  st->duration_ns = ws.end - ws.start;
  st->wall_start_ms = s->wall_start_ms + (ws.start - s->started_ns) / 1000000;
  st->lost = ws.lost;
  st->no_memory = ws.no_memory;
  uint64_t t0 = kf_now_ns();
  rc = profile_of(agg, info->max_stack, out);
  st->stop_fold_ns = st->stop_ns = kf_now_ns() - t0;
  kf_aggregate_free(agg);
  if (rc != 0) kf_profile_free(out);
  return rc;
}

#define _GNU_SOURCE
#include "profiler.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "collector.h"
#include "error.h"
#include "folded.h"
#include "jitframes.h"
#include "jithook.h"
#include "perfmap.h"
#include "symbolizer.h"
#include "threadrole.h"

struct kf_profiler {
  kf_symbolizer_t *symbolizer; /* kept across sessions: ELF tables are costly */
  /* The first session loads the ELF tables and kallsyms on a thread of its
   * own while it samples, so its stop() only names. */
  pthread_t preload;
  int preloading, preloaded;
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
};

typedef struct root {
  uint32_t tid;
  char *name;
} root_t;

typedef struct fold_ctx {
  kf_symbolizer_t *symbolizer;
  const kf_jitframes_t *jit;
  int keep_tiers;
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
  kf_profiler_t *p = arg;
  kf_symbolizer_preload(p->symbolizer, p->preload_kernel);
  return NULL;
}

/* Hands the symbolizer back to the JS thread. */
static void join_preload(kf_profiler_t *p) {
  if (!p->preloading) return;
  pthread_join(p->preload, NULL);
  p->preloading = 0;
  p->preloaded = 1;
}

static void start_preload(kf_profiler_t *p, int kernel) {
  if (p->preloaded || p->preloading) return;
  p->preload_kernel = kernel;
  /* Without a thread, stop() loads the tables itself, as it always could. */
  if (pthread_create(&p->preload, NULL, preload_symbols, p) == 0) {
    pthread_setname_np(p->preload, "kflame-symbols");
    p->preloading = 1;
  }
}

static void close_session(kf_profiler_t *p) {
  if (p->collector) kf_collector_free(p->collector);
  if (p->sampler) kf_sampler_close(p->sampler);
  kf_timer_close(p->timer);
  if (p->opts.codemap) kf_codemap_keep_dead(p->opts.codemap, 0);
  free(p->perf_map);
  p->collector = NULL;
  p->sampler = NULL;
  p->timer = NULL;
  p->perf_map = NULL;
}

void kf_profiler_free(kf_profiler_t *p) {
  if (!p) return;
  join_preload(p);
  if (kf_profiler_running(p)) {
    if (p->sampler) kf_sampler_disable(p->sampler);
    kf_collector_stop(p->collector);
    close_session(p);
  }
  kf_symbolizer_free(p->symbolizer);
  free(p);
}

int kf_profiler_running(const kf_profiler_t *p) {
  return p->sampler != NULL || p->timer != NULL;
}

/* perf_event_open refused or unusable here, where timers may still work. */
static int timer_may_help(int rc) {
  return rc == -KF_ERR_PERF_PARANOID || rc == -KF_ERR_PERF_DENIED ||
         rc == -KF_ERR_PERF_UNSUPPORTED || rc == -KF_ERR_MLOCK ||
         rc == -KF_ERR_FD_LIMIT;
}

/* Opens the sampler the mode asks for: AUTO tries perf, then the timers. */
static int open_sampler(kf_profiler_t *p, const kf_profile_opts_t *opts,
                        int *sys_errno) {
  int rc = -KF_ERR_PERF_UNSUPPORTED;
  p->perf_refused = p->perf_refused_errno = 0;
  if (opts->mode != KF_MODE_TIMER) {
    rc = kf_sampler_open(&opts->sampler, &p->sampler, sys_errno);
    /* Out of descriptors is the same advice wherever it struck: in
     * perf_event_open or in reading /sys or /proc before it. */
    if (rc == -EMFILE || rc == -ENFILE) rc = -KF_ERR_FD_LIMIT;
    if (rc != 0) p->sampler = NULL;
    if (rc == 0 || opts->mode == KF_MODE_PERF || !timer_may_help(rc)) return rc;
    p->perf_refused = rc;
    p->perf_refused_errno = *sys_errno;
  }
  rc = kf_timer_open(&opts->sampler, &p->timer, sys_errno);
  if (rc != 0) p->timer = NULL;
  return rc;
}

int kf_profiler_start(kf_profiler_t *p, const kf_profile_opts_t *opts,
                      int *sys_errno) {
  *sys_errno = 0;
  if (kf_profiler_running(p)) return -KF_ERR_RUNNING;
  p->opts = *opts;
  if (opts->perf_map && !(p->perf_map = strdup(opts->perf_map)))
    return -ENOMEM;
  p->opts.perf_map = p->perf_map;
  p->started_ns = kf_now_ns();
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  p->wall_start_ms = (uint64_t)wall.tv_sec * 1000 + (uint64_t)wall.tv_nsec / 1000000;
  /* Dead code is kept from before the first sample on. */
  if (opts->codemap) {
    kf_codemap_keep_dead(opts->codemap, 1);
    kf_codemap_stats(opts->codemap, &p->code_at_start);
  }
  int rc = open_sampler(p, opts, sys_errno);
  if (rc != 0) {
    close_session(p);
    return rc;
  }
  kf_collector_opts_t copts = {.codemap = opts->codemap,
                               .perf_map = p->perf_map,
                               .v8layout = opts->v8layout,
                               .funcpos = opts->funcpos,
                               .timer = p->timer,
                               .dwarf = opts->dwarf};
  rc = kf_collector_start(p->sampler, &copts, &p->collector);
  if (rc != 0) {
    *sys_errno = -rc < KF_ERR_BASE ? -rc : errno;
    if (rc == -EMFILE || rc == -ENFILE) rc = -KF_ERR_FD_LIMIT;
    p->collector = NULL;
    close_session(p);
    return rc;
  }
  start_preload(p, p->sampler && kf_sampler_info(p->sampler)->kernel);
  return 0;
}

/* The outermost frame of a stack that is not C library start-up code
 * (clone3, start_thread): the function the thread was started with. */
static const char *start_routine(kf_symbolizer_t *sym, const kf_stack_t *st) {
  for (uint32_t i = st->nr; i-- > 0;) {
    uint64_t ip = st->ips[i];
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) break; /* only user frames */
    if (kf_symbolizer_in_libc(sym, ip)) continue;
    return kf_symbolizer_frame(sym, ip, 0);
  }
  return NULL;
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

static int make_roots(kf_profiler_t *p, const kf_stacks_t *stacks,
                      fold_ctx_t *ctx) {
  size_t n = kf_stacks_count(stacks);
  uint32_t pid = (uint32_t)getpid();
  char main_buf[16];
  const char *main_comm = kf_collector_comm(p->collector, pid);
  if (!main_comm) main_comm = read_main_comm(main_buf);
  ctx->roots = calloc(n ? n : 1, sizeof(root_t));
  if (!ctx->roots) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    kf_stack_t st;
    kf_stacks_get(stacks, i, &st);
    root_t *r = NULL;
    for (size_t j = 0; j < ctx->nroots && !r; j++)
      if (ctx->roots[j].tid == st.tid) r = &ctx->roots[j];
    if (r && r->name) continue;
    if (!r) {
      r = &ctx->roots[ctx->nroots++];
      r->tid = st.tid;
    }
    /* A role is settled by the first stack whose outermost frame is one of
     * Node's start routines. A chain broken by a frame without a frame
     * pointer (libc is built without) ends in a garbage frame and settles
     * nothing; threads no stack settled are named by comm below. */
    const char *routine = start_routine(p->symbolizer, &st);
    if (st.tid != pid && !kf_thread_role(routine)) continue;
    const char *comm = kf_collector_comm(p->collector, st.tid);
    r->name = kf_thread_root(st.tid, pid, comm, main_comm, routine);
    if (!r->name) return -ENOMEM;
  }
  for (size_t j = 0; j < ctx->nroots; j++) {
    root_t *r = &ctx->roots[j];
    if (r->name) continue;
    r->name = kf_thread_root(r->tid, pid, kf_collector_comm(p->collector, r->tid),
                             main_comm, NULL);
    if (!r->name) return -ENOMEM;
  }
  return 0;
}

static const char *frame_name(void *c, uint64_t ip, int kernel) {
  fold_ctx_t *ctx = c;
  if (ctx->jit && kf_jitframes_is_token(ip)) {
    const char *name = kf_jitframes_name(ctx->jit, ip, ctx->keep_tiers);
    return name ? name : "[jit]_[j]";
  }
  return kf_symbolizer_frame(ctx->symbolizer, ip, kernel);
}

static const char *thread_name(void *c, uint32_t tid) {
  fold_ctx_t *ctx = c;
  for (size_t i = 0; i < ctx->nroots; i++)
    if (ctx->roots[i].tid == tid) return ctx->roots[i].name;
  return "[thread]";
}

static int copy_samples(const kf_stacks_t *stacks, const uint32_t *line_of,
                        kf_profile_t *out) {
  size_t n;
  const kf_sample_t *in = kf_stacks_samples(stacks, &n);
  out->samples = malloc((n ? n : 1) * sizeof(*out->samples));
  if (!out->samples) return -ENOMEM;
  for (size_t i = 0; i < n; i++)
    out->samples[i] = (kf_profile_sample_t){in[i].time, line_of[in[i].stack], in[i].tid};
  out->nsamples = n;
  return 0;
}

int kf_profiler_stop(kf_profiler_t *p, kf_profile_t *out) {
  memset(out, 0, sizeof(*out));
  if (!kf_profiler_running(p)) return -KF_ERR_NOT_RUNNING;
  if (p->sampler) kf_sampler_disable(p->sampler);
  kf_collector_stop(p->collector);

  kf_profile_stats_t *st = &out->stats;
  const kf_sampler_info_t *info =
      p->sampler ? kf_sampler_info(p->sampler) : kf_timer_info(p->timer);
  const kf_collector_stats_t *cs = kf_collector_stats(p->collector);
  st->samples = cs->samples;
  st->lost = cs->lost;
  st->duplicates = cs->duplicates;
  st->foreign = cs->foreign;
  st->corrupt = cs->corrupt;
  st->no_memory = cs->no_memory;
  st->duration_ns = kf_now_ns() - p->started_ns;
  st->started_ns = p->started_ns;
  st->wall_start_ms = p->wall_start_ms;
  st->hz = p->opts.sampler.hz;
  st->mode = p->sampler ? KF_MODE_PERF : KF_MODE_TIMER;
  st->perf_refused = p->perf_refused;
  st->perf_refused_errno = p->perf_refused_errno;
  st->timer = cs->timer;
  st->dwarf = cs->dwarf;
  st->event = p->opts.sampler.event;
  st->kernel = info->kernel;
  st->kernel_refused = info->kernel_refused;
  st->inherit_thread = info->inherit_thread;
  st->ring_pages = info->ring_pages;
  st->ring_pages_asked = info->ring_pages_asked;
  st->attached = info->threads;
  st->cpus = info->cpus;
  st->jit_frames = cs->jit.named;
  st->interpreted_named = cs->jit.interpreted_named;
  st->interpreted_unnamed = cs->jit.interpreted_unnamed;
  st->running_added = cs->jit.running_added;
  st->inlined = cs->jit.inlined;
  st->stack_copies_short = cs->jit.copy_short;
  st->stack_bytes = info->stack_bytes;
  st->stack_copies = cs->stack_copies;
  st->stack_copy_bytes = cs->stack_bytes;
  st->v8_layout = p->opts.v8layout != NULL;
  st->perf_map_writes = cs->perf_map_writes;
  st->perf_map_errors = cs->perf_map_errors;
  st->code_events_dropped = kf_jithook_dropped();
  if (p->opts.codemap) {
    kf_codemap_stats_t ms;
    kf_codemap_stats(p->opts.codemap, &ms);
    st->code_live = ms.live;
    st->code_bytes = ms.bytes;
    st->code_evicted = ms.evicted - p->code_at_start.evicted;
    st->code_moved = ms.moved - p->code_at_start.moved;
    if (p->perf_map) st->perf_map_lines = kf_perfmap_write(p->opts.codemap, p->perf_map);
  }
  /* The session's settings travel with its result: stop() may be called from
   * another isolate than start() (a worker), which knows nothing of them. */
  int rc = 0;
  if (p->perf_map && !(out->perf_map = strdup(p->perf_map))) rc = -ENOMEM;

  /* The rings are drained: give the fds and locked memory back before the
   * slow part. The collector's tables stay until naming is done. */
  uint32_t max_frames = info->max_stack;
  kf_sampler_close(p->sampler);
  p->sampler = NULL;
  kf_timer_close(p->timer);
  p->timer = NULL;

  const kf_stacks_t *stacks = kf_collector_stacks(p->collector);
  join_preload(p);
  fold_ctx_t ctx = {.symbolizer = p->symbolizer,
                    .jit = kf_collector_jitframes(p->collector),
                    .keep_tiers = p->opts.keep_tiers};
  if (rc == 0) rc = kf_symbolizer_begin(p->symbolizer);
  if (rc == 0) rc = make_roots(p, stacks, &ctx);
  if (rc == 0) {
    st->threads = (uint32_t)ctx.nroots;
    kf_fold_names_t names = {.frame = frame_name,
                             .thread = thread_name,
                             .ctx = &ctx,
                             .max_frames = max_frames};
    uint32_t *line_of = malloc((kf_stacks_count(stacks) + 1) * sizeof(*line_of));
    rc = line_of ? kf_fold(stacks, &names, &out->folded, &out->folded_len, line_of)
                 : -ENOMEM;
    if (rc == 0) rc = copy_samples(stacks, line_of, out);
    free(line_of);
  }
  st->kernel_hidden = st->kernel && kf_symbolizer_kernel_hidden(p->symbolizer);
  kf_symbolizer_stats_t ss;
  kf_symbolizer_stats(p->symbolizer, &ss);
  st->native_from_debug = ss.from_debug;
  st->native_folded = ss.folded;
  for (size_t i = 0; i < ctx.nroots; i++) free(ctx.roots[i].name);
  free(ctx.roots);
  close_session(p);
  return rc;
}

void kf_profile_free(kf_profile_t *profile) {
  free(profile->perf_map);
  profile->perf_map = NULL;
  free(profile->folded);
  free(profile->samples);
  profile->folded = NULL;
  profile->samples = NULL;
  profile->nsamples = 0;
}

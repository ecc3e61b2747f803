#define _GNU_SOURCE
#include "collect/collector.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/grow.h"
#include "util/parked.h"
#include "collect/namer.h"
#include "sample/offcpu.h"
#include "jit/perfmap.h"
#include "jit/v8regexp.h"

#define POLL_TIMEOUT_MS 100
#define PERF_MAP_INTERVAL_NS 1000000000ULL
/* A sample is stamped in the interrupt and published to the ring a moment
 * later: dead code is kept this much longer than the drain that began
 * after it died, for samples stamped before the drain but published during
 * it. */
#define RETIRE_MARGIN_NS 50000000ULL
/* /proc/self/maps is read again for an address in no mapping known (the
 * code space of a worker's new isolate, say): the first few times at most
 * every 5 ms, then every 100 ms (stray addresses from broken frame chains
 * miss too, and must not make the collector read maps all the time). */
#define MAPS_RELOAD_NS 100000000ULL
#define MAPS_RELOAD_SOON_NS 5000000ULL
#define MAPS_RELOADS_SOON 16
/* The timer sampler finds threads by reading /proc/self/task this often: a
 * thread is sampled from at most this long after it started. Between scans
 * the collector wakes only when a ring is half full: at 99 Hz a wake-up
 * every 20 ms cost the collector more than its samples did. */
#define THREAD_SCAN_NS 50000000ULL
/* Raw stacks are named into the aggregate this often, or sooner when they
 * hold this much: what stop() has left to name, and the memory a profile
 * holds beyond what is distinct. */
#define FOLD_INTERVAL_NS 1000000000ULL
#define FOLD_BYTES ((size_t)8 << 20)

/* A thread seen in samples. `source` is the tid owning the opened event its
 * samples are taken from: itself when attached directly, else the creator it
 * inherited events from. A thread that starts while start() is attaching can
 * be both attached directly and covered by inherited clones, and a thread it
 * creates inherits from both: keeping one source per thread counts each
 * timer tick once. */
typedef struct thread {
  uint32_t tid;
  uint32_t source;
  int direct;
  char comm[16];
} thread_t;

struct kf_collector {
  kf_sampler_t *sampler; /* or: */
  kf_timer_t *timer;
  /* Every thread's samples come from its own timer or a CPU-wide event:
   * none is sampled through its creator's inherited events. */
  int own_sources;
  kf_stacks_t *stacks;     /* raw, since the last fold */
  kf_aggregate_t *agg;     /* named: the profile so far */
  kf_namer_t *namer;
  uint64_t folded_at;
  /* Windows of a continuous profile (kf_collector_cut). `lock` guards
   * cut_at, done and done_stats; `next` is the collector's alone. */
  pthread_mutex_t lock;
  pthread_cond_t window_done;
  uint64_t cut_at;          /* a cut asked for and not yet made, or 0 */
  kf_aggregate_t *next;     /* samples at or after cut_at */
  kf_aggregate_t *done;     /* a window made and not yet taken */
  kf_window_stats_t done_stats;
  uint64_t window_start;    /* of the window being filled */
  uint64_t lost_at_window_start, no_memory_at_window_start;
  int joined; /* the thread has ended (kf_collector_stop) */
  kf_collector_stats_t stats;
  thread_t *threads;
  size_t nthreads, threads_cap;
  const kf_event_owner_t *owners;
  size_t nowners;
  uint32_t pid;
  int wake_fd;
  kf_parked_job_t job; /* the draining loop, on the parked thread */
  kf_collector_opts_t opts;
  const kf_ring_layout_t *layout; /* of the sampler's records */
  const kf_ring_layout_t *switch_layout; /* of its switch events' samples */
  kf_offcpu_t *offcpu;     /* off-CPU waits being paired, or NULL */
  kf_jitframes_t *jit;
  uint64_t *scratch; /* a callchain with JIT frames as tokens */
  size_t scratch_cap;
  uint64_t perf_map_generation, perf_map_written_at;
  kf_dwarf_t *dwarf;       /* NULL: off */
  uint64_t *spliced;       /* a callchain with frames put back */
  size_t spliced_cap;
  uint64_t *tailbuf;       /* a rebuilt chain's tail, named */
  size_t tailbuf_cap;
  kf_maps_t maps;          /* to tell unnamed generated code apart */
  uint64_t maps_loaded_at;
  kf_v8heap_layout_t heap; /* V8's objects, for frames of unreported code */
  kf_v8regexp_layout_t regexps; /* and for RegExp code reported unnamed */
  uint32_t maps_reloads;
};

static void read_comm(uint32_t tid, char comm[16]) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
  memset(comm, 0, 16);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, comm, 15);
  close(fd);
  if (n > 0 && comm[n - 1] == '\n') comm[n - 1] = '\0';
}

static thread_t *find_thread(kf_collector_t *c, uint32_t tid) {
  for (size_t i = c->nthreads; i-- > 0;)
    if (c->threads[i].tid == tid) return &c->threads[i];
  return NULL;
}

static int is_direct(const kf_collector_t *c, uint32_t tid) {
  if (c->own_sources) return 1;
  for (size_t i = 0; i < c->nowners; i++)
    if (c->owners[i].tid == tid) return 1;
  return 0;
}

static thread_t *add_thread(kf_collector_t *c, uint32_t tid) {
  if (kf_grow((void **)&c->threads, &c->threads_cap, c->nthreads + 1,
              sizeof(thread_t), 32))
    return NULL;
  thread_t *t = &c->threads[c->nthreads++];
  memset(t, 0, sizeof(*t));
  t->tid = tid;
  t->direct = is_direct(c, tid);
  t->source = t->direct ? tid : 0;
  read_comm(tid, t->comm);
  return t;
}

static const kf_event_owner_t *owner_of(const kf_collector_t *c, uint64_t id) {
  size_t lo = 0, hi = c->nowners;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->owners[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo < c->nowners && c->owners[lo].id == id ? &c->owners[lo] : NULL;
}

static int anonymous(const kf_mapping_t *m) {
  return m->path[0] == '\0' || strncmp(m->path, "[anon", 5) == 0;
}

/* Generated code's mapping: executable, of no file. */
static int generated_code(const kf_mapping_t *m) { return m && m->exec && anonymous(m); }

/* Generated code (an anonymous executable mapping) the code map does not
 * know: an isolate without kflame's hook, whose code may be unmapped by
 * stop() (a worker that exited), when it could no longer be told from a
 * stray address. */
static int unnamed_jit(kf_collector_t *c, uint64_t ip) {
  const kf_mapping_t *m = kf_maps_find(&c->maps, ip);
  /* An address in no mapping, or in reserved memory not executable when
   * maps were read (V8 makes code pages of its reservation executable as it
   * needs them): read maps again. */
  if (!m || (!m->exec && anonymous(m))) {
    uint64_t now = kf_now_ns(), since = now - c->maps_loaded_at;
    if (since < MAPS_RELOAD_SOON_NS ||
        (since < MAPS_RELOAD_NS && c->maps_reloads >= MAPS_RELOADS_SOON))
      return 0;
    kf_maps_free(&c->maps);
    kf_maps_load(&c->maps); /* on failure: none known, nothing marked */
    c->maps_loaded_at = now;
    c->maps_reloads++;
    m = kf_maps_find(&c->maps, ip);
  }
  return generated_code(m);
}

/* For jitframes (kf_jitframes_unreported), which asks about return
 * addresses and words that may be anything: the maps as they are, never
 * read again for it. Code V8 made before the hook was armed, which is what
 * it names, was mapped before start() read them. */
static int is_jit_code(void *collector, uint64_t ip) {
  return generated_code(kf_maps_find(&((kf_collector_t *)collector)->maps, ip));
}

static void mark_unnamed_jit(kf_collector_t *c, uint64_t *ips, uint32_t nr) {
  int user = 0;
  for (uint32_t i = 0; i < nr; i++) {
    if (ips[i] >= (uint64_t)PERF_CONTEXT_MAX) {
      user = ips[i] == (uint64_t)PERF_CONTEXT_USER;
      continue;
    }
    if (user && !kf_jitframes_is_token(ips[i]) && unnamed_jit(c, ips[i]))
      ips[i] = KF_JIT_UNNAMED;
  }
}

/* A callchain with its JIT frames as tokens (jitframes.h), into *buf
 * (grown to room for KF_JITFRAMES_OUT(n)): the count, or -ENOMEM. */
static int name_jit_frames(kf_collector_t *c, uint64_t time, const uint64_t *chain,
                           uint32_t n, const kf_userstack_t *stack, uint64_t **buf,
                           size_t *cap) {
  int k;
  if (kf_grow((void **)buf, cap, KF_JITFRAMES_OUT(n), sizeof(uint64_t), 256) ||
      (k = kf_jitframes_resolve(c->jit, time, chain, n, stack, *buf)) < 0)
    return -ENOMEM;
  mark_unnamed_jit(c, *buf, (uint32_t)k);
  return k;
}

static uint32_t user_marker(const uint64_t *ips, uint32_t nr) {
  for (uint32_t i = 0; i < nr; i++)
    if (ips[i] == (uint64_t)PERF_CONTEXT_USER) return i;
  return nr;
}

/* The frames a DWARF unwind found (dwarfunwind.h), named like the rest:
 * V8's builtins among them become tokens. Writes to out (room for KF_JITFRAMES_OUT(n + 2))
 * and returns how many, or -ENOMEM. */
static int name_found_frames(kf_collector_t *c, uint64_t time, int runs_js,
                             const uint64_t *frames, size_t n, uint64_t *out) {
  if (!c->jit || !runs_js || n == 0) {
    memcpy(out, frames, n * sizeof(uint64_t));
    return (int)n;
  }
  /* [USER marker, no leaf, the return addresses] for resolve */
  uint64_t chain[2 + KF_DWARF_MAX_FRAMES], named[KF_JITFRAMES_OUT(2 + KF_DWARF_MAX_FRAMES)];
  chain[0] = (uint64_t)PERF_CONTEXT_USER;
  chain[1] = 0;
  memcpy(chain + 2, frames, n * sizeof(uint64_t));
  int k = kf_jitframes_resolve(c->jit, time, chain, (uint32_t)(n + 2), NULL, named);
  if (k < 2) return k < 0 ? -ENOMEM : 0;
  memcpy(out, named + 2, ((size_t)k - 2) * sizeof(uint64_t));
  return k - 2;
}

/* Frames put back after the leaf of *ips (the chain as it will be stored;
 * `raw` is the one the kernel or the timer sampler walked, with the same
 * leaf). Returns 0, or -ENOMEM. */
static int put_back_frames(kf_collector_t *c, const kf_dwarf_fix_t *fix,
                           uint64_t time, int runs_js, const uint64_t *raw,
                           uint32_t raw_nr, const uint64_t **ips, uint32_t *nr) {
  uint32_t ru = user_marker(raw, raw_nr), u = user_marker(*ips, *nr);
  if (ru + 2 > raw_nr || u + 2 > *nr || (*ips)[u + 1] != raw[ru + 1]) return 0;
  uint64_t named[KF_JITFRAMES_OUT(2 + KF_DWARF_MAX_FRAMES)];
  int n = name_found_frames(c, time, runs_js, fix->frames, fix->n, named);
  if (n <= 0) return n;
  /* Into a buffer *ips is not in (a rebuilt chain is in c->spliced). */
  uint64_t **buf = *ips == c->spliced ? &c->tailbuf : &c->spliced;
  size_t *cap = *ips == c->spliced ? &c->tailbuf_cap : &c->spliced_cap;
  if (kf_grow((void **)buf, cap, *nr + (size_t)n, sizeof(uint64_t), 256)) return -ENOMEM;
  uint64_t *out = *buf;
  memcpy(out, *ips, (u + 2) * sizeof(uint64_t));
  memcpy(out + u + 2, named, (size_t)n * sizeof(uint64_t));
  memcpy(out + u + 2 + n, *ips + u + 2, (*nr - u - 2) * sizeof(uint64_t));
  *ips = out;
  *nr += (uint32_t)n;
  return 0;
}

/* The chain rebuilt where the walked one went wrong: the first prefix_nr
 * entries of `raw` as walked (the kernel's part, the marker, the frames up
 * to the one the unwind started from; named with `stack`), the frames the
 * unwind found, then the frame-pointer chain from fix->tail, named as a
 * sample of its own (its interpreter frames too). Returns 0, or -ENOMEM. */
#define REBUILT_MAX_FRAMES 256
static int rebuild_from_tail(kf_collector_t *c, const kf_dwarf_fix_t *fix,
                             uint64_t time, int runs_js, const uint64_t *raw,
                             uint32_t prefix_nr, const kf_userstack_t *stack,
                             const uint64_t **ips, uint32_t *nr) {
  uint64_t tail[2 + REBUILT_MAX_FRAMES];
  tail[0] = (uint64_t)PERF_CONTEXT_USER;
  tail[1] = fix->tail.ip;
  size_t nt = fix->tail.ip ? 2 + kf_userstack_walk(&fix->tail, tail + 2, REBUILT_MAX_FRAMES)
                           : 1; /* the unwind reached the outermost frame */
  const uint64_t *prefix = raw, *named_tail = tail;
  int np = (int)prefix_nr, nk = (int)nt;
  if (c->jit && runs_js) {
    if ((np = name_jit_frames(c, time, raw, prefix_nr, stack, &c->scratch, &c->scratch_cap)) < 0 ||
        (nk = name_jit_frames(c, time, tail, (uint32_t)nt, &fix->tail, &c->tailbuf,
                              &c->tailbuf_cap)) < 0)
      return -ENOMEM;
    prefix = c->scratch;
    named_tail = c->tailbuf;
  }
  uint64_t found[KF_JITFRAMES_OUT(2 + KF_DWARF_MAX_FRAMES)];
  int nf = name_found_frames(c, time, runs_js, fix->frames, fix->n, found);
  if (nf < 0) return nf;
  size_t total = (size_t)np + (size_t)nf + (size_t)nk - 1;
  if (kf_grow((void **)&c->spliced, &c->spliced_cap, total, sizeof(uint64_t), 256))
    return -ENOMEM;
  uint64_t *out = c->spliced;
  memcpy(out, prefix, (size_t)np * sizeof(uint64_t));
  memcpy(out + np, found, (size_t)nf * sizeof(uint64_t));
  memcpy(out + np + nf, named_tail + 1, ((size_t)nk - 1) * sizeof(uint64_t)); /* no marker */
  *ips = out;
  *nr = (uint32_t)total;
  return 0;
}

/* A frame in the middle of the walked chain after which the walk went
 * astray: one of a library without frame pointers followed by an address
 * in no object, or the chain's last frame when the walk stopped there on
 * a frame pointer that is not 0 (and it is not a known dead end). The
 * registers of that frame, as the walk knew them (ip its return address,
 * sp above the frame below, rbp what that frame saved), let a DWARF unwind
 * go on from it. The fix's tail points into `stack`'s copy. Fills *fix and *prefix_nr (the raw
 * entries up to that frame) and returns 1, else 0. */
static int fix_mid_chain(kf_collector_t *c, const kf_userstack_t *stack,
                         const uint64_t *raw, uint32_t raw_nr, uint32_t ru,
                         kf_dwarf_fix_t *fix, uint32_t *prefix_nr) {
  const uint64_t *user = raw + ru + 1;
  size_t nuser = raw_nr - ru - 1;
  size_t max = nuser < REBUILT_MAX_FRAMES ? nuser : REBUILT_MAX_FRAMES;
  /* The first frame that looks astray, by the objects its addresses fall
   * in; only then is the copy read (most chains have none). */
  for (size_t k = 1; k <= max && k < nuser; k++) {
    int kind = kf_dwarf_object_kind(c->dwarf, user[k]);
    int last = k + 1 == nuser;
    if (kind == KF_DWARF_NO_OBJECT || (kind == KF_DWARF_MAIN_PROGRAM && !last)) continue;
    if (!last && kf_dwarf_object_kind(c->dwarf, user[k + 1]) != KF_DWARF_NO_OBJECT) continue;
    uint64_t known_end[KF_DWARF_MAX_END_FRAMES];
    int ends = last ? kf_dwarf_ends(c->dwarf, user[k], known_end) : -1;
    if (ends == 0) return 0;
    *prefix_nr = ru + 1 + (uint32_t)k + 1; /* the raw entries up to frame k */
    if (ends > 0) {
      /* The thread's outermost frames, found before from this return
       * address: the same for every chain that ends at it, so the copy
       * need not be read (a cache miss per frame). */
      memset(fix, 0, sizeof *fix);
      memcpy(fix->frames, known_end, (size_t)ends * sizeof(uint64_t));
      fix->n = (size_t)ends;
      fix->restart = 1;
      return 1;
    }
    /* The frame pointers of the frames below it, as the kernel's walk
     * followed them. */
    uint64_t fps[REBUILT_MAX_FRAMES];
    if (kf_userstack_frames(stack, user, k, fps) < k) return 0;
    uint64_t fp = fps[k - 1], ret, saved_bp;
    if (kf_userstack_word(stack, fp + 8, &ret) != 0 || ret != user[k] ||
        kf_userstack_word(stack, fp, &saved_bp) != 0 || fp + 16 < fp)
      return 0;
    /* A chain that ends with a frame pointer of 0 ended where threads
     * start (_start and clone3 clear rbp): nothing is missing there, nor in
     * later chains that end at this address. */
    if (last && saved_bp == 0) {
      kf_dwarf_note_end(c->dwarf, user[k], NULL, 0);
      return 0;
    }
    uint64_t sp = fp + 16;
    if (sp - stack->sp >= stack->len) return 0;
    kf_userstack_t sub = {.ip = user[k], .sp = sp, .bp = saved_bp,
                          .bytes = stack->bytes + (sp - stack->sp),
                          .len = stack->len - (sp - stack->sp)};
    if (!kf_dwarf_fix(c->dwarf, &sub, user + k, nuser - k, fix) || !fix->restart) {
      if (last) kf_dwarf_note_end(c->dwarf, user[k], NULL, 0);
      return 0;
    }
    /* Reached the thread's first frame: the same for every later sample. */
    if (last && fix->tail.ip == 0) kf_dwarf_note_end(c->dwarf, user[k], fix->frames, fix->n);
    return 1;
  }
  return 0;
}

static void on_sample(kf_collector_t *c, const struct perf_event_header *h) {
  kf_ring_sample_t rs;
  /* The event's id comes first (PERF_SAMPLE_IDENTIFIER): its kind says how
   * the rest is laid out. */
  uint64_t id = 0;
  if (h->size >= sizeof(*h) + 8) memcpy(&id, h + 1, 8);
  const kf_event_owner_t *owner = c->timer ? NULL : owner_of(c, id);
  int switched = owner && owner->kind == KF_KIND_SWITCH && c->offcpu;
  if (kf_ring_parse_sample(h, switched ? c->switch_layout : c->layout, &rs) != 0) {
    c->stats.corrupt++;
    return;
  }
  uint64_t time = rs.time;
  uint32_t pid = rs.pid, tid = rs.tid, nr = rs.nr;
  if (pid != c->pid || (!owner && !c->timer)) {
    c->stats.foreign++;
    return;
  }
  uint32_t source = owner && owner->tid != KF_OWNER_ANY ? owner->tid : tid;
  thread_t *t = find_thread(c, tid);
  if (!t && !(t = add_thread(c, tid))) {
    c->stats.no_memory++;
    return;
  }
  if (t->source == 0) t->source = source;
  if (t->source != source) {
    c->stats.duplicates++;
    return;
  }
  const uint64_t *ips = rs.ips;
  /* kflame's own threads (this collector, the symbol loader) never run JS:
   * a return address there that falls in JIT code is a stray value read
   * off a frame without a frame pointer (glibc's), not a JS frame. */
  int runs_js = strncmp(t->comm, "kflame-", 7) != 0;
  kf_userstack_t stack = {0}, *with_stack = NULL;
  if (rs.nregs == KF_SAMPLER_USER_REGS) {
    stack = (kf_userstack_t){.ip = rs.regs[KF_REG_IP],
                             .sp = rs.regs[KF_REG_SP],
                             .bp = rs.regs[KF_REG_BP],
                             .bytes = rs.stack,
                             .len = rs.stack_len};
    with_stack = &stack;
    c->stats.stack_bytes += rs.stack_len;
    c->stats.stack_copies++;
  }
  /* Frames a frame-pointer walk skipped under a leaf in a library without
   * frame pointers, from DWARF (dwarfunwind.h). */
  kf_dwarf_fix_t leaf_fix, mid_fix;
  kf_dwarf_stats_t dwarf_before = {0};
  if (c->dwarf) dwarf_before = *kf_dwarf_stats(c->dwarf);
  uint32_t ru = user_marker(rs.ips, rs.nr);
  int leaf_fixed = c->dwarf && with_stack && ru + 1 < rs.nr &&
                   kf_dwarf_fix(c->dwarf, with_stack, rs.ips + ru + 1, rs.nr - ru - 1, &leaf_fix);
  /* The chain is rebuilt from the leaf's fix, or from a frame in the
   * middle where the walk went astray (independently of frames put back
   * under the leaf, which go in afterwards). */
  const kf_dwarf_fix_t *rebuild = leaf_fixed && leaf_fix.restart ? &leaf_fix : NULL;
  uint32_t prefix_nr = ru + 2; /* the kernel's part, the marker, the leaf */
  if (!rebuild && c->dwarf && with_stack && ru + 1 < rs.nr &&
      fix_mid_chain(c, with_stack, rs.ips, rs.nr, ru, &mid_fix, &prefix_nr))
    rebuild = &mid_fix;
  if (c->dwarf) kf_dwarf_count_sample(c->dwarf, &dwarf_before);
  if (rebuild) {
    if (rebuild_from_tail(c, rebuild, time, runs_js, rs.ips, prefix_nr, with_stack, &ips, &nr) != 0) {
      c->stats.no_memory++;
      return;
    }
  } else if (c->jit && runs_js) {
    int n = name_jit_frames(c, time, ips, nr, with_stack, &c->scratch, &c->scratch_cap);
    if (n < 0) {
      c->stats.no_memory++;
      return;
    }
    ips = c->scratch;
    nr = (uint32_t)n;
  }
  if (leaf_fixed && !leaf_fix.restart &&
      put_back_frames(c, &leaf_fix, time, runs_js, rs.ips, rs.nr, &ips, &nr) != 0) {
    c->stats.no_memory++;
    return;
  }
  if (switched) {
    /* Weighed once the thread is back on a CPU (offcpu.h). */
    kf_offcpu_out(c->offcpu, tid, time, rs.periods, ips, (uint32_t)nr);
    return;
  }
  if (kf_stacks_add_n(c->stacks, tid, time, ips, (uint32_t)nr, rs.periods)) {
    c->stats.no_memory++;
    return;
  }
  c->stats.samples += rs.periods;
}

/* An off-CPU wait weighed in periods (offcpu.h): samples of their own. */
static int on_wait(void *ctx, uint32_t tid, uint64_t time, const uint64_t *ips,
                   uint32_t nr, uint64_t periods) {
  kf_collector_t *c = ctx;
  if (kf_stacks_add_n(c->stacks, tid, time, ips, nr, periods)) {
    c->stats.no_memory++;
    return -ENOMEM;
  }
  c->stats.samples += periods;
  return 0;
}

/* A thread whose switch-out was sampled came back (a switch record, or a
 * stamp of switchin.h). */
static void on_switch_in(kf_collector_t *c, uint32_t tid, uint64_t time) {
  if (kf_offcpu_in(c->offcpu, tid, time)) c->stats.no_memory++;
}

/* switchin.h's records: a switch-in, or the weight of a switch-out sampled
 * under the rate bound. */
static void on_traced_switch(void *ctx, uint32_t tid, uint64_t time, uint32_t switches) {
  kf_collector_t *c = ctx;
  if (!switches) on_switch_in(c, tid, time);
  else if (kf_offcpu_weight(c->offcpu, tid, time, switches)) c->stats.no_memory++;
}

/* PERF_RECORD_SWITCH of a per-thread switch event, or
 * PERF_RECORD_SWITCH_CPU_WIDE of a CPU-wide one (every task's, with the
 * pid and tid of the task switched to or from first): a thread of ours
 * switched in (or out, which its sample already said). sample_id_all puts
 * { u32 pid, tid; u64 time; u64 id } after the body, for the task
 * switching. */
static void on_switch(kf_collector_t *c, const struct perf_event_header *h) {
  if (!c->offcpu || (h->misc & PERF_RECORD_MISC_SWITCH_OUT)) return;
  size_t body = h->type == PERF_RECORD_SWITCH_CPU_WIDE ? 8 : 0;
  if (h->size < sizeof(*h) + body + 24) {
    c->stats.corrupt++;
    return;
  }
  const unsigned char *p = (const unsigned char *)(h + 1) + body;
  uint32_t pid, tid;
  uint64_t time, id;
  memcpy(&pid, p, 4);
  memcpy(&tid, p + 4, 4);
  memcpy(&time, p + 8, 8);
  memcpy(&id, p + 16, 8);
  if (pid != c->pid) return; /* CPU-wide: another process's */
  const kf_event_owner_t *owner = owner_of(c, id);
  if (!owner || owner->kind != KF_KIND_SWITCH) return;
  on_switch_in(c, tid, time);
}

/* PERF_RECORD_COMM: u32 pid, tid; char comm[]; (a thread renamed itself) */
static void on_comm(kf_collector_t *c, const struct perf_event_header *h) {
  const unsigned char *p = (const unsigned char *)(h + 1);
  size_t room = h->size - sizeof(*h);
  if (room < 9) return;
  uint32_t pid, tid;
  memcpy(&pid, p, 4);
  memcpy(&tid, p + 4, 4);
  if (pid != c->pid) return;
  thread_t *t = find_thread(c, tid);
  if (!t && !(t = add_thread(c, tid))) return;
  size_t n = strnlen((const char *)p + 8, room - 8);
  if (n > 15) n = 15;
  memcpy(t->comm, p + 8, n);
  t->comm[n] = '\0';
}

static void on_record(const struct perf_event_header *h, void *ctx) {
  kf_collector_t *c = ctx;
  switch (h->type) {
    case PERF_RECORD_SAMPLE:
      on_sample(c, h);
      break;
    case PERF_RECORD_LOST: {
      /* u64 id; u64 lost; */
      uint64_t lost;
      if (h->size >= sizeof(*h) + 16) {
        memcpy(&lost, (const unsigned char *)(h + 1) + 8, 8);
        c->stats.lost += lost;
      }
      break;
    }
    case PERF_RECORD_COMM:
      on_comm(c, h);
      break;
    case PERF_RECORD_SWITCH:
    case PERF_RECORD_SWITCH_CPU_WIDE:
      on_switch(c, h);
      break;
    default:
      break;
  }
}

static void drain_all(kf_collector_t *c) {
  kf_ring_t *rings;
  const int *fds;
  size_t n = kf_sampler_rings(c->sampler, &rings, &fds);
  for (size_t i = 0; i < n; i++) kf_ring_drain(&rings[i], on_record, c);
  kf_switchin_t *ins = kf_sampler_switchin(c->sampler);
  if (ins && c->offcpu) kf_switchin_drain(ins, on_traced_switch, c);
}

static const char *comm_of(void *ctx, uint32_t tid) {
  return kf_collector_comm(ctx, tid);
}

/* The namer, made on first use; NULL for lack of memory (tried again). */
static kf_namer_t *namer_of(kf_collector_t *c) {
  if (!c->namer) {
    kf_namer_opts_t o = {.symbolizer = c->opts.symbolizer,
                         .jit = c->jit,
                         .keep_tiers = c->opts.keep_tiers,
                         .pid = c->pid,
                         .comm = comm_of,
                         .comm_ctx = c};
    c->namer = kf_namer_new(&o);
  }
  return c->namer;
}

/* Names the raw stacks into the aggregate, once the symbol tables are
 * loaded (the profiler's preload thread has the symbolizer until then). */
static void fold(kf_collector_t *c) {
  if (namer_of(c)) kf_namer_fold(c->namer, c->stacks, c->agg, NULL, 0, &c->stats.no_memory);
}

static int symbols_ready(const kf_collector_t *c) {
  return !c->opts.symbols_ready || __atomic_load_n(c->opts.symbols_ready, __ATOMIC_ACQUIRE);
}

static uint64_t lost_so_far(kf_collector_t *c) {
  /* After stop the timer's count is in stats.lost, and the timer may be
   * closed. */
  if (!c->timer || c->joined) return c->stats.lost;
  kf_timer_stats_t ts;
  kf_timer_stats(c->timer, &ts);
  return c->stats.lost + ts.lost;
}

/* A window is made once every sample stamped before its cut has been
 * drained: by a drain that began RETIRE_MARGIN_NS after the cut. */
static void make_window(kf_collector_t *c, uint64_t cut, uint64_t drain_began) {
  if (!c->next && !(c->next = kf_aggregate_new(c->opts.timeline_max))) return;
  if (!namer_of(c)) return;
  kf_namer_fold(c->namer, c->stacks, c->agg, c->next, cut, &c->stats.no_memory);
  c->folded_at = drain_began;
  if (drain_began < cut + RETIRE_MARGIN_NS) return;
  uint64_t lost = lost_so_far(c);
  kf_namer_forget(c->namer, c->agg); /* handed over: its address may come back */
  pthread_mutex_lock(&c->lock);
  c->done = c->agg;
  c->done_stats = (kf_window_stats_t){
      .start = c->window_start,
      .end = cut,
      .lost = lost - c->lost_at_window_start,
      .no_memory = c->stats.no_memory - c->no_memory_at_window_start};
  c->cut_at = 0;
  pthread_cond_broadcast(&c->window_done);
  pthread_mutex_unlock(&c->lock);
  c->agg = c->next;
  c->next = NULL;
  c->window_start = cut;
  c->lost_at_window_start = lost;
  c->no_memory_at_window_start = c->stats.no_memory;
}

static void maybe_fold(kf_collector_t *c, uint64_t now) {
  if (!symbols_ready(c)) return;
  pthread_mutex_lock(&c->lock);
  uint64_t cut = c->done ? 0 : c->cut_at; /* one window handed over at a time */
  pthread_mutex_unlock(&c->lock);
  if (cut) {
    make_window(c, cut, now);
    return;
  }
  if (now - c->folded_at < FOLD_INTERVAL_NS && kf_stacks_bytes(c->stacks) < FOLD_BYTES) return;
  fold(c);
  c->folded_at = now;
}

/* Every sample stamped before the drain began has been processed: code
 * that died before then can no longer name one. */
static void after_drain(kf_collector_t *c, uint64_t drain_began) {
  /* Switch-outs and switch-ins stamped before the drain (less the margin
   * for records still being published) have all arrived: pair them. */
  if (c->offcpu && drain_began > RETIRE_MARGIN_NS)
    kf_offcpu_settle(c->offcpu, drain_began - RETIRE_MARGIN_NS, 0, on_wait, c);
  maybe_fold(c, drain_began);
  kf_codemap_t *map = c->opts.codemap;
  if (!map) return;
  if (drain_began > RETIRE_MARGIN_NS)
    kf_codemap_retire(map, drain_began - RETIRE_MARGIN_NS);
  if (!c->opts.perf_map ||
      drain_began - c->perf_map_written_at < PERF_MAP_INTERVAL_NS)
    return;
  kf_codemap_stats_t ms;
  kf_codemap_stats(map, &ms);
  if (ms.generation == c->perf_map_generation && c->perf_map_written_at)
    return;
  long rc = kf_perfmap_write(map, c->opts.perf_map);
  c->perf_map_written_at = drain_began;
  c->perf_map_generation = ms.generation;
  if (rc < 0) {
    c->stats.perf_map_errors++;
    c->stats.perf_map_error = rc;
  } else {
    c->stats.perf_map_writes++;
  }
}

/* Timer sampler: wakes when a ring is half full, and to look for new
 * threads; at the end disarms the sampler, then drains what is left. */
static void run_timer(kf_collector_t *c) {
  struct pollfd pfd[2] = {{.fd = c->wake_fd, .events = POLLIN},
                          {.fd = kf_timer_wake_fd(c->timer), .events = POLLIN}};
  uint64_t scanned_at = kf_now_ns();
  for (int stopping = 0; !stopping;) {
    poll(pfd, 2, (int)(THREAD_SCAN_NS / 1000000));
    stopping = (pfd[0].revents & POLLIN) != 0;
    uint64_t drain_began = kf_now_ns();
    if (stopping) {
      kf_timer_disable(c->timer);
    } else if (drain_began - scanned_at >= THREAD_SCAN_NS) {
      kf_timer_scan(c->timer);
      scanned_at = drain_began;
    } else {
      kf_timer_find_stacks(c->timer);
    }
    kf_timer_drain(c->timer, on_record, c);
    after_drain(c, drain_began);
  }
}

static void *run(void *arg) {
  kf_collector_t *c = arg;
  if (c->opts.on_start) c->opts.on_start(c->opts.on_start_arg);
  if (c->timer) {
    run_timer(c);
    return NULL;
  }
  kf_ring_t *rings;
  const int *fds;
  size_t n = kf_sampler_rings(c->sampler, &rings, &fds);
  struct pollfd *pfd = calloc(n + 1, sizeof(*pfd));
  int stopping = 0;
  if (pfd) {
    pfd[0] = (struct pollfd){.fd = c->wake_fd, .events = POLLIN};
    for (size_t i = 0; i < n; i++)
      pfd[i + 1] = (struct pollfd){.fd = fds[i], .events = POLLIN};
  }
  while (!stopping) {
    if (pfd) {
      poll(pfd, n + 1, POLL_TIMEOUT_MS);
      stopping = (pfd[0].revents & POLLIN) != 0;
      /* The event owning a ring hangs up when its thread exits; the ring
       * still fills through the other events, so keep draining it on the
       * timeout instead of polling a descriptor that always answers. */
      for (size_t i = 0; i < n; i++)
        if (pfd[i + 1].revents & (POLLHUP | POLLERR)) pfd[i + 1].fd = -1;
    } else {
      usleep(POLL_TIMEOUT_MS * 1000);
      uint64_t v;
      stopping = read(c->wake_fd, &v, sizeof v) == sizeof v;
    }
    uint64_t drain_began = kf_now_ns();
    drain_all(c);
    /* The last drain has everything: waits still open end here. */
    if (stopping && c->offcpu)
      kf_offcpu_settle(c->offcpu, UINT64_MAX, drain_began, on_wait, c);
    after_drain(c, drain_began);
  }
  free(pfd);
  return NULL;
}

int kf_collector_start(kf_sampler_t *sampler, const kf_collector_opts_t *opts,
                       kf_collector_t **out, int *sys_errno) {
  *sys_errno = ENOMEM;
  kf_collector_t *c = calloc(1, sizeof(*c));
  if (!c) return -ENOMEM;
  c->sampler = sampler;
  c->timer = sampler ? NULL : opts->timer;
  c->opts = *opts;
  c->layout = sampler ? &kf_sampler_info(sampler)->layout
                      : &kf_timer_info(c->timer)->layout;
  if (sampler && (kf_sampler_info(sampler)->what & KF_WHAT_OFFCPU)) {
    c->switch_layout = &kf_sampler_info(sampler)->switch_layout;
    if (!(c->offcpu = kf_offcpu_new(opts->offcpu_period_ns))) {
      free(c);
      return -ENOMEM;
    }
  }
  if (opts->codemap &&
      !(c->jit = kf_jitframes_new(opts->codemap, opts->v8layout))) {
    free(c);
    return -ENOMEM;
  }
  if (c->jit) {
    kf_jitframes_inlining(c->jit, opts->funcpos);
    /* Without V8's heap layout, unreported code is only counted. */
    int heap = opts->v8layout &&
               kf_v8heap_layout_load(opts->v8layout->sfi_function_data, &c->heap) == 0;
    kf_jitframes_unreported(c->jit, is_jit_code, c, heap ? &c->heap : NULL);
    if (opts->v8layout && kf_v8regexp_layout_load(&c->regexps) == 0)
      kf_jitframes_regexps(c->jit, &c->regexps);
  }
  /* Without it, frames stay as the frame-pointer walk found them. */
  if (opts->dwarf) c->dwarf = kf_dwarf_new();
  if (c->jit && kf_maps_load(&c->maps) == 0) {
    /* V8's copy of its builtins, mapped before any isolate ran JS */
    kf_code_alias_t aliases[8];
    kf_jitframes_alias(c->jit, aliases,
                       kf_maps_code_aliases(&c->maps, aliases, 8));
    c->maps_loaded_at = kf_now_ns();
  }
  c->pid = (uint32_t)getpid();
  if (sampler) c->owners = kf_sampler_owners(sampler, &c->nowners);
  c->own_sources = !sampler || kf_sampler_info(sampler)->scope == KF_SCOPE_CPUS;
  c->stacks = kf_stacks_new();
  c->agg = kf_aggregate_new(opts->timeline_max);
  c->folded_at = kf_now_ns();
  c->window_start = opts->started_ns ? opts->started_ns : c->folded_at;
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->window_done, NULL);
  c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  int rc = c->wake_fd < 0 ? -errno : -ENOMEM;
  *sys_errno = -rc;
  if (!c->stacks || !c->agg || c->wake_fd < 0) goto fail;
  rc = kf_parked_start(&c->job, run, c, "kflame-collect", opts->park);
  if (rc != 0) {
    *sys_errno = rc; /* pthread_create's errno */
    rc = -KF_ERR_THREAD;
    goto fail;
  }
  *sys_errno = 0;
  *out = c;
  return 0;
fail:
  if (c->wake_fd >= 0) close(c->wake_fd);
  kf_stacks_free(c->stacks);
  kf_aggregate_free(c->agg);
  pthread_mutex_destroy(&c->lock);
  pthread_cond_destroy(&c->window_done);
  kf_jitframes_free(c->jit);
  kf_dwarf_free(c->dwarf);
  kf_maps_free(&c->maps);
  kf_offcpu_free(c->offcpu);
  free(c);
  return rc;
}

void kf_collector_stop(kf_collector_t *c) {
  uint64_t one = 1;
  ssize_t w = write(c->wake_fd, &one, sizeof one);
  (void)w; /* an eventfd write of 1 cannot fail short of overflow */
  kf_parked_join(&c->job);
  c->joined = 1;
  if (c->timer) {
    kf_timer_stats(c->timer, &c->stats.timer);
    c->stats.lost += c->stats.timer.lost;
    c->stats.corrupt += c->stats.timer.corrupt;
  } else {
    kf_ring_t *rings;
    const int *fds;
    size_t n = kf_sampler_rings(c->sampler, &rings, &fds);
    for (size_t i = 0; i < n; i++) c->stats.corrupt += rings[i].corrupt;
    kf_switchin_t *ins = kf_sampler_switchin(c->sampler);
    if (ins) c->stats.corrupt += kf_switchin_corrupt(ins);
  }
  if (c->jit) c->stats.jit = *kf_jitframes_stats(c->jit);
  if (c->dwarf) c->stats.dwarf = *kf_dwarf_stats(c->dwarf);
}

int kf_collector_cut(kf_collector_t *c) {
  pthread_mutex_lock(&c->lock);
  int busy = c->cut_at != 0 || c->done != NULL;
  /* Stamped under the lock: a fold that read no cut before this read it
   * before this time, so every sample it took was stamped before the cut. */
  if (!busy) c->cut_at = kf_now_ns();
  pthread_mutex_unlock(&c->lock);
  return busy ? -EBUSY : 0;
}

int kf_collector_take_window(kf_collector_t *c, int timeout_ms, kf_aggregate_t **out,
                             kf_window_stats_t *stats) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += timeout_ms / 1000;
  until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  while (!c->done && rc == 0) rc = pthread_cond_timedwait(&c->window_done, &c->lock, &until);
  *out = c->done;
  if (c->done) *stats = c->done_stats;
  c->done = NULL;
  pthread_mutex_unlock(&c->lock);
  return *out ? 0 : -EAGAIN;
}

int kf_collector_finish(kf_collector_t *c) {
  uint64_t before = c->stats.no_memory;
  /* A window asked for and not made, or made and not taken, goes into the
   * profile stop() returns: no sample is lost to a cut in flight. */
  pthread_mutex_lock(&c->lock);
  kf_aggregate_t *untaken = c->done;
  kf_window_stats_t untaken_stats = c->done_stats;
  uint64_t cut = c->cut_at;
  c->done = NULL;
  c->cut_at = 0;
  pthread_mutex_unlock(&c->lock);
  if (untaken) { /* the profile begins where that window began */
    c->window_start = untaken_stats.start;
    c->lost_at_window_start -= untaken_stats.lost;
    c->no_memory_at_window_start -= untaken_stats.no_memory;
  }
  if (c->next) {
    if (c->namer) kf_namer_fold(c->namer, c->stacks, c->agg, c->next, cut, &c->stats.no_memory);
    kf_aggregate_merge(c->agg, c->next, &c->stats.no_memory);
    kf_aggregate_free(c->next);
    c->next = NULL;
  }
  if (untaken) { /* it holds the earlier samples: the rest goes into it */
    fold(c);
    kf_aggregate_merge(untaken, c->agg, &c->stats.no_memory);
    if (c->namer) kf_namer_forget(c->namer, c->agg);
    kf_aggregate_free(c->agg);
    c->agg = untaken;
  }
  fold(c);
  if (kf_stacks_count(c->stacks) > 0) { /* no namer: out of memory */
    size_t n;
    kf_stacks_samples(c->stacks, &n);
    c->stats.no_memory += n;
    kf_stacks_clear(c->stacks);
  }
  return c->stats.no_memory == before ? 0 : -ENOMEM;
}

kf_aggregate_t *kf_collector_aggregate(kf_collector_t *c) { return c->agg; }

void kf_collector_window(kf_collector_t *c, kf_window_stats_t *out) {
  uint64_t lost = lost_so_far(c);
  *out = (kf_window_stats_t){.start = c->window_start,
                             .end = kf_now_ns(),
                             .lost = lost - c->lost_at_window_start,
                             .no_memory = c->stats.no_memory - c->no_memory_at_window_start};
}

void kf_collector_names_stats(const kf_collector_t *c, kf_symbolizer_stats_t *out) {
  memset(out, 0, sizeof(*out));
  if (c->namer) kf_namer_stats(c->namer, out);
}


const kf_jitframes_t *kf_collector_jitframes(const kf_collector_t *c) {
  return c->jit;
}

const kf_collector_stats_t *kf_collector_stats(const kf_collector_t *c) {
  return &c->stats;
}

const char *kf_collector_comm(const kf_collector_t *c, uint32_t tid) {
  for (size_t i = 0; i < c->nthreads; i++)
    if (c->threads[i].tid == tid) return c->threads[i].comm;
  return NULL;
}

void kf_collector_free(kf_collector_t *c) {
  if (!c) return;
  close(c->wake_fd);
  kf_stacks_free(c->stacks);
  kf_aggregate_free(c->agg);
  kf_aggregate_free(c->next);
  kf_aggregate_free(c->done);
  pthread_mutex_destroy(&c->lock);
  pthread_cond_destroy(&c->window_done);
  kf_namer_free(c->namer);
  kf_jitframes_free(c->jit);
  kf_dwarf_free(c->dwarf);
  kf_maps_free(&c->maps);
  free(c->scratch);
  free(c->spliced);
  free(c->tailbuf);
  free(c->threads);
  kf_offcpu_free(c->offcpu);
  free(c);
}

void kf_collector_offcpu_stats(const kf_collector_t *c, kf_offcpu_stats_t *out) {
  if (c->offcpu) kf_offcpu_stats(c->offcpu, out);
  else *out = (kf_offcpu_stats_t){0};
}

#include "sample/offcpu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"

/* A switch-out (ips set, KF_CONTEXT_OFFCPU first), a switch-in (ips NULL,
 * switches 0) or the weight of the next switch-out (ips NULL, switches >=
 * 1), in arrival order `seq` among equal times. */
typedef struct event {
  uint64_t time, seq, switches;
  uint64_t *ips;
  uint32_t tid, nr;
} event_t;

/* A thread's switch-out waiting for its switch-in, the part of a period
 * its earlier waits left over, and the weight its next switch-out takes. */
typedef struct thread {
  uint32_t tid, used;
  uint64_t carry;
  uint64_t weight, weight_time; /* weight 0: none */
  event_t out; /* out.ips NULL: none pending */
} thread_t;

struct kf_offcpu {
  uint64_t period_ns, seq;
  event_t *events;
  size_t nevents, events_cap;
  thread_t *threads; /* open addressing by tid, a power of two */
  size_t nthreads, threads_cap;
  kf_offcpu_stats_t stats;
};

kf_offcpu_t *kf_offcpu_new(uint64_t period_ns) {
  kf_offcpu_t *o = calloc(1, sizeof(*o));
  if (o) o->period_ns = period_ns ? period_ns : 1;
  return o;
}

void kf_offcpu_free(kf_offcpu_t *o) {
  if (!o) return;
  for (size_t i = 0; i < o->nevents; i++) free(o->events[i].ips);
  for (size_t i = 0; i < o->threads_cap; i++) free(o->threads[i].out.ips);
  free(o->events);
  free(o->threads);
  free(o);
}

static size_t slot_of(uint32_t tid, size_t cap) {
  return (size_t)((tid * 0x9e3779b97f4a7c15ULL) >> 32) & (cap - 1);
}

static int grow_threads(kf_offcpu_t *o) {
  size_t cap = o->threads_cap ? o->threads_cap * 2 : 64;
  thread_t *t = calloc(cap, sizeof(*t));
  if (!t) return -ENOMEM;
  for (size_t i = 0; i < o->threads_cap; i++) {
    if (!o->threads[i].used) continue;
    size_t k = slot_of(o->threads[i].tid, cap);
    while (t[k].used) k = (k + 1) & (cap - 1);
    t[k] = o->threads[i];
  }
  free(o->threads);
  o->threads = t;
  o->threads_cap = cap;
  return 0;
}

static thread_t *thread_of(kf_offcpu_t *o, uint32_t tid) {
  if ((o->nthreads + 1) * 2 > o->threads_cap && grow_threads(o)) return NULL;
  size_t k = slot_of(tid, o->threads_cap);
  for (; o->threads[k].used; k = (k + 1) & (o->threads_cap - 1))
    if (o->threads[k].tid == tid) return &o->threads[k];
  o->threads[k] = (thread_t){.tid = tid, .used = 1};
  o->nthreads++;
  return &o->threads[k];
}

static int push(kf_offcpu_t *o, const event_t *e) {
  if (kf_grow((void **)&o->events, &o->events_cap, o->nevents + 1, sizeof(event_t), 256))
    return -ENOMEM;
  o->events[o->nevents] = *e;
  o->events[o->nevents].seq = o->seq++;
  o->nevents++;
  return 0;
}

int kf_offcpu_out(kf_offcpu_t *o, uint32_t tid, uint64_t time,
                  uint64_t switches, const uint64_t *ips, uint32_t nr) {
  o->stats.outs++;
  event_t e = {.time = time, .switches = switches ? switches : 1, .tid = tid, .nr = nr + 1};
  e.ips = malloc((size_t)e.nr * sizeof(uint64_t));
  if (!e.ips || push(o, &e)) {
    free(e.ips);
    o->stats.no_memory++;
    return -ENOMEM;
  }
  e.ips[0] = KF_CONTEXT_OFFCPU;
  if (nr) memcpy(e.ips + 1, ips, (size_t)nr * sizeof(uint64_t));
  return 0;
}

int kf_offcpu_in(kf_offcpu_t *o, uint32_t tid, uint64_t time) {
  o->stats.ins++;
  event_t e = {.time = time, .tid = tid};
  return push(o, &e);
}

int kf_offcpu_weight(kf_offcpu_t *o, uint32_t tid, uint64_t time,
                     uint64_t switches) {
  event_t e = {.time = time, .tid = tid, .switches = switches ? switches : 1};
  return push(o, &e);
}

static int is_weight(const event_t *e) {
  return !e->ips && e->switches;
}

/* By time; at equal times a weight first (it comes before its sample). */
static int by_time(const void *a, const void *b) {
  const event_t *x = a, *y = b;
  if (x->time != y->time) return x->time < y->time ? -1 : 1;
  if (is_weight(x) != is_weight(y)) return is_weight(x) ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void drop_out(kf_offcpu_t *o, thread_t *t) {
  free(t->out.ips);
  t->out.ips = NULL;
  o->stats.unpaired++;
}

/* The switch-in ends the thread's pending wait: its weight in periods,
 * the remainder carried. */
static void pair(kf_offcpu_t *o, thread_t *t, uint64_t in, kf_offcpu_emit_fn emit,
                 void *ctx) {
  event_t *out = &t->out;
  uint64_t ns = (in - out->time) * out->switches;
  o->stats.paired++;
  o->stats.weighted_ns += ns;
  uint64_t total = t->carry + ns;
  uint64_t periods = total / o->period_ns;
  t->carry = total % o->period_ns;
  if (periods) {
    if (emit(ctx, out->tid, out->time, out->ips, out->nr, periods) == 0)
      o->stats.samples += periods;
    else
      o->stats.no_memory++;
  }
  free(out->ips);
  out->ips = NULL;
}

void kf_offcpu_settle(kf_offcpu_t *o, uint64_t until, uint64_t end,
                      kf_offcpu_emit_fn emit, void *ctx) {
  qsort(o->events, o->nevents, sizeof(event_t), by_time);
  size_t done = 0;
  for (; done < o->nevents && o->events[done].time < until; done++) {
    event_t *e = &o->events[done];
    thread_t *t = thread_of(o, e->tid);
    if (!t) { /* no memory for the thread: its event is lost */
      if (e->ips) o->stats.no_memory++;
      free(e->ips);
      continue;
    }
    if (e->ips) {
      if (t->out.ips) drop_out(o, t);
      t->out = *e;
      if (t->weight && e->time - t->weight_time <= KF_OFFCPU_WEIGHT_NS)
        t->out.switches = t->weight;
      t->weight = 0;
    } else if (is_weight(e)) {
      t->weight = e->switches;
      t->weight_time = e->time;
    } else if (t->out.ips && e->time >= t->out.time) {
      pair(o, t, e->time, emit, ctx);
    }
  }
  memmove(o->events, o->events + done, (o->nevents - done) * sizeof(event_t));
  o->nevents -= done;
  if (until != UINT64_MAX) return;
  for (size_t i = 0; i < o->threads_cap; i++) {
    thread_t *t = &o->threads[i];
    if (!t->used || !t->out.ips) continue;
    if (t->out.time > end) {
      drop_out(o, t);
    } else {
      o->stats.open++;
      pair(o, t, end, emit, ctx);
    }
  }
}

void kf_offcpu_stats(const kf_offcpu_t *o, kf_offcpu_stats_t *out) {
  *out = o->stats;
}

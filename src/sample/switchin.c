#define _GNU_SOURCE
#include "sample/switchin.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sample/bpf.h"
#include "sample/bpfring.h"
#include "sample/pidfilter.h"

/* Threads marked at once: one per sampled wait still open. An LRU map:
 * when full, the oldest mark goes (its wait is then counted unpaired), and
 * a mark never cleared (a thread sampled as it exited) ages out. */
#define MARKS 4096
/* 24 bytes a record: ~10,900 of them, twice what every switch of a server
 * switching 50,000 times a second leaves between two drains (100 ms). */
#define RING_BYTES (256u << 10)
#define FORMAT_MAX 8192

static const char *const TRACEFS[] = {
    "/sys/kernel/tracing/events/sched/sched_switch/",
    "/sys/kernel/debug/tracing/events/sched/sched_switch/",
};

struct kf_switchin {
  int mark_map, ring_map, state_map, prog;
  uint64_t tracepoint;
  void *consumer_page;
  void *data_map;
  size_t page, data_map_size;
  kf_bpfring_t ring;
};

int kf_switchin_next_pid_offset(const char *format, size_t n) {
  const char *end = format + n;
  for (const char *line = format; line < end;) {
    const char *eol = memchr(line, '\n', (size_t)(end - line));
    if (!eol) eol = end;
    const char *name = memmem(line, (size_t)(eol - line), " next_pid;", 10);
    if (name) {
      const char *o = memmem(name, (size_t)(eol - name), "offset:", 7);
      const char *z = memmem(name, (size_t)(eol - name), "size:4;", 7);
      if (!o || !z) return -1;
      long off = 0;
      int digits = 0;
      for (o += 7; o < eol && *o >= '0' && *o <= '9' && digits < 6; o++, digits++)
        off = off * 10 + (*o - '0');
      /* past the 8 bytes the kernel puts its own pointer in, within a page */
      if (!digits || o >= eol || *o != ';' || off % 4 || off < 8 || off > 4096) return -1;
      return (int)off;
    }
    line = eol + 1;
  }
  return -1;
}

/* Reads a small tracefs file whole, NUL-terminated. */
static ssize_t read_small(const char *dir, const char *name, char *buf, size_t cap) {
  char path[128];
  snprintf(path, sizeof path, "%s%s", dir, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -errno;
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
    if (n == cap - 1) break;
  }
  close(fd);
  buf[n] = '\0';
  return (ssize_t)n;
}

/* The tracepoint's perf id and where next_pid is in its record. */
static int find_tracepoint(uint64_t *id, int *next_pid) {
  char format[FORMAT_MAX];
  int rc = -ENOENT;
  for (size_t i = 0; i < sizeof TRACEFS / sizeof TRACEFS[0]; i++) {
    char text[32];
    ssize_t n = read_small(TRACEFS[i], "id", text, sizeof text);
    if (n < 0) {
      if (n != -ENOENT) rc = (int)n;
      continue;
    }
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text) return -EINVAL;
    n = read_small(TRACEFS[i], "format", format, sizeof format);
    if (n < 0) return (int)n;
    if ((*next_pid = kf_switchin_next_pid_offset(format, (size_t)n)) < 0) return -EINVAL;
    *id = v;
    return 0;
  }
  return rc;
}

/* Where the program keeps things on its stack (r10 - offset). */
enum {
  AT_NEXT = 4,  /* u32: the incoming task's global tid */
  AT_REC = 24,  /* { u32 tid; u32 switches; u64 time }: a record */
  AT_NS = 32,   /* struct bpf_pidns_info { u32 pid; u32 tgid; } */
  AT_ZERO = 36, /* u32 0: the rate state's key */
  AT_PREV = 40, /* u32: the outgoing task's global tid */
};

/* The program's state, per CPU: this process's global tgid once a switch
 * of ours was seen here (0 before), and for the rate bound, perf's
 * frequency mode: one switch of ours in `period` is sampled, and each
 * sample sets the period to what would have spaced the last ones
 * 1/max_rate s apart (so the clock is read at samples only). */
typedef struct cpu_state {
  uint64_t period, pending, last_ns;
  uint32_t self, unused;
} cpu_state_t;

/* The longest period: a switch in 2^20 (a million switches a second at
 * one sample a second). */
#define PERIOD_MAX (1u << 20)

#define CALL(helper) KF_INSN(BPF_JMP | BPF_CALL, 0, 0, 0, helper)
#define MOV_IMM(dst, imm) KF_INSN(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm)
#define MOV_REG(dst, src) KF_INSN(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0)
#define LOAD(size, dst, src, off) KF_INSN(BPF_LDX | BPF_MEM | (size), dst, src, off, 0)
#define STORE(size, dst, off, src) KF_INSN(BPF_STX | BPF_MEM | (size), dst, src, off, 0)
/* A forward jump whose target is written once known (patch). */
#define JUMP_LATER(code, reg, imm) KF_INSN(BPF_JMP | (code) | BPF_K, reg, 0, 0, imm)

static void patch(struct bpf_insn *prog, size_t at, size_t target) {
  prog[at].off = (int16_t)(target - at - 1);
}

/* Writes the instructions that send the record at AT_REC to the ring. */
static size_t emit_record(struct bpf_insn *at, int ring_map) {
  size_t n = kf_bpf_load_map(at, BPF_REG_1, ring_map);
  n += kf_bpf_stack_addr(&at[n], BPF_REG_2, -AT_REC);
  at[n++] = MOV_IMM(BPF_REG_3, 16);
  /* the collector drains on its own schedule: no wake-up per record */
  at[n++] = MOV_IMM(BPF_REG_4, BPF_RB_NO_WAKEUP);
  at[n++] = CALL(BPF_FUNC_ringbuf_output);
  return n;
}

/* Writes, from prog[n] on, the instructions that ask whether the current
 * task is one of this process's threads, in our pid namespace (the helper
 * fails for a task outside it), leaving { u32 pid; u32 tgid; } at AT_NS;
 * for a task that is not they jump to "drop" (their places added to
 * drop[]). Returns the new n. */
static size_t emit_ns_check(struct bpf_insn *prog, size_t n, uint64_t dev,
                            uint64_t ino, size_t *drop, size_t *nd) {
  n += kf_bpf_load_u64(&prog[n], BPF_REG_1, dev);
  n += kf_bpf_load_u64(&prog[n], BPF_REG_2, ino);
  n += kf_bpf_stack_addr(&prog[n], BPF_REG_3, -AT_NS);
  prog[n++] = MOV_IMM(BPF_REG_4, 8);
  prog[n++] = CALL(BPF_FUNC_get_ns_current_pid_tgid);
  drop[(*nd)++] = n;
  prog[n++] = JUMP_LATER(BPF_JNE, BPF_REG_0, 0);
  prog[n++] = LOAD(BPF_W, BPF_REG_0, BPF_REG_10, -AT_NS + 4);
  drop[(*nd)++] = n;
  prog[n++] = JUMP_LATER(BPF_JNE, BPF_REG_0, (int32_t)getpid());
  return n;
}

/* On sched_switch (r1: the tracepoint's record): stamps a marked incoming
 * task, then returns 1 for a switch-out of ours to sample, else 0. */
static int load_program(const kf_switchin_t *t, int next_pid, uint32_t max_rate) {
  uint64_t dev, ino;
  int rc = kf_pidfilter_ns(&dev, &ino);
  if (rc != 0) return rc;
  struct bpf_insn prog[160]; /* 104 at most; ASan checks it in test_bpfring */
  size_t n = 0, drop[8], nd = 0; /* the jumps to "drop": 7 at most */
  prog[n++] = MOV_REG(BPF_REG_6, BPF_REG_1);

  /* The incoming task: marked? Then record = { our tid, 0, now }. */
  prog[n++] = LOAD(BPF_W, BPF_REG_1, BPF_REG_6, (int16_t)next_pid);
  prog[n++] = STORE(BPF_W, BPF_REG_10, -AT_NEXT, BPF_REG_1);
  n += kf_bpf_load_map(&prog[n], BPF_REG_1, t->mark_map);
  n += kf_bpf_stack_addr(&prog[n], BPF_REG_2, -AT_NEXT);
  prog[n++] = CALL(BPF_FUNC_map_lookup_elem);
  size_t unmarked = n;
  prog[n++] = JUMP_LATER(BPF_JEQ, BPF_REG_0, 0);
  prog[n++] = LOAD(BPF_W, BPF_REG_7, BPF_REG_0, 0);
  prog[n++] = CALL(BPF_FUNC_ktime_get_ns);
  prog[n++] = STORE(BPF_DW, BPF_REG_10, -AT_REC + 8, BPF_REG_0);
  prog[n++] = STORE(BPF_W, BPF_REG_10, -AT_REC, BPF_REG_7);
  prog[n++] = KF_INSN(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -AT_REC + 4, 0);
  n += emit_record(&prog[n], t->ring_map);
  n += kf_bpf_load_map(&prog[n], BPF_REG_1, t->mark_map);
  n += kf_bpf_stack_addr(&prog[n], BPF_REG_2, -AT_NEXT);
  prog[n++] = CALL(BPF_FUNC_map_delete_elem);
  patch(prog, unmarked, n);

  /* The outgoing task (the current one): ours? Its global tgid against the
   * one this CPU cached; while none is, asked the slow way (below). */
  prog[n++] = KF_INSN(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -AT_ZERO, 0);
  n += kf_bpf_load_map(&prog[n], BPF_REG_1, t->state_map);
  n += kf_bpf_stack_addr(&prog[n], BPF_REG_2, -AT_ZERO);
  prog[n++] = CALL(BPF_FUNC_map_lookup_elem);
  drop[nd++] = n;
  prog[n++] = JUMP_LATER(BPF_JEQ, BPF_REG_0, 0);
  prog[n++] = MOV_REG(BPF_REG_8, BPF_REG_0);
  prog[n++] = CALL(BPF_FUNC_get_current_pid_tgid);
  prog[n++] = STORE(BPF_W, BPF_REG_10, -AT_PREV, BPF_REG_0); /* its global tid */
  prog[n++] = KF_INSN(BPF_ALU64 | BPF_RSH | BPF_K, BPF_REG_0, 0, 0, 32);
  prog[n++] = LOAD(BPF_W, BPF_REG_1, BPF_REG_8, offsetof(cpu_state_t, self));
  size_t known = n;
  prog[n++] = KF_INSN(BPF_JMP | BPF_JEQ | BPF_X, BPF_REG_1, BPF_REG_0, 0, 0);
  drop[nd++] = n;
  prog[n++] = JUMP_LATER(BPF_JNE, BPF_REG_1, 0);
  prog[n++] = MOV_REG(BPF_REG_7, BPF_REG_0);
  n = emit_ns_check(prog, n, dev, ino, drop, &nd);
  prog[n++] = STORE(BPF_W, BPF_REG_8, offsetof(cpu_state_t, self), BPF_REG_7);
  patch(prog, known, n);

  if (max_rate) {
    /* One switch of ours in `period`: it stands for them all, and its
     * record { our tid, switches, now } says so. */
    prog[n++] = LOAD(BPF_DW, BPF_REG_7, BPF_REG_8, offsetof(cpu_state_t, pending));
    prog[n++] = KF_INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_7, 0, 0, 1);
    prog[n++] = STORE(BPF_DW, BPF_REG_8, offsetof(cpu_state_t, pending), BPF_REG_7);
    prog[n++] = LOAD(BPF_DW, BPF_REG_1, BPF_REG_8, offsetof(cpu_state_t, period));
    drop[nd++] = n; /* not yet */
    prog[n++] = KF_INSN(BPF_JMP | BPF_JGT | BPF_X, BPF_REG_1, BPF_REG_7, 0, 0);
    prog[n++] = KF_INSN(BPF_ST | BPF_MEM | BPF_DW, BPF_REG_8, 0, offsetof(cpu_state_t, pending), 0);
    prog[n++] = STORE(BPF_W, BPF_REG_10, -AT_REC + 4, BPF_REG_7);
    prog[n++] = CALL(BPF_FUNC_ktime_get_ns);
    prog[n++] = STORE(BPF_DW, BPF_REG_10, -AT_REC + 8, BPF_REG_0);
    /* period = switches * (1 s / max_rate) / ns since the last sample */
    prog[n++] = LOAD(BPF_DW, BPF_REG_1, BPF_REG_8, offsetof(cpu_state_t, last_ns));
    prog[n++] = STORE(BPF_DW, BPF_REG_8, offsetof(cpu_state_t, last_ns), BPF_REG_0);
    prog[n++] = KF_INSN(BPF_ALU64 | BPF_SUB | BPF_X, BPF_REG_0, BPF_REG_1, 0, 0);
    prog[n++] = KF_INSN(BPF_ALU64 | BPF_MUL | BPF_K, BPF_REG_7, 0, 0, (int32_t)(1000000000u / max_rate));
    prog[n++] = KF_INSN(BPF_ALU64 | BPF_DIV | BPF_X, BPF_REG_7, BPF_REG_0, 0, 0); /* (x / 0 is 0) */
    prog[n++] = KF_INSN(BPF_JMP | BPF_JGT | BPF_K, BPF_REG_7, 0, 1, 0);
    prog[n++] = MOV_IMM(BPF_REG_7, 1);
    prog[n++] = KF_INSN(BPF_JMP | BPF_JLE | BPF_K, BPF_REG_7, 0, 1, PERIOD_MAX);
    prog[n++] = MOV_IMM(BPF_REG_7, PERIOD_MAX);
    prog[n++] = STORE(BPF_DW, BPF_REG_8, offsetof(cpu_state_t, period), BPF_REG_7);
  }

  /* Sampled. Its tid in our namespace (the slow way, but only now), for
   * the weight's record and mark[its global tid]. */
  n = emit_ns_check(prog, n, dev, ino, drop, &nd);
  if (max_rate) {
    prog[n++] = LOAD(BPF_W, BPF_REG_1, BPF_REG_10, -AT_NS);
    prog[n++] = STORE(BPF_W, BPF_REG_10, -AT_REC, BPF_REG_1);
    n += emit_record(&prog[n], t->ring_map);
  }
  n += kf_bpf_load_map(&prog[n], BPF_REG_1, t->mark_map);
  n += kf_bpf_stack_addr(&prog[n], BPF_REG_2, -AT_PREV);
  n += kf_bpf_stack_addr(&prog[n], BPF_REG_3, -AT_NS);
  prog[n++] = MOV_IMM(BPF_REG_4, BPF_ANY);
  prog[n++] = CALL(BPF_FUNC_map_update_elem);
  prog[n++] = MOV_IMM(BPF_REG_0, 1);
  prog[n++] = KF_INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
  for (size_t i = 0; i < nd; i++) patch(prog, drop[i], n);
  prog[n++] = MOV_IMM(BPF_REG_0, 0);
  prog[n++] = KF_INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
  return kf_bpf_prog_load(BPF_PROG_TYPE_TRACEPOINT, prog, n);
}

static int map_ring(kf_switchin_t *t) {
  t->page = (size_t)sysconf(_SC_PAGESIZE);
  t->consumer_page = mmap(NULL, t->page, PROT_READ | PROT_WRITE, MAP_SHARED, t->ring_map, 0);
  if (t->consumer_page == MAP_FAILED) {
    t->consumer_page = NULL;
    return -errno;
  }
  /* The producer's page, then the data area twice over. */
  t->data_map_size = t->page + 2 * (size_t)RING_BYTES;
  t->data_map = mmap(NULL, t->data_map_size, PROT_READ, MAP_SHARED, t->ring_map, (off_t)t->page);
  if (t->data_map == MAP_FAILED) {
    t->data_map = NULL;
    return -errno;
  }
  t->ring = (kf_bpfring_t){.consumer = t->consumer_page,
                           .producer = t->data_map,
                           .data = (const unsigned char *)t->data_map + t->page,
                           .size = RING_BYTES};
  return 0;
}

int kf_switchin_open(uint32_t max_rate, kf_switchin_t **out) {
  int next_pid;
  kf_switchin_t *t = calloc(1, sizeof(*t));
  if (!t) return -ENOMEM;
  t->prog = t->ring_map = t->mark_map = t->state_map = -1;
  int rc = find_tracepoint(&t->tracepoint, &next_pid);
  if (rc != 0) goto fail;
  if ((t->mark_map = kf_bpf_map_create(BPF_MAP_TYPE_LRU_HASH, 4, 4, MARKS)) < 0 ||
      (t->ring_map = kf_bpf_map_create(BPF_MAP_TYPE_RINGBUF, 0, 0, RING_BYTES)) < 0 ||
      (t->state_map = kf_bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, 4, sizeof(cpu_state_t), 1)) < 0 ||
      (t->prog = load_program(t, next_pid, max_rate)) < 0) {
    rc = t->mark_map < 0 ? t->mark_map : t->ring_map < 0 ? t->ring_map
         : t->state_map < 0 ? t->state_map : t->prog;
    goto fail;
  }
  if ((rc = map_ring(t)) != 0) goto fail;
  *out = t;
  return 0;
fail:
  kf_switchin_close(t);
  return rc;
}

void kf_switchin_close(kf_switchin_t *t) {
  if (!t) return;
  if (t->data_map) munmap(t->data_map, t->data_map_size);
  if (t->consumer_page) munmap(t->consumer_page, t->page);
  if (t->prog >= 0) close(t->prog);
  if (t->state_map >= 0) close(t->state_map);
  if (t->ring_map >= 0) close(t->ring_map);
  if (t->mark_map >= 0) close(t->mark_map);
  free(t);
}

uint64_t kf_switchin_tracepoint(const kf_switchin_t *t) {
  return t->tracepoint;
}

int kf_switchin_attach(const kf_switchin_t *t, int perf_fd) {
  return ioctl(perf_fd, PERF_EVENT_IOC_SET_BPF, t->prog) == 0 ? 0 : -errno;
}

typedef struct {
  kf_switchin_fn fn;
  void *ctx;
  uint64_t *corrupt;
} drain_ctx_t;

static void on_record(const void *rec, uint32_t len, void *arg) {
  drain_ctx_t *d = arg;
  if (len < 16) { /* never from our program */
    (*d->corrupt)++;
    return;
  }
  uint32_t tid, switches;
  uint64_t time;
  memcpy(&tid, rec, 4);
  memcpy(&switches, (const unsigned char *)rec + 4, 4);
  memcpy(&time, (const unsigned char *)rec + 8, 8);
  d->fn(d->ctx, tid, time, switches);
}

void kf_switchin_drain(kf_switchin_t *t, kf_switchin_fn fn, void *ctx) {
  drain_ctx_t d = {fn, ctx, &t->ring.corrupt};
  kf_bpfring_drain(&t->ring, on_record, &d);
}

uint64_t kf_switchin_corrupt(const kf_switchin_t *t) {
  return t->ring.corrupt;
}

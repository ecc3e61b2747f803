#define _GNU_SOURCE
#include "sample/switchin.h"

#include <errno.h>
#include <fcntl.h>
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
  int mark_map, ring_map, prog;
  int event; /* on the tracepoint, holding the program */
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

/* On sched_switch: r0 = 0 (the perf event itself records nothing). */
static int load_program(int next_pid, int mark_map, int ring_map) {
  struct bpf_insn prog[40];
  size_t n = 0;
  prog[n++] = KF_INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_6, BPF_REG_1, 0, 0);
  /* key = the incoming task's global tid */
  prog[n++] = KF_INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_1, BPF_REG_6, (int16_t)next_pid, 0);
  prog[n++] = KF_INSN(BPF_STX | BPF_MEM | BPF_W, BPF_REG_10, BPF_REG_1, -4, 0);
  n += kf_bpf_load_map(&prog[n], BPF_REG_1, mark_map);
  n += kf_bpf_stack_addr(&prog[n], BPF_REG_2, -4);
  prog[n++] = KF_INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem);
  size_t unmarked = n++;
  /* record = { our tid, 0, now } */
  prog[n++] = KF_INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_7, BPF_REG_0, 0, 0);
  prog[n++] = KF_INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_ktime_get_ns);
  prog[n++] = KF_INSN(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, BPF_REG_0, -16, 0);
  prog[n++] = KF_INSN(BPF_STX | BPF_MEM | BPF_W, BPF_REG_10, BPF_REG_7, -24, 0);
  prog[n++] = KF_INSN(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -20, 0);
  n += kf_bpf_load_map(&prog[n], BPF_REG_1, ring_map);
  n += kf_bpf_stack_addr(&prog[n], BPF_REG_2, -24);
  prog[n++] = KF_INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0, 16);
  /* the collector drains on its own schedule: no wake-up per record */
  prog[n++] = KF_INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_4, 0, 0, BPF_RB_NO_WAKEUP);
  prog[n++] = KF_INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_ringbuf_output);
  n += kf_bpf_load_map(&prog[n], BPF_REG_1, mark_map);
  n += kf_bpf_stack_addr(&prog[n], BPF_REG_2, -4);
  prog[n++] = KF_INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_delete_elem);
  size_t out = n;
  prog[n++] = KF_INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);
  prog[n++] = KF_INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
  prog[unmarked] = KF_INSN(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, (int16_t)(out - unmarked - 1), 0);
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

/* One perf event on the tracepoint, on any CPU, runs the program on every
 * CPU: the kernel keeps a tracepoint's programs with the tracepoint (as
 * libbpf's attach does, pid -1 on one CPU). */
static int open_event(kf_switchin_t *t, uint64_t id, int cpu) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_TRACEPOINT;
  a.config = id;
  a.sample_period = 1;
  t->event = (int)syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
  if (t->event < 0) return -errno;
  return ioctl(t->event, PERF_EVENT_IOC_SET_BPF, t->prog) == 0 ? 0 : -errno;
}

int kf_switchin_open(int cpu, kf_switchin_t **out) {
  uint64_t id;
  int next_pid;
  int rc = find_tracepoint(&id, &next_pid);
  if (rc != 0) return rc;
  kf_switchin_t *t = calloc(1, sizeof(*t));
  if (!t) return -ENOMEM;
  t->prog = t->ring_map = t->event = -1;
  if ((t->mark_map = kf_bpf_map_create(BPF_MAP_TYPE_LRU_HASH, 4, 4, MARKS)) < 0 ||
      (t->ring_map = kf_bpf_map_create(BPF_MAP_TYPE_RINGBUF, 0, 0, RING_BYTES)) < 0 ||
      (t->prog = load_program(next_pid, t->mark_map, t->ring_map)) < 0) {
    rc = t->mark_map < 0 ? t->mark_map : t->ring_map < 0 ? t->ring_map : t->prog;
    goto fail;
  }
  if ((rc = map_ring(t)) != 0 || (rc = open_event(t, id, cpu)) != 0) goto fail;
  *out = t;
  return 0;
fail:
  kf_switchin_close(t);
  return rc;
}

void kf_switchin_close(kf_switchin_t *t) {
  if (!t) return;
  if (t->event >= 0) close(t->event);
  if (t->data_map) munmap(t->data_map, t->data_map_size);
  if (t->consumer_page) munmap(t->consumer_page, t->page);
  if (t->prog >= 0) close(t->prog);
  if (t->ring_map >= 0) close(t->ring_map);
  if (t->mark_map >= 0) close(t->mark_map);
  free(t);
}

int kf_switchin_mark_map(const kf_switchin_t *t) {
  return t->mark_map;
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
  uint32_t tid;
  uint64_t time;
  memcpy(&tid, rec, 4);
  memcpy(&time, (const unsigned char *)rec + 8, 8);
  d->fn(d->ctx, tid, time);
}

void kf_switchin_drain(kf_switchin_t *t, kf_switchin_fn fn, void *ctx) {
  drain_ctx_t d = {fn, ctx, &t->ring.corrupt};
  kf_bpfring_drain(&t->ring, on_record, &d);
}

uint64_t kf_switchin_corrupt(const kf_switchin_t *t) {
  return t->ring.corrupt;
}

#include "collect/timeline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* 64 KiB a chunk: about 10,000 samples at 999 Hz. */
#define CHUNK_BYTES ((size_t)64 << 10)
/* The longest record: three varints of 64, 32 and 32 bits. */
#define RECORD_MAX (10 + 5 + 5)

typedef struct chunk {
  struct chunk *next;
  uint32_t used;  /* bytes of data */
  uint32_t count; /* samples */
} chunk_t;

#define CHUNK_DATA (CHUNK_BYTES - sizeof(chunk_t))

struct kf_timeline {
  chunk_t *first, *last;
  uint64_t max, count, dropped;
  size_t chunks;
  kf_sample_t prev; /* of the last sample written into `last` */
};

kf_timeline_t *kf_timeline_new(uint64_t max) {
  kf_timeline_t *t = calloc(1, sizeof(*t));
  if (t) t->max = max;
  return t;
}

void kf_timeline_free(kf_timeline_t *t) {
  if (!t) return;
  for (chunk_t *c = t->first, *next; c; c = next) {
    next = c->next;
    munmap(c, CHUNK_BYTES);
  }
  free(t);
}

static unsigned char *data_of(const chunk_t *c) { return (unsigned char *)(c + 1); }

static size_t put_varint(unsigned char *p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (unsigned char)v;
  return n;
}

static uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static int64_t unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* Drops whole chunks from the front while the rest still hold `max`. */
static void drop_oldest(kf_timeline_t *t) {
  while (t->first && t->first != t->last && t->count - t->first->count >= t->max) {
    chunk_t *c = t->first;
    t->first = c->next;
    t->count -= c->count;
    t->dropped += c->count;
    t->chunks--;
    munmap(c, CHUNK_BYTES);
  }
}

int kf_timeline_add(kf_timeline_t *t, uint64_t time, uint32_t stack, uint32_t tid) {
  if (t->max == 0) {
    t->dropped++;
    return 0;
  }
  chunk_t *c = t->last;
  if (!c || CHUNK_DATA - c->used < RECORD_MAX) {
    void *m = mmap(NULL, CHUNK_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      t->dropped++;
      return -ENOMEM;
    }
    c = m;
    c->next = NULL;
    c->used = c->count = 0;
    if (t->last) t->last->next = c;
    else t->first = c;
    t->last = c;
    t->chunks++;
    memset(&t->prev, 0, sizeof t->prev); /* a chunk reads on its own */
  }
  unsigned char *p = data_of(c) + c->used;
  size_t n = put_varint(p, zigzag((int64_t)(time - t->prev.time)));
  n += put_varint(p + n, stack);
  n += put_varint(p + n, zigzag((int64_t)tid - (int64_t)t->prev.tid));
  c->used += (uint32_t)n;
  c->count++;
  t->count++;
  t->prev = (kf_sample_t){.time = time, .stack = stack, .tid = tid};
  if (t->count > t->max) drop_oldest(t);
  return 0;
}

uint64_t kf_timeline_count(const kf_timeline_t *t) {
  return t->count < t->max ? t->count : t->max;
}

uint64_t kf_timeline_dropped(const kf_timeline_t *t) {
  return t->dropped + (t->count > t->max ? t->count - t->max : 0);
}

size_t kf_timeline_bytes(const kf_timeline_t *t) { return t->chunks * CHUNK_BYTES; }

void kf_timeline_iter(const kf_timeline_t *t, kf_timeline_iter_t *it) {
  memset(it, 0, sizeof(*it));
  it->chunk = t->first;
  it->left = t->first ? t->first->count : 0;
  it->skip = t->count > t->max ? t->count - t->max : 0;
}

static uint64_t get_varint(const unsigned char *p, size_t *off) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    unsigned char b = p[(*off)++];
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  return v;
}

int kf_timeline_next(kf_timeline_iter_t *it, kf_sample_t *out) {
  for (;;) {
    const chunk_t *c = it->chunk;
    if (!c) return 0;
    if (it->left == 0) {
      it->chunk = c->next;
      it->off = 0;
      it->left = c->next ? c->next->count : 0;
      memset(&it->prev, 0, sizeof it->prev);
      continue;
    }
    const unsigned char *p = data_of(c);
    kf_sample_t s;
    s.time = it->prev.time + (uint64_t)unzigzag(get_varint(p, &it->off));
    s.stack = (uint32_t)get_varint(p, &it->off);
    s.tid = (uint32_t)((int64_t)it->prev.tid + unzigzag(get_varint(p, &it->off)));
    it->prev = s;
    it->left--;
    if (it->skip) {
      it->skip--;
      continue;
    }
    *out = s;
    return 1;
  }
}

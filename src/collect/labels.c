/*
 * labels: see labels.h. The log is an array of intervals plus interned
 * names (a label such as a request route opens thousands of times; its name
 * is stored once). A handle carries the log's epoch, so a label that closes
 * after its profile ended cannot close an interval of the next one.
 */
#define _GNU_SOURCE
#include "collect/labels.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/grow.h"
#include "util/hash.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int recording;
static uint32_t epoch; /* of the current log; under lock */
static kf_labels_t log_; /* under lock */
static size_t labels_cap, names_cap;
static uint32_t *slots; /* name index + 1 per slot, 0 = empty; under lock */
static size_t nslots;

const int *kf_labels_recording_word(void) { return (const int *)&recording; }

static uint32_t thread_id(void) {
  static __thread uint32_t tid;
  if (!tid) tid = (uint32_t)syscall(SYS_gettid);
  return tid;
}

static uint64_t hash_name(const char *s, size_t len) {
  return kf_fnv_bytes(KF_FNV_OFFSET, s, len);
}

/* Doubles the slot table and re-inserts every name. */
static int grow_slots(void) {
  size_t n = nslots ? nslots * 2 : 64;
  uint32_t *fresh = calloc(n, sizeof(*fresh));
  if (!fresh) return -1;
  for (size_t i = 0; i < log_.nnames; i++) {
    const char *s = log_.names[i];
    size_t j = hash_name(s, strlen(s)) & (n - 1);
    while (fresh[j]) j = (j + 1) & (n - 1);
    fresh[j] = (uint32_t)i + 1;
  }
  free(slots);
  slots = fresh;
  nslots = n;
  return 0;
}

/* The index of name[0..len) in log_.names, added if new; -1 without memory. */
static int64_t intern(const char *name, size_t len) {
  if ((log_.nnames + 1) * 2 > nslots && grow_slots() != 0) return -1;
  size_t j = hash_name(name, len) & (nslots - 1);
  for (; slots[j]; j = (j + 1) & (nslots - 1)) {
    const char *s = log_.names[slots[j] - 1];
    if (strncmp(s, name, len) == 0 && s[len] == '\0') return slots[j] - 1;
  }
  if (kf_grow((void **)&log_.names, &names_cap, log_.nnames + 1,
              sizeof(*log_.names), 16) != 0)
    return -1;
  char *copy = strndup(name, len);
  if (!copy) return -1;
  log_.names[log_.nnames] = copy;
  slots[j] = (uint32_t)++log_.nnames;
  return slots[j] - 1;
}

/* Forgets the name index and capacities once log_ is freed or handed over. */
static void drop_index_locked(void) {
  free(slots);
  slots = NULL;
  nslots = labels_cap = names_cap = 0;
}

void kf_labels_begin(void) {
  pthread_mutex_lock(&lock);
  kf_labels_free(&log_);
  drop_index_locked();
  epoch = (epoch + 1) & 0xffff; /* handles stay below 2^48: exact in a JS number */
  atomic_store(&recording, 1);
  pthread_mutex_unlock(&lock);
}

/* Cuts at a character boundary so a name never ends in half a character. */
static size_t cut_utf8(const char *s, size_t len) {
  if (len <= KF_LABEL_NAME_MAX) return len;
  len = KF_LABEL_NAME_MAX;
  while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80) len--;
  return len;
}

int64_t kf_labels_open(const char *name, size_t len) {
  if (!atomic_load_explicit(&recording, memory_order_relaxed)) return -1;
  uint64_t now = kf_now_ns();
  uint32_t tid = thread_id();
  len = cut_utf8(name, len);
  int64_t handle = -1;
  pthread_mutex_lock(&lock);
  if (atomic_load(&recording)) {
    int64_t id = log_.count < KF_LABELS_MAX ? intern(name, len) : -1;
    if (id >= 0 && kf_grow((void **)&log_.labels, &labels_cap, log_.count + 1,
                           sizeof(*log_.labels), 256) == 0) {
      log_.labels[log_.count] = (kf_label_t){now, 0, tid, (uint32_t)id};
      handle = ((int64_t)epoch << 32) | (int64_t)log_.count++;
    } else {
      log_.dropped++;
    }
  }
  pthread_mutex_unlock(&lock);
  return handle;
}

void kf_labels_close(int64_t handle) {
  if (handle < 0 || !atomic_load_explicit(&recording, memory_order_relaxed))
    return;
  uint64_t now = kf_now_ns();
  pthread_mutex_lock(&lock);
  size_t i = (size_t)(handle & 0xffffffff);
  if (atomic_load(&recording) && (uint32_t)(handle >> 32) == epoch &&
      i < log_.count && log_.labels[i].end_ns == 0)
    log_.labels[i].end_ns = now;
  pthread_mutex_unlock(&lock);
}

void kf_labels_end(kf_labels_t *out) {
  pthread_mutex_lock(&lock);
  uint64_t now = kf_now_ns(); /* after any open that got the lock first */
  atomic_store(&recording, 0);
  for (size_t i = 0; i < log_.count; i++)
    if (log_.labels[i].end_ns == 0) log_.labels[i].end_ns = now;
  *out = log_;
  memset(&log_, 0, sizeof(log_));
  drop_index_locked();
  pthread_mutex_unlock(&lock);
}

void kf_labels_free(kf_labels_t *l) {
  for (size_t i = 0; i < l->nnames; i++) free(l->names[i]);
  free(l->names);
  free(l->labels);
  memset(l, 0, sizeof(*l));
}

#include "jit/jithook.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "util/clock.h"
#include "jit/jitname.h"

/* Longer names are cut: a frame name this long is unreadable anyway, and
 * the bound keeps the event handler off the heap for the formatting. */
#define NAME_MAX_BYTES 1024

/* TurboFan inlines functions of up to 460 bytes of bytecode (V8's
 * max_inlined_bytecode_size), Maglev fewer: larger functions are never
 * inlined, so their source offsets are not indexed. */
#define INLINABLE_BYTECODE_MAX 460
/* At most this many (script, offset) pairs: 16 bytes each, 16 MiB. */
#define FUNCPOS_MAX_ENTRIES (1u << 20)

static kf_codemap_t *map;
static kf_funcpos_t *funcpos;
static pthread_once_t map_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t dropped;

static void make_map(void) {
  map = kf_codemap_new();
  funcpos = kf_funcpos_new(FUNCPOS_MAX_ENTRIES);
}

kf_codemap_t *kf_jithook_map(void) {
  pthread_once(&map_once, make_map);
  return map;
}

kf_funcpos_t *kf_jithook_funcpos(void) {
  pthread_once(&map_once, make_map);
  return funcpos;
}

void kf_jithook_added(uintptr_t isolate, uintptr_t start, size_t len,
                      const char *v8name, size_t name_len, int bytecode,
                      int existing, uint32_t script, kf_lines_t *lines) {
  kf_codemap_t *m = kf_jithook_map();
  char name[NAME_MAX_BYTES];
  char tier;
  kf_jitname(v8name, name_len, name, sizeof name, &tier);
  enum kf_code_kind kind =
      bytecode ? KF_CODE_BYTECODE : kf_jitname_kind(v8name, name_len);
  /* A small function's offsets are known before its code is added: the
   * collector caches what it resolved while the map's generation holds
   * (jitframes.c), and adding the code is what changes the generation. */
  if (lines && kind == KF_CODE_BYTECODE && len <= INLINABLE_BYTECODE_MAX && funcpos)
    kf_funcpos_add(funcpos, script, name, lines);
  if (!m || kf_codemap_add(m, start, len, name, tier, kind, isolate,
                           existing ? 0 : kf_now_ns()) != 0) {
    atomic_fetch_add(&dropped, 1);
  } else if (lines && kind != KF_CODE_BYTECODE && (tier == '*' || tier == '+')) {
    kf_codemap_attach_lines(m, start, script, lines);
  }
  kf_lines_release(lines);
}

kf_lines_t *kf_jithook_lines_begin(void) { return kf_lines_new(); }

void kf_jithook_lines_add(kf_lines_t *lines, size_t code_offset,
                          size_t position, int bytecode) {
  if (!lines) return;
  /* An offset past the inlining limit: this bytecode is never inlined,
   * and its table would only be dropped when the code is added. */
  if (bytecode && code_offset >= INLINABLE_BYTECODE_MAX)
    kf_lines_abandon(lines);
  else if (code_offset <= UINT32_MAX && position <= UINT32_MAX)
    kf_lines_push(lines, (uint32_t)code_offset, (uint32_t)position);
}

kf_lines_t *kf_jithook_lines_end(kf_lines_t *lines) {
  if (lines && kf_lines_seal(lines) != 0) {
    kf_lines_release(lines);
    return NULL;
  }
  return lines;
}

void kf_jithook_moved(uintptr_t from, uintptr_t to) {
  kf_codemap_t *m = kf_jithook_map();
  if (!m || kf_codemap_move(m, from, to, kf_now_ns()) != 0)
    atomic_fetch_add(&dropped, 1);
}

void kf_jithook_forget(uintptr_t isolate) {
  kf_codemap_t *m = kf_jithook_map();
  if (m) kf_codemap_drop_owner(m, isolate, kf_now_ns());
}

/* Isolates armed, with how many copies of the addon armed each: few (the
 * main thread and the workers alive), so a list. */
typedef struct armed {
  uintptr_t isolate;
  int count;
  struct armed *next;
} armed_t;

static armed_t *armed_list;
static pthread_mutex_t armed_lock = PTHREAD_MUTEX_INITIALIZER;

static int adjust(uintptr_t isolate, int delta) {
  pthread_mutex_lock(&armed_lock);
  armed_t **at = &armed_list;
  while (*at && (*at)->isolate != isolate) at = &(*at)->next;
  if (!*at && delta > 0 && (*at = calloc(1, sizeof(armed_t))))
    (*at)->isolate = isolate;
  int count = 0;
  if (*at) {
    count = (*at)->count += delta;
    if (count <= 0) {
      armed_t *gone = *at;
      *at = gone->next;
      free(gone);
      count = 0;
    }
  }
  pthread_mutex_unlock(&armed_lock);
  /* Out of memory: counted as the only copy, as before the count existed. */
  return delta > 0 && count == 0 ? 1 : count;
}

int kf_jithook_retain(uintptr_t isolate) { return adjust(isolate, 1); }
int kf_jithook_release(uintptr_t isolate) { return adjust(isolate, -1); }

uint64_t kf_jithook_dropped(void) { return atomic_load(&dropped); }

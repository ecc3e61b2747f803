/* Code map, V8 name parsing and JIT frame tokens. `make TSAN=1` runs the
 * threaded case under ThreadSanitizer. */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jit/codemap.h"
#include "jit/jitframes.h"
#include "jit/jitname.h"
#include "kftest.h"

static const char *name_at(kf_codemap_t *m, uint64_t addr, uint64_t t) {
  static char buf[256];
  kf_code_info_t info;
  return kf_codemap_lookup(m, addr, t, buf, sizeof buf, &info) < 0 ? "(none)"
                                                                   : buf;
}

static void jitname_formats(void) {
  char out[64], tier;
#define NAME(s) kf_jitname(s, strlen(s), out, sizeof out, &tier)
  NAME("JS:~foo /app/a.js:3:10");
  CHECK_STR(out, "foo /app/a.js:3:10");
  CHECK(tier == '~');
  NAME("JS:* /app/a.js:9:1");
  CHECK_STR(out, "(anonymous) /app/a.js:9:1");
  CHECK(tier == '*');
  NAME("JS:*'foo /app/a.js:3:10"); /* context-specialized, V8 12+ */
  CHECK_STR(out, "foo /app/a.js:3:10");
  CHECK(tier == '*');
  NAME("JS:+'bar b.js:1:1");
  CHECK_STR(out, "bar b.js:1:1");
  CHECK(tier == '+');
  NAME("JS:~'quoted b.js:1:1"); /* not a marker after ~ */
  CHECK_STR(out, "'quoted b.js:1:1");
  NAME("Eval:~ [eval]:1:1");
  CHECK_STR(out, "(anonymous) [eval]:1:1");
  NAME("LazyCompile:^bar node:internal/x:1:2");
  CHECK_STR(out, "bar node:internal/x:1:2");
  CHECK(tier == '^');
  NAME("Builtin:ArrayMap");
  CHECK_STR(out, "Builtin:ArrayMap");
  CHECK(tier == '\0');
  NAME("Builtin:InterpreterEntryTrampoline");
  CHECK_STR(out, "(interpreted)");
  NAME("RegExp:a+;b\nc");
  CHECK_STR(out, "RegExp:/a+:b c/"); /* sanitised */
  /* RegExp code V8 reports as existing when the hook is armed: no source */
  NAME("RegExp:Regular expression code");
  CHECK_STR(out, "RegExp:(compiled before start)");
  NAME("RegExp:Regular expression codes");
  CHECK_STR(out, "RegExp:/Regular expression codes/");
  /* V8 13: source and flags quoted; the source may hold quotes itself */
  NAME("RegExp.> src: 'x(abc|def)+y' flags: 'gi'");
  CHECK_STR(out, "RegExp:/x(abc|def)+y/gi");
  NAME("RegExp.> src: 'a' flags: 'b' flags: ''");
  CHECK_STR(out, "RegExp:/a' flags: 'b/");
  NAME("RegExp.> src: 'x' flags: 'g"); /* cut short: kept as V8 wrote it */
  CHECK_STR(out, "RegExp.> src: 'x' flags: 'g");
  NAME("RegExp.> src: '");
  CHECK_STR(out, "RegExp.> src: '");
  kf_jitname("JS:+f\0x", 7, out, sizeof out, &tier);
  CHECK_STR(out, "f x");
  CHECK(tier == '+');
  NAME("JS:~averyveryveryveryveryveryveryveryveryveryveryverylongname f.js:1:1");
  CHECK(strlen(out) == sizeof out - 1); /* truncated, terminated */
#undef NAME
}

static void codemap_evicts_overlaps(void) {
  kf_codemap_t *m = kf_codemap_new();
  CHECK(kf_codemap_add(m, 0x1000, 0x100, "a", '~', KF_CODE_OTHER, 1, 10) == 0);
  CHECK(kf_codemap_add(m, 0x1100, 0x100, "b", '~', KF_CODE_OTHER, 1, 10) == 0);
  CHECK_STR(name_at(m, 0x10ff, 20), "a");
  CHECK_STR(name_at(m, 0x1100, 20), "b");
  CHECK_STR(name_at(m, 0x1200, 20), "(none)");
  /* New code over both: both are dead, one line remains. */
  CHECK(kf_codemap_add(m, 0x1080, 0x100, "c", '*', KF_CODE_OTHER, 1, 30) == 0);
  kf_codemap_stats_t st;
  kf_codemap_stats(m, &st);
  CHECK_EQ_U64(st.live, 1);
  CHECK_EQ_U64(st.evicted, 2);
  CHECK_EQ_U64(st.dead, 0); /* not profiling: nothing kept */
  CHECK_STR(name_at(m, 0x1000, 40), "(none)");
  CHECK_STR(name_at(m, 0x1100, 40), "c");
  char *text;
  size_t len;
  CHECK(kf_codemap_format(m, &text, &len) == 0);
  CHECK_STR(text, "1080 100 *c\n");
  free(text);
  kf_codemap_free(m);
}

static void codemap_is_time_correct(void) {
  kf_codemap_t *m = kf_codemap_new();
  kf_codemap_keep_dead(m, 1);
  CHECK(kf_codemap_add(m, 0x1000, 0x100, "old", 0, KF_CODE_OTHER, 1, 100) == 0);
  CHECK(kf_codemap_add(m, 0x1000, 0x80, "new", 0, KF_CODE_OTHER, 1, 200) == 0); /* reuse */
  CHECK_STR(name_at(m, 0x1010, 50), "(none)"); /* before either */
  CHECK_STR(name_at(m, 0x1010, 150), "old");
  CHECK_STR(name_at(m, 0x1010, 200), "new");
  CHECK_STR(name_at(m, 0x10c0, 150), "old");
  CHECK_STR(name_at(m, 0x10c0, 250), "(none)"); /* old is gone there */
  /* Retiring before the death keeps it; after, it is gone. */
  kf_codemap_retire(m, 200);
  CHECK_STR(name_at(m, 0x1010, 150), "old");
  kf_codemap_retire(m, 201);
  CHECK_STR(name_at(m, 0x1010, 150), "(none)");
  kf_codemap_stats_t st;
  kf_codemap_stats(m, &st);
  CHECK_EQ_U64(st.dead, 0);
  CHECK_EQ_U64(st.retired, 1);
  kf_codemap_free(m);
}

static void codemap_moves_and_drops(void) {
  kf_codemap_t *m = kf_codemap_new();
  kf_codemap_keep_dead(m, 1);
  CHECK(kf_codemap_add(m, 0x1000, 0x40, "f", '*', KF_CODE_OTHER, 7, 0) == 0);
  CHECK(kf_codemap_add(m, 0x2000, 0x40, "g", '*', KF_CODE_OTHER, 8, 0) == 0);
  CHECK(kf_codemap_add(m, 0x9000, 0x40, "shared", 0, KF_CODE_OTHER, 7, 0) == 0);
  CHECK(kf_codemap_add(m, 0x9000, 0x40, "shared", 0, KF_CODE_OTHER, 8, 5) == 0); /* again */
  CHECK(kf_codemap_move(m, 0x1000, 0x3000, 100) == 0);
  CHECK(kf_codemap_move(m, 0x5555, 0x6000, 100) == 0); /* unknown: ignored */
  CHECK_STR(name_at(m, 0x1000, 50), "f");  /* before the move */
  CHECK_STR(name_at(m, 0x1000, 150), "(none)");
  CHECK_STR(name_at(m, 0x3010, 150), "f");
  CHECK_STR(name_at(m, 0x3010, 50), "(none)"); /* not there yet */
  kf_codemap_drop_owner(m, 7, 300); /* isolate 7 went away */
  CHECK_STR(name_at(m, 0x3010, 400), "(none)");
  CHECK_STR(name_at(m, 0x3010, 200), "f");
  CHECK_STR(name_at(m, 0x2010, 400), "g");
  CHECK_STR(name_at(m, 0x9010, 400), "shared"); /* other isolates use it */
  kf_codemap_stats_t st;
  kf_codemap_stats(m, &st);
  CHECK_EQ_U64(st.live, 2);
  CHECK_EQ_U64(st.moved, 1);
  kf_codemap_keep_dead(m, 0);
  kf_codemap_stats(m, &st);
  CHECK_EQ_U64(st.dead, 0);
  kf_codemap_free(m);
}

/* A lookup's stamp changes with code on its page, and only there (or
 * with code too big to stamp page by page); bytecode's generation only
 * with bytecode. */
static void codemap_stamps_follow_changes(void) {
  kf_codemap_t *m = kf_codemap_new();
  char name[64];
  kf_code_info_t info;
  CHECK(kf_codemap_add(m, 0x10000, 0x100, "a", '*', KF_CODE_JS, 1, 1) == 0);
  CHECK(kf_codemap_lookup(m, 0x10010, 2, name, sizeof name, &info) == 1);
  uint64_t stamp = info.stamp, bytecode = kf_codemap_bytecode_generation(m);
  CHECK(stamp == kf_codemap_stamp(m, 0x10010) && stamp > 0);
  /* elsewhere: code, bytecode, a move, lines */
  CHECK(kf_codemap_add(m, 0x900000, 0x100, "b", '*', KF_CODE_JS, 1, 3) == 0);
  CHECK(kf_codemap_add(m, 0x910000, 0x40, "c", '~', KF_CODE_BYTECODE, 1, 3) == 0);
  CHECK(kf_codemap_move(m, 0x900000, 0x920000, 4) == 0);
  kf_lines_t *l = kf_lines_new();
  CHECK(kf_lines_push(l, 0, 5) == 0 && kf_lines_seal(l) == 0);
  CHECK(kf_codemap_attach_lines(m, 0x920000, 1, l) == 0);
  CHECK_EQ_U64(kf_codemap_stamp(m, 0x10010), stamp);
  CHECK(kf_codemap_bytecode_generation(m) > bytecode);
  bytecode = kf_codemap_bytecode_generation(m);
  /* on its page: lines, then code over it, then a move away */
  CHECK(kf_codemap_attach_lines(m, 0x10000, 1, l) == 0);
  CHECK(kf_codemap_stamp(m, 0x10010) > stamp);
  stamp = kf_codemap_stamp(m, 0x10fff);
  CHECK(kf_codemap_add(m, 0x10f00, 0x100, "d", '*', KF_CODE_JS, 1, 5) == 0);
  CHECK(kf_codemap_stamp(m, 0x10010) > stamp);
  stamp = kf_codemap_stamp(m, 0x10010);
  CHECK(kf_codemap_move(m, 0x10000, 0x930000, 6) == 0);
  CHECK(kf_codemap_stamp(m, 0x10010) > stamp);
  CHECK_EQ_U64(kf_codemap_bytecode_generation(m), bytecode);
  /* code over a span too big to stamp page by page stamps every page */
  stamp = kf_codemap_stamp(m, 0x10010);
  CHECK(kf_codemap_add(m, 0x4000000, 0x400000, "huge", '\0', KF_CODE_OTHER, 0, 7) == 0);
  CHECK(kf_codemap_stamp(m, 0x10010) > stamp);
  kf_lines_release(l);
  kf_codemap_free(m);
}

static void codemap_stays_bounded_under_churn(void) {
  kf_codemap_t *m = kf_codemap_new();
  kf_codemap_stats_t st;
  uint64_t bytes_after_first = 0;
  /* 100 rounds of 1000 functions compiled into the same code space. */
  for (int round = 0; round < 100; round++) {
    for (int i = 0; i < 1000; i++) {
      char name[32];
      snprintf(name, sizeof name, "fn%d_%d", round, i);
      CHECK(kf_codemap_add(m, 0x100000 + (uint64_t)i * 0x100 + (round & 1) * 0x80,
                           0x100, name, '~', KF_CODE_OTHER, 1, (uint64_t)round * 1000 + i + 1) == 0);
    }
    kf_codemap_stats(m, &st);
    if (round == 1) bytes_after_first = st.bytes;
  }
  CHECK(st.live <= 1001);
  CHECK(st.bytes <= bytes_after_first + 1001 * 8);
  kf_codemap_free(m);
}

static void jitframes_tokens_and_tiers(void) {
  kf_codemap_t *m = kf_codemap_new();
  CHECK(kf_codemap_add(m, 0x1000, 0x100, "f a.js:1:1", '~', KF_CODE_OTHER, 1, 10) == 0);
  CHECK(kf_codemap_add(m, 0x2000, 0x100, "f a.js:1:1", '*', KF_CODE_OTHER, 1, 10) == 0);
  kf_jitframes_t *j = kf_jitframes_new(m, NULL);
  uint64_t ips[] = {(uint64_t)PERF_CONTEXT_KERNEL, 0x1010,
                    (uint64_t)PERF_CONTEXT_USER, 0x1010, 0x2020, 0x7000};
  uint64_t out[7];
  CHECK(kf_jitframes_resolve(j, 20, ips, 6, NULL, out) == 6);
  CHECK(kf_jitframes_stats(j)->named == 2);
  CHECK(out[1] == 0x1010); /* kernel context: untouched */
  CHECK(kf_jitframes_is_token(out[3]) && kf_jitframes_is_token(out[4]));
  CHECK(out[3] != out[4]);
  CHECK(out[5] == 0x7000);
  CHECK_STR(kf_jitframes_name(j, out[3], 0), "f a.js:1:1_[j]");
  CHECK_STR(kf_jitframes_name(j, out[4], 0), "f a.js:1:1_[j]");
  CHECK_STR(kf_jitframes_name(j, out[3], 1), "~f a.js:1:1_[j]");
  CHECK_STR(kf_jitframes_name(j, out[4], 1), "*f a.js:1:1_[j]");
  /* The same code again: the same token. */
  uint64_t again[7];
  CHECK(kf_jitframes_resolve(j, 30, ips, 6, NULL, again) == 6);
  CHECK(again[3] == out[3]);
  CHECK(kf_jitframes_name(j, 0x1234, 0) == NULL);
  kf_jitframes_free(j);
  kf_codemap_free(m);
}

/* The address cache (jitframes.c) gives what an uncached lookup would:
 * after code is replaced at the same address, for samples before and after
 * the replacement, for an address with no code that later gets some, and
 * for a sample older than the code it would have cached. */
static void jitframes_cache_follows_the_map(void) {
  kf_codemap_t *m = kf_codemap_new();
  kf_codemap_keep_dead(m, 1);
  CHECK(kf_codemap_add(m, 0x1000, 0x100, "old a.js:1:1", '*', KF_CODE_JS, 1, 10) == 0);
  kf_jitframes_t *j = kf_jitframes_new(m, NULL);
  uint64_t ips[] = {(uint64_t)PERF_CONTEXT_USER, 0x1010, 0x3010};
  uint64_t out[3];
  const char *name;
#define FRAME(t, k) (kf_jitframes_resolve(j, (t), ips, 3, NULL, out) == 3 && \
                     (name = kf_jitframes_name(j, out[k], 0)) != NULL)
  CHECK(FRAME(20, 1));
  CHECK_STR(name, "old a.js:1:1_[j]");
  CHECK(out[2] == 0x3010); /* nothing known there */
  uint64_t hits = kf_jitframes_stats(j)->cache_hits;
  CHECK(FRAME(21, 1));
  CHECK_STR(name, "old a.js:1:1_[j]");
  /* both frames cached; the one with no code at its call is also looked
   * up at its return address (a frame the deoptimizer made returns to an
   * interpreter entry's first byte), cached as well */
  CHECK(kf_jitframes_stats(j)->cache_hits == hits + 3);
  /* V8 reuses the address at 30, and compiles code where there was none. */
  CHECK(kf_codemap_add(m, 0x1000, 0x100, "new a.js:2:1", '*', KF_CODE_JS, 1, 30) == 0);
  CHECK(kf_codemap_add(m, 0x3000, 0x100, "born a.js:3:1", '*', KF_CODE_JS, 1, 30) == 0);
  CHECK(FRAME(31, 1));
  CHECK_STR(name, "new a.js:2:1_[j]");
  CHECK(FRAME(31, 2));
  CHECK_STR(name, "born a.js:3:1_[j]");
  /* A sample from before the reuse, drained late: the old code, and no
   * code yet at 0x3000; then the new code again, not a stale cache. */
  CHECK(FRAME(25, 1));
  CHECK_STR(name, "old a.js:1:1_[j]");
  CHECK(out[2] == 0x3010);
  CHECK(FRAME(32, 1));
  CHECK_STR(name, "new a.js:2:1_[j]");
  CHECK(FRAME(32, 2));
  CHECK_STR(name, "born a.js:3:1_[j]");
#undef FRAME
  kf_jitframes_free(j);
  kf_codemap_keep_dead(m, 0);
  kf_codemap_free(m);
}

/* V8's threads (compile, GC move) and the collector (lookup, retire) at
 * once. Run under TSan by `make TSAN=1`; here it checks consistency. */
#define WORKERS 3
#define ROUNDS 20000
static kf_codemap_t *shared_map;

static void *compiler(void *arg) {
  uint64_t base = 0x100000 * (1 + (uintptr_t)arg);
  for (uint64_t i = 0; i < ROUNDS; i++) {
    char name[32];
    snprintf(name, sizeof name, "f%lu", (unsigned long)i);
    kf_codemap_add(shared_map, base + (i % 512) * 0x40, 0x40, name, '~', KF_CODE_OTHER,
                   (uintptr_t)arg + 1, i + 1);
    if (i % 7 == 0)
      kf_codemap_move(shared_map, base + (i % 512) * 0x40,
                      base + 0x80000 + (i % 512) * 0x40, i + 1);
  }
  return NULL;
}

static void *collector(void *arg) {
  (void)arg;
  char buf[64];
  kf_code_info_t info;
  for (uint64_t i = 0; i < ROUNDS; i++) {
    uint64_t addr = 0x100000 + (i * 0x40) % 0x200000;
    if (kf_codemap_lookup(shared_map, addr, i, buf, sizeof buf, &info) >= 0)
      CHECK(buf[0] == 'f' && info.tier == '~');
    if (i % 1000 == 0) kf_codemap_retire(shared_map, i > 500 ? i - 500 : 0);
    if (i % 5000 == 0) {
      char *text;
      size_t len;
      CHECK(kf_codemap_format(shared_map, &text, &len) == 0);
      free(text);
    }
  }
  return NULL;
}

static void codemap_threads(void) {
  shared_map = kf_codemap_new();
  kf_codemap_keep_dead(shared_map, 1);
  pthread_t t[WORKERS + 1];
  for (uintptr_t i = 0; i < WORKERS; i++)
    CHECK(pthread_create(&t[i], NULL, compiler, (void *)i) == 0);
  CHECK(pthread_create(&t[WORKERS], NULL, collector, NULL) == 0);
  for (int i = 0; i <= WORKERS; i++) pthread_join(t[i], NULL);
  kf_codemap_drop_owner(shared_map, 1, ROUNDS + 1);
  kf_codemap_stats_t st;
  kf_codemap_stats(shared_map, &st);
  CHECK(st.live > 0 && st.live <= WORKERS * 1024);
  CHECK_EQ_U64(st.added, WORKERS * ROUNDS);
  kf_codemap_free(shared_map);
}

static const kftest_case_t cases[] = {
    {"jitname: V8 names to frame names", jitname_formats},
    {"codemap: new code evicts what it overlaps", codemap_evicts_overlaps},
    {"codemap: samples named by the code of their time", codemap_is_time_correct},
    {"codemap: moves and dropped isolates", codemap_moves_and_drops},
    {"codemap: stamps follow changes where they are", codemap_stamps_follow_changes},
    {"codemap: bounded under churn", codemap_stays_bounded_under_churn},
    {"jitframes: tokens, tiers merged or kept", jitframes_tokens_and_tiers},
    {"jitframes: the address cache follows the map", jitframes_cache_follows_the_map},
    {"codemap: compile, move, look up from several threads", codemap_threads},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }

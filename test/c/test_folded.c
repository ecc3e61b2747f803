/* Aggregation and folding: stacks are counted per (thread, callchain),
 * ordered root first across the kernel/user boundary, sanitised, merged
 * when different addresses get the same names, and sorted. */
#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>

#include "render/folded.h"
#include "collect/stacks.h"
#include "kftest.h"

#define K ((uint64_t)PERF_CONTEXT_KERNEL)
#define U ((uint64_t)PERF_CONTEXT_USER)

/* Frame 0x1NN is named "fNN"; kernel frames get "_[k]". 0x999 has a
 * hostile name; 0x500 and 0x501 share a name. */
static const char *frame(void *ctx, uint64_t ip, int kernel) {
  (void)ctx;
  static char names[64][32];
  static int next;
  if (ip == 0x999) return "evil;name\nwith\tcontrols";
  if (ip == 0x500 || ip == 0x501) return "same";
  char *b = names[next++ % 64];
  snprintf(b, 32, "f%llx%s", (unsigned long long)(ip & 0xff), kernel ? "_[k]" : "");
  return b;
}

static const char *thread(void *ctx, uint32_t tid) {
  (void)ctx;
  return tid == 1 ? "main" : "libuv-worker-2";
}

static char *fold(kf_stacks_t *s, uint32_t max_frames) {
  kf_fold_names_t names = {.frame = frame, .thread = thread, .max_frames = max_frames};
  char *out;
  size_t len;
  CHECK(kf_fold(s, &names, &out, &len, NULL) == 0);
  CHECK(strlen(out) == len);
  return out;
}

static void stacks_count_duplicates(void) {
  kf_stacks_t *s = kf_stacks_new();
  uint64_t a[] = {U, 0x101, 0x102}, b[] = {U, 0x103};
  CHECK(kf_stacks_add(s, 1, 10, a, 3) == 0);
  CHECK(kf_stacks_add(s, 1, 20, b, 2) == 0);
  CHECK(kf_stacks_add(s, 1, 30, a, 3) == 0);
  CHECK(kf_stacks_add(s, 2, 40, a, 3) == 0); /* other thread: other stack */
  CHECK_EQ_U64(kf_stacks_count(s), 3);
  kf_stack_t st;
  kf_stacks_get(s, 0, &st);
  CHECK(st.tid == 1 && st.nr == 3 && st.count == 2 && st.ips[2] == 0x102);
  size_t n;
  const kf_sample_t *samples = kf_stacks_samples(s, &n);
  CHECK_EQ_U64(n, 4);
  CHECK(samples[2].time == 30 && samples[2].stack == 0 && samples[3].tid == 2);
  kf_stacks_free(s);
}

static void stacks_grow_past_rehash(void) {
  kf_stacks_t *s = kf_stacks_new();
  for (uint64_t i = 0; i < 5000; i++) {
    uint64_t ips[] = {U, 0x100 + i, 0x42};
    CHECK(kf_stacks_add(s, 1, i, ips, 3) == 0);
    CHECK(kf_stacks_add(s, 1, i, ips, 3) == 0);
  }
  CHECK_EQ_U64(kf_stacks_count(s), 5000);
  for (size_t i = 0; i < 5000; i++) {
    kf_stack_t st;
    kf_stacks_get(s, i, &st);
    CHECK(st.count == 2 && st.ips[1] == 0x100 + i);
  }
  kf_stacks_free(s);
}

static void folds_root_first_kernel_last(void) {
  kf_stacks_t *s = kf_stacks_new();
  /* leaf first: kernel leaf k1 called from k2, entered from user u3 <- u4 */
  uint64_t ips[] = {K, 0x1a1, 0x1a2, U, 0x103, 0x104};
  CHECK(kf_stacks_add(s, 1, 0, ips, 6) == 0);
  char *out = fold(s, 0);
  CHECK_STR(out, "main;f4;f3;fa2_[k];fa1_[k] 1\n");
  free(out);
  kf_stacks_free(s);
}

static void folds_merge_equal_names_and_sort(void) {
  kf_stacks_t *s = kf_stacks_new();
  uint64_t a[] = {U, 0x500, 0x101}, b[] = {U, 0x501, 0x101}, c[] = {U, 0x102};
  CHECK(kf_stacks_add(s, 2, 0, c, 2) == 0);
  CHECK(kf_stacks_add(s, 1, 0, a, 3) == 0);
  CHECK(kf_stacks_add(s, 1, 0, b, 3) == 0);
  CHECK(kf_stacks_add(s, 1, 0, b, 3) == 0);
  char *out = fold(s, 0);
  CHECK_STR(out, "libuv-worker-2;f2 1\nmain;f1;same 3\n");
  free(out);
  /* Each stack knows its line: samples can be tied to lines. */
  kf_fold_names_t names = {.frame = frame, .thread = thread};
  uint32_t line_of[3] = {9, 9, 9};
  size_t len;
  CHECK(kf_stacks_count(s) == 3); /* a and b: other addresses, same names */
  CHECK(kf_fold(s, &names, &out, &len, line_of) == 0);
  CHECK(line_of[0] == 0 && line_of[1] == 1 && line_of[2] == 1);
  free(out);
  kf_stacks_free(s);
}

static void folds_sanitise_names(void) {
  kf_stacks_t *s = kf_stacks_new();
  uint64_t a[] = {U, 0x999, 0x101};
  CHECK(kf_stacks_add(s, 1, 0, a, 3) == 0);
  char *out = fold(s, 0);
  CHECK_STR(out, "main;f1;evil:name with controls 1\n");
  free(out);
  kf_stacks_free(s);
}

static void folds_mark_truncated_and_skip_guest(void) {
  kf_stacks_t *s = kf_stacks_new();
  uint64_t full[] = {U, 0x101, 0x102, 0x103};
  uint64_t guest[] = {(uint64_t)PERF_CONTEXT_GUEST, 0x1ff, U, 0x101};
  CHECK(kf_stacks_add(s, 1, 0, full, 4) == 0);
  CHECK(kf_stacks_add(s, 2, 0, guest, 4) == 0);
  char *out = fold(s, 3);
  CHECK_STR(out, "libuv-worker-2;f1 1\nmain;[truncated];f3;f2;f1 1\n");
  free(out);
  kf_stacks_free(s);
}

static void folds_nothing(void) {
  kf_stacks_t *s = kf_stacks_new();
  char *out = fold(s, 0);
  CHECK_STR(out, "");
  free(out);
  kf_stacks_free(s);
}

/* The kernel writes nr == 0 when it could not take a callchain (its
 * empty-callchain fallback), and the collector then hands over no ips at
 * all (NULL when the JIT scratch was never needed). Such samples are kept,
 * one stack per thread, folded as the thread alone. Under UBSan this once
 * hit memcmp(NULL, ips, 0) and NULL + 0 in stacks.c. */
static void stacks_keep_empty_callchains(void) {
  kf_stacks_t *s = kf_stacks_new();
  uint64_t none[1] = {0};
  CHECK(kf_stacks_add(s, 1, 10, NULL, 0) == 0);
  CHECK(kf_stacks_add(s, 1, 20, NULL, 0) == 0);
  CHECK(kf_stacks_add(s, 1, 30, none, 0) == 0);
  CHECK(kf_stacks_add(s, 2, 40, NULL, 0) == 0);
  uint64_t a[] = {U, 0x101};
  CHECK(kf_stacks_add(s, 1, 50, a, 2) == 0);
  CHECK(kf_stacks_add(s, 2, 60, NULL, 0) == 0);
  CHECK_EQ_U64(kf_stacks_count(s), 3);
  kf_stack_t st;
  kf_stacks_get(s, 0, &st);
  CHECK(st.tid == 1 && st.nr == 0 && st.count == 3 && st.ips != NULL);
  kf_stacks_get(s, 1, &st);
  CHECK(st.tid == 2 && st.nr == 0 && st.count == 2 && st.ips != NULL);
  char *out = fold(s, 0);
  CHECK_STR(out, "libuv-worker-2 2\nmain 3\nmain;f1 1\n");
  free(out);
  kf_stacks_free(s);
}

/* Each (ip, kernel) is named once per fold, however many stacks hold it;
 * the same address in kernel and user context is two frames. */
static int named;
static const char *counting_frame(void *ctx, uint64_t ip, int kernel) {
  named++;
  return frame(ctx, ip, kernel);
}

static void folds_name_each_address_once(void) {
  kf_stacks_t *s = kf_stacks_new();
  for (uint64_t i = 0; i < 1000; i++) {
    uint64_t ips[] = {K, 0x101, U, 0x101, 0x102, 0x100 + (i % 50), 0x103};
    CHECK(kf_stacks_add(s, 1 + (uint32_t)(i % 2), i, ips, 7) == 0);
  }
  kf_fold_names_t names = {.frame = counting_frame, .thread = thread};
  char *out;
  size_t len;
  named = 0;
  CHECK(kf_fold(s, &names, &out, &len, NULL) == 0);
  /* 0x101 in the kernel; in user space 0x100..0x131 (0x101..0x103 among
   * them): 1 + 50 names for 7,000 frames. */
  CHECK_EQ_U64(named, 1 + 50);
  CHECK(strstr(out, "main;f3;f0;f2;f1;f1_[k] ") != NULL);
  free(out);
  kf_stacks_free(s);
}


/* Names that are prefixes of one another, with bytes below and above ';'
 * after the shared part ("a" "a.b" "ab" "a<" "a;x" which becomes "a:x"),
 * and two addresses with one name: the lines come out in the order of
 * their texts (memcmp), each text once, every sample counted once. The
 * fold compares names, not built lines, so this is where it could go
 * wrong. */
static const char *prefix_frame(void *ctx, uint64_t ip, int kernel) {
  (void)ctx;
  (void)kernel;
  static const char *names[] = {"a", "a.b", "ab", "a<", "a;x", "a:x", "", "b", "a"};
  return names[ip % 9];
}

static void folds_in_text_order_with_prefix_names(void) {
  kf_stacks_t *s = kf_stacks_new();
  uint64_t seed = 42, samples = 0;
  for (int i = 0; i < 3000; i++) {
    uint64_t ips[6] = {U};
    uint32_t nr = 1 + (uint32_t)(i % 5);
    for (uint32_t k = 1; k <= nr; k++) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      ips[k] = 0x1000 + (seed >> 33) % 9;
    }
    CHECK(kf_stacks_add(s, 1 + (uint32_t)(i % 2), (uint64_t)i, ips, nr + 1) == 0);
    samples++;
  }
  kf_fold_names_t names = {.frame = prefix_frame, .thread = thread};
  char *out;
  size_t len;
  uint32_t *line_of = malloc(kf_stacks_count(s) * sizeof(uint32_t));
  CHECK(kf_fold(s, &names, &out, &len, line_of) == 0);
  const char *prev = NULL;
  size_t prev_len = 0, lines = 0;
  uint64_t total = 0;
  for (const char *p = out; *p; lines++) {
    const char *nl = strchr(p, '\n');
    const char *sp = nl - 1;
    while (*sp != ' ') sp--;
    size_t n = (size_t)(sp - p);
    total += strtoull(sp + 1, NULL, 10);
    if (prev) {
      size_t m = n < prev_len ? n : prev_len;
      int c = memcmp(prev, p, m);
      CHECK(c < 0 || (c == 0 && prev_len < n)); /* strictly increasing */
    }
    prev = p;
    prev_len = n;
    p = nl + 1;
  }
  CHECK_EQ_U64(total, samples);
  for (size_t i = 0; i < kf_stacks_count(s); i++) CHECK(line_of[i] < lines);
  free(line_of);
  free(out);
  kf_stacks_free(s);
}

static const kftest_case_t cases[] = {
    {"stacks: count duplicates per thread", stacks_count_duplicates},
    {"stacks: grow past rehash", stacks_grow_past_rehash},
    {"stacks: keep empty callchains", stacks_keep_empty_callchains},
    {"folded: root first, kernel last", folds_root_first_kernel_last},
    {"folded: merge equal names and sort", folds_merge_equal_names_and_sort},
    {"folded: sanitise names", folds_sanitise_names},
    {"folded: mark truncated, skip guest frames", folds_mark_truncated_and_skip_guest},
    {"folded: empty profile", folds_nothing},
    {"folded: each address named once", folds_name_each_address_once},
    {"folded: text order with names that prefix others", folds_in_text_order_with_prefix_names},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }

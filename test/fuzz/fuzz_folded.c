/* libFuzzer target: the folded-text parser (flametree.c), forward and
 * reverse, with the tree's invariants checked after every parse:
 *   - each node's total is its self plus its children's totals (the root
 *     too), so no total is below its self;
 *   - children are sorted by name, siblings have distinct names, and every
 *     node is reached exactly once from the root at its recorded depth;
 *   - names are non-empty spans of the input with no ';' or '\n';
 *   - both directions agree on lines, bad lines and the root's total;
 *   - the root's total is at most 2^53 - 1 (exact as a JS number).
 * A violation aborts, which libFuzzer reports as a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/flametree.h"

#define FUZZ_TARGET "fuzz_folded"
#include "fuzz.h"

static int name_cmp(const kf_ftnode_t *x, const kf_ftnode_t *y) {
  size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
  int c = memcmp(x->name, y->name, n);
  return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

static void check_tree(const kf_flametree_t *t, const char *text, size_t len) {
  if (t->count == 0 || !t->nodes) FAIL("no root");
  if (t->bad_lines > t->lines) FAIL("bad_lines %llu > lines %llu",
                                    (unsigned long long)t->bad_lines,
                                    (unsigned long long)t->lines);
  const kf_ftnode_t *root = &t->nodes[0];
  if (root->depth != 0 || root->parent != 0 || root->self != 0)
    FAIL("root depth/parent/self");
  /* Lines that would push the total past 2^53 - 1 are bad lines: every
   * count stays exact as a JS number. */
  if (root->total > (1ULL << 53) - 1)
    FAIL("root total %llu past 2^53 - 1", (unsigned long long)root->total);
  if (t->lines == t->bad_lines && (root->total != 0 || t->count != 1))
    FAIL("no good line, yet a tree");

  /* Walk the tree without recursion (it can be as deep as the input is
   * long), marking each node reached. */
  unsigned char *seen = calloc(t->count, 1);
  uint32_t *stack = malloc(t->count * sizeof(*stack));
  if (!seen || !stack) abort();
  size_t n = 0, reached = 0;
  uint32_t max_depth = 0;
  stack[n++] = 0;
  while (n) {
    uint32_t id = stack[--n];
    if (id >= t->count) FAIL("node %u out of range", id);
    if (seen[id]) FAIL("node %u reached twice", id);
    seen[id] = 1;
    reached++;
    const kf_ftnode_t *f = &t->nodes[id];
    if (f->depth > max_depth) max_depth = f->depth;
    if (f->total < f->self) FAIL("node %u: total %llu < self %llu", id,
                                 (unsigned long long)f->total,
                                 (unsigned long long)f->self);
    if (id != 0) {
      if (f->name_len == 0) FAIL("node %u: empty name", id);
      if (f->name < text || f->name_len > len ||
          (size_t)(f->name - text) > len - f->name_len)
        FAIL("node %u: name outside the input", id);
      if (memchr(f->name, ';', f->name_len) || memchr(f->name, '\n', f->name_len))
        FAIL("node %u: name holds a separator", id);
      if (f->total == 0) FAIL("node %u: no samples", id);
    }
    uint64_t sum = f->self;
    const kf_ftnode_t *prev = NULL;
    for (uint32_t c = f->first_child; c; c = t->nodes[c].next_sibling) {
      if (c >= t->count) FAIL("child %u out of range", c);
      const kf_ftnode_t *k = &t->nodes[c];
      if (k->parent != id) FAIL("node %u: parent %u, expected %u", c, k->parent, id);
      if (k->depth != f->depth + 1) FAIL("node %u: depth %u under %u", c, k->depth, f->depth);
      if (prev && name_cmp(prev, k) >= 0) FAIL("node %u: children not sorted or repeated", id);
      prev = k;
      if (sum + k->total < sum) FAIL("node %u: children's totals overflow", id);
      sum += k->total;
      if (n >= t->count) FAIL("more children than nodes");
      stack[n++] = c;
    }
    if (sum != f->total)
      FAIL("node %u: total %llu != self + children %llu", id,
           (unsigned long long)f->total, (unsigned long long)sum);
  }
  if (reached != t->count) FAIL("%zu of %zu nodes reached", reached, t->count);
  if (max_depth != t->max_depth) FAIL("max_depth %u, deepest node %u", t->max_depth, max_depth);
  free(seen);
  free(stack);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A private copy of exactly `size` bytes: ASan then catches any read past
   * the end, and the parser must not need a NUL after it. */
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  memcpy(text, data, size);
  kf_flametree_t fwd, rev;
  if (kf_flametree_parse(&fwd, text, size, 0) != 0) {
    free(text);
    return 0; /* -ENOMEM: the fuzzer's rss limit, not a bug */
  }
  check_tree(&fwd, text, size);
  if (kf_flametree_parse(&rev, text, size, 1) == 0) {
    check_tree(&rev, text, size);
    if (rev.lines != fwd.lines || rev.bad_lines != fwd.bad_lines ||
        rev.nodes[0].total != fwd.nodes[0].total || rev.max_depth != fwd.max_depth)
      FAIL("forward and reverse disagree");
    kf_flametree_free(&rev);
  }
  kf_flametree_free(&fwd);
  free(text);
  return 0;
}

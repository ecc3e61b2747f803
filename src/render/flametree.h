/*
 * flametree: folded stacks ("root;...;leaf COUNT" lines) parsed into the
 * tree a flame graph draws: one node per distinct path, each with the
 * samples of the stacks through it (total) and ending at it (self).
 *
 * Names point into the parsed text, which must outlive the tree. Lines
 * that are not "frames COUNT" (no count, a count that is not a positive
 * integer, an empty frame, a count past KF_FLAMETREE_MAX_TOTAL) are skipped
 * and counted, never fatal. Pure;
 * any thread, one tree per caller.
 */
#ifndef KF_FLAMETREE_H
#define KF_FLAMETREE_H

#include <stddef.h>
#include <stdint.h>

typedef struct kf_ftnode {
  const char *name; /* not NUL-terminated: name_len bytes */
  uint32_t name_len;
  uint32_t depth;   /* the root ("all") is 0 */
  uint32_t parent;  /* index; the root's is itself */
  uint32_t first_child, next_sibling; /* 0: none (0 is the root) */
  uint64_t total, self;
  /* Off-CPU: 0 on CPU, else the node is the "[off-cpu]" (1) or "(idle)"
   * (2) frame folded text puts under a thread's root, or is above one. */
  uint32_t waiting;
} kf_ftnode_t;

typedef struct kf_flametree {
  kf_ftnode_t *nodes; /* nodes[0] is the root */
  size_t count;
  uint32_t max_depth;
  uint64_t lines, bad_lines;
  uint64_t hidden_lines, hidden_samples; /* "(idle)" stacks left out */
} kf_flametree_t;

/* The largest total of a tree: 2^53 - 1, the largest integer a JS number
 * holds exactly. A line whose count would take the total past it is a bad
 * line, so every node's total is exact (lib/folded.js has the same rule). */
#define KF_FLAMETREE_MAX_TOTAL ((UINT64_C(1) << 53) - 1)

/* Parses `len` bytes of folded text. With `reverse`, each stack is read
 * leaf first (a "reverse stack order" graph: who calls the hot leaves).
 * Children end up sorted by name. Returns 0 or -ENOMEM (tree empty). */
int kf_flametree_parse(kf_flametree_t *t, const char *text, size_t len,
                       int reverse);
/* The same, leaving out the stacks with an "(idle)" frame when hide_idle
 * (counted in hidden_lines and hidden_samples): an off-CPU graph shows
 * waits, not threads with nothing to do. */
int kf_flametree_parse_idle(kf_flametree_t *t, const char *text, size_t len,
                            int reverse, int hide_idle);

void kf_flametree_free(kf_flametree_t *t);

#endif

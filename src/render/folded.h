/*
 * folded: turns aggregated stacks into FlameGraph's collapsed text,
 *   root;outer;...;leaf COUNT
 * one line per distinct stack, sorted, equal lines merged. Frame names come
 * from the caller; this module only orders, sanitises and merges, so it is
 * tested without any process state. Called on the JS thread at stop().
 */
#ifndef KF_FOLDED_H
#define KF_FOLDED_H

#include <stddef.h>
#include <stdint.h>

#include "collect/stacks.h"
#include "util/framename.h" /* kf_fold_sanitize: the one frame-name rule */

typedef struct kf_fold_names {
  /* Name of a frame; `kernel` is 1 for a kernel address. Called once per
   * distinct (ip, kernel) of a fold (an address has one name), and the
   * string must stay valid until the call returns. */
  const char *(*frame)(void *ctx, uint64_t ip, int kernel);
  /* Name of the root frame of a thread's stacks. Same lifetime. */
  const char *(*thread)(void *ctx, uint32_t tid);
  void *ctx;
  /* A callchain with this many frames was cut by the kernel: the stack gets
   * a "[truncated]" frame under its root. 0 disables the marker. */
  uint32_t max_frames;
} kf_fold_names_t;

/* Writes the collapsed text to *out (malloc'd, NUL-terminated, *len bytes).
 * When line_of_stack is not NULL (kf_stacks_count entries), it receives the
 * 0-based line of the text each stack was folded into, so samples can be
 * tied to lines. Returns 0 or -ENOMEM. */
int kf_fold(const kf_stacks_t *stacks, const kf_fold_names_t *names,
            char **out, size_t *len, uint32_t *line_of_stack);


#endif

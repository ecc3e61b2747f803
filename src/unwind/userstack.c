#include "unwind/userstack.h"

#include <string.h>

int kf_userstack_word(const kf_userstack_t *s, uint64_t addr, uint64_t *out) {
  if (!s->bytes || addr < s->sp || s->len < 8) return -1;
  uint64_t off = addr - s->sp;
  if (off > s->len - 8) return -1;
  memcpy(out, s->bytes + off, 8);
  return 0;
}

size_t kf_userstack_walk(const kf_userstack_t *s, uint64_t *rets, size_t max) {
  size_t n = 0;
  for (uint64_t fp = s->bp; n < max;) {
    uint64_t next, ret;
    if (fp > UINT64_MAX - 8 || kf_userstack_word(s, fp, &next) != 0 ||
        kf_userstack_word(s, fp + 8, &ret) != 0)
      break;
    rets[n++] = ret;
    if (next <= fp) break;
    fp = next;
  }
  return n;
}

size_t kf_userstack_frames(const kf_userstack_t *s, const uint64_t *ips,
                           size_t n, uint64_t *fps) {
  if (n == 0) return 0;
  fps[0] = s->bp;
  return kf_userstack_frames_more(s, ips, 1, n, fps);
}

size_t kf_userstack_frames_more(const kf_userstack_t *s, const uint64_t *ips,
                                size_t have, size_t n, uint64_t *fps) {
  if (have == 0) return 0;
  size_t k = have;
  for (; k < n; k++) {
    uint64_t fp = fps[k - 1], next, ret;
    if (fp > UINT64_MAX - 8 || kf_userstack_word(s, fp, &next) != 0 ||
        kf_userstack_word(s, fp + 8, &ret) != 0 || ret != ips[k] ||
        next <= fp)
      break;
    fps[k] = next;
  }
  return k;
}

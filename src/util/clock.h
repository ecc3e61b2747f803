/*
 * clock: CLOCK_MONOTONIC in nanoseconds, the clock perf samples carry
 * (use_clockid) and code-map entries are stamped with. Any thread.
 */
#ifndef KF_CLOCK_H
#define KF_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t kf_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

#endif

/* What the fuzz targets share: FAIL(...) reports a broken invariant with
 * the target's name (FUZZ_TARGET, defined before including this) and
 * aborts, which libFuzzer records as a crash with its input. */
#ifndef KF_FUZZ_H
#define KF_FUZZ_H

#include <stdio.h>
#include <stdlib.h>

#define FAIL(...)                                  \
  do {                                             \
    fprintf(stderr, "%s: ", FUZZ_TARGET);          \
    fprintf(stderr, __VA_ARGS__);                  \
    fprintf(stderr, "\n");                         \
    abort();                                       \
  } while (0)

#endif

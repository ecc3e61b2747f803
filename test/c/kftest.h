/*
 * kftest: a very small test runner. Each test runs in its own forked
 * process with a time limit, so a crash or hang fails that test alone.
 * CHECK() survives release builds (it is not assert()).
 */
#ifndef KFTEST_H
#define KFTEST_H

#include <stdio.h>
#include <stdlib.h>

typedef void (*kftest_fn)(void);

typedef struct kftest_case {
  const char *name;
  kftest_fn fn;
} kftest_case_t;

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__,  \
              #cond);                                                     \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

#define CHECK_EQ_U64(a, b)                                                \
  do {                                                                    \
    unsigned long long a_ = (unsigned long long)(a),                      \
                       b_ = (unsigned long long)(b);                      \
    if (a_ != b_) {                                                       \
      fprintf(stderr, "  %s:%d: %s == %llu, expected %s == %llu\n",       \
              __FILE__, __LINE__, #a, a_, #b, b_);                        \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

#define CHECK_STR(a, b)                                                   \
  do {                                                                    \
    const char *a_ = (a), *b_ = (b);                                      \
    if (!a_ || strcmp(a_, b_) != 0) {                                     \
      fprintf(stderr, "  %s:%d: %s is \"%s\", expected \"%s\"\n",         \
              __FILE__, __LINE__, #a, a_ ? a_ : "(null)", b_);            \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

/* Runs every case (or those whose name contains argv[1]); prints one line a
 * case and "N passed, N failed". Returns the exit status. */
int kftest_main(const kftest_case_t *cases, int argc, char **argv);

#endif

/* Label log: recording window, handles, interning, and (under `make TSAN=1`)
 * threads opening and closing labels while the log begins and ends. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "collect/labels.h"
#include "kftest.h"

#define OPEN(s) kf_labels_open(s, strlen(s))

static void labels_record_only_while_begun(void) {
  kf_labels_t log;
  CHECK(OPEN("idle") == -1); /* nothing recording: the cheap path */
  kf_labels_begin();
  int64_t outer = OPEN("request");
  int64_t inner = OPEN("db");
  CHECK(outer >= 0 && inner >= 0 && inner != outer);
  kf_labels_close(inner);
  kf_labels_close(inner); /* twice: the first end stays */
  kf_labels_end(&log);
  kf_labels_close(outer); /* after the end: ignored */
  CHECK(OPEN("late") == -1);
  CHECK_EQ_U64(log.count, 2);
  CHECK_EQ_U64(log.nnames, 2);
  CHECK_STR(log.names[log.labels[0].name], "request");
  CHECK_STR(log.names[log.labels[1].name], "db");
  CHECK(log.labels[0].start_ns <= log.labels[1].start_ns);
  CHECK(log.labels[1].end_ns >= log.labels[1].start_ns);
  CHECK(log.labels[0].end_ns >= log.labels[1].end_ns); /* closed by the end */
  CHECK(log.labels[0].tid == log.labels[1].tid && log.labels[0].tid != 0);
  CHECK_EQ_U64(log.dropped, 0);
  kf_labels_free(&log);
}

static void labels_handles_of_an_old_log_are_ignored(void) {
  kf_labels_t log;
  kf_labels_begin();
  int64_t old = OPEN("first profile");
  kf_labels_end(&log);
  kf_labels_free(&log);
  kf_labels_begin();
  int64_t fresh = OPEN("second profile");
  CHECK((old & 0xffffffff) == (fresh & 0xffffffff)); /* same index... */
  kf_labels_close(old);                                /* ...other epoch */
  kf_labels_end(&log);
  CHECK_EQ_U64(log.count, 1);
  CHECK(log.labels[0].end_ns > 0); /* ended by kf_labels_end, not by `old` */
  kf_labels_free(&log);
}

static void labels_intern_names_and_cut_long_ones(void) {
  kf_labels_t log;
  char name[16], longname[KF_LABEL_NAME_MAX + 8];
  kf_labels_begin();
  for (int i = 0; i < 3000; i++) {
    snprintf(name, sizeof name, "route-%d", i % 300);
    kf_labels_close(OPEN(name));
  }
  /* "é" is two bytes; the cut must not split one. */
  memset(longname, 'a', sizeof longname);
  memcpy(longname + KF_LABEL_NAME_MAX - 1, "\xc3\xa9", 2);
  kf_labels_close(kf_labels_open(longname, sizeof longname));
  kf_labels_end(&log);
  CHECK_EQ_U64(log.count, 3001);
  CHECK_EQ_U64(log.nnames, 301);
  CHECK_STR(log.names[log.labels[2999].name], "route-299");
  CHECK_EQ_U64(strlen(log.names[300]), KF_LABEL_NAME_MAX - 1);
  kf_labels_free(&log);
}

#define WORKERS 3
#define ROUNDS 20000

static void *open_close_loop(void *arg) {
  char name[16];
  for (int i = 0; i < ROUNDS; i++) {
    snprintf(name, sizeof name, "t%d-%d", (int)(intptr_t)arg, i % 50);
    int64_t h = OPEN(name);
    kf_labels_close(h);
  }
  return NULL;
}

static void labels_threads(void) {
  pthread_t t[WORKERS];
  kf_labels_t log;
  size_t seen = 0;
  kf_labels_begin();
  for (intptr_t i = 0; i < WORKERS; i++)
    CHECK(pthread_create(&t[i], NULL, open_close_loop, (void *)i) == 0);
  for (int round = 0; round < 20; round++) { /* profiles stop and start */
    kf_labels_end(&log);
    for (size_t i = 0; i < log.count; i++)
      CHECK(log.labels[i].end_ns >= log.labels[i].start_ns);
    seen += log.count;
    kf_labels_free(&log);
    kf_labels_begin();
  }
  for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
  kf_labels_end(&log);
  seen += log.count;
  CHECK(log.nnames <= WORKERS * 50);
  kf_labels_free(&log);
  CHECK(seen > 0 && seen <= WORKERS * ROUNDS);
}

static const kftest_case_t cases[] = {
    {"labels: recorded only between begin and end", labels_record_only_while_begun},
    {"labels: a handle of an earlier log closes nothing", labels_handles_of_an_old_log_are_ignored},
    {"labels: names interned, long names cut whole", labels_intern_names_and_cut_long_ones},
    {"labels: open and close from several threads", labels_threads},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }

/*
 * labels: named stretches of a thread's time (kflame.label, per-test labels),
 * recorded while a profile runs, so that stop() can put each sample under
 * the labels that were open on its thread at its time.
 *
 * One log per process, like the profiler: a label may open on any JS thread
 * (main, workers). kf_labels_open/close are called on those threads and take
 * the log's mutex only while recording; kf_labels_begin/end are called by
 * whoever starts and stops the profile. Times are CLOCK_MONOTONIC, the clock
 * of perf samples.
 */
#ifndef KF_LABELS_H
#define KF_LABELS_H

#include <stddef.h>
#include <stdint.h>

/* Names longer than this are cut (at a UTF-8 character boundary). */
#define KF_LABEL_NAME_MAX 512
/* Intervals kept per profile; more are dropped and counted. */
#define KF_LABELS_MAX (1u << 22)

typedef struct kf_label {
  uint64_t start_ns, end_ns;
  uint32_t tid;
  uint32_t name; /* index into kf_labels_t.names */
} kf_label_t;

/* A finished log, handed over by kf_labels_end. */
typedef struct kf_labels {
  kf_label_t *labels;
  size_t count;
  char **names; /* interned, NUL-terminated */
  size_t nnames;
  uint64_t dropped; /* opens refused: the cap or out of memory */
} kf_labels_t;

/* The word that says whether a log records (non-zero) or not, for readers
 * that want to skip kf_labels_open entirely (JS reads it through an
 * external ArrayBuffer). Lives as long as the process. */
const int *kf_labels_recording_word(void);

/* Starts a new log (discarding any unfinished one); opens now record. */
void kf_labels_begin(void);

/* Opens a label named name[0..len) on the calling thread, now. Returns a
 * handle >= 0, or -1 when no log is recording (the cheap path: one atomic
 * load) or the open was dropped. */
int64_t kf_labels_open(const char *name, size_t len);

/* Closes a handle from kf_labels_open, now. Handles of an earlier log,
 * already closed ones and -1 are ignored. */
void kf_labels_close(int64_t handle);

/* Stops recording and hands the log over; labels still open end now.
 * Free it with kf_labels_free. */
void kf_labels_end(kf_labels_t *out);
void kf_labels_free(kf_labels_t *log);

#endif

#define _GNU_SOURCE
#include "collect/threadrole.h"

#include <stdio.h>
#include <string.h>

/* Start routines of the threads a Node process makes, as demangled names
 * (substring match). */
static const struct {
  const char *routine;
  const char *role;
} roles[] = {
    {"worker", "libuv-worker"}, /* libuv src/threadpool.c: static worker() */
    {"PlatformWorkerThread", "v8-worker"},
    {"DelayedTaskScheduler", "v8-delayed-tasks"},
    {"node::worker::Worker", "worker-thread"},
    {"inspector", "inspector"},
    {"SignalInspectorThread", "inspector-signal"},
};

/* Names Node (>= 22 for the pool, >= 24 for the rest) and libuv give their
 * threads: the same roles as the start routines above. comm is cut at 15
 * bytes. */
static const struct {
  const char *comm;
  const char *role;
} comms[] = {
    {"libuv-worker", "libuv-worker"},
    {"V8Worker", "v8-worker"},
    {"WorkerThread", "worker-thread"},
    {"DelayedTaskSche", "v8-delayed-tasks"},
    {"SignalInspector", "inspector-signal"},
};

static const char *role_of_comm(const char *comm) {
  for (size_t i = 0; comm && i < sizeof comms / sizeof comms[0]; i++)
    if (strcmp(comm, comms[i].comm) == 0) return comms[i].role;
  return NULL;
}

const char *kf_thread_role(const char *routine) {
  if (!routine) return NULL;
  if (strcmp(routine, "worker") == 0) return roles[0].role;
  for (size_t i = 1; i < sizeof roles / sizeof roles[0]; i++)
    if (strstr(routine, roles[i].routine)) return roles[i].role;
  return NULL;
}

char *kf_thread_root(uint32_t tid, uint32_t pid, const char *comm,
                     const char *main_comm, const char *routine) {
  char *out = NULL;
  if (tid == pid) return strdup("main");
  const char *role = role_of_comm(comm);
  if (!role && comm && *comm && (!main_comm || strcmp(comm, main_comm) != 0))
    role = comm; /* the thread named itself */
  if (!role) role = kf_thread_role(routine);
  if (!role) role = comm && *comm ? comm : "thread";
  if (asprintf(&out, "%s-%u", role, tid) < 0) return NULL;
  return out;
}

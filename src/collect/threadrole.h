/*
 * threadrole: the root frame that names a thread in folded stacks.
 *
 *   main                    the process's main thread
 *   libuv-worker-<tid>      libuv's thread pool (fs, dns, crypto, zlib)
 *   v8-worker-<tid>         V8 platform workers (GC, compiler jobs)
 *   <comm>-<tid>            a thread that named itself (pthread_setname_np)
 *   <role>-<tid>            otherwise, from the function it was started with
 *
 * Node 20's threads all inherit the comm "node", so the start routine (the
 * outermost frame outside libc) is what tells them apart; the names newer
 * Node gives its threads ("V8Worker", "WorkerThread", ...) map to the same
 * roles. Pure; any thread.
 */
#ifndef KF_THREADROLE_H
#define KF_THREADROLE_H

#include <stdint.h>

/* The role a start routine gives a thread ("libuv-worker", "v8-worker", ...),
 * or NULL when the routine is not one of Node's. */
const char *kf_thread_role(const char *routine);

/* Returns a malloc'd name, or NULL when out of memory. comm, main_comm and
 * routine may be NULL when unknown. */
char *kf_thread_root(uint32_t tid, uint32_t pid, const char *comm,
                     const char *main_comm, const char *routine);

#endif

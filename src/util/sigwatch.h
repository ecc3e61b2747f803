/*
 * sigwatch: remembers that a signal arrived, for kflame/register.
 *
 * Node runs a JS signal listener only when the event loop gets control. A
 * SIGTERM that arrives during a long synchronous stretch, just before the
 * loop runs dry, is never dispatched: the process then exits 0 as if no
 * signal had come. register writes the profile at 'exit' either way, and
 * asks here whether a watched signal arrived, to end the process by that
 * signal as it would have without kflame.
 *
 * kf_sigwatch_add installs a handler in front of the one in place (libuv's,
 * once JS listens) that records the signal and calls the previous handler.
 * Call it on the JS thread after the JS listener is installed; the handler
 * runs on any thread and only stores one word.
 */
#ifndef KF_SIGWATCH_H
#define KF_SIGWATCH_H

/* Returns 0 (also when no handler is in place: nothing is installed then),
 * or -EINVAL for a signal that cannot be watched. */
int kf_sigwatch_add(int signo);

/* The watched signal that arrived last, or 0. */
int kf_sigwatch_arrived(void);

/* Ends the process by `signo` with its default action: the handler reset,
 * the signal unblocked and raised. Returns only if that did not kill (a
 * signal whose default is not to terminate); -errno then. Used at exit,
 * where a JS listener (ours or signal-exit's) could no longer run. */
int kf_sigwatch_die(int signo);

#endif

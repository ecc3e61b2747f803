/*
 * dwarfunwind: recovers the frames a frame-pointer walk skips, from the
 * DWARF call-frame information (.eh_frame) of the objects loaded in this
 * process, with libunwind's remote interface over a sample's registers and
 * stack copy (userstack.h).
 *
 * glibc and most system libraries are built without frame pointers. When a
 * sample's leaf is in one of them, the frame-pointer callchain (the kernel's,
 * or the timer sampler's) goes from the leaf to the caller of the first
 * function that kept a frame pointer: memmove's caller under Buffer.copy is
 * missing. kf_dwarf_missing() unwinds from the sample's registers through
 * the copy until it meets the chain again and returns the frames in between.
 *
 * Unwind tables are the objects' .eh_frame_hdr, found in memory with
 * dl_iterate_phdr and cached per object (again when an address falls in no
 * object known, at most every 100 ms). Memory outside the stack copy is
 * read only inside those objects' read-only loaded segments (code, unwind
 * tables); nothing else is touched.
 * Node never unloads an object, so what was loaded stays readable.
 * Called on the collector thread only.
 */
#ifndef KF_DWARFUNWIND_H
#define KF_DWARFUNWIND_H

#include <stddef.h>
#include <stdint.h>

#include "unwind/userstack.h"

/* Frames unwound from the leaf at most, to meet the frame-pointer chain. */
#define KF_DWARF_MAX_FRAMES 16

typedef struct kf_dwarf_stats {
  uint64_t tried;     /* samples whose leaf was in an object without frame
                         pointers (anything but the main program) */
  uint64_t recovered; /* samples that got frames back */
  uint64_t frames;    /* frames put back */
  uint64_t broke;     /* tried, but the unwind never met the chain (no
                         unwind info, a copy too short, a chain that
                         disagrees): left as it was */
} kf_dwarf_stats_t;

typedef struct kf_dwarf kf_dwarf_t;

/* libunwind sets itself up once per process on first use, and keeps a pipe
 * (close-on-exec) for that process's life to check memory it unwinds
 * locally. The binding calls this when kflame loads, so that no profile's
 * start() is where a descriptor appears. Any thread, before the others. */
void kf_dwarf_init_library(void);

/* NULL when out of memory or libunwind cannot make an address space. */
kf_dwarf_t *kf_dwarf_new(void);
void kf_dwarf_free(kf_dwarf_t *d);

/* What the unwind found for one sample:
 *  - restart 0: the walked chain is right past the leaf, only frames are
 *    missing: frames[0..n) go between user[0] and user[1];
 *  - restart 1: the walked chain is wrong past the leaf (a library without
 *    frame pointers used rbp for data): frames[0..n) are the leaf's
 *    callers up to the first frame of the main program (which keeps frame
 *    pointers), and `tail` is that frame as a sample of its own: its ip,
 *    sp and rbp, and the copy from its sp on. The chain goes on from there
 *    (kf_userstack_walk). A tail with ip 0: the unwind reached the thread's
 *    outermost frame, frames[] are all the leaf's callers. */
typedef struct kf_dwarf_fix {
  uint64_t frames[KF_DWARF_MAX_FRAMES];
  size_t n;
  int restart;
  kf_userstack_t tail;
} kf_dwarf_fix_t;

/* `user` is the user part of a sample's callchain (user[0] the
 * interrupted ip, then the return addresses the walk found; nuser may be
 * 1), `stack` the sample's registers and copy. Returns 1 with *fix filled
 * when frames can be put back, else 0 (none missing, the leaf's object
 * keeps frame pointers, or nothing could be recovered). */
int kf_dwarf_fix(kf_dwarf_t *d, const kf_userstack_t *stack,
                 const uint64_t *user, size_t nuser, kf_dwarf_fix_t *fix);

const kf_dwarf_stats_t *kf_dwarf_stats(const kf_dwarf_t *d);

/* One sample may be fixed twice (its leaf, then a frame in the middle of
 * its chain): counts what fix did since `before` as one sample, so tried,
 * recovered and broke stay counts of samples. */
void kf_dwarf_count_sample(kf_dwarf_t *d, const kf_dwarf_stats_t *before);

/* What an unwind from a chain's last frame found before, by that frame's
 * return address: nothing (a dead end, or a chain that ended where its
 * thread starts), or the thread's outermost frames
 * (_start and what glibc runs before main: the same for every sample, as
 * they do not depend on the stack above). The collector asks before it
 * unwinds from a last frame, and notes what it found, so that it does not
 * unwind the same few frames for every sample. kf_dwarf_ends returns -1
 * when nothing is known, else how many frames it wrote to out (0: a dead
 * end). */
#define KF_DWARF_MAX_END_FRAMES 4
int kf_dwarf_ends(const kf_dwarf_t *d, uint64_t ip, uint64_t *out);
void kf_dwarf_note_end(kf_dwarf_t *d, uint64_t ip, const uint64_t *frames, size_t n);

/* Where an address lies among the loaded objects. */
enum { KF_DWARF_NO_OBJECT, KF_DWARF_MAIN_PROGRAM, KF_DWARF_LIBRARY };
int kf_dwarf_object_kind(kf_dwarf_t *d, uint64_t ip);

#endif

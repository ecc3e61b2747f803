/*
 * jitframes: names a profile's JIT frames while its samples are collected,
 * when the code map still knows what ran at each sample's time.
 *
 * Each user-space address that JIT code held at the sample's time is
 * replaced by a token standing for that code's name (interned once per
 * profile), so stacks aggregate by function rather than by address, and
 * the names outlive the code map's entries. Tokens are non-canonical
 * addresses (0xfffe...) that no real frame or PERF_CONTEXT marker can be.
 *
 * resolve is called on the collector thread; names are read after the
 * collector has joined.
 */
#ifndef KF_JITFRAMES_H
#define KF_JITFRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "codemap.h"

typedef struct kf_jitframes kf_jitframes_t;

kf_jitframes_t *kf_jitframes_new(kf_codemap_t *map);
void kf_jitframes_free(kf_jitframes_t *j);

/* Copies the callchain ips[0..nr) of a sample taken at `time` into out,
 * with JIT frames as tokens. Returns how many were named, or -ENOMEM. */
int kf_jitframes_resolve(kf_jitframes_t *j, uint64_t time,
                         const uint64_t *ips, uint32_t nr, uint64_t *out);

int kf_jitframes_is_token(uint64_t ip);

/* The frame name of a token: "name file:line:col_[j]", with V8's tier
 * marker in front when keep_tier is set. NULL for an unknown token. */
const char *kf_jitframes_name(const kf_jitframes_t *j, uint64_t token,
                              int keep_tier);

#endif

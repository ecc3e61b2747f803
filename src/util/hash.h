/*
 * hash: the hash functions of kflame's tables, one copy of each. Each table
 * (open addressing over a power-of-two number of slots) keeps its own
 * probing; only the hashing lives here. Pure, static inline, no state:
 * callable on any thread.
 *
 *   kf_fnv_*     64-bit FNV-1a (Fowler-Noll-Vo): over bytes, a NUL-terminated
 *                string, or 64-bit words taken one per step. Cheap and good
 *                on short names; its high bits are well mixed, its low bits
 *                less so, which is why a table that masks the low bits mixes
 *                the result first (kf_hash_mix). The colours of the flame
 *                graphs come from it (svg.c): its values must never change.
 *   kf_hash_mix  the final mix of MurmurHash3 (fmix64's first rounds):
 *                spreads every input bit into the low bits.
 *   kf_hash_fib  Fibonacci hashing of one 64-bit key (an address): multiply
 *                by 2^64 / golden ratio, keep high bits, for a table of cap
 *                slots.
 */
#ifndef KF_HASH_H
#define KF_HASH_H

#include <stddef.h>
#include <stdint.h>

#define KF_FNV_OFFSET 1469598103934665603ULL
#define KF_FNV_PRIME 1099511628211ULL

/* FNV-1a over p[0..n), continuing from h (KF_FNV_OFFSET to begin). */
static inline uint64_t kf_fnv_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * KF_FNV_PRIME;
  return h;
}

/* FNV-1a over the bytes of a NUL-terminated string, continuing from h. */
static inline uint64_t kf_fnv_str(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * KF_FNV_PRIME;
  return h;
}

/* One FNV-1a step over a whole 64-bit word (an address), continuing from h. */
static inline uint64_t kf_fnv_word(uint64_t h, uint64_t w) { return (h ^ w) * KF_FNV_PRIME; }

/* FNV-1a steps over w[0..n), one per word. */
static inline uint64_t kf_fnv_words(uint64_t h, const uint64_t *w, size_t n) {
  for (size_t i = 0; i < n; i++) h = kf_fnv_word(h, w[i]);
  return h;
}

/* Spreads the high bits of h into the low ones, for masking. */
static inline uint64_t kf_hash_mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

/* The slot of key in a table of cap slots (a power of two, at most 2^32). */
static inline size_t kf_hash_fib(uint64_t key, size_t cap) {
  return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 32) & (cap - 1);
}

#endif

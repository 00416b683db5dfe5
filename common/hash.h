/* hash.h -- the project's hashes and mixers, header-only (common/: the lowest layer, below collectives/).
 *
 * Results depend on these bit for bit: recorded weight and decision hashes, checkpoints, the
 * majority initiator of every round and every injected delay. Never change a constant or an
 * operation here; a new need gets a new function.
 */
#ifndef COMMON_HASH_H
#define COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a 64 (offset basis and prime): a hash of bytes. Start from HASH_FNV1A64_INIT and chain
 * calls to hash several pieces as one stream. For identities (weights, decisions, arguments that
 * ranks compare), not for security. */
#define HASH_FNV1A64_PRIME 1099511628211ull
/* The start of every hash the project records (weights, decisions, checkpoints, descriptions):
 * 1469598103934665603, which is FNV's offset basis 14695981039346656037 with its last digit lost.
 * Kept as it is: recorded hashes and checkpoints depend on it. */
#define HASH_FNV1A64_INIT 1469598103934665603ull
/* FNV's own offset basis, for fingerprints that programs outside this project compute too (the
 * DDP mirror's initial-weights hash, in Python: trainer/ref/ddp_preset.py fnv1a64). */
#define HASH_FNV1A64_BASIS 0xCBF29CE484222325ull

/* One FNV-1a step with a whole value x as the unit (not its bytes one by one): h' = (h ^ x) * prime.
 * For hashes that were defined over values (libpcoll's rule.wait agreement). */
static inline uint64_t hash_fnv1a64_word(uint64_t h, uint64_t x) { return (h ^ x) * HASH_FNV1A64_PRIME; }

/* h extended by the n bytes at p (p may be NULL when n is 0). */
static inline uint64_t hash_fnv1a64(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = (const uint8_t *)p;
    for (size_t i = 0; i < n; i++) h = hash_fnv1a64_word(h, b[i]);
    return h;
}

/* splitmix64's output function with its increment (x + golden gamma, then the finaliser): a
 * bijective mixer of 64-bit words. Draws that every rank computes alike are built from it
 * (libpcoll's majority initiator, the injected delays): pure, so any rank can compute any other
 * rank's draw and a rerun repeats it. */
#define HASH_SPLITMIX64_GAMMA 0x9E3779B97F4A7C15ull /* the golden gamma: a splitmix64 stream's step */
static inline uint64_t hash_splitmix64(uint64_t x) {
    x += HASH_SPLITMIX64_GAMMA;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* MurmurHash3's 64-bit finaliser (no increment; 0 maps to 0): the controller's replay of majority
 * rounds draws its initiators from it (controller/predict.c); its decisions depend on it. */
static inline uint64_t hash_murmur3_fmix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

#endif

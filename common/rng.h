/* rng.h: deterministic random numbers with explicit state.
 *
 * Two kinds:
 *  - rng_t: a sequential generator (splitmix64) for parameter init and sampling; its whole
 *    state is one u64, so checkpoints store it as a decimal string.
 *  - rng_hash: a counter-based draw, hash(key, index). Dropout masks use it: the mask of
 *    element i at one dropout site is a pure function of (seed, step, site, i), so the
 *    backward pass regenerates the forward mask instead of storing it, and a resumed run
 *    draws exactly the masks an uninterrupted one would. */
#ifndef TXL_RNG_H
#define TXL_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s;
} rng_t;

static inline uint64_t rng_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rng_next(rng_t *r)
{
    r->s += 0x9e3779b97f4a7c15ULL;
    return rng_mix64(r->s);
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double rng_uniform(rng_t *r)
{
    return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller; one draw per call, the second value is dropped so the
 * state stays a single u64). */
double rng_normal(rng_t *r);

/* Key for a sub-stream: combines a parent key with a small integer label. */
static inline uint64_t rng_key(uint64_t parent, uint64_t label)
{
    return rng_mix64(parent ^ rng_mix64(label + 0x632be59bd9b4e019ULL));
}

#endif

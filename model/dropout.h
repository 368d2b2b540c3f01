/* dropout.h: inverted dropout with counter-based masks (see common/rng.h).
 *
 * Element i is kept iff rng_hash32(key, base + i) >= p * 2^32; kept elements are scaled by
 * 1/(1-p). The mask is never stored: backward recomputes it from the same key. `base`
 * offsets the counter so a slice of a larger tensor draws the same mask as the whole. */
#ifndef TXL_DROPOUT_H
#define TXL_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

/* y[n] = x[n] * mask / (1 - p); y may alias x. p == 0: plain copy (or no-op if aliased). */
void dropout_forward(float *y, const float *x, size_t n, float p, uint64_t key, uint64_t base);
/* dx[n] = dy[n] * mask / (1 - p) (the same map); dx may alias dy. */
void dropout_backward(float *dx, const float *dy, size_t n, float p, uint64_t key,
                      uint64_t base);
/* The threshold below which a draw drops the element. */
static inline uint32_t dropout_threshold(float p)
{
    double t = (double)p * 4294967296.0;
    return t >= 4294967295.0 ? 4294967295u : (uint32_t)t;
}

#endif

/* dropout.h: inverted dropout with counter-based masks (see common/rng.h).
 *
 * Element i of a dropout site is kept iff its 16-bit draw is >= round(p * 65536), where the
 * draws of elements 4g..4g+3 are the four 16-bit lanes (low first) of rng_mix64(key +
 * g * GOLDEN) with g = (base + i) / 4: one hash serves four elements. Kept elements are
 * scaled by 1/(1-p). The mask is never stored: backward recomputes it from the same key,
 * and `base` offsets the counter so a slice of a larger tensor draws the same mask as the
 * whole. p is resolved to 1/65536. */
#ifndef TXL_DROPOUT_H
#define TXL_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/rng.h"

#define DROPOUT_GOLDEN 0x9e3779b97f4a7c15ULL

/* y[n] = x[n] * mask / (1 - p); y may alias x. p == 0: plain copy (or no-op if aliased). */
void dropout_forward(float *y, const float *x, size_t n, float p, uint64_t key, uint64_t base);
/* dx[n] = dy[n] * mask / (1 - p) (the same map); dx may alias dy. */
void dropout_backward(float *dx, const float *dy, size_t n, float p, uint64_t key,
                      uint64_t base);

/* Fused forms, each one pass instead of two (the same float operations, so bitwise equal
 * to the unfused calls); y may alias x or res:
 * dropout_add:           y = res + dropout(x)           (residual connections)
 * dropout_backward_copy: copy = dy; dx = dropout(dy)   (a gradient that forks at a residual)
 * dropout_relu:          y = dropout(relu(x))            (the feed-forward activation) */
void dropout_add(float *y, const float *res, const float *x, size_t n, float p, uint64_t key,
                 uint64_t base);
void dropout_backward_copy(float *dx, float *copy, const float *dy, size_t n, float p,
                           uint64_t key, uint64_t base);
void dropout_relu(float *y, const float *x, size_t n, float p, uint64_t key, uint64_t base);
/* Backward of a = dropout_relu(z), from its output alone (a != 0 exactly where both relu and
 * mask pass): dz[n] = da[n] / (1-p) where a != 0, else 0. dz may alias da. */
void dropout_relu_backward(float *dz, const float *da, const float *a, size_t n, float p);

/* The same, writing the fp32 output's bf16 rounding too (yh, dxh, dzh: NULL = not): the
 * input of a bf16 product, rounded where it is made (gemm.h, linear_round). */
void dropout_relu_h(float *y, uint16_t *yh, const float *x, size_t n, float p, uint64_t key,
                    uint64_t base);
void dropout_backward_copy_h(float *dx, uint16_t *dxh, float *copy, const float *dy, size_t n,
                             float p, uint64_t key, uint64_t base);
void dropout_relu_backward_h(float *dz, uint16_t *dzh, const float *da, const float *a,
                             size_t n, float p);

/* The 16-bit threshold below which a draw drops the element. */
static inline uint32_t dropout_threshold(float p)
{
    double t = (double)p * 65536.0 + 0.5;
    return t >= 65536.0 ? 65536u : (uint32_t)t;
}

/* The 16-bit draw of element idx (global index base + i). */
static inline uint32_t dropout_draw(uint64_t key, uint64_t idx)
{
    uint64_t h = rng_mix64(key + (idx >> 2) * DROPOUT_GOLDEN);
    return (uint32_t)(h >> ((idx & 3) * 16)) & 0xffffu;
}

/* Fills keep[k] (0/1) for elements base..base+n-1 in groups sharing one hash: the helper
 * the kernels use to stay fast (one hash per four elements). */
static inline void dropout_mask4(uint8_t keep[4], uint64_t key, uint64_t group, uint32_t thr)
{
    uint64_t h = rng_mix64(key + group * DROPOUT_GOLDEN);
    for (int k = 0; k < 4; k++)
        keep[k] = ((uint32_t)(h >> (16 * k)) & 0xffffu) >= thr;
}

#endif

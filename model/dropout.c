/* dropout.c: see dropout.h. Forward and backward are the same elementwise map; the fused
 * variants only add what the caller would otherwise do in another pass over the data. */
#include "dropout.h"

#include <string.h>

#include "../common/par.h"
#include "gemm_bf16.h"

/* What the fused map does around the mask, element by element (always inlined with constant
 * flags, so each public function gets its own straight-line loop):
 *   v = x[i]; copy[i] = v (if copy); v = relu(v) (if relu); v = keep ? v / (1-p) : 0 (p > 0);
 *   y[i] = res ? res[i] + v : v.
 * y may alias x or res. */
typedef struct {
    float *y;
    const float *x, *res;
    float *copy;
    int relu;
    uint16_t *yh; /* y rounded to bf16 too, or NULL */
} drop_op;

static inline float drop_in(const drop_op *o, size_t i)
{
    float v = o->x[i];
    if (o->copy)
        o->copy[i] = v;
    if (o->relu)
        v = v > 0.0f ? v : 0.0f;
    return v;
}

static inline void drop_out(const drop_op *o, size_t i, float v)
{
    float y = o->res ? o->res[i] + v : v;
    o->y[i] = y;
    if (o->yh)
        o->yh[i] = bf16_from_f32(y);
}

/* draw[4j + k] = 16-bit lane k (low first) of h[j], j < n: on a little-endian machine the
 * lanes already lie in that order in memory */
static inline void split16(uint16_t *draw, const uint64_t *h, int n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(draw, h, (size_t)n * sizeof *h);
#else
    for (int j = 0; j < 4 * n; j++)
        draw[j] = (uint16_t)(h[j >> 2] >> ((j & 3) * 16));
#endif
}

static inline __attribute__((always_inline)) void drop_map(drop_op o, size_t n, float p,
                                                           uint64_t key, uint64_t base)
{
    if (p <= 0.0f) {
        if (o.y == o.x && !o.copy && !o.relu && !o.res && !o.yh)
            return;
        if (n <= 16384) { /* no parallel region: libgomp allocates a team per region */
            for (size_t i = 0; i < n; i++)
                drop_out(&o, i, drop_in(&o, i));
            return;
        }
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            drop_out(&o, i, drop_in(&o, i));
        return;
    }
    const uint32_t thr = dropout_threshold(p);
    const float scale = 1.0f / (1.0f - p);
    /* whole groups of four global indices [g0*4, g1*4), plus partial groups at the ends */
    const uint64_t first = base, last = base + n; /* [first, last) */
    const uint64_t g0 = (first + 3) / 4, g1 = last / 4;
    if (g1 <= g0) {
        for (size_t i = 0; i < n; i++) {
            float v = drop_in(&o, i);
            drop_out(&o, i, dropout_draw(key, base + i) >= thr ? v * scale : 0.0f);
        }
        return;
    }
    for (uint64_t idx = first; idx < g0 * 4; idx++) {
        float v = drop_in(&o, idx - base);
        drop_out(&o, idx - base, dropout_draw(key, idx) >= thr ? v * scale : 0.0f);
    }
    for (uint64_t idx = g1 * 4; idx < last; idx++) {
        float v = drop_in(&o, idx - base);
        drop_out(&o, idx - base, dropout_draw(key, idx) >= thr ? v * scale : 0.0f);
    }
    /* chunks of 64 groups: the hashes first, then their 256 16-bit draws as an array, then
     * the 256 elements they cover; each of the three loops vectorises (the element loop reads
     * draw[j] where a shift by (j & 3) * 16 would keep it scalar) */
    enum { CG = 64 };
    const long ng = (long)(g1 - g0), nchunk = (ng + CG - 1) / CG;
#pragma omp parallel for schedule(static) if (n > 16384)
    for (long c = 0; c < nchunk; c++) {
        uint64_t h[CG];
        uint16_t draw[4 * CG];
        const uint64_t gs = g0 + (uint64_t)c * CG;
        const int cg = (long)(c + 1) * CG <= ng ? CG : (int)(ng - c * CG);
        for (int j = 0; j < cg; j++)
            h[j] = rng_mix64(key + (gs + (uint64_t)j) * DROPOUT_GOLDEN);
        split16(draw, h, cg);
        const size_t i0 = (size_t)(gs * 4 - base);
        for (int j = 0; j < 4 * cg; j++) {
            float v = drop_in(&o, i0 + (size_t)j);
            drop_out(&o, i0 + (size_t)j, draw[j] >= thr ? v * scale : 0.0f);
        }
    }
}

void dropout_forward(float *y, const float *x, size_t n, float p, uint64_t key, uint64_t base)
{
    drop_map((drop_op){.y = y, .x = x}, n, p, key, base);
}

void dropout_backward(float *dx, const float *dy, size_t n, float p, uint64_t key,
                      uint64_t base)
{
    drop_map((drop_op){.y = dx, .x = dy}, n, p, key, base);
}

void dropout_add(float *y, const float *res, const float *x, size_t n, float p, uint64_t key,
                 uint64_t base)
{
    drop_map((drop_op){.y = y, .x = x, .res = res}, n, p, key, base);
}

void dropout_backward_copy(float *dx, float *copy, const float *dy, size_t n, float p,
                           uint64_t key, uint64_t base)
{
    drop_map((drop_op){.y = dx, .x = dy, .copy = copy}, n, p, key, base);
}

void dropout_backward_copy_h(float *dx, uint16_t *dxh, float *copy, const float *dy, size_t n,
                             float p, uint64_t key, uint64_t base)
{
    if (!dxh)
        dropout_backward_copy(dx, copy, dy, n, p, key, base);
    else
        drop_map((drop_op){.y = dx, .x = dy, .copy = copy, .yh = dxh}, n, p, key, base);
}

void dropout_relu(float *y, const float *x, size_t n, float p, uint64_t key, uint64_t base)
{
    drop_map((drop_op){.y = y, .x = x, .relu = 1}, n, p, key, base);
}

void dropout_relu_h(float *y, uint16_t *yh, const float *x, size_t n, float p, uint64_t key,
                    uint64_t base)
{
    if (!yh)
        dropout_relu(y, x, n, p, key, base);
    else
        drop_map((drop_op){.y = y, .x = x, .relu = 1, .yh = yh}, n, p, key, base);
}

void dropout_relu_backward(float *dz, const float *da, const float *a, size_t n, float p)
{
    dropout_relu_backward_h(dz, NULL, da, a, n, p);
}

void dropout_relu_backward_h(float *dz, uint16_t *dzh, const float *da, const float *a,
                             size_t n, float p)
{
    float scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
    if (!dzh) {
#pragma omp parallel for schedule(static) if (n > 16384)
        for (size_t i = 0; i < n; i++)
            dz[i] = a[i] != 0.0f ? da[i] * scale : 0.0f;
        return;
    }
#pragma omp parallel for schedule(static) if (n > 16384)
    for (size_t i = 0; i < n; i++) {
        float v = a[i] != 0.0f ? da[i] * scale : 0.0f;
        dz[i] = v;
        dzh[i] = bf16_from_f32(v);
    }
}

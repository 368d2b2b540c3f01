/* dropout.c: see dropout.h. Forward and backward are the same elementwise map. */
#include "dropout.h"

#include <string.h>

#include "../common/par.h"

void dropout_forward(float *y, const float *x, size_t n, float p, uint64_t key, uint64_t base)
{
    if (p <= 0.0f) {
        if (y != x)
            memcpy(y, x, n * sizeof *y);
        return;
    }
    const uint32_t thr = dropout_threshold(p);
    const float scale = 1.0f / (1.0f - p);
    /* whole groups of four global indices [g0*4, g1*4), plus partial groups at the ends */
    const uint64_t first = base, last = base + n; /* [first, last) */
    const uint64_t g0 = (first + 3) / 4, g1 = last / 4;
    if (g1 <= g0) {
        for (size_t i = 0; i < n; i++)
            y[i] = dropout_draw(key, base + i) >= thr ? x[i] * scale : 0.0f;
        return;
    }
    for (uint64_t idx = first; idx < g0 * 4; idx++)
        y[idx - base] = dropout_draw(key, idx) >= thr ? x[idx - base] * scale : 0.0f;
    for (uint64_t idx = g1 * 4; idx < last; idx++)
        y[idx - base] = dropout_draw(key, idx) >= thr ? x[idx - base] * scale : 0.0f;
    /* chunks of 64 groups: the hashes first (a loop the compiler vectorises), then the
     * 256 elements they cover */
    enum { CG = 64 };
    const long ng = (long)(g1 - g0), nchunk = (ng + CG - 1) / CG;
#pragma omp parallel for schedule(static) if (n > 16384)
    for (long c = 0; c < nchunk; c++) {
        uint64_t h[CG];
        const uint64_t gs = g0 + (uint64_t)c * CG;
        const int cg = (long)(c + 1) * CG <= ng ? CG : (int)(ng - c * CG);
        for (int j = 0; j < cg; j++)
            h[j] = rng_mix64(key + (gs + (uint64_t)j) * DROPOUT_GOLDEN);
        const size_t i0 = (size_t)(gs * 4 - base);
        const float *xc = x + i0;
        float *yc = y + i0;
        for (int j = 0; j < 4 * cg; j++) {
            uint32_t draw = (uint32_t)(h[j >> 2] >> ((j & 3) * 16)) & 0xffffu;
            yc[j] = draw >= thr ? xc[j] * scale : 0.0f;
        }
    }
}

void dropout_backward(float *dx, const float *dy, size_t n, float p, uint64_t key,
                      uint64_t base)
{
    dropout_forward(dx, dy, n, p, key, base);
}

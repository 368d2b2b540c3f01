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
    const long ng = (long)(g1 - g0);
#pragma omp parallel for schedule(static) if (n > 16384)
    for (long g = 0; g < ng; g++) {
        uint8_t keep[4];
        dropout_mask4(keep, key, g0 + (uint64_t)g, thr);
        size_t i = (size_t)((g0 + (uint64_t)g) * 4 - base);
        for (int k = 0; k < 4; k++)
            y[i + k] = keep[k] ? x[i + k] * scale : 0.0f;
    }
}

void dropout_backward(float *dx, const float *dy, size_t n, float p, uint64_t key,
                      uint64_t base)
{
    dropout_forward(dx, dy, n, p, key, base);
}

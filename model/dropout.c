/* dropout.c: see dropout.h. Forward and backward are the same elementwise map. */
#include "dropout.h"

#include <string.h>

#include "../common/par.h"
#include "../common/rng.h"

void dropout_forward(float *y, const float *x, size_t n, float p, uint64_t key, uint64_t base)
{
    if (p <= 0.0f) {
        if (y != x)
            memcpy(y, x, n * sizeof *y);
        return;
    }
    uint32_t thr = dropout_threshold(p);
    float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static) if (n > 16384)
    for (size_t i = 0; i < n; i++)
        y[i] = rng_hash32(key, base + i) >= thr ? x[i] * scale : 0.0f;
}

void dropout_backward(float *dx, const float *dy, size_t n, float p, uint64_t key,
                      uint64_t base)
{
    dropout_forward(dx, dy, n, p, key, base);
}

/* ff.c: see ff.h. */
#include "ff.h"

#include "../common/par.h"
#include "../common/rng.h"
#include "dropout.h"

void ff_act_forward(float *a, const float *z, size_t n, float p, uint64_t key, uint64_t base)
{
    dropout_relu(a, z, n, p, key, base); /* one pass; one hash per four elements */
}

void ff_act_backward(float *dz, const float *da, const float *a, size_t n, float p)
{
    float scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
#pragma omp parallel for schedule(static) if (n > 16384)
    for (size_t i = 0; i < n; i++)
        dz[i] = a[i] != 0.0f ? da[i] * scale : 0.0f;
}

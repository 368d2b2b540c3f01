/* embedding.c: see embedding.h. */
#include "embedding.h"

#include <stddef.h>

void embedding_forward(float *h, const float *E, const uint8_t *tok, int n, int d, float scale)
{
    for (int i = 0; i < n; i++) {
        const float *e = E + (size_t)tok[i] * d;
        float *hi = h + (size_t)i * d;
        for (int c = 0; c < d; c++)
            hi[c] = e[c] * scale;
    }
}

void embedding_backward(float *dE, const float *dh, const uint8_t *tok, int n, int d,
                        float scale)
{
    for (int i = 0; i < n; i++) {
        float *e = dE + (size_t)tok[i] * d;
        const float *g = dh + (size_t)i * d;
        for (int c = 0; c < d; c++)
            e[c] += g[c] * scale;
    }
}

/* embedding.c: see embedding.h. */
#include "embedding.h"

#include <stddef.h>

#include "../common/par.h"

static inline void emb_row(float *h, const float *E, const txl_tok *tok, int i, int d,
                           float scale)
{
    const float *e = E + (size_t)tok[i] * d;
    float *hi = h + (size_t)i * d;
    for (int c = 0; c < d; c++)
        hi[c] = e[c] * scale;
}

void embedding_forward(float *h, const float *E, const txl_tok *tok, int n, int d, float scale)
{
    if ((size_t)n * d <= 8192) { /* no parallel region (libgomp allocates a team per region) */
        for (int i = 0; i < n; i++)
            emb_row(h, E, tok, i, d, scale);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        emb_row(h, E, tok, i, d, scale);
}

void embedding_backward(float *dE, const float *dh, const txl_tok *tok, int n, int d,
                        float scale)
{
    /* rows of dE repeat, so threads split the columns: each dE element is summed by one
     * thread over the tokens in order */
    int nt = (size_t)n * d > 8192 ? par_threads() : 1;
#pragma omp parallel num_threads(nt)
    {
        size_t c0, c1;
        par_range((size_t)d, par_thread_id(), nt, &c0, &c1);
        for (int i = 0; i < n; i++) {
            float *e = dE + (size_t)tok[i] * d;
            const float *g = dh + (size_t)i * d;
            for (size_t c = c0; c < c1; c++)
                e[c] += g[c] * scale;
        }
    }
}

/* embedding.h: token embedding lookup scaled by sqrt(d) (DESIGN.md §3 step 1). */
#ifndef TXL_EMBEDDING_H
#define TXL_EMBEDDING_H

#include <stdint.h>

/* h[n,d] = E[tok[i]] * scale, E [V,d]. Tokens are bytes, always < V = 256. */
void embedding_forward(float *h, const float *E, const uint8_t *tok, int n, int d, float scale);
/* dE[tok[i]] += dh[i] * scale. */
void embedding_backward(float *dE, const float *dh, const uint8_t *tok, int n, int d,
                        float scale);

#endif

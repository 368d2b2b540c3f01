/* embedding.h: token embedding lookup scaled by sqrt(d) (doc/design.md, "The model" step 1). */
#ifndef TXL_EMBEDDING_H
#define TXL_EMBEDDING_H

#include <stdint.h>

#include "../common/tok.h"

/* h[n,d] = E[tok[i]] * scale, E [V,d]; every tok[i] < V (bytes, and the anchors a model was
 * trained with: the data layer makes them). */
void embedding_forward(float *h, const float *E, const txl_tok *tok, int n, int d, float scale);
/* dE[tok[i]] += dh[i] * scale. */
void embedding_backward(float *dE, const float *dh, const txl_tok *tok, int n, int d,
                        float scale);

#endif

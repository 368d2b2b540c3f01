/* xent.h: tied output layer and cross-entropy (doc/design.md, "The model" step 3).
 *
 *   logits[rows,V] = h[rows,d] @ E[V,d]^T + b[V]
 *   loss_r = logsumexp(logits_r) - logits_r[y_r]   (nats)
 */
#ifndef TXL_XENT_H
#define TXL_XENT_H

#include <stdint.h>

#include "../common/tok.h"

/* Fills logits and lse[rows] (log-sum-exp per row, cached for the backward); writes the
 * per-row loss to row_loss[rows] and returns the SUM of the losses in nats (accumulated in
 * double, in row order). y may be NULL (no targets: no loss, returns 0; row_loss unused). */
double xent_forward(float *logits, float *lse, float *row_loss, const float *h, const float *E,
                    const float *b, const txl_tok *y, int rows, int d, int V);

/* Backward of scale * sum_r loss_r (scale = 1/rows for a mean). Turns `logits` in place into
 * dlogits = scale * (softmax - onehot(y)), then dh[rows,d] = dlogits @ E (overwritten),
 * dE += dlogits^T @ h, db += colsum(dlogits). */
void xent_backward(float *dh, float *dE, float *db, float *logits, const float *lse,
                   const float *h, const float *E, const txl_tok *y, int rows, int d, int V,
                   float scale);

#endif

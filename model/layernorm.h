/* layernorm.h: LayerNorm over the last dimension (eps 1e-5, biased variance), as
 * torch.nn.LayerNorm. Grads follow the += rule for dgamma/dbeta; dx is overwritten
 * or added according to `accumulate`. */
#ifndef TXL_LAYERNORM_H
#define TXL_LAYERNORM_H

#define LN_EPS 1e-5

/* y[rows,d] = xhat * gamma + beta, xhat = (x - mean) * rstd, rstd = 1/sqrt(var + eps).
 * Caches xhat[rows,d] and rstd[rows] for the backward (either may be NULL in inference).
 * y may alias x. Mean and variance are accumulated in double. */
void layernorm_forward(float *y, float *xhat, float *rstd, const float *x, const float *gamma,
                       const float *beta, int rows, int d);

/* dx[rows,d] (=, or += when accumulate) rstd * (g - mean(g) - xhat * mean(g * xhat)) with
 * g = dy * gamma; dgamma[d] += sum_rows dy * xhat; dbeta[d] += sum_rows dy. dx may be NULL
 * (parameter gradients only, e.g. for memory rows that carry no gradient). */
void layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                        const float *xhat, const float *rstd, const float *gamma, int rows,
                        int d, int accumulate);

#endif

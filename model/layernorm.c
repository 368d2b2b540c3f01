/* layernorm.c: see layernorm.h. Row sums run in double: d is up to a few thousand and the
 * backward's two means are differences of similar numbers. */
#include "layernorm.h"

#include "../common/par.h"
#include "../common/vmath.h"

#include <math.h>
#include <stddef.h>

static inline void ln_row(float *y, float *xhat, float *rstd, const float *x,
                          const float *gamma, const float *beta, int r, int d)
{
    const float *xr = x + (size_t)r * d;
    double mean = vm_sum(xr, (size_t)d) / d;
    double var = vm_sumsq(xr, (size_t)d, mean) / d;
    float rs = (float)(1.0 / sqrt(var + LN_EPS));
    float m = (float)mean;
    float *yr = y + (size_t)r * d;
    float *hr = xhat ? xhat + (size_t)r * d : NULL;
    for (int c = 0; c < d; c++) {
        float h = (xr[c] - m) * rs;
        if (hr)
            hr[c] = h;
        yr[c] = h * gamma[c] + beta[c];
    }
    if (rstd)
        rstd[r] = rs;
}

void layernorm_forward(float *y, float *xhat, float *rstd, const float *x, const float *gamma,
                       const float *beta, int rows, int d)
{
    /* a few rows (a decoded token's) run outside any parallel region: libgomp allocates
     * a team for every region it enters, even of one thread */
    if ((size_t)rows * d <= 8192) {
        for (int r = 0; r < rows; r++)
            ln_row(y, xhat, rstd, x, gamma, beta, r, d);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
        ln_row(y, xhat, rstd, x, gamma, beta, r, d);
}

void layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                        const float *xhat, const float *rstd, const float *gamma, int rows,
                        int d, int accumulate)
{
    int nt = (size_t)rows * d > 8192 ? par_threads() : 1;
    /* dgamma, dbeta first (dx may alias dy): each thread owns a block of columns and sums
     * them over all rows in order, so no partial sums are combined */
#pragma omp parallel num_threads(nt)
    {
        size_t c0, c1;
        par_range((size_t)d, par_thread_id(), nt, &c0, &c1);
        for (int r = 0; r < rows; r++) {
            const float *dyr = dy + (size_t)r * d, *hr = xhat + (size_t)r * d;
            for (size_t c = c0; c < c1; c++) {
                dgamma[c] += dyr[c] * hr[c];
                dbeta[c] += dyr[c];
            }
        }
    }
    if (!dx)
        return;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int r = 0; r < rows; r++) {
        const float *dyr = dy + (size_t)r * d;
        const float *hr = xhat + (size_t)r * d;
        /* sums in VM_LANES independent lanes (see vmath.h) */
        double ag[VM_LANES] = {0}, agh[VM_LANES] = {0}, sg = 0, sgh = 0;
        int c = 0;
        for (; c + VM_LANES <= d; c += VM_LANES)
            for (int k = 0; k < VM_LANES; k++) {
                double g = (double)dyr[c + k] * gamma[c + k];
                ag[k] += g;
                agh[k] += g * hr[c + k];
            }
        for (int k = 0; k < VM_LANES; k++) {
            sg += ag[k];
            sgh += agh[k];
        }
        for (; c < d; c++) {
            double g = (double)dyr[c] * gamma[c];
            sg += g;
            sgh += g * hr[c];
        }
        float mg = (float)(sg / d), mgh = (float)(sgh / d), rs = rstd[r];
        float *dxr = dx + (size_t)r * d;
        for (int c = 0; c < d; c++) {
            float v = rs * (dyr[c] * gamma[c] - mg - hr[c] * mgh);
            dxr[c] = accumulate ? dxr[c] + v : v;
        }
    }
}

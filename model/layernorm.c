/* layernorm.c: see layernorm.h. Row sums run in double: d is up to a few thousand and the
 * backward's two means are differences of similar numbers. */
#include "layernorm.h"

#include "../common/par.h"

#include <math.h>
#include <stddef.h>

void layernorm_forward(float *y, float *xhat, float *rstd, const float *x, const float *gamma,
                       const float *beta, int rows, int d)
{
#pragma omp parallel for schedule(static) if ((size_t)rows * d > 8192)
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * d;
        double mean = 0, var = 0;
        for (int c = 0; c < d; c++)
            mean += xr[c];
        mean /= d;
        for (int c = 0; c < d; c++) {
            double t = xr[c] - mean;
            var += t * t;
        }
        var /= d;
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
        double sg = 0, sgh = 0;
        for (int c = 0; c < d; c++) {
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

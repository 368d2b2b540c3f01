/* layernorm.c: see layernorm.h. Row sums run in double: d is up to a few thousand and the
 * backward's two means are differences of similar numbers. */
#include "layernorm.h"

#include <math.h>
#include <stddef.h>

void layernorm_forward(float *y, float *xhat, float *rstd, const float *x, const float *gamma,
                       const float *beta, int rows, int d)
{
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
    for (int r = 0; r < rows; r++) {
        const float *dyr = dy + (size_t)r * d;
        const float *hr = xhat + (size_t)r * d;
        double sg = 0, sgh = 0;
        for (int c = 0; c < d; c++) {
            double g = (double)dyr[c] * gamma[c];
            sg += g;
            sgh += g * hr[c];
            dgamma[c] += dyr[c] * hr[c];
            dbeta[c] += dyr[c];
        }
        if (!dx)
            continue;
        float mg = (float)(sg / d), mgh = (float)(sgh / d), rs = rstd[r];
        float *dxr = dx + (size_t)r * d;
        for (int c = 0; c < d; c++) {
            float v = rs * (dyr[c] * gamma[c] - mg - hr[c] * mgh);
            dxr[c] = accumulate ? dxr[c] + v : v;
        }
    }
}

/* xent.c: see xent.h. Row reductions: the maximum, the sum of exps in double; exps through
 * vmath's vm_expf_neg, as the attention's and the adaptive softmax's. */
#include "xent.h"

#include <math.h>
#include <stddef.h>

#include "../common/vmath.h"
#include "gemm.h"

double xent_forward(float *logits, float *lse, float *row_loss, const float *h, const float *E,
                    const float *b, const txl_tok *y, int rows, int d, int V)
{
    linear_forward(logits, h, E, b, rows, V, d, 0);
#pragma omp parallel for schedule(static) if (rows > 64)
    for (int r = 0; r < rows; r++) {
        const float *z = logits + (size_t)r * V;
        float mx = vm_max(z, V);
        double l = mx + log(vm_exp_sum_keep(z, V, mx));
        if (lse)
            lse[r] = (float)l;
        if (y)
            row_loss[r] = (float)(l - z[y[r]]);
    }
    double total = 0; /* summed in row order: the same total for any thread count */
    for (int r = 0; y && r < rows; r++)
        total += row_loss[r];
    return total;
}

void xent_backward(float *dh, float *dE, float *db, float *logits, const float *lse,
                   const float *h, const float *E, const txl_tok *y, int rows, int d, int V,
                   float scale)
{
#pragma omp parallel for schedule(static) if (rows > 64)
    for (int r = 0; r < rows; r++) {
        float *z = logits + (size_t)r * V;
        float l = lse[r];
        for (int v = 0; v < V; v++) /* z <= l up to rounding: vm_expf_neg's range */
            z[v] = vm_expf_neg(z[v] - l) * scale;
        z[y[r]] -= scale;
    }
    linear_backward(dh, dE, db, logits, h, E, rows, V, d, 0);
}

/* gemm.c: cblas_sgemm wrapper, its naive twin, and the linear layer pair (see gemm.h).
 * Gradients follow the += rule: dW and dbias are added to; callers zero them. */
#include "gemm.h"

#include <cblas.h>

void gemm(float *C, const float *A, const float *B, int M, int N, int K,
          int trans_a, int trans_b, float alpha, float beta, int lda, int ldb, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) { /* empty inner product: C = beta * C */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

void gemm_naive(float *C, const float *A, const float *B, int M, int N, int K,
                int trans_a, int trans_b, float alpha, float beta, int lda, int ldb, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) {
                double a = trans_a ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                double b = trans_b ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += a * b;
            }
            float *c = &C[(size_t)i * ldc + j];
            *c = (float)(alpha * s + (beta == 0.0f ? 0.0 : (double)beta * *c));
        }
}

void linear_forward(float *y, const float *x, const float *W, const float *bias,
                    int rows, int out, int in, int accumulate)
{
    float beta = accumulate ? 1.0f : 0.0f;
    if (bias) {
        for (int r = 0; r < rows; r++) {
            float *yr = y + (size_t)r * out;
            for (int o = 0; o < out; o++)
                yr[o] = accumulate ? yr[o] + bias[o] : bias[o];
        }
        beta = 1.0f;
    }
    gemm(y, x, W, rows, out, in, 0, 1, 1.0f, beta, in, in, out);
}

void linear_backward(float *dx, float *dW, float *dbias, const float *dy, const float *x,
                     const float *W, int rows, int out, int in, int accumulate_dx)
{
    if (dx)
        gemm(dx, dy, W, rows, in, out, 0, 0, 1.0f, accumulate_dx ? 1.0f : 0.0f, out, in, in);
    gemm(dW, dy, x, out, in, rows, 1, 0, 1.0f, 1.0f, out, in, in);
    if (dbias)
        for (int r = 0; r < rows; r++) {
            const float *d = dy + (size_t)r * out;
            for (int o = 0; o < out; o++)
                dbias[o] += d[o];
        }
}

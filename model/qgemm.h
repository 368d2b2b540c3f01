/* qgemm.h: matrix products with a stored (bf16 or q8) weight matrix and fp32 activations,
 * for decoding's few rows (doc/design.md, "Quantized checkpoints"): no library offers int8
 * weights times fp32 activations, so these are txl's own.
 *
 *   C[M, N] = alpha A[M, K] W^T + beta C,   W [N, K] a qmat (qmat.h), row-major as gemm.h's.
 *
 * Each block of W is dequantized exactly (quant.h: q s is a float) in registers and
 * multiplied with the fp32 rows of A, so the result is an fp32 product of the dequantized
 * weights, with one fused multiply-add per term, in a fixed order (qgemm.c says which: q8
 * reads its panels of 16 rows, bf16 the rows). Every kernel computes that same sum: the
 * AVX-512 and AVX2 ones (picked at run time by what the CPU has, whatever the build) and
 * the plain C twin (fmaf) give the same bits.
 * Each weight is read once per call for up to QG_ROWS rows of A (the streams of a decoding
 * step); more rows take it again per QG_ROWS. One thread. */
#ifndef TXL_QGEMM_H
#define TXL_QGEMM_H

#include "qmat.h"

#define QG_ROWS 4

void qgemm(float *C, const float *A, const qmat *W, int M, float alpha, float beta, int lda,
           int ldc);

/* y[rows, out] = x[rows, in] W^T (+ bias[out] when bias != NULL), W [out, in] stored. */
void qlinear(float *y, const float *x, const qmat *W, const float *bias, int rows);

/* y[N] = a[K] W for W bf16 [K, N] (row stride ldw): attention's weighted values over a
 * bf16 cache. Each element's terms in k order, one fma each, on every kernel. */
void qgemv_t(float *y, const float *a, const uint16_t *W, int K, int N, int ldw);

/* The kernel in use: "avx512", "avx2" or "c". qgemm_use picks one by name for tests and
 * benchmarks ("c" always works; a name the CPU cannot run is refused): 0, or -1. */
const char *qgemm_kernel(void);
int qgemm_use(const char *name);

#endif

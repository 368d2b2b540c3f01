/* gemm.h: the one GEMM entry point of txl: OpenBLAS in fp32, oneDNN in bf16 (gemm_bf16.h)
 * when gemm_set_precision(GEMM_BF16) is in force.
 *
 * Convention: row-major everywhere. A linear layer's weight W is [out, in] as in PyTorch,
 * so y = x @ W^T is gemm(y, x, W, rows, out, in, 0, 1, ...). Leading dimensions are the
 * row strides in floats, which lets a call address one head's slice of a wider matrix.
 *
 *   C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C
 *   op(A) = A ([M,K], lda) or A^T (A stored [K,M], lda); likewise op(B).
 */
#ifndef TXL_GEMM_H
#define TXL_GEMM_H

#include <stddef.h>
#include <stdint.h>

void gemm(float *C, const float *A, const float *B, int M, int N, int K,
          int trans_a, int trans_b, float alpha, float beta, int lda, int ldb, int ldc);

/* gemm() with A and B also given in bf16 (Ah, Bh: their roundings, laid out as A and B
 * with the same leading dimensions, or NULL), which a bf16 product reads instead of
 * rounding A and B. An operand may be given in bf16 only (A or B NULL, its twin not): an
 * fp32 product (the precision, a small product, oneDNN refused) then widens it exactly. */
void gemm_x(float *C, const float *A, const uint16_t *Ah, const float *B, const uint16_t *Bh,
            int M, int N, int K, int trans_a, int trans_b, float alpha, float beta, int lda,
            int ldb, int ldc);

/* The precision of gemm()'s products (doc/design.md, "Precision"): GEMM_FP32 (OpenBLAS,
 * the default) or GEMM_BF16 (oneDNN: operands rounded to bf16, sums in fp32; products of
 * fewer than 2 rows or columns, or below GEMM_BF16_MIN multiply-adds, stay fp32).
 * Process-wide: set it outside parallel regions, between steps. GEMM_BF16 starts oneDNN's
 * engine; returns -1 (precision unchanged) if it cannot. The CPU's support is the caller's
 * question (common/cpu.h): without AVX512_BF16 or AMX, oneDNN emulates bf16 slowly. */
typedef enum { GEMM_FP32, GEMM_BF16 } gemm_precision;
#define GEMM_BF16_MIN (1L << 15)
int gemm_set_precision(gemm_precision p);
gemm_precision gemm_get_precision(void);

/* C[M,N] = alpha A[M,K] B[N,K]^T + beta C for a few rows of A (one-token decoding of M
 * streams: y = x W^T). sgemm packs all of B for every call, which costs more than the
 * product when a few rows use it; up to 16 rows (on one thread) take txl's own kernel,
 * which reads each row of B once for all rows of A (measured, S's weights: 2 rows 2x and
 * 8 rows 1.9x faster than sgemm, 16 rows 1.3x; at 32 sgemm is ahead and gets them), other
 * shapes gemm(). A separate entry, not a case of gemm(): the forward and backward of
 * training and evaluation keep sgemm's rounding (resumed runs repeat their losses bit for
 * bit). */
void gemm_few(float *C, const float *A, const float *B, int M, int N, int K, float alpha,
              float beta, int lda, int ldb, int ldc);

/* Thread-seconds spent in gemm() and gemm_few() since the start, over all threads (a call
 * split over n threads counts n times its wall time). Its growth over a stretch of work,
 * divided by threads x wall seconds, is the GEMM share of that work. Read it outside
 * parallel regions. */
double gemm_thread_seconds(void);

/* Naive triple loop with double accumulation: the test twin of gemm(). */
void gemm_naive(float *C, const float *A, const float *B, int M, int N, int K,
                int trans_a, int trans_b, float alpha, float beta, int lda, int ldb, int ldc);

/* y[rows,out] (+)= x[rows,in] @ W[out,in]^T (+ bias[out] when bias != NULL).
 * accumulate = 0 overwrites y, 1 adds to it. Contiguous rows. */
void linear_forward(float *y, const float *x, const float *W, const float *bias,
                    int rows, int out, int in, int accumulate);
/* In bf16 precision, x [rows, in] (contiguous) rounded into xh and xh returned: the bf16
 * input of the linear_forward_x / linear_backward_x calls that take x; else (fp32, or xh
 * NULL) NULL, and they read x. */
const uint16_t *linear_round(uint16_t *xh, const float *x, int rows, int in);
/* Whether the product of x [rows, in] and W [out, in]^T (and its backward's dW) runs in
 * bf16, reading only xh, in the precision of the moment (unless oneDNN refuses it) */
int linear_in_bf16(int rows, int out, int in);
/* linear_forward with x also given in bf16 (xh from linear_round, or NULL); x may be NULL
 * when xh is not (gemm_x's rule: widened for an fp32 product) */
void linear_forward_x(float *y, const float *x, const uint16_t *xh, const float *W,
                      const float *bias, int rows, int out, int in, int accumulate);
/* yh [rows, out] = bf16(relu(x W^T + bias)) by the bf16 product itself (inference's
 * feed-forward: no fp32 activation, no pass over it): 0, or -1 when it does not run in bf16
 * (fp32 precision, a small product, oneDNN refused), having written nothing. */
int linear_relu_h(uint16_t *yh, const float *x, const uint16_t *xh, const float *W,
                  const float *bias, int rows, int out, int in);
/* linear_forward (overwriting y) through gemm_few: for decoding. */
void linear_forward_few(float *y, const float *x, const float *W, const float *bias, int rows,
                        int out, int in);
/* Backward of linear_forward: dx[rows,in] (+)= dy @ W (dx may be NULL; accumulate_dx picks
 * = or +=), dW[out,in] += dy^T @ x, dbias[out] += colsum(dy) (dbias may be NULL). */
void linear_backward(float *dx, float *dW, float *dbias, const float *dy, const float *x,
                     const float *W, int rows, int out, int in, int accumulate_dx);
/* linear_backward with dy and x also given in bf16 (dyh, xh: their roundings, e.g. from
 * linear_round or from the op that made them; NULL: rounded here) */
void linear_backward_x(float *dx, float *dW, float *dbias, const float *dy, const uint16_t *dyh,
                       const float *x, const uint16_t *xh, const float *W, int rows, int out,
                       int in, int accumulate_dx);

/* The address space OpenBLAS and the threads' malloc arenas will map at txl's first GEMM (0
 * once one has run): what a memory check keeps free under an address-space limit
 * (common/sys.h, sys_check_memory). */
double gemm_as_reserve(void);

#endif

/* gemm.c: cblas_sgemm wrapper, its naive twin, and the linear layer pair (see gemm.h).
 * Gradients follow the += rule: dW and dbias are added to; callers zero them. */
#include "gemm.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/par.h"
#include "gemm_bf16.h"

/* Below this many multiply-adds a GEMM runs on the calling thread: splitting it would cost
 * more in fork/join than it saves. */
#define GEMM_SPLIT_MIN (1L << 20)

/* gemm() when M or N is 1. Row of C (M == 1): C[0,:] = alpha op(B)^T a + beta C, with a the
 * one row of op(A) (stride lda when A is transposed). Column of C (N == 1): C[:,0] =
 * alpha op(A) b + beta C, b the one column of op(B), C's stride ldc. */
static void gemv(float *C, const float *A, const float *B, int M, int N, int K, int trans_a,
                 int trans_b, float alpha, float beta, int lda, int ldb, int ldc)
{
    if (M == 1) {
        int inc_a = trans_a ? lda : 1;
        if (trans_b) /* B [N, K]: C = B a */
            cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, alpha, B, ldb, A, inc_a, beta, C, 1);
        else         /* B [K, N]: C = B^T a */
            cblas_sgemv(CblasRowMajor, CblasTrans, K, N, alpha, B, ldb, A, inc_a, beta, C, 1);
        return;
    }
    int inc_b = trans_b ? 1 : ldb;
    if (trans_a) /* A [K, M]: C = A^T b */
        cblas_sgemv(CblasRowMajor, CblasTrans, K, M, alpha, A, lda, B, inc_b, beta, C, ldc);
    else         /* A [M, K]: C = A b */
        cblas_sgemv(CblasRowMajor, CblasNoTrans, M, K, alpha, A, lda, B, inc_b, beta, C, ldc);
}

/* gemm_few for up to SKINNY_MAX rows: each row of B is read once per S rows of A: blocks of
 * R rows of B times S rows of A, each product a sum of 16 lanes (GCC vector extensions), the
 * lanes added in a fixed tree, then the K % 16 tail in order. A block past the edge repeats
 * the last row and drops its results. FMA contraction is allowed here (GCC turns it off for
 * -std=c11): each product-sum is rounded once. */
#if defined(__AVX__) /* without it (a portable build), OpenBLAS, which picks its kernels for
                       * the CPU at run time, sampled S at 1.9-2.8x this kernel's speed on
                       * SSE2 (8 and 16 streams) */
#define SKINNY_MAX 16
/* A 16-lane sum is held as P parts of the CPU's own vector width W: as one 64-byte vector on
 * AVX2, GCC kept the sums on the stack (8 streams sampled at 0.6x one stream's speed). The
 * tile, R rows of B times S rows of A, keeps R x S sums and R + 1 loaded parts in registers,
 * measured (gemm_few, N 1024, K 256, M 4-16): AVX-512 4 x 4 of one zmm each (62-71 GFLOP/s
 * here; 1 x 4 42-47), AVX 1 x 4 of two ymm (45-49; 2 x 2 25-34). Neither the width nor the
 * tile changes the order of any sum, so every build computes the bits the AVX-512 one does
 * (FMA contraction aside: a CPU without FMA rounds each product). */
#if defined(__AVX512F__)
enum { SK_W = 16, SK_R = 4, SK_S = 4 };
#else
enum { SK_W = 8, SK_R = 1, SK_S = 4 };
#endif
enum { SK_P = 16 / SK_W };
typedef float vw __attribute__((vector_size(SK_W * 4)));
typedef float vwu __attribute__((vector_size(SK_W * 4), aligned(4)));

typedef struct {
    vw part[SK_P]; /* part h: lanes h W .. h W + W-1 */
} v16s;

typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));

/* the 16 lanes added in a fixed tree: lanes i + (i + 8), then i + (i + 4), then
 * (0 + 2) + (1 + 3), as vector adds of halves */
static inline float sum_lanes(v16s a)
{
    v8 lo, hi;
    memcpy(&lo, (const char *)&a, sizeof lo);
    memcpy(&hi, (const char *)&a + sizeof lo, sizeof hi);
    v8 u = lo + hi;
    v4 ulo, uhi;
    memcpy(&ulo, (const char *)&u, sizeof ulo);
    memcpy(&uhi, (const char *)&u + sizeof ulo, sizeof uhi);
    v4 v = ulo + uhi;
    return (v[0] + v[2]) + (v[1] + v[3]);
}

#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=fast")))
#endif
static void gemm_skinny(float *C, const float *A, const float *B, int M, int N, int K,
                        float alpha, float beta, int lda, int ldb, int ldc)
{
    enum { R = SK_R, S = SK_S, P = SK_P, W = SK_W };
    const int K16 = K / 16 * 16;
    for (int o0 = 0; o0 < N; o0 += R) {
        const float *w[R];
        for (int r = 0; r < R; r++)
            w[r] = B + (size_t)(o0 + r < N ? o0 + r : N - 1) * ldb;
        for (int b0 = 0; b0 < M; b0 += S) {
            const float *x[S];
            for (int t = 0; t < S; t++)
                x[t] = A + (size_t)(b0 + t < M ? b0 + t : M - 1) * lda;
            v16s acc[R][S];
            for (int r = 0; r < R; r++)
                for (int t = 0; t < S; t++)
                    for (int h = 0; h < P; h++)
                        acc[r][t].part[h] = (vw){0};
            for (int k = 0; k < K16; k += 16)
                for (int h = 0; h < P; h++) {
                    vw wv[R];
                    for (int r = 0; r < R; r++)
                        wv[r] = *(const vwu *)(w[r] + k + h * W);
                    for (int t = 0; t < S; t++) {
                        vw xv = *(const vwu *)(x[t] + k + h * W);
                        for (int r = 0; r < R; r++)
                            acc[r][t].part[h] += wv[r] * xv;
                    }
                }
            for (int r = 0; r < R && o0 + r < N; r++)
                for (int t = 0; t < S && b0 + t < M; t++) {
                    float sum = sum_lanes(acc[r][t]);
                    for (int k = K16; k < K; k++)
                        sum += w[r][k] * x[t][k];
                    float *c = C + (size_t)(b0 + t) * ldc + o0 + r;
                    *c = alpha * sum + (beta == 0.0f ? 0.0f : beta * *c);
                }
        }
    }
}
#endif /* __AVX__ */

/* Thread-seconds in gemm() and gemm_few(), one slot per calling thread (a cache line each):
 * a call split over nt threads counts nt times its wall time, one on a single thread (inside
 * a parallel region, or small) once. */
enum { GEMM_SLOTS = 64 };
static struct {
    double s;
    char pad[64 - sizeof(double)];
} gemm_busy[GEMM_SLOTS];

static double gemm_clock(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void gemm_account(double t0, int nt)
{
    gemm_busy[par_thread_id() & (GEMM_SLOTS - 1)].s += (gemm_clock() - t0) * nt;
}

double gemm_thread_seconds(void)
{
    double s = 0;
    for (int i = 0; i < GEMM_SLOTS; i++)
        s += gemm_busy[i].s;
    return s;
}

static gemm_precision precision = GEMM_FP32;

int gemm_set_precision(gemm_precision p)
{
    if (p == GEMM_BF16 && gemm_bf16_init())
        return -1;
    precision = p;
    return 0;
}

gemm_precision gemm_get_precision(void) { return precision; }

/* Whether gemm() runs an M x N x K product in bf16 */
static int in_bf16(int M, int N, int K)
{
    return precision == GEMM_BF16 && M > 1 && N > 1 && K > 0 &&
           (long)M * N * K >= GEMM_BF16_MIN;
}

/* h [rows, cols] (row stride ld) widened into *buf (contiguous, grown to fit): the fp32
 * operand of a product whose caller gave it only in bf16 and that runs in fp32 (oneDNN
 * refused it; no caller does so otherwise today, so a run whose shapes oneDNN takes
 * allocates nothing here); out of memory here has no way back but to stop */
static const float *widen(float **buf, size_t *cap, const uint16_t *h, int rows, int cols,
                          int ld)
{
    size_t n = (size_t)rows * cols;
    if (n > *cap) {
        float *p = realloc(*buf, n * sizeof *p);
        if (!p) {
            fprintf(stderr, "txl: out of memory for a %d x %d product operand\n", rows, cols);
            abort();
        }
        *buf = p, *cap = n;
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            (*buf)[(size_t)r * cols + c] = bf16_to_f32(h[(size_t)r * ld + c]);
    return *buf;
}

/* gemm() without the accounting, A and B optionally given in bf16 too (Ah, Bh: read when
 * the product runs in bf16); returns the threads the call ran on */
static int gemm_run(float *C, const float *A, const uint16_t *Ah, const float *B,
                    const uint16_t *Bh, int M, int N, int K, int trans_a, int trans_b,
                    float alpha, float beta, int lda, int ldb, int ldc)
{
    if (M <= 0 || N <= 0)
        return 1;
    if (K <= 0) { /* empty inner product: C = beta * C */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return 1;
    }
    int nt = par_threads();
    if (in_bf16(M, N, K) && gemm_bf16_x(C, A, Ah, B, Bh, NULL, M, N, K, trans_a, trans_b,
                                        alpha, beta, lda, ldb, ldc) == 0)
        return nt; /* oneDNN ran it on the threads of the moment */
    /* fp32 (the precision, a small product, or oneDNN refused it): an operand given only
     * in bf16 widened (exactly) first */
    static _Thread_local float *wa, *wb;
    static _Thread_local size_t ca, cb;
    if (!A) {
        A = widen(&wa, &ca, Ah, trans_a ? K : M, trans_a ? M : K, lda);
        lda = trans_a ? M : K;
    }
    if (!B) {
        B = widen(&wb, &cb, Bh, trans_b ? N : K, trans_b ? K : N, ldb);
        ldb = trans_b ? K : N;
    }
    if (M == 1 || N == 1) { /* a vector: sgemv reads the matrix once, sgemm would pack it */
        gemv(C, A, B, M, N, K, trans_a, trans_b, alpha, beta, lda, ldb, ldc);
        return 1;
    }
    if (nt == 1 || (long)M * N * K < GEMM_SPLIT_MIN) {
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                    trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta,
                    C, ldc);
        return 1;
    }
    /* One block of C per thread, along the longer of M and N, in multiples of 16 so every
     * block keeps the kernel's full register tiles. Each C element is still one dot product
     * over all of K, but OpenBLAS may pick other kernels for the edge of a smaller block, so
     * results can differ by an ulp between thread counts (never between runs). */
    int split_m = M >= N;
    int len = split_m ? M : N, units = (len + 15) / 16;
    if (units < nt)
        nt = units;
#pragma omp parallel num_threads(nt)
    {
        size_t u0, u1;
        par_range((size_t)units, par_thread_id(), nt, &u0, &u1);
        int b0 = (int)u0 * 16, b1 = (int)u1 * 16 < len ? (int)u1 * 16 : len;
        if (b1 > b0) {
            const float *a = A, *b = B;
            float *c = C;
            int m = M, n = N;
            if (split_m) {
                a += trans_a ? (size_t)b0 : (size_t)b0 * lda;
                c += (size_t)b0 * ldc;
                m = b1 - b0;
            } else {
                b += trans_b ? (size_t)b0 * ldb : (size_t)b0;
                c += b0;
                n = b1 - b0;
            }
            cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                        trans_b ? CblasTrans : CblasNoTrans, m, n, K, alpha, a, lda, b, ldb,
                        beta, c, ldc);
        }
    }
    return nt;
}

void gemm(float *C, const float *A, const float *B, int M, int N, int K,
          int trans_a, int trans_b, float alpha, float beta, int lda, int ldb, int ldc)
{
    double t0 = gemm_clock();
    gemm_account(t0, gemm_run(C, A, NULL, B, NULL, M, N, K, trans_a, trans_b, alpha, beta, lda,
                              ldb, ldc));
}

void gemm_x(float *C, const float *A, const uint16_t *Ah, const float *B, const uint16_t *Bh,
            int M, int N, int K, int trans_a, int trans_b, float alpha, float beta, int lda,
            int ldb, int ldc)
{
    double t0 = gemm_clock();
    gemm_account(t0, gemm_run(C, A, Ah, B, Bh, M, N, K, trans_a, trans_b, alpha, beta, lda,
                              ldb, ldc));
}

void gemm_few(float *C, const float *A, const float *B, int M, int N, int K, float alpha,
              float beta, int lda, int ldb, int ldc)
{
#ifdef SKINNY_MAX
    if (M >= 2 && M <= SKINNY_MAX && N > 0 && K > 0 &&
        (par_threads() == 1 || (long)M * N * K < GEMM_SPLIT_MIN)) {
        double t0 = gemm_clock();
        gemm_skinny(C, A, B, M, N, K, alpha, beta, lda, ldb, ldc);
        gemm_account(t0, 1);
        return;
    }
#endif
    gemm(C, A, B, M, N, K, 0, 1, alpha, beta, lda, ldb, ldc);
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

const uint16_t *linear_round(uint16_t *xh, const float *x, int rows, int in)
{
    if (!xh || precision != GEMM_BF16)
        return NULL;
    gemm_bf16_round(xh, x, rows, in, in);
    return xh;
}

int linear_in_bf16(int rows, int out, int in)
{
    return in_bf16(rows, out, in) && in_bf16(out, in, rows);
}

void linear_forward(float *y, const float *x, const float *W, const float *bias,
                    int rows, int out, int in, int accumulate)
{
    linear_forward_x(y, x, NULL, W, bias, rows, out, in, accumulate);
}

void linear_forward_x(float *y, const float *x, const uint16_t *xh, const float *W,
                      const float *bias, int rows, int out, int in, int accumulate)
{
    float beta = accumulate ? 1.0f : 0.0f;
    if (bias && !accumulate && in_bf16(rows, out, in)) { /* the bias added by the bf16
                                                          * product itself */
        double t0 = gemm_clock();
        if (gemm_bf16_x(y, x, xh, W, NULL, bias, rows, out, in, 0, 1, 1.0f, beta, in, in,
                        out) == 0) {
            gemm_account(t0, par_threads());
            return;
        }
    }
    if (bias) {
#pragma omp parallel for schedule(static) if ((size_t)rows * out > 8192)
        for (int r = 0; r < rows; r++) {
            float *yr = y + (size_t)r * out;
            for (int o = 0; o < out; o++)
                yr[o] = accumulate ? yr[o] + bias[o] : bias[o];
        }
        beta = 1.0f;
    }
    gemm_x(y, x, xh, W, NULL, rows, out, in, 0, 1, 1.0f, beta, in, in, out);
}

int linear_relu_h(uint16_t *yh, const float *x, const uint16_t *xh, const float *W,
                  const float *bias, int rows, int out, int in)
{
    if (!in_bf16(rows, out, in))
        return -1;
    double t0 = gemm_clock();
    if (gemm_bf16_relu_h(yh, x, xh, W, NULL, bias, rows, out, in, 0, 1, in, in, out))
        return -1;
    gemm_account(t0, par_threads());
    return 0;
}

void linear_forward_few(float *y, const float *x, const float *W, const float *bias, int rows,
                        int out, int in)
{
    for (int r = 0; bias && r < rows; r++)
        memcpy(y + (size_t)r * out, bias, (size_t)out * sizeof(float));
    gemm_few(y, x, W, rows, out, in, 1.0f, bias ? 1.0f : 0.0f, in, in, out);
}

/* This thread's buffer of at least n bf16 values (grown at a shape's first use: the first
 * training step), or NULL */
static uint16_t *dy_buffer(size_t n)
{
    static _Thread_local uint16_t *buf;
    static _Thread_local size_t cap;
    if (n > cap) {
        uint16_t *p = realloc(buf, n * sizeof *p);
        if (!p)
            return NULL;
        buf = p, cap = n;
    }
    return buf;
}

void linear_backward(float *dx, float *dW, float *dbias, const float *dy, const float *x,
                     const float *W, int rows, int out, int in, int accumulate_dx)
{
    linear_backward_x(dx, dW, dbias, dy, NULL, x, NULL, W, rows, out, in, accumulate_dx);
}

void linear_backward_x(float *dx, float *dW, float *dbias, const float *dy, const uint16_t *dyh,
                       const float *x, const uint16_t *xh, const float *W, int rows, int out,
                       int in, int accumulate_dx)
{
    /* On two threads, dx and dW (equal FLOPs) run side by side, each whole on one thread
     * (gemm() inside the active region stays on its thread), rather than each split in
     * halves that pack the shared operand twice; otherwise one after the other, split. */
    const int side_by_side = dx && par_threads() == 2 && (long)rows * in * out >= GEMM_SPLIT_MIN;
    /* in bf16, dy is rounded once for both products (it is dx's A and, transposed, dW's),
     * unless the caller has it */
    uint16_t *buf;
    if (!dyh && in_bf16(rows, in, out) && in_bf16(out, in, rows) &&
        (buf = dy_buffer((size_t)rows * out))) {
        gemm_bf16_round(buf, dy, rows, out, out);
        dyh = buf;
    }
#pragma omp parallel sections num_threads(2) if (side_by_side)
    {
#pragma omp section
        if (dx)
            gemm_x(dx, dy, dyh, W, NULL, rows, in, out, 0, 0, 1.0f, accumulate_dx ? 1.0f : 0.0f,
                   out, in, in);
#pragma omp section
        gemm_x(dW, dy, dyh, x, xh, out, in, rows, 1, 0, 1.0f, 1.0f, out, in, in);
    }
    if (dbias) { /* column blocks per thread: each sum runs over the rows in order */
        int nt = (size_t)rows * out > 8192 ? par_threads() : 1;
#pragma omp parallel num_threads(nt)
        {
            size_t o0, o1;
            par_range((size_t)out, par_thread_id(), nt, &o0, &o1);
            for (int r = 0; r < rows; r++) {
                const float *d = dy + (size_t)r * out;
                for (size_t o = o0; o < o1; o++)
                    dbias[o] += d[o];
            }
        }
    }
}

/* The address space a thread takes at its first GEMM and its first malloc: OpenBLAS's
 * buffer (BUFFER_SIZE, 128 MiB in the x86-64 builds: Debian's mallocs 128 MiB + 4 KiB), and
 * for a thread other than the first, glibc's arena (it maps 128 MiB to keep 64 aligned). */
#define BLAS_BUFFER (128.0 * 1048576.0)
#define MALLOC_ARENA (128.0 * 1048576.0)

double gemm_as_reserve(void)
{
    /* OpenBLAS maps its buffer at a thread's first call, and when the address-space limit
     * leaves no room it retries forever (OpenBLAS issue 5289; 0.3.30 exits instead): a plan
     * that fit the limit with 50 MiB to spare (1 thread; 300 with 2) hung, in OpenBLAS or
     * in malloc making a thread's arena. Until txl's first GEMM these are not in the
     * process's size, so a limit must leave room for them. */
    int T = par_max_threads();
    return gemm_thread_seconds() == 0 ? T * BLAS_BUFFER + (T - 1) * MALLOC_ARENA : 0;
}

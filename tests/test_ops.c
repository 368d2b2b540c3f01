/* test_ops.c: per-op unit tests of model/ and optim/ (doc/design.md, "The model", STYLE.md
 * "Tests").
 *
 * For every op: the forward against an independent double-precision formula written here
 * (never the op's own code path), the backward against central finite differences of
 * loss = sum(out * g) with a random g (accumulated in double), the += rule (a second
 * backward call doubles every accumulated gradient; outputs documented as overwritten come
 * out identical and ignore what the buffer held, which we fill with NaN first), and the
 * op-specific contracts of each header (masks, slices, aliasing, schedules).
 *
 * Errors are norm-relative: max|x - ref| / max|ref| over a tensor (tl_max_rel_err), since
 * elementwise relative errors of entries near zero mean nothing. For finite differences the
 * denominator is max|analytic| over the whole gradient tensor.
 *
 * Finite differences. The ops compute in float32, so the loss at a perturbed point carries
 * the round-off of every float the probed entry feeds: relative noise ~ eps32 (6e-8) times
 * the square root of their count, i.e. ~1e-7..1e-6 of the loss in these small cases.
 * Divided by the step 2h, that is the noise floor of the FD estimate.
 *  - Ops that are affine in each single input entry (linear layer, embedding, dropout, rope,
 *    the FF activation away from 0, the mlp bias's second layer) have no truncation error,
 *    so we take a large step (h = 0.25 * max(|x|, 1)): noise ~ 1e-7 relative, tol 1e-5.
 *  - Smooth nonlinear ops (layernorm, softmax attention, GELU MLP, cross-entropy) take
 *    h = 1e-2 * max(|x|, 1), which balances truncation h^2 |f'''| / 6 ~ 2e-5 against noise
 *    ~ 1e-6 / 2e-2 = 5e-5 (the optimum of the two is near (3 * 1e-6)^(1/3) ~ 1e-2). With
 *    h = 1e-3 the noise term reaches 1e-3 of a small gradient tensor (attention's dv at
 *    Lq = 1: max|dv| = 0.03 while the scores are O(1)). Measured errors are <= 4e-4;
 *    tolerances are 1e-3 (2e-3 for attention, whose gradient tensors differ most in size).
 * The step actually taken is (float)(x+h) - (float)(x-h), so the division is exact.
 * Runs single-threaded except where thread counts are compared; well under a second. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/par.h"
#include "../common/rng.h"
#include "../common/vmath.h"
#include "../model/adaptive.h"
#include "../model/attention.h"
#include "../model/attn_decode.h"
#include "../model/attn_amx.h"
#include "../model/attn_fused.h"
#include "../model/dropout.h"
#include "../model/embedding.h"
#include "../model/gemm.h"
#include "../model/gemm_bf16.h"
#include "../common/cpu.h"
#include "../model/layernorm.h"
#include "../model/model.h"
#include "../model/posenc.h"
#include "../model/qgemm.h"
#include "../model/xent.h"
#include "../optim/optim.h"
#include "testlib.h"

#define PI 3.14159265358979323846
#define STEP_AFFINE 0.25 /* relative FD step for ops affine in each input entry */
#define STEP_SMOOTH 1e-2 /* relative FD step for smooth nonlinear ops */
#define MAX_PROBES 300   /* FD probes per tensor (all entries when fewer) */
/* The += rule: GEMM-accumulated gradients (beta = 1) double exactly; ones summed term by
 * term (bias columns, du/dv, d_dist_bias) add the second call's terms one at a time onto
 * the first result, so they double up to a few roundings of the largest entry. */
#define TOL_DOUBLE 1e-6

static tl_rng rng = {0x2545f4914f6cdd1dULL};

/* ---------------------------------------------------------------- helpers */

static float *alloc_f(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "test_ops: out of memory\n");
        exit(1);
    }
    return p;
}

static double *alloc_d(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    if (!p) {
        fprintf(stderr, "test_ops: out of memory\n");
        exit(1);
    }
    return p;
}

static float *rand_f(size_t n, float scale)
{
    float *p = alloc_f(n);
    tl_fill(&rng, p, n, scale);
    return p;
}

static float *zeros_f(size_t n)
{
    float *p = alloc_f(n);
    memset(p, 0, (n ? n : 1) * sizeof *p);
    return p;
}

static float *nan_f(size_t n)
{
    float *p = alloc_f(n);
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

static float *copy_f(const float *x, size_t n)
{
    float *p = alloc_f(n);
    memcpy(p, x, n * sizeof *p);
    return p;
}

static double dot_fd(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

static int same_f(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

static size_t count_nonfinite(const float *a, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += !isfinite(a[i]);
    return c;
}

/* max |b - 2a| / max |2a| (0 when both are zero); *n_exact counts entries with b == 2a. */
static double doubling_err(const float *a, const float *b, size_t n, size_t *n_exact)
{
    double md = 0, mr = 0;
    size_t ex = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)b[i] - 2.0 * a[i]);
        if (!(d <= md))
            md = d;
        mr = fmax(mr, fabs(2.0 * a[i]));
        ex += b[i] == 2.0f * a[i];
    }
    if (n_exact)
        *n_exact = ex;
    return md == 0 ? 0 : md / fmax(mr, 1e-30);
}

/* Checks the += rule for an accumulated gradient: `second` after two identical backward
 * calls from zero, `first` after one. */
static void check_doubling(const char *what, const float *first, const float *second, size_t n)
{
    size_t ex;
    double e = doubling_err(first, second, n, &ex);
    CHECK(e <= TOL_DOUBLE, "%s: second backward doubles it (+=): max err %.1e, %zu/%zu exact",
          what, e, ex, n);
}

typedef double (*loss_fn)(void *ctx);

/* Central finite differences of f() over entries of x (all of them, or MAX_PROBES random
 * ones), against the analytic gradient an[n]. Returns max|fd - an| / max|an| (denominator
 * over the whole tensor). skip_kink: skip entries within the step of 0 (relu kinks). */
static double fd_err(loss_fn f, void *ctx, float *x, const float *an, size_t n, double rel,
                     int skip_kink, int *n_probed, double *max_an, double *max_fd)
{
    tl_rng pr = {0x9e3779b97f4a7c15ULL ^ (n * 2654435761u)};
    double maxan = 0, maxdiff = 0, maxfd = 0;
    for (size_t i = 0; i < n; i++)
        maxan = fmax(maxan, fabs(an[i]));
    size_t probes = n <= MAX_PROBES ? n : MAX_PROBES;
    int done = 0;
    for (size_t k = 0; k < probes; k++) {
        size_t i = n <= MAX_PROBES ? k : (size_t)((tl_uniform(&pr, 0.5f) + 0.5f) * n) % n;
        float x0 = x[i];
        double h = rel * fmax(fabs(x0), 1.0);
        if (skip_kink && fabs(x0) <= 1.5 * h)
            continue;
        float xp = (float)(x0 + h), xm = (float)(x0 - h);
        x[i] = xp;
        double lp = f(ctx);
        x[i] = xm;
        double lm = f(ctx);
        x[i] = x0;
        double fd = (lp - lm) / ((double)xp - (double)xm);
        double d = fabs(fd - an[i]);
        if (!(d <= maxdiff))
            maxdiff = d; /* also catches NaN */
        maxfd = fmax(maxfd, fabs(fd));
        done++;
    }
    *n_probed = done;
    *max_an = maxan;
    *max_fd = maxfd;
    if (maxdiff == 0)
        return 0;
    return maxan > 0 ? maxdiff / maxan : INFINITY;
}

static void check_fd(const char *op, const char *name, loss_fn f, void *ctx, float *x,
                     const float *an, size_t n, double rel, double tol, int skip_kink)
{
    int probed;
    double maxan, maxfd;
    double e = fd_err(f, ctx, x, an, n, rel, skip_kink, &probed, &maxan, &maxfd);
    CHECK(e <= tol, "%s: d%s vs central FD: max err %.2e (tol %.0e, %d of %zu entries probed, "
          "max|analytic| %.2g, max|fd| %.2g)", op, name, e, tol, probed, n, maxan, maxfd);
}

/* ---------------------------------------------------------------- gemm, linear */

/* C = alpha op(A) op(B) + beta C0 in double. */
static void gemm_ref(double *C, const float *C0, const float *A, const float *B, int M, int N,
                     int K, int ta, int tb, double alpha, double beta, int lda, int ldb, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (double)(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                     (tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
            double c0 = beta == 0 ? 0 : beta * C0[(size_t)i * ldc + j];
            C[(size_t)i * N + j] = alpha * s + c0;
        }
}

/* One gemm case: A, B padded with NaN beyond their logical columns (a read there poisons
 * the result), C padded with a sentinel that must survive; for beta = 0, C starts as NaN.
 * Tolerance 1e-5: float GEMM error grows like sqrt(K) eps32 |a||b| (K <= 96 here: ~1e-6);
 * gemm_naive rounds a double sum once, so it must agree with the double reference to
 * 1e-7 (half an ulp of each element). */
static void test_gemm_case(int M, int N, int K, int ta, int tb, float alpha, float beta,
                           int few)
{
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + 3, ldb = bc + 2, ldc = N + 5;
    float *A = alloc_f((size_t)ar * lda), *B = alloc_f((size_t)br * ldb);
    float *C = alloc_f((size_t)M * ldc), *Cn = alloc_f((size_t)M * ldc);
    float *C0 = alloc_f((size_t)M * ldc);
    double *ref = alloc_d((size_t)M * N);
    for (int i = 0; i < ar; i++)
        for (int j = 0; j < lda; j++)
            A[(size_t)i * lda + j] = j < ac ? tl_normal(&rng, 1.0f) : NAN;
    for (int i = 0; i < br; i++)
        for (int j = 0; j < ldb; j++)
            B[(size_t)i * ldb + j] = j < bc ? tl_normal(&rng, 1.0f) : NAN;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < ldc; j++)
            C0[(size_t)i * ldc + j] = j < N ? (beta == 0 ? NAN : tl_normal(&rng, 1.0f)) : 777.0f;
    memcpy(C, C0, (size_t)M * ldc * sizeof *C);
    memcpy(Cn, C0, (size_t)M * ldc * sizeof *C);
    if (few) /* (ta = 0, tb = 1) */
        gemm_few(C, A, B, M, N, K, alpha, beta, lda, ldb, ldc);
    else
        gemm(C, A, B, M, N, K, ta, tb, alpha, beta, lda, ldb, ldc);
    gemm_naive(Cn, A, B, M, N, K, ta, tb, alpha, beta, lda, ldb, ldc);
    gemm_ref(ref, C0, A, B, M, N, K, ta, tb, alpha, beta, lda, ldb, ldc);

    float *Cp = alloc_f((size_t)M * N), *Cnp = alloc_f((size_t)M * N);
    int pad_ok = 1;
    for (int i = 0; i < M; i++) {
        memcpy(Cp + (size_t)i * N, C + (size_t)i * ldc, N * sizeof *C);
        memcpy(Cnp + (size_t)i * N, Cn + (size_t)i * ldc, N * sizeof *C);
        for (int j = N; j < ldc; j++)
            pad_ok &= C[(size_t)i * ldc + j] == 777.0f && Cn[(size_t)i * ldc + j] == 777.0f;
    }
    double e = tl_max_rel_err(Cp, ref, (size_t)M * N, 1e-30);
    double en = tl_max_rel_err(Cnp, ref, (size_t)M * N, 1e-30);
    CHECK(e <= 1e-5 && en <= 1e-7 && pad_ok,
          "%s %dx%dx%d trans_a=%d trans_b=%d beta=%g lda/ldb/ldc padded: gemm err %.1e, "
          "gemm_naive err %.1e vs double, padding untouched %s", few ? "gemm_few" : "gemm",
          M, N, K, ta, tb, beta, e, en, pad_ok ? "yes" : "NO");
    free(A), free(B), free(C), free(Cn), free(C0), free(ref), free(Cp), free(Cnp);
}

/* gemm() in bf16 (oneDNN), where the CPU has bf16 (common/cpu.h): against the double
 * product of the bf16-rounded operands (the roundings txl makes), the sums in fp32: the same
 * 1e-5 as an fp32 gemm; and against the fp32 product, off by the roundings themselves:
 * ~2^-9 relative per operand, ~1e-2 of the largest |C| at most for K = 300 random terms. */
static void test_gemm_bf16_case(int M, int N, int K, int ta, int tb, float alpha, float beta)
{
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + 3, ldb = bc + 2, ldc = N + 5;
    float *A = alloc_f((size_t)ar * lda), *B = alloc_f((size_t)br * ldb);
    float *Ar = alloc_f((size_t)ar * lda), *Br = alloc_f((size_t)br * ldb);
    float *C = alloc_f((size_t)M * ldc), *C0 = alloc_f((size_t)M * ldc);
    double *ref = alloc_d((size_t)M * N), *ref32 = alloc_d((size_t)M * N);
    for (size_t i = 0; i < (size_t)ar * lda; i++)
        A[i] = tl_normal(&rng, 1.0f), Ar[i] = bf16_to_f32(bf16_from_f32(A[i]));
    for (size_t i = 0; i < (size_t)br * ldb; i++)
        B[i] = tl_normal(&rng, 1.0f), Br[i] = bf16_to_f32(bf16_from_f32(B[i]));
    for (size_t i = 0; i < (size_t)M * ldc; i++)
        C0[i] = beta == 0 ? NAN : tl_normal(&rng, 1.0f);
    for (int i = 0; i < M; i++)
        for (int j = N; j < ldc; j++)
            C0[(size_t)i * ldc + j] = 777.0f;
    memcpy(C, C0, (size_t)M * ldc * sizeof *C);
    gemm_set_precision(GEMM_BF16);
    gemm(C, A, B, M, N, K, ta, tb, alpha, beta, lda, ldb, ldc);
    gemm_set_precision(GEMM_FP32);
    gemm_ref(ref, C0, Ar, Br, M, N, K, ta, tb, alpha, beta, lda, ldb, ldc);
    gemm_ref(ref32, C0, A, B, M, N, K, ta, tb, alpha, beta, lda, ldb, ldc);
    float *Cp = alloc_f((size_t)M * N);
    int pad_ok = 1;
    for (int i = 0; i < M; i++) {
        memcpy(Cp + (size_t)i * N, C + (size_t)i * ldc, N * sizeof *C);
        for (int j = N; j < ldc; j++)
            pad_ok &= C[(size_t)i * ldc + j] == 777.0f;
    }
    double e = tl_max_rel_err(Cp, ref, (size_t)M * N, 1e-30);
    double e32 = tl_max_rel_err(Cp, ref32, (size_t)M * N, 1e-30);
    CHECK(e <= 1e-5 && e32 <= 1e-2 && e32 > 1e-5 && pad_ok,
          "gemm bf16 %dx%dx%d trans_a=%d trans_b=%d alpha=%g beta=%g (%s): vs the bf16-rounded "
          "double product %.1e (tol 1e-5); vs fp32 %.1e (the roundings: in (1e-5, 1e-2]); "
          "padding untouched %s", M, N, K, ta, tb, alpha, beta, gemm_bf16_impl(), e, e32,
          pad_ok ? "yes" : "NO");
    free(A), free(B), free(Ar), free(Br), free(C), free(C0), free(ref), free(ref32), free(Cp);
}

/* Shadows (gemm_bf16.h): a product whose weight lies in a shadowed array reads the copy,
 * which gives the bits of rounding it at the call; linear_backward's dy, rounded once for
 * both of its products, gives the bits of two separate products. A stale copy (the array
 * changed, not rounded again) is what the product reads: it shows the copy is used. */
static void test_gemm_bf16_shadow(void)
{
    const int rows = 40, in = 48, out = 36;
    const size_t nw = (size_t)out * in + 50; /* the weight at offset 50 of its array */
    float *Wall = rand_f(nw, 1.0f), *W = Wall + 50, *x = rand_f((size_t)rows * in, 1.0f);
    float *dy = rand_f((size_t)rows * out, 1.0f);
    uint16_t *copy = malloc(nw * sizeof *copy);
    gemm_bf16_round(copy, Wall, 1, (int)nw, (int)nw);
    float *y0 = alloc_f((size_t)rows * out), *y1 = alloc_f((size_t)rows * out);
    float *dx0 = zeros_f((size_t)rows * in), *dW0 = zeros_f(nw), *dx1 = zeros_f((size_t)rows * in);
    float *dW1 = zeros_f(nw), *y2 = alloc_f((size_t)rows * out);
    gemm_set_precision(GEMM_BF16);
    linear_forward(y0, x, W, NULL, rows, out, in, 0);
    /* dx and dW as two plain products (each rounds dy itself) */
    gemm(dx0, dy, W, rows, in, out, 0, 0, 1.0f, 0.0f, out, in, in);
    gemm(dW0, dy, x, out, in, rows, 1, 0, 1.0f, 1.0f, out, in, in);
    CHECK(gemm_bf16_shadow(Wall, nw, copy) == 0, "gemm_bf16_shadow takes an array");
    linear_forward(y1, x, W, NULL, rows, out, in, 0);
    linear_backward(dx1, dW1, NULL, dy, x, W, rows, out, in, 0);
    CHECK(same_f(y0, y1, (size_t)rows * out) && same_f(dx0, dx1, (size_t)rows * in) &&
              same_f(dW0, dW1, (size_t)out * in),
          "bf16: a shadowed weight's products, and linear_backward's dy rounded once, give the "
          "bits of rounding at each product");
    for (size_t i = 0; i < nw; i++)
        Wall[i] += 0.5f; /* the copy is now stale */
    linear_forward(y2, x, W, NULL, rows, out, in, 0);
    int stale = same_f(y2, y1, (size_t)rows * out);
    gemm_bf16_use_shadows(0);
    linear_forward(y2, x, W, NULL, rows, out, in, 0);
    int fresh = !same_f(y2, y1, (size_t)rows * out);
    gemm_bf16_use_shadows(1);
    gemm_bf16_unshadow(Wall);
    linear_forward(y1, x, W, NULL, rows, out, in, 0);
    gemm_set_precision(GEMM_FP32);
    CHECK(stale && fresh && same_f(y1, y2, (size_t)rows * out),
          "bf16: products read the shadow (a stale one too); without shadows, or unshadowed, "
          "they round the array as it is");
    /* the bias added by the bf16 product (oneDNN's bias input): the bits of filling y with
     * the bias and adding the product to it */
    float *bias = rand_f((size_t)out, 1.0f);
    gemm_set_precision(GEMM_BF16);
    linear_forward(y1, x, W, bias, rows, out, in, 0);
    for (int r = 0; r < rows; r++)
        memcpy(y2 + (size_t)r * out, bias, (size_t)out * sizeof *y2);
    gemm(y2, x, W, rows, out, in, 0, 1, 1.0f, 1.0f, in, in, out);
    int same_bias = same_f(y1, y2, (size_t)rows * out);
    memcpy(y0, y1, (size_t)rows * out * sizeof *y0);
    linear_forward(y1, x, W, bias, rows, out, in, 1); /* accumulate: y1 = y0 + bias + x W^T */
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++)
            y2[(size_t)r * out + o] = y0[(size_t)r * out + o] + bias[o];
    gemm(y2, x, W, rows, out, in, 0, 1, 1.0f, 1.0f, in, in, out);
    int same_acc = same_f(y1, y2, (size_t)rows * out);
    /* inference's feed-forward: bf16(relu(x W^T + b)) made by the product */
    uint16_t *rh = malloc((size_t)rows * out * sizeof *rh);
    int relu_ran = linear_relu_h(rh, x, NULL, W, bias, rows, out, in) == 0, relu_same = 1;
    linear_forward(y1, x, W, bias, rows, out, in, 0);
    for (size_t i = 0; i < (size_t)rows * out; i++)
        relu_same &= rh[i] == bf16_from_f32(y1[i] > 0.0f ? y1[i] : 0.0f);
    gemm_set_precision(GEMM_FP32);
    CHECK(relu_ran && relu_same && linear_relu_h(rh, x, NULL, W, bias, rows, out, in) == -1,
          "bf16: linear_relu_h gives the rounding of relu(linear_forward) bit for bit (and "
          "declines in fp32)");
    free(rh);
    CHECK(same_bias && same_acc, "bf16: linear_forward's bias in the product equals a filled bias plus the "
          "product, overwriting and accumulating");
    free(Wall), free(x), free(dy), free(copy), free(y0), free(y1), free(y2), free(dx0);
    free(dW0), free(dx1), free(dW1), free(bias);
}

/* More shapes than a thread's primitives (gemm_bf16.c's SHAPES, 128): a probe's lengths and
 * trials make that many. Each new shape takes the least recently used one's place (150
 * shapes in a cycle, twice: every call of the second pass creates its primitive again),
 * and a product whose input exists only in bf16 (inference's a, made by the ReLU product)
 * still runs in bf16: the bits of rounding x at the call, and the double product of the
 * rounded operands to fp32's 1e-5, shape after shape. Refused (as oneDNN may refuse a
 * shape), products whose operands exist only in bf16 (gemm_x with A or B NULL, every
 * transposition) run in fp32 on them widened: their double product to 1e-5. */
static void test_gemm_bf16_many_shapes(void)
{
    enum { IN = 128, OUT = 64, M0 = 8, SHAPES_USED = 150 };
    const int mmax = M0 + SHAPES_USED;
    float *x = rand_f((size_t)mmax * IN, 1.0f), *W = rand_f((size_t)OUT * IN, 1.0f);
    float *bias = rand_f(OUT, 1.0f), *y = alloc_f((size_t)mmax * OUT);
    float *y1 = alloc_f((size_t)mmax * OUT), *xr = alloc_f((size_t)mmax * IN);
    float *Wr = alloc_f((size_t)OUT * IN);
    double *ref = alloc_d((size_t)mmax * OUT);
    uint16_t *xh = malloc((size_t)mmax * IN * sizeof *xh);
    uint16_t *Wh = malloc((size_t)OUT * IN * sizeof *Wh);
    gemm_bf16_round(xh, x, mmax, IN, IN);
    gemm_bf16_round(Wh, W, OUT, IN, IN);
    for (size_t i = 0; i < (size_t)mmax * IN; i++)
        xr[i] = bf16_to_f32(xh[i]);
    for (size_t i = 0; i < (size_t)OUT * IN; i++)
        Wr[i] = bf16_to_f32(Wh[i]);
    /* the double product of the rounded operands, plus the bias */
    gemm_ref(ref, NULL, xr, Wr, mmax, OUT, IN, 0, 1, 1.0f, 0.0f, IN, IN, OUT);
    for (int r = 0; r < mmax; r++)
        for (int o = 0; o < OUT; o++)
            ref[(size_t)r * OUT + o] += bias[o];
    gemm_set_precision(GEMM_BF16);
    int held0, held;
    long made0, made;
    gemm_bf16_stats(&held0, &made0);
    int differ = 0;
    double e = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int m = M0; m < mmax; m++) {
            linear_forward_x(y, NULL, xh, W, bias, m, OUT, IN, 0);
            linear_forward(y1, x, W, bias, m, OUT, IN, 0);
            differ += !same_f(y, y1, (size_t)m * OUT);
            e = fmax(e, tl_max_rel_err(y, ref, (size_t)m * OUT, 1e-30));
        }
    gemm_bf16_stats(&held, &made);
    CHECK(differ == 0 && e <= 1e-5 && held == 128 && made - made0 == 2 * SHAPES_USED,
          "bf16, %d shapes twice over: 128 held, %ld primitives made (%d expected); a product "
          "of an input given only in bf16 equals rounding it at the call, bit for bit (%d of "
          "%d differ), and the double product of the rounded operands to %.1e (tol 1e-5)",
          SHAPES_USED, made - made0, 2 * SHAPES_USED, differ, 2 * SHAPES_USED, e);
    /* refused: every transposition, A and B given only in bf16 */
    double er = 0;
    gemm_bf16_refuse(1);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            /* C [M, N] = op(A) op(B): A = x's first rows [M, K] (or its transpose, made
             * here), B = W [N, K] (tb) or W^T [K, N] */
            const int M = 40, K = IN, N = OUT;
            uint16_t *Ah = malloc((size_t)M * K * sizeof *Ah);
            uint16_t *Bh = malloc((size_t)N * K * sizeof *Bh);
            float *Af = alloc_f((size_t)M * K), *Bf = alloc_f((size_t)N * K);
            for (int i = 0; i < M; i++)
                for (int k = 0; k < K; k++) {
                    size_t at = ta ? (size_t)k * M + i : (size_t)i * K + k;
                    Ah[at] = xh[(size_t)i * IN + k], Af[at] = xr[(size_t)i * IN + k];
                }
            for (int n = 0; n < N; n++)
                for (int k = 0; k < K; k++) {
                    size_t at = tb ? (size_t)n * K + k : (size_t)k * N + n;
                    Bh[at] = Wh[(size_t)n * IN + k], Bf[at] = Wr[(size_t)n * IN + k];
                }
            double *rr = alloc_d((size_t)M * N);
            gemm_ref(rr, NULL, Af, Bf, M, N, K, ta, tb, 1.0f, 0.0f, ta ? M : K, tb ? K : N, N);
            gemm_x(y, NULL, Ah, NULL, Bh, M, N, K, ta, tb, 1.0f, 0.0f, ta ? M : K, tb ? K : N, N);
            er = fmax(er, tl_max_rel_err(y, rr, (size_t)M * N, 1e-30));
            free(Ah), free(Bh), free(Af), free(Bf), free(rr);
        }
    gemm_bf16_refuse(0);
    gemm_set_precision(GEMM_FP32);
    CHECK(er <= 1e-5, "bf16 refused, A and B given only in bf16 (4 transpositions): the fp32 "
          "product of them widened, %.1e from their double product (tol 1e-5)", er);
    free(x), free(W), free(bias), free(y), free(y1), free(xr), free(Wr), free(ref);
    free(xh), free(Wh);
}

static void test_gemm_bf16(void)
{
    char missing[160];
    if (!cpu_bf16_kernel(missing, sizeof missing)) {
        printf("  skip gemm bf16: %s\n", missing);
        return;
    }
    CHECK(gemm_set_precision(GEMM_BF16) == 0 && gemm_get_precision() == GEMM_BF16,
          "gemm_set_precision(GEMM_BF16) starts oneDNN");
    gemm_set_precision(GEMM_FP32);
    tl_rng saved = rng;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            test_gemm_bf16_case(64, 48, 40, ta, tb, 1.0f, 0.0f);
            test_gemm_bf16_case(40, 33, 300, ta, tb, -0.5f, 1.0f);
        }
    test_gemm_bf16_shadow();
    test_gemm_bf16_many_shapes();
    rng = saved;
}

static void test_gemm(void)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            test_gemm_case(5, 7, 9, ta, tb, 0.75f, 0.0f, 0);
            test_gemm_case(5, 7, 9, ta, tb, 1.0f, 1.0f, 0);
            test_gemm_case(33, 17, 96, ta, tb, -1.25f, 1.0f, 0);
            /* vectors (one row or one column of C): gemm() takes sgemv for them */
            test_gemm_case(1, 37, 21, ta, tb, 0.75f, 0.0f, 0);
            test_gemm_case(1, 37, 21, ta, tb, -1.5f, 1.0f, 0);
            test_gemm_case(29, 1, 18, ta, tb, 0.75f, 0.0f, 0);
            test_gemm_case(29, 1, 18, ta, tb, 1.0f, 1.0f, 0);
        }
    test_gemm_case(1, 1, 1, 0, 0, 1.0f, 0.0f, 0);
    /* gemm_few, a few rows times a weight: its own kernel up to 16 rows (16-lane chunks
     * plus a tail of K, edge blocks of rows of A and of B), else gemm(). On a copy of the
     * random stream, so the cases after these draw what they always drew. */
    tl_rng saved = rng;
    test_gemm_case(6, 37, 50, 0, 1, 0.75f, 0.0f, 1);
    test_gemm_case(6, 37, 50, 0, 1, -1.0f, 1.0f, 1);
    test_gemm_case(16, 9, 96, 0, 1, 1.0f, 0.0f, 1);
    test_gemm_case(2, 4, 16, 0, 1, 1.0f, 1.0f, 1);
    test_gemm_case(1, 37, 21, 0, 1, 0.75f, 1.0f, 1);
    test_gemm_case(33, 17, 96, 0, 1, -1.25f, 1.0f, 1);
    rng = saved;

    /* K = 0: an empty sum, so C = beta C (beta 0 clears even a NaN C). M = 0: no-op. */
    float C[6] = {1, 2, 3, NAN, NAN, NAN}, A[1] = {5}, B[1] = {7};
    gemm(C, A, B, 1, 3, 0, 0, 0, 1.0f, 1.0f, 1, 3, 3);
    gemm(C + 3, A, B, 1, 3, 0, 0, 0, 1.0f, 0.0f, 1, 3, 3);
    int ok = C[0] == 1 && C[1] == 2 && C[2] == 3 && C[3] == 0 && C[4] == 0 && C[5] == 0;
    gemm_naive(C, A, B, 1, 3, 0, 0, 0, 1.0f, 1.0f, 1, 3, 3);
    ok &= C[0] == 1 && C[1] == 2 && C[2] == 3;
    gemm(C, A, B, 0, 3, 1, 0, 0, 1.0f, 0.0f, 1, 3, 3);
    ok &= C[0] == 1;
    CHECK(ok, "gemm K=0 gives beta*C (NaN cleared when beta=0); M=0 is a no-op");
}

static double wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* gemm_thread_seconds: a call on one thread counts its wall time once, a call split over
 * three threads three times, and calls made on each thread of a parallel region once each
 * (so the growth over threads x wall time is the GEMM share of the work). */
static void test_gemm_accounting(void)
{
    const int n = 320, reps = 6;
    float *A = malloc(sizeof(float) * n * n), *B = malloc(sizeof(float) * n * n);
    float *C = malloc(sizeof(float) * 3 * n * n);
    for (int i = 0; i < n * n; i++)
        A[i] = (float)(i % 13 - 6) * 0.01f, B[i] = (float)(i % 7 - 3) * 0.01f;
    double ratio[3];
    for (int k = 0; k < 3; k++) {
        par_set_threads(k ? 3 : 1);
        double g0 = gemm_thread_seconds(), t0 = wall_s(), span[3] = {0};
        if (k < 2)
            for (int r = 0; r < reps; r++)
                gemm(C, A, B, n, n, n, 0, 1, 1.0f, 0.0f, n, n, n);
        else
#pragma omp parallel num_threads(3)
        { /* each thread's own span: on a busy machine the threads may not overlap */
            double s0 = wall_s();
            for (int r = 0; r < reps; r++)
                gemm(C + (size_t)par_thread_id() * n * n, A, B, n, n, n, 0, 1, 1.0f, 0.0f, n,
                     n, n);
            span[par_thread_id()] = wall_s() - s0;
        }
        double wall = k < 2 ? wall_s() - t0 : span[0] + span[1] + span[2];
        ratio[k] = (gemm_thread_seconds() - g0) / wall;
    }
    par_set_threads(1);
    CHECK(ratio[0] > 0.9 && ratio[0] <= 1.001 && ratio[1] > 2.7 && ratio[1] <= 3.003 &&
              ratio[2] > 0.9 && ratio[2] <= 1.001,
          "gemm_thread_seconds / wall: one thread %.3f (0.9-1), split over 3 %.3f (2.7-3); 3 "
          "threads each on its own, over the sum of their spans, %.3f (0.9-1)", ratio[0],
          ratio[1], ratio[2]);
    free(A), free(B), free(C);
}

typedef struct {
    float *x, *W, *b, *y, *g;
    int rows, out, in;
} lin_ctx;

static double lin_loss(void *p)
{
    lin_ctx *c = p;
    linear_forward(c->y, c->x, c->W, c->b, c->rows, c->out, c->in, 0);
    return dot_fd(c->y, c->g, (size_t)c->rows * c->out);
}

/* linear_forward vs double y = x W^T + b (overwrite and accumulate, with and without bias);
 * linear_backward vs FD (affine in each entry: large step, tol 1e-5) and the += rule. */
static void test_linear_case(int rows, int out, int in)
{
    char lbl[64];
    snprintf(lbl, sizeof lbl, "linear %dx%d<-%d", rows, out, in);
    size_t ny = (size_t)rows * out, nx = (size_t)rows * in, nw = (size_t)out * in;
    float *x = rand_f(nx, 1.0f), *W = rand_f(nw, 0.5f), *b = rand_f(out, 0.5f);
    float *y0 = rand_f(ny, 1.0f), *y = alloc_f(ny), *g = rand_f(ny, 1.0f);
    double *ref = alloc_d(ny);

    /* forward: 4 variants */
    double worst = 0;
    int nonan = 1;
    for (int bias = 0; bias < 2; bias++)
        for (int acc = 0; acc < 2; acc++) {
            if (acc)
                memcpy(y, y0, ny * sizeof *y);
            else
                for (size_t i = 0; i < ny; i++)
                    y[i] = NAN;
            linear_forward(y, x, W, bias ? b : NULL, rows, out, in, acc);
            for (int r = 0; r < rows; r++)
                for (int o = 0; o < out; o++) {
                    double s = (acc ? y0[(size_t)r * out + o] : 0) + (bias ? b[o] : 0);
                    for (int k = 0; k < in; k++)
                        s += (double)x[(size_t)r * in + k] * W[(size_t)o * in + k];
                    ref[(size_t)r * out + o] = s;
                }
            nonan &= count_nonfinite(y, ny) == 0;
            worst = fmax(worst, tl_max_rel_err(y, ref, ny, 1e-30));
        }
    CHECK(worst <= 1e-6 && nonan,
          "%s: forward (bias/no bias x overwrite/accumulate) vs double: max err %.1e "
          "(tol 1e-6: K=%d float dot products)", lbl, worst, in);

    /* backward */
    float *dx = nan_f(nx), *dW = zeros_f(nw), *db = zeros_f(out);
    linear_backward(dx, dW, db, g, x, W, rows, out, in, 0);
    lin_ctx c = {x, W, b, y, g, rows, out, in};
    check_fd(lbl, "x", lin_loss, &c, x, dx, nx, STEP_AFFINE, 1e-5, 0);
    check_fd(lbl, "W", lin_loss, &c, W, dW, nw, STEP_AFFINE, 1e-5, 0);
    check_fd(lbl, "bias", lin_loss, &c, b, db, out, STEP_AFFINE, 1e-5, 0);

    float *dx1 = copy_f(dx, nx), *dW1 = copy_f(dW, nw), *db1 = copy_f(db, out);
    linear_backward(dx, dW, db, g, x, W, rows, out, in, 0);
    CHECK(same_f(dx, dx1, nx), "%s: dx (accumulate_dx=0) overwritten: identical after a "
          "second call, NaN prefill ignored", lbl);
    check_doubling("linear dW", dW1, dW, nw);
    check_doubling("linear dbias", db1, db, out);
    linear_backward(dx, dW, db, g, x, W, rows, out, in, 1);
    double e = doubling_err(dx1, dx, nx, NULL);
    CHECK(e <= TOL_DOUBLE, "%s: dx with accumulate_dx=1 adds (2x after one more call): err %.1e",
          lbl, e);
    /* NULL dx / dbias are allowed and leave dW's contribution unchanged */
    memset(dW, 0, nw * sizeof *dW);
    linear_backward(NULL, dW, NULL, g, x, W, rows, out, in, 0);
    CHECK(same_f(dW, dW1, nw), "%s: dx = dbias = NULL gives the same dW", lbl);

    free(x), free(W), free(b), free(y0), free(y), free(g), free(ref);
    free(dx), free(dW), free(db), free(dx1), free(dW1), free(db1);
}

static void test_linear(void)
{
    test_linear_case(4, 3, 5);
    test_linear_case(1, 6, 2);
    test_linear_case(7, 5, 8);
    /* rows = 0 (an empty batch): gradients stay what they were */
    float dW[6] = {1, 2, 3, 4, 5, 6}, db[2] = {7, 8}, W[6] = {0}, dy[1] = {0}, x[1] = {0};
    linear_backward(NULL, dW, db, dy, x, W, 0, 2, 3, 0);
    CHECK(dW[0] == 1 && dW[5] == 6 && db[0] == 7 && db[1] == 8,
          "linear rows=0: dW and dbias unchanged");
}

/* ---------------------------------------------------------------- layernorm */

typedef struct {
    float *x, *gamma, *beta, *y, *xhat, *rstd, *g;
    int rows, d;
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    layernorm_forward(c->y, c->xhat, c->rstd, c->x, c->gamma, c->beta, c->rows, c->d);
    return dot_fd(c->y, c->g, (size_t)c->rows * c->d);
}

/* Forward vs double mean / biased variance (tol 1e-6: xhat rounds (x-mean)*rstd in float,
 * a few ulps of O(1) values). Backward: smooth, step 1e-3; rstd ~ 1 and second derivatives
 * O(1), so truncation ~1e-7 and noise ~ 6e-8 sqrt(d) / 2e-3 ~ 1e-4; tol 1e-3. */
static void test_layernorm_case(int rows, int d, float offset, float spread)
{
    char lbl[64];
    snprintf(lbl, sizeof lbl, "layernorm %dx%d", rows, d);
    size_t n = (size_t)rows * d;
    float *x = rand_f(n, spread), *gamma = rand_f(d, 0.3f), *beta = rand_f(d, 0.3f);
    for (size_t i = 0; i < n; i++)
        x[i] += offset * (float)(1 + i / d);
    for (int c = 0; c < d; c++)
        gamma[c] += 1.0f;
    float *y = alloc_f(n), *xhat = alloc_f(n), *rstd = alloc_f(rows), *g = rand_f(n, 1.0f);
    double *yref = alloc_d(n), *href = alloc_d(n), *rref = alloc_d(rows);
    for (int r = 0; r < rows; r++) {
        double mean = 0, var = 0;
        for (int c = 0; c < d; c++)
            mean += x[(size_t)r * d + c];
        mean /= d;
        for (int c = 0; c < d; c++)
            var += (x[(size_t)r * d + c] - mean) * (x[(size_t)r * d + c] - mean);
        var /= d;
        rref[r] = 1.0 / sqrt(var + 1e-5);
        for (int c = 0; c < d; c++) {
            href[(size_t)r * d + c] = (x[(size_t)r * d + c] - mean) * rref[r];
            yref[(size_t)r * d + c] = href[(size_t)r * d + c] * gamma[c] + beta[c];
        }
    }
    layernorm_forward(y, xhat, rstd, x, gamma, beta, rows, d);
    double ey = tl_max_rel_err(y, yref, n, 1e-30), eh = tl_max_rel_err(xhat, href, n, 1e-30);
    double er = tl_max_rel_err(rstd, rref, rows, 1e-30);
    /* an offset of 100 with spread 0.1 costs float's (x - mean) ulp(100)/0.1 ~ 1e-4 rel. */
    double tol = offset == 0 ? 1e-6 : 2e-4;
    CHECK(ey <= tol && eh <= tol && er <= 1e-6,
          "%s (offset %g, spread %g): y, xhat, rstd vs double mean/var: %.1e %.1e %.1e (tol %.0e)",
          lbl, offset, spread, ey, eh, er, tol);
    float *ya = copy_f(x, n);
    layernorm_forward(ya, NULL, NULL, ya, gamma, beta, rows, d);
    CHECK(same_f(ya, y, n), "%s: y aliasing x, caches NULL: same y", lbl);
    free(ya);
    if (offset != 0) { /* forward-only case */
        free(x), free(gamma), free(beta), free(y), free(xhat), free(rstd), free(g);
        free(yref), free(href), free(rref);
        return;
    }

    float *dx = nan_f(n), *dgam = zeros_f(d), *dbet = zeros_f(d);
    layernorm_backward(dx, dgam, dbet, g, xhat, rstd, gamma, rows, d, 0);
    ln_ctx c = {x, gamma, beta, y, xhat, rstd, g, rows, d};
    check_fd(lbl, "x", ln_loss, &c, x, dx, n, STEP_SMOOTH, 1e-3, 0);
    check_fd(lbl, "gamma", ln_loss, &c, gamma, dgam, d, STEP_SMOOTH, 1e-3, 0);
    check_fd(lbl, "beta", ln_loss, &c, beta, dbet, d, STEP_SMOOTH, 1e-3, 0);
    layernorm_forward(y, xhat, rstd, x, gamma, beta, rows, d); /* caches at the probe point */

    float *dx1 = copy_f(dx, n), *dg1 = copy_f(dgam, d), *db1 = copy_f(dbet, d);
    layernorm_backward(dx, dgam, dbet, g, xhat, rstd, gamma, rows, d, 0);
    CHECK(same_f(dx, dx1, n), "%s: dx (accumulate=0) overwritten, NaN prefill ignored", lbl);
    check_doubling("layernorm dgamma", dg1, dgam, d);
    check_doubling("layernorm dbeta", db1, dbet, d);
    layernorm_backward(dx, dgam, dbet, g, xhat, rstd, gamma, rows, d, 1);
    double e = doubling_err(dx1, dx, n, NULL);
    CHECK(e <= TOL_DOUBLE, "%s: dx with accumulate=1 adds: err %.1e", lbl, e);
    memset(dgam, 0, d * sizeof *dgam);
    memset(dbet, 0, d * sizeof *dbet);
    layernorm_backward(NULL, dgam, dbet, g, xhat, rstd, gamma, rows, d, 0);
    CHECK(same_f(dgam, dg1, d) && same_f(dbet, db1, d), "%s: dx = NULL gives the same "
          "dgamma, dbeta", lbl);

    free(x), free(gamma), free(beta), free(y), free(xhat), free(rstd), free(g);
    free(yref), free(href), free(rref), free(dx), free(dgam), free(dbet);
    free(dx1), free(dg1), free(db1);
}

static void test_layernorm(void)
{
    test_layernorm_case(3, 5, 0, 1.0f);
    test_layernorm_case(1, 16, 0, 2.0f);
    test_layernorm_case(5, 8, 0, 0.5f);
    test_layernorm_case(4, 64, 100.0f, 0.1f); /* large mean, small spread: forward only */
}

/* ---------------------------------------------------------------- embedding */

typedef struct {
    float *E, *h, *g;
    const txl_tok *tok;
    int n, d;
    float scale;
} emb_ctx;

static double emb_loss(void *p)
{
    emb_ctx *c = p;
    embedding_forward(c->h, c->E, c->tok, c->n, c->d, c->scale);
    return dot_fd(c->h, c->g, (size_t)c->n * c->d);
}

/* Forward: h = E[tok] * scale is one float product, so it equals (float)(E * scale) exactly.
 * Backward: affine, large step, tol 1e-5; tokens repeat so rows accumulate. */
static void test_embedding(void)
{
    const int V = 10, n = 9, d = 6;
    const txl_tok tok[9] = {3, 0, 9, 3, 3, 7, 0, 2, 9};
    float scale = sqrtf((float)d);
    float *E = rand_f((size_t)V * d, 1.0f), *h = nan_f((size_t)n * d);
    float *g = rand_f((size_t)n * d, 1.0f);
    embedding_forward(h, E, tok, n, d, scale);
    int ok = 1;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < d; c++)
            ok &= h[(size_t)i * d + c] == (float)((double)E[(size_t)tok[i] * d + c] * scale);
    CHECK(ok, "embedding: forward equals E[tok] * sqrt(d) exactly");
    float *dE = zeros_f((size_t)V * d);
    embedding_backward(dE, g, tok, n, d, scale);
    emb_ctx c = {E, h, g, tok, n, d, scale};
    check_fd("embedding (repeated tokens)", "E", emb_loss, &c, E, dE, (size_t)V * d, STEP_AFFINE,
             1e-5, 0);
    float *dE1 = copy_f(dE, (size_t)V * d);
    embedding_backward(dE, g, tok, n, d, scale);
    check_doubling("embedding dE", dE1, dE, (size_t)V * d);
    free(E), free(h), free(g), free(dE), free(dE1);
}

/* ---------------------------------------------------------------- xent */

typedef struct {
    float *h, *E, *b, *logits, *lse, *row_loss;
    const txl_tok *y;
    int rows, d, V;
    float scale;
} xent_ctx;

static double xent_loss(void *p)
{
    xent_ctx *c = p;
    return c->scale * xent_forward(c->logits, c->lse, c->row_loss, c->h, c->E, c->b, c->y,
                                   c->rows, c->d, c->V);
}

/* Forward vs double logits / log-sum-exp / per-row loss. Float logits carry ~eps32 |z|
 * each, and lse and the loss inherit it: tol 1e-6 relative to max|z| (norm-relative).
 * Backward: smooth, step 1e-3, tol 1e-3 (noise ~ 6e-8 sqrt(V) |z| / 2e-3 on O(1/rows)
 * gradients). dlogits (the in-place buffer) rows sum to 0 up to V * eps32 * scale. */
static void test_xent_case(int rows, int d, int V, float hscale)
{
    char lbl[64];
    snprintf(lbl, sizeof lbl, "xent %dx%d V=%d (h, E ~ N(0, %g^2))", rows, d, V, hscale);
    size_t nl = (size_t)rows * V;
    float *h = rand_f((size_t)rows * d, hscale), *E = rand_f((size_t)V * d, hscale);
    float *b = rand_f(V, 0.5f), *logits = alloc_f(nl), *lse = alloc_f(rows);
    float *rl = alloc_f(rows);
    txl_tok *y = malloc(rows * sizeof *y);
    for (int r = 0; r < rows; r++)
        y[r] = (txl_tok)((r * 7 + 3) % V);
    y[rows - 1] = y[0]; /* a repeated target */
    float scale = 1.0f / rows;

    double *zref = alloc_d(nl), *lref = alloc_d(rows), *rlref = alloc_d(rows), tot = 0;
    for (int r = 0; r < rows; r++) {
        double mx = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) {
            double z = b[v];
            for (int k = 0; k < d; k++)
                z += (double)h[(size_t)r * d + k] * E[(size_t)v * d + k];
            zref[(size_t)r * V + v] = z;
            mx = fmax(mx, z);
        }
        for (int v = 0; v < V; v++)
            s += exp(zref[(size_t)r * V + v] - mx);
        lref[r] = mx + log(s);
        rlref[r] = lref[r] - zref[(size_t)r * V + y[r]];
        tot += rlref[r];
    }
    double ret = xent_forward(logits, lse, rl, h, E, b, y, rows, d, V);
    double zmax = 0;
    for (size_t i = 0; i < nl; i++)
        zmax = fmax(zmax, fabs(zref[i]));
    double ez = tl_max_rel_err(logits, zref, nl, 1e-30);
    double el = tl_max_rel_err(lse, lref, rows, zmax);
    double er = tl_max_rel_err(rl, rlref, rows, zmax);
    double et = fabs(ret - tot) / (rows * fmax(zmax, 1.0));
    CHECK(ez <= 1e-6 && el <= 1e-6 && er <= 1e-6 && et <= 1e-6,
          "%s: forward vs double: logits %.1e, lse %.1e, row loss %.1e, sum %.1e "
          "(rel. to max|z|; tol 1e-6)", lbl, ez, el, er, et);
    double r0 = xent_forward(logits, lse, NULL, h, E, b, NULL, rows, d, V);
    CHECK(r0 == 0 && tl_max_rel_err(logits, zref, nl, 1e-30) == ez,
          "%s: y = NULL (inference) returns 0 and the same logits", lbl);

    xent_forward(logits, lse, rl, h, E, b, y, rows, d, V);
    float *dh = nan_f((size_t)rows * d), *dE = zeros_f((size_t)V * d), *db = zeros_f(V);
    xent_backward(dh, dE, db, logits, lse, h, E, y, rows, d, V, scale);
    /* dlogits rows sum to 0: softmax sums to 1 and the one-hot to 1 (so does sum(db)) */
    double rowsum = 0, dbsum = 0;
    for (int r = 0; r < rows; r++) {
        double s = 0;
        for (int v = 0; v < V; v++)
            s += logits[(size_t)r * V + v];
        rowsum = fmax(rowsum, fabs(s));
    }
    for (int v = 0; v < V; v++)
        dbsum += db[v];
    double rs_tol = 4 * V * FLT_EPSILON * scale;
    CHECK(rowsum <= rs_tol && fabs(dbsum) <= rows * rs_tol,
          "%s: dlogits rows sum to 0 (max |sum| %.1e, tol 4 V eps32 scale = %.1e); sum(db) %.1e",
          lbl, rowsum, rs_tol, dbsum);

    xent_ctx c = {h, E, b, logits, lse, rl, y, rows, d, V, scale};
    check_fd(lbl, "h", xent_loss, &c, h, dh, (size_t)rows * d, STEP_SMOOTH, 1e-3, 0);
    check_fd(lbl, "E", xent_loss, &c, E, dE, (size_t)V * d, STEP_SMOOTH, 1e-3, 0);
    check_fd(lbl, "b", xent_loss, &c, b, db, V, STEP_SMOOTH, 1e-3, 0);

    float *dh1 = copy_f(dh, (size_t)rows * d), *dE1 = copy_f(dE, (size_t)V * d);
    float *db1 = copy_f(db, V);
    xent_forward(logits, lse, rl, h, E, b, y, rows, d, V); /* backward consumed logits */
    xent_backward(dh, dE, db, logits, lse, h, E, y, rows, d, V, scale);
    CHECK(same_f(dh, dh1, (size_t)rows * d), "%s: dh overwritten, NaN prefill ignored", lbl);
    check_doubling("xent dE", dE1, dE, (size_t)V * d);
    check_doubling("xent db", db1, db, V);

    free(h), free(E), free(b), free(logits), free(lse), free(rl), free(y);
    free(zref), free(lref), free(rlref), free(dh), free(dE), free(db);
    free(dh1), free(dE1), free(db1);
}

static void test_xent(void)
{
    test_xent_case(4, 5, 7, 1.0f);
    test_xent_case(1, 3, 2, 1.0f);
    test_xent_case(3, 8, 256, 1.0f);
    test_xent_case(2, 4, 9, 5.0f); /* logits ~ +-100: exp would overflow without the max */
}

/* ---------------------------------------------------------------- adaptive softmax */

/* The tensors come from the model's parameter table (model_init, model_adapt_view: the
 * names, shapes and ties of adaptive.h); every other tensor of that model is unused here.
 * The reference is written from adaptive.h's formulas in double, cluster by cluster.
 * Tolerances as the header's: the log-softmax is a smooth nonlinear op like xent (forward
 * 1e-6 of max|log p|, FD step 1e-2, tol 1e-3); the adaptive input is affine in each single
 * entry of E_i and of P_i (h = s E P^T), so the large step and 1e-5. Blocks of 2-4 rows and
 * chunks of 3-5 logits (ws.R, ws.C set below the planned sizes) run every blocked path: a
 * cluster over several blocks and chunks, the head's cluster logits in a chunk of their own,
 * a cluster without targets; one case keeps the full sizes (one block, one chunk). */
typedef struct {
    model mdl;
    adapt_shape s;
    adapt_tensors W, G;
    adapt_ws ws;
    float *wsbuf, *x, *rl, *h, *g;
    txl_tok *y, *tok;
    int rows, n_tok;
    float scale;
} ad_ctx;

static double ad_xent_loss(void *p)
{
    ad_ctx *c = p;
    return c->scale * adapt_xent_forward(c->rl, c->x, &c->W, &c->s, c->y, c->rows, &c->ws);
}

static double ad_embed_loss(void *p)
{
    ad_ctx *c = p;
    adapt_embed_forward(c->h, &c->W, &c->s, c->tok, c->n_tok, 2.5f, &c->ws);
    return dot_fd(c->h, c->g, (size_t)c->n_tok * c->s.d);
}

/* x Q (or x) in double: v [dk] */
static void ad_ref_project(double *v, const float *x, const float *Q, int d, int dk)
{
    for (int j = 0; j < dk; j++) {
        double s = 0;
        for (int k = 0; k < d; k++)
            s += Q ? (double)x[k] * Q[(size_t)k * dk + j] : (k == j ? x[k] : 0.0);
        v[j] = s;
    }
}

static double ad_ref_logit(const double *v, const float *w, float b, int dk)
{
    double z = b;
    for (int j = 0; j < dk; j++)
        z += v[j] * w[j];
    return z;
}

/* lp [V]: log p of every token for one row x, from adaptive.h's formulas */
static void ad_ref_logprobs(double *lp, const ad_ctx *c, const float *x)
{
    const adapt_shape *s = &c->s;
    const int T = s->n - 1, n0 = s->hi[0], d = s->d;
    double v[64], zc[ADAPT_MAX_CLUSTERS], mx = -INFINITY, sum = 0;
    ad_ref_project(v, x, c->W.pout[0], d, s->dim[0]);
    for (int j = 0; j < n0; j++)
        mx = fmax(mx, lp[j] = ad_ref_logit(v, c->W.emb[0] + (size_t)j * s->dim[0],
                                           c->W.bias[0][j], s->dim[0]));
    for (int t = 0; t < T; t++)
        mx = fmax(mx, zc[t] = ad_ref_logit(v, c->W.cw + (size_t)t * s->dim[0], c->W.cb[t],
                                           s->dim[0]));
    for (int j = 0; j < n0; j++)
        sum += exp(lp[j] - mx);
    for (int t = 0; t < T; t++)
        sum += exp(zc[t] - mx);
    double lse = mx + log(sum);
    for (int j = 0; j < n0; j++)
        lp[j] -= lse;
    for (int i = 1; i <= T; i++) {
        int lo = s->lo[i], ni = s->hi[i] - lo, dk = s->dim[i];
        double mt = -INFINITY, st = 0;
        ad_ref_project(v, x, c->W.pout[i], d, dk);
        for (int j = 0; j < ni; j++)
            mt = fmax(mt, lp[lo + j] = ad_ref_logit(v, c->W.emb[i] + (size_t)j * dk,
                                                     c->W.bias[i][j], dk));
        for (int j = 0; j < ni; j++)
            st += exp(lp[lo + j] - mt);
        double off = (zc[T - i] - lse) - (mt + log(st)); /* official's head_logprob[:, -i] */
        for (int j = 0; j < ni; j++)
            lp[lo + j] += off;
    }
}

/* FD of f over every adaptive tensor of the table (word_emb.*, crit.*) against the
 * gradient array, with relative step `rel` */
static void ad_check_tensors(const char *lbl, ad_ctx *c, loss_fn f, const char *prefix,
                             double rel, double tol)
{
    for (int i = 0; i < c->mdl.n_params; i++) {
        const param_entry *p = &c->mdl.table[i];
        if (strncmp(p->name, "word_emb.", 9) && strncmp(p->name, "crit.", 5))
            continue;
        if (prefix && strncmp(p->name, prefix, strlen(prefix)))
            continue;
        check_fd(lbl, p->name, f, c, c->mdl.w + p->offset, c->mdl.g + p->offset, p->numel,
                 rel, tol, 0);
    }
}

static void test_adaptive_case(const char *lbl, int V, const int *cut, int T, int d,
                               int d_embed, int div, int tie, int R, int C, int skip)
{
    model_config mc = {.n_layer = 1, .d_model = d, .n_head = 1, .d_head = 2, .d_inner = 2,
                       .tgt_len = 1, .pos = POS_NONE, .vocab = V, .div_val = div,
                       .d_embed = d_embed, .tie_projs = tie, .cutoffs = {.n = T}};
    for (int i = 0; i < T; i++)
        mc.cutoffs.v[i] = cut[i];
    ad_ctx c = {.rows = 11, .n_tok = 13, .scale = 1.0f / 11};
    txl_err e;
    if (model_init(&c.mdl, &mc, &e) || model_alloc_grads(&c.mdl, &e)) {
        CHECK(0, "%s: model_init: %s", lbl, e.msg);
        return;
    }
    tl_fill(&rng, c.mdl.w, c.mdl.n_floats, 0.7f);
    adapt_shape_of(&mc, &c.s);
    model_adapt_view(&mc, &c.mdl.W, &c.W);
    model_adapt_view(&mc, &c.mdl.G, &c.G);
    c.wsbuf = alloc_f((size_t)adapt_ws_floats(&c.s, 64, 1));
    adapt_ws_place(&c.ws, &c.s, 64, 1, c.wsbuf);
    c.ws.R = R < c.ws.R ? R : c.ws.R; /* small blocks and chunks: every blocked path */
    c.ws.C = C < c.ws.C ? C : c.ws.C;
    c.x = rand_f((size_t)c.rows * d, 1.0f);
    c.rl = alloc_f(c.rows);
    c.y = malloc((size_t)c.rows * sizeof *c.y);
    c.tok = malloc((size_t)c.n_tok * sizeof *c.tok);
    for (int r = 0; r < c.rows; r++) /* every cluster, the last token, a repeat */
        c.y[r] = r == 1 ? c.y[0] : (txl_tok)(r == 0 ? V - 1 : (r * 5 + 2) % V);
    for (int r = 0; r < c.n_tok; r++)
        c.tok[r] = r == 3 ? c.tok[0] : (txl_tok)((r * 7 + 1) % V);
    for (int r = 0; skip > 0 && r < c.rows; r++) /* no target in tail `skip` */
        if ((int)c.y[r] >= c.s.lo[skip] && (int)c.y[r] < c.s.hi[skip])
            c.y[r] = (txl_tok)c.s.lo[skip - 1];

    /* forward against the double reference: every row's full log-probabilities */
    double *lp = alloc_d((size_t)c.rows * V), rl_ref[16], tot = 0, worst_n = 0;
    for (int r = 0; r < c.rows; r++) {
        ad_ref_logprobs(lp + (size_t)r * V, &c, c.x + (size_t)r * d);
        double sp = 0;
        for (int v = 0; v < V; v++)
            sp += exp(lp[(size_t)r * V + v]);
        worst_n = fmax(worst_n, fabs(sp - 1));
        tot += rl_ref[r] = -lp[(size_t)r * V + c.y[r]];
    }
    double ret = adapt_xent_forward(c.rl, c.x, &c.W, &c.s, c.y, c.rows, &c.ws);
    double lmax = 0;
    for (size_t i = 0; i < (size_t)c.rows * V; i++)
        lmax = fmax(lmax, fabs(lp[i]));
    double er = tl_max_rel_err(c.rl, rl_ref, c.rows, lmax), et = fabs(ret - tot) / (c.rows * lmax);
    float *out = nan_f((size_t)c.rows * V), *out_few = nan_f((size_t)c.rows * V);
    adapt_logprobs(out, c.x, &c.W, &c.s, c.rows, 0, &c.ws);
    adapt_logprobs(out_few, c.x, &c.W, &c.s, c.rows, 1, &c.ws);
    double ep = tl_max_rel_err(out, lp, (size_t)c.rows * V, 1e-30);
    double ef = tl_max_rel_err(out_few, lp, (size_t)c.rows * V, 1e-30);
    CHECK(worst_n < 1e-12 && er <= 1e-6 && et <= 1e-6 && ep <= 1e-6 && ef <= 1e-6,
          "%s: forward vs double (reference sums to 1 within %.0e): row loss %.1e, sum %.1e, "
          "log-probs %.1e, through gemm_few %.1e (rel. to max|log p|; tol 1e-6)", lbl, worst_n,
          er, et, ep, ef);

    /* backward: dx against FD; every tensor against FD; += and the NaN prefill of dx */
    float *dx = nan_f((size_t)c.rows * d);
    model_zero_grads(&c.mdl);
    adapt_xent_forward(c.rl, c.x, &c.W, &c.s, c.y, c.rows, &c.ws);
    adapt_xent_backward(dx, &c.G, c.x, &c.W, &c.s, c.y, c.rows, c.scale, &c.ws);
    check_fd(lbl, "x", ad_xent_loss, &c, c.x, dx, (size_t)c.rows * d, STEP_SMOOTH, 1e-3, 0);
    ad_check_tensors(lbl, &c, ad_xent_loss, NULL, STEP_SMOOTH, 1e-3);
    float *g1 = copy_f(c.mdl.g, c.mdl.n_floats), *dx1 = copy_f(dx, (size_t)c.rows * d);
    adapt_xent_forward(c.rl, c.x, &c.W, &c.s, c.y, c.rows, &c.ws);
    adapt_xent_backward(dx, &c.G, c.x, &c.W, &c.s, c.y, c.rows, c.scale, &c.ws);
    CHECK(same_f(dx, dx1, (size_t)c.rows * d), "%s: dx overwritten, NaN prefill ignored", lbl);
    check_doubling("adaptive softmax grads", g1, c.mdl.g, c.mdl.n_floats);

    /* adapt_xent_train (training's one pass, a block's logits kept in ws.zh where they
     * fit: with the planned room every block's; with a head block's room for the small
     * blocks, a wider tail's recomputed): the numbers of forward then backward, bit for
     * bit; dx overwritten */
    model_zero_grads(&c.mdl);
    double r2 = adapt_xent_forward(c.rl, c.x, &c.W, &c.s, c.y, c.rows, &c.ws);
    adapt_xent_backward(dx, &c.G, c.x, &c.W, &c.s, c.y, c.rows, c.scale, &c.ws);
    float *g2 = copy_f(c.mdl.g, c.mdl.n_floats), *rl2 = copy_f(c.rl, c.rows);
    float *dx3 = nan_f((size_t)c.rows * d);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && c.ws.zh) /* room for a head block of ws.R rows only */
            c.ws.zh_cap = (size_t)c.ws.R * (size_t)(c.s.hi[0] + c.s.n - 1);
        model_zero_grads(&c.mdl);
        memset(dx3, 0xff, (size_t)c.rows * d * sizeof *dx3);
        double r3 = adapt_xent_train(c.rl, dx3, &c.G, c.x, &c.W, &c.s, c.y, c.rows, c.scale,
                                     &c.ws);
        CHECK(r3 == r2 && same_f(c.rl, rl2, c.rows) && same_f(dx3, dx, (size_t)c.rows * d) &&
                  same_f(c.mdl.g, g2, c.mdl.n_floats),
              "%s: adapt_xent_train (logits %s) is forward then backward, bit for bit", lbl,
              !c.ws.zh ? "recomputed" : pass ? "kept for the head's room" : "kept");
    }
    free(g2), free(rl2), free(dx3);

    /* the adaptive input: forward against the double formula, backward against FD */
    c.h = nan_f((size_t)c.n_tok * d);
    c.g = rand_f((size_t)c.n_tok * d, 1.0f);
    adapt_embed_forward(c.h, &c.W, &c.s, c.tok, c.n_tok, 2.5f, &c.ws);
    double *href = alloc_d((size_t)c.n_tok * d), v[64];
    for (int r = 0; r < c.n_tok; r++) {
        int i = 0;
        while (i + 1 < c.s.n && (int)c.tok[r] >= c.s.hi[i])
            i++;
        const float *er_ = c.W.emb[i] + (size_t)((int)c.tok[r] - c.s.lo[i]) * c.s.dim[i];
        for (int k = 0; k < d; k++) { /* sqrt(d) (e P^T), or e itself without P */
            v[k] = 0;
            for (int j = 0; j < c.s.dim[i]; j++)
                v[k] += c.W.pin[i] ? (double)er_[j] * c.W.pin[i][(size_t)k * c.s.dim[i] + j]
                                   : (j == k ? er_[j] : 0.0);
            href[(size_t)r * d + k] = 2.5 * v[k];
        }
    }
    double eh = tl_max_rel_err(c.h, href, (size_t)c.n_tok * d, 1e-30);
    CHECK(eh <= 1e-6, "%s: adaptive input vs double: %.1e (tol 1e-6)", lbl, eh);
    model_zero_grads(&c.mdl);
    adapt_embed_backward(&c.G, &c.W, &c.s, c.g, c.tok, c.n_tok, 2.5f, &c.ws);
    ad_check_tensors(lbl, &c, ad_embed_loss, "word_emb.", STEP_AFFINE, 1e-5);
    memcpy(g1, c.mdl.g, c.mdl.n_floats * sizeof(float));
    adapt_embed_backward(&c.G, &c.W, &c.s, c.g, c.tok, c.n_tok, 2.5f, &c.ws);
    check_doubling("adaptive input grads", g1, c.mdl.g, c.mdl.n_floats);

    free(lp), free(out), free(out_few), free(dx), free(g1), free(dx1), free(href);
    free(c.wsbuf), free(c.x), free(c.rl), free(c.y), free(c.tok), free(c.h), free(c.g);
    model_free(&c.mdl);
}

static void test_adaptive(void)
{
    const int c3[] = {5, 9, 17}, c2[] = {4, 11}, c1[] = {7};
    /* div_val 2: a table and a projection per cluster (widths 8, 4, 2, 1); tails' Q tied */
    test_adaptive_case("adaptive div2 tied", 23, c3, 3, 6, 8, 2, 1, 3, 3, -1);
    test_adaptive_case("adaptive div2 untied", 23, c3, 3, 6, 8, 2, 0, 2, 5, -1);
    /* a tail without targets: its tensors get no softmax gradient (only the head's logit) */
    test_adaptive_case("adaptive div2 tail 2 empty", 23, c3, 3, 6, 8, 2, 1, 3, 3, 2);
    /* div_val 1, d_embed = d: one table, no projection (official's wt103 base) */
    test_adaptive_case("adaptive div1 noproj", 15, c2, 2, 6, 6, 1, 1, 2, 5, -1);
    /* div_val 1, d_embed != d: one P_0, the head's Q_0 its own, the tail's tied or not */
    test_adaptive_case("adaptive div1 proj tied", 12, c1, 1, 6, 5, 1, 1, 4, 4, -1);
    test_adaptive_case("adaptive div1 proj untied", 12, c1, 1, 6, 5, 1, 0, 64, 4096, -1);
    /* no cutoffs, a projected full softmax */
    test_adaptive_case("adaptive nocut proj", 9, NULL, 0, 6, 4, 1, 0, 3, 4, -1);
}

/* ---------------------------------------------------------------- dropout */

typedef struct {
    float *x, *y, *g;
    size_t n;
    float p;
    uint64_t key, base;
} drop_ctx;

static double drop_loss(void *q)
{
    drop_ctx *c = q;
    dropout_forward(c->y, c->x, c->n, c->p, c->key, c->base);
    return dot_fd(c->y, c->g, c->n);
}

static void test_dropout(void)
{
    const size_t n = 100000;
    float *ones = alloc_f(n), *y = alloc_f(n), *y2 = alloc_f(n);
    for (size_t i = 0; i < n; i++)
        ones[i] = 1.0f;
    const float ps[3] = {0.1f, 0.3f, 0.5f};
    for (int k = 0; k < 3; k++) {
        float p = ps[k];
        uint64_t key = 0x1234 + k;
        dropout_forward(y, ones, n, p, key, 0);
        size_t kept = 0;
        int vals_ok = 1, pred_ok = 1;
        float kv = (float)(1.0 / (1.0 - p));
        for (size_t i = 0; i < n; i++) {
            int keep = y[i] != 0.0f;
            kept += keep;
            /* kept values are x / (1-p) to within an ulp (x * float(1/(1-p))) */
            vals_ok &= !keep || fabsf(y[i] - kv) <= kv * FLT_EPSILON;
            /* the documented predicate: kept iff hash >= p * 2^32 */
            pred_ok &= keep == (dropout_draw(key, i) >= dropout_threshold(p));
        }
        double frac = (double)kept / n, sigma = sqrt(p * (1.0 - p) / n);
        double z = (frac - (1.0 - p)) / sigma;
        CHECK(fabs(z) <= 5 && vals_ok && pred_ok,
              "dropout p=%.1f over %zu: kept fraction %.5f (%.2f sigma from 1-p, tol 5), kept "
              "values x/(1-p), mask = documented hash predicate", p, n, frac, z);
    }

    float p = 0.3f;
    float *x = rand_f(n, 1.0f);
    dropout_forward(y, x, n, p, 77, 5);
    dropout_forward(y2, x, n, p, 77, 5);
    int same = same_f(y, y2, n);
    dropout_forward(y2, x, n, p, 78, 5);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += (y[i] == 0) != (y2[i] == 0);
    CHECK(same && differ > n / 10, "dropout: same key+base gives the same mask; another key "
          "changes %zu of %zu decisions", differ, n);

    /* a slice [300, 700) drawn with base + 300 equals that part of the whole */
    dropout_forward(y, x, 1000, p, 99, 12345);
    dropout_forward(y2, x + 300, 400, p, 99, 12345 + 300);
    CHECK(same_f(y + 300, y2, 400), "dropout: slice with base offset equals the whole's part");

    dropout_backward(y2, x, n, p, 77, 5);
    dropout_forward(y, x, n, p, 77, 5);
    int bw = same_f(y, y2, n);
    memcpy(y2, x, n * sizeof *y2);
    dropout_backward(y2, y2, n, p, 77, 5);
    int alias_b = same_f(y, y2, n);
    memcpy(y2, x, n * sizeof *y2);
    dropout_forward(y2, y2, n, p, 77, 5);
    int alias_f = same_f(y, y2, n);
    CHECK(bw && alias_b && alias_f, "dropout_backward is forward's map (also in place, as is "
          "forward)");
    dropout_forward(y, x, n, 0.0f, 77, 5);
    memcpy(y2, x, n * sizeof *y2);
    dropout_forward(y2, y2, n, 0.0f, 77, 5);
    CHECK(same_f(y, x, n) && same_f(y2, x, n), "dropout p=0: plain copy / in-place no-op");

    /* the fused forms equal the unfused passes bit for bit, at p = 0 and 0.3, on lengths and
     * bases that leave partial hash groups at both ends, in place and out of place */
    int fused_ok = 1;
    float *r = rand_f(n, 1.0f), *y3 = alloc_f(n), *cp = alloc_f(n);
    for (int pk = 0; pk < 2; pk++)
        for (int t = 0; t < 3; t++) {
            float pp = pk ? 0.3f : 0.0f;
            size_t len = t == 0 ? n : t == 1 ? 3 : 70001;
            uint64_t base = t == 0 ? 0 : t == 1 ? 6 : 4099;
            dropout_forward(y, x, len, pp, 42, base); /* add: y = r + drop(x) */
            for (size_t i = 0; i < len; i++)
                y[i] = r[i] + y[i];
            dropout_add(y2, r, x, len, pp, 42, base);
            memcpy(y3, x, len * sizeof *y3);
            dropout_add(y3, r, y3, len, pp, 42, base);
            fused_ok &= same_f(y, y2, len) && same_f(y, y3, len);
            dropout_backward(y, x, len, pp, 42, base); /* copy: cp = x; y = drop(x) */
            memcpy(y2, x, len * sizeof *y2);
            dropout_backward_copy(y2, cp, y2, len, pp, 42, base);
            fused_ok &= same_f(y, y2, len) && same_f(cp, x, len);
            for (size_t i = 0; i < len; i++) /* relu: y = drop(relu(x)) */
                y3[i] = x[i] > 0.0f ? x[i] : 0.0f;
            dropout_forward(y, y3, len, pp, 42, base);
            dropout_relu(y2, x, len, pp, 42, base);
            fused_ok &= same_f(y, y2, len);
        }
    CHECK(fused_ok, "dropout_add, dropout_backward_copy, dropout_relu equal their unfused "
          "passes bitwise (p 0 and 0.3, partial hash groups, in place)");
    free(r), free(y3), free(cp);

    /* FD: affine map, large step, tol 1e-5 */
    size_t nf = 200;
    float *g = rand_f(nf, 1.0f), *dx = alloc_f(nf);
    dropout_backward(dx, g, nf, p, 5, 11);
    drop_ctx c = {x, y, g, nf, p, 5, 11};
    check_fd("dropout p=0.3", "x", drop_loss, &c, x, dx, nf, STEP_AFFINE, 1e-5, 0);
    free(ones), free(y), free(y2), free(x), free(g), free(dx);
}

/* ---------------------------------------------------------------- ff activation */

typedef struct {
    float *z, *a, *g;
    size_t n;
    float p;
    uint64_t key, base;
} ff_ctx;

static double ff_loss(void *q)
{
    ff_ctx *c = q;
    dropout_relu(c->a, c->z, c->n, c->p, c->key, c->base);
    return dot_fd(c->a, c->g, c->n);
}

/* a = relu(z) * mask / (1-p). Piecewise affine: step 1e-2 (truncation-free away from 0),
 * probes with |z| within 1.5 steps of the kink at 0 are skipped; tol 1e-5. */
static void test_ff(void)
{
    const size_t n = 400;
    const float ps[2] = {0.0f, 0.25f};
    for (int k = 0; k < 2; k++) {
        float p = ps[k];
        char lbl[48];
        snprintf(lbl, sizeof lbl, "dropout_relu p=%.2f", p);
        float *z = rand_f(n, 1.0f), *a = alloc_f(n), *g = rand_f(n, 1.0f), *ref = alloc_f(n);
        float *dz = nan_f(n);
        for (size_t i = 0; i < n; i++)
            ref[i] = z[i] > 0 ? z[i] : 0.0f;
        dropout_forward(ref, ref, n, p, 42, 1000);
        dropout_relu(a, z, n, p, 42, 1000);
        CHECK(same_f(a, ref, n), "%s: forward equals dropout(relu(z)) with the same key/base", lbl);
        float *za = copy_f(z, n);
        dropout_relu(za, za, n, p, 42, 1000);
        CHECK(same_f(za, a, n), "%s: forward in place (a aliasing z)", lbl);
        free(za);
        dropout_relu_backward(dz, g, a, n, p);
        ff_ctx c = {z, a, g, n, p, 42, 1000};
        check_fd(lbl, "z (kinks skipped)", ff_loss, &c, z, dz, n, 1e-2, 1e-5, 1);
        dropout_relu(a, z, n, p, 42, 1000);
        float *dz1 = copy_f(dz, n), *ga = copy_f(g, n);
        dropout_relu_backward(dz, g, a, n, p);
        dropout_relu_backward(ga, ga, a, n, p);
        CHECK(same_f(dz, dz1, n) && same_f(ga, dz1, n), "%s: dz overwritten (NaN prefill "
              "ignored), also in place", lbl);
        free(z), free(a), free(g), free(ref), free(dz), free(dz1), free(ga);
    }
}

/* ---------------------------------------------------------------- attention */

typedef struct {
    const char *name;
    int B, H, dh, Lq, m;
    int use_u, use_v, use_rk, use_bias;
    int dr, clamp;  /* rk = pos_sinusoid(klen, dr, klen-1, -1, clamp) @ Wr^T, Wr [H*dh, dr] */
    float dropatt;
    float qscale;   /* scale of q (large: saturated softmax, forward checks only) */
} attn_case;

typedef struct {
    attn_args a;
    float *q, *kv, *prob, *vec, *scratch, *g;
    size_t nvec;
} attn_ctx;

static double attn_loss(void *p)
{
    attn_ctx *c = p;
    attn_forward(c->prob, c->vec, c->q, c->kv, &c->a, c->scratch);
    return dot_fd(c->vec, c->g, c->nvec);
}

/* The score (doc/design.md, "The model") computed per (i, j) in double. The xl position vector is
 * built from the distance itself, rk(delta) = Wr [sin(delta f), cos(delta f)] with
 * f_t = exp(-2t/dr ln 10000) and delta clamped to clamp_len: if the op reads rk at any row
 * other than p = Lq-1-i+j (whose position klen-1-p is delta), this disagrees.
 * keep: [B,H,Lq,klen] dropatt factors (0 or 1/(1-p)) or NULL. */
static void attn_ref(double *prob, double *vec, const attn_case *t, const float *q,
                     const float *kv, const float *u, const float *v, const float *Wr,
                     const float *bias, const float *keep)
{
    const int B = t->B, H = t->H, dh = t->dh, Lq = t->Lq, m = t->m, klen = m + Lq;
    const int hd = H * dh, dr = t->dr;
    const double scale = 1.0 / sqrt((double)dh);
    double *rkd = alloc_d((size_t)klen * hd), *R = alloc_d(dr > 0 ? dr : 1), *s = alloc_d(klen);
    if (t->use_rk)
        for (int delta = 0; delta < klen; delta++) {
            double pos = t->clamp > 0 && delta > t->clamp ? t->clamp : delta;
            for (int e = 0; e < dr / 2; e++) {
                double ang = pos * exp(-2.0 * e / dr * log(10000.0));
                R[e] = sin(ang);
                R[dr / 2 + e] = cos(ang);
            }
            for (int o = 0; o < hd; o++) {
                double acc = 0;
                for (int e = 0; e < dr; e++)
                    acc += (double)Wr[(size_t)o * dr + e] * R[e];
                rkd[(size_t)delta * hd + o] = acc;
            }
        }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < Lq; i++) {
                const float *qi = q + ((size_t)b * Lq + i) * hd + (size_t)h * dh;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= m + i; j++) {
                    int delta = m + i - j;
                    const float *kj = kv + ((size_t)b * klen + j) * 2 * hd + (size_t)h * dh;
                    double ac = 0, bd = 0;
                    for (int c = 0; c < dh; c++) {
                        ac += ((double)qi[c] + (u ? u[h * dh + c] : 0.0)) * kj[c];
                        if (t->use_rk)
                            bd += ((double)qi[c] + (v ? v[h * dh + c] : 0.0)) *
                                  rkd[(size_t)delta * hd + h * dh + c];
                    }
                    s[j] = scale * (ac + bd) + (bias ? bias[(size_t)h * klen + delta] : 0.0);
                    mx = fmax(mx, s[j]);
                }
                for (int j = 0; j <= m + i; j++)
                    sum += exp(s[j] - mx);
                double *pr = prob + (((size_t)b * H + h) * Lq + i) * klen;
                for (int j = 0; j < klen; j++)
                    pr[j] = j <= m + i ? exp(s[j] - mx) / sum : 0.0;
                for (int c = 0; c < dh; c++) {
                    double acc = 0;
                    for (int j = 0; j <= m + i; j++)
                        acc += pr[j] * (keep ? keep[pr - prob + j] : 1.0) *
                               kv[((size_t)b * klen + j) * 2 * hd + hd + (size_t)h * dh + c];
                    vec[((size_t)b * Lq + i) * hd + (size_t)h * dh + c] = acc;
                }
            }
    free(rkd), free(R), free(s);
}

/* Forward vs attn_ref: float scores carry ~eps32 * |s| and the softmax turns that into the
 * same relative error of the probabilities: tol 1e-5 (|s| up to ~10).
 * Backward: smooth, step 1e-3. Each probe moves one row of scores (or one key's column),
 * whose float noise ~ 6e-8 * sqrt(klen dh) * |vec||g| / 2e-3 ~ 1e-4 of gradients that are
 * O(0.1..1) here: tol 2e-3. */
/* attn_decode over a bf16 cache (decode.h): the keys, values and xl position rows in
 * decode's layout (each head's rows contiguous, [klen, dh]) rounded to bf16, read through
 * kv16 and rk16, against the fp32 path over the same rounded values in the same layout:
 * the same terms in another order (qgemm.h), 1e-5. */
static void test_decode_bf16(const char *lbl, const attn_args *a0, const float *q,
                             const float *kv, const float *rk, size_t nq)
{
    const int B = a0->B, H = a0->H, dh = a0->dh, klen = a0->m + 1, hd = H * dh;
    const size_t per_b = (size_t)H * 2 * klen * dh, nrk = (size_t)H * klen * dh;
    float *kvr = alloc_f((size_t)B * per_b), *rkr = alloc_f(nrk);
    uint16_t *kv16 = malloc(sizeof(uint16_t) * B * per_b), *rk16 = malloc(sizeof(uint16_t) * nrk);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int j = 0; j < klen; j++)
                for (int i = 0; i < dh; i++)
                    for (int kvh = 0; kvh < 2; kvh++) { /* key, value */
                        float x = kv[((size_t)b * klen + j) * 2 * hd + (size_t)kvh * hd +
                                     (size_t)h * dh + i];
                        size_t o = (size_t)b * per_b + ((size_t)h * 2 + kvh) * klen * dh +
                                   (size_t)j * dh + i;
                        kv16[o] = bf16_from_f32(x);
                        kvr[o] = bf16_to_f32(kv16[o]);
                    }
    for (int h = 0; rk && h < H; h++)
        for (int j = 0; j < klen; j++)
            for (int i = 0; i < dh; i++) {
                size_t o = ((size_t)h * klen + j) * dh + i;
                rk16[o] = bf16_from_f32(rk[(size_t)j * hd + (size_t)h * dh + i]);
                rkr[o] = bf16_to_f32(rk16[o]);
            }
    attn_args a = *a0;
    a.kv_bstride = per_b, a.kv_hstride = 2 * (size_t)klen * dh, a.v_offset = (size_t)klen * dh;
    a.kv_row = dh;
    a.rk = rk ? rkr : NULL, a.rk_hstride = (size_t)klen * dh, a.rk_row = dh;
    float *dscr = alloc_f(attn_decode_scratch_floats(B, klen, dh, 1));
    float *v32 = nan_f(nq), *v16 = nan_f(nq);
    attn_decode(v32, q, kvr, &a, dscr);
    a.kv16 = kv16, a.rk16 = rk ? rk16 : NULL;
    attn_decode(v16, q, NULL, &a, dscr);
    double *ref = alloc_d(nq);
    for (size_t i = 0; i < nq; i++)
        ref[i] = v32[i];
    double e = tl_max_rel_err(v16, ref, nq, 1e-30);
    CHECK(e <= 1e-5 && count_nonfinite(v16, nq) == 0, "attn %s: attn_decode over a bf16 cache "
          "vs fp32 over the same rounded rows: %.1e (tol 1e-5)", lbl, e);
    free(kvr), free(rkr), free(kv16), free(rk16), free(dscr), free(v32), free(v16), free(ref);
}

static void test_attn_case(const attn_case *t, int kernel)
{
    const int B = t->B, H = t->H, dh = t->dh, Lq = t->Lq, m = t->m, klen = m + Lq;
    const int hd = H * dh;
    const size_t nq = (size_t)B * Lq * hd, nkv = (size_t)B * klen * 2 * hd;
    const size_t np = (size_t)B * H * Lq * klen, nrk = (size_t)klen * hd;
    const size_t nb = (size_t)H * klen, nu = (size_t)hd;
    static const char *kname[] = {"blas", "fused", "fused rb2"};
    char lbl[160];
    snprintf(lbl, sizeof lbl, "%s [%s]", t->name, kname[kernel]);

    float *q = rand_f(nq, t->qscale), *kv = rand_f(nkv, 1.0f);
    float *u = t->use_u ? rand_f(nu, 0.5f) : NULL, *v = t->use_v ? rand_f(nu, 0.5f) : NULL;
    float *bias = t->use_bias ? rand_f(nb, 0.5f) : NULL;
    float *Wr = NULL, *rk = NULL;
    if (t->use_rk) {
        float *R = alloc_f((size_t)klen * t->dr);
        pos_sinusoid(R, klen, t->dr, klen - 1, -1, t->clamp);
        Wr = rand_f((size_t)hd * t->dr, 0.5f);
        rk = alloc_f(nrk);
        linear_forward(rk, R, Wr, NULL, klen, hd, t->dr, 0);
        free(R);
    }
    float *prob = nan_f(np), *vec = nan_f(nq), *g = rand_f(nq, 1.0f);
    /* scratch sized exactly (valgrind sees overruns) for up to 3 threads; the main run is
     * single-threaded, threads 2 and 3 are compared with it at the end */
    float *scratch = alloc_f((size_t)attn_scratch_floats(Lq, klen, dh, H, 3));
    attn_args a = {.B = B, .H = H, .dh = dh, .Lq = Lq, .m = m,
                   .scale = (float)(1.0 / sqrt((double)dh)), .dropatt = t->dropatt,
                   .drop_key = 0xabcdef, .u = u, .v = v, .rk = rk, .dist_bias = bias,
                   .threads = 1, .fused = kernel > 0, .row_block = kernel == 2 ? 2 : 0};
    float *keep = NULL;
    if (t->dropatt > 0) { /* the mask dropout.h draws over the prob tensor (counter = index) */
        keep = alloc_f(np);
        for (size_t i = 0; i < np; i++)
            keep[i] = 1.0f;
        dropout_forward(keep, keep, np, t->dropatt, a.drop_key, 0);
    }
    attn_forward(prob, vec, q, kv, &a, scratch);
    double *pref = alloc_d(np), *vref = alloc_d(nq);
    attn_ref(pref, vref, t, q, kv, u, v, Wr, bias, keep);
    double ep = tl_max_rel_err(prob, pref, np, 1e-30), ev = tl_max_rel_err(vec, vref, nq, 1e-30);
    CHECK(ep <= 1e-5 && ev <= 1e-5, "attn %s: prob, vec vs per-(i,j) double formula%s: "
          "%.1e, %.1e (tol 1e-5)", lbl, keep ? " with dropout.h's mask on prob" : "", ep, ev);

    size_t masked_bad = 0;
    double rowsum = 0;
    for (int bh = 0; bh < B * H; bh++)
        for (int i = 0; i < Lq; i++) {
            const float *pr = prob + ((size_t)bh * Lq + i) * klen;
            double s = 0;
            for (int j = 0; j < klen; j++) {
                s += pr[j];
                masked_bad += j > m + i && (pr[j] != 0.0f || signbit(pr[j]));
            }
            rowsum = fmax(rowsum, fabs(s - 1.0));
        }
    /* each p_ij is rounded ~3 times (expf, sum, *1/sum): |sum - 1| <~ 3 eps32 */
    CHECK(masked_bad == 0 && rowsum <= 4 * FLT_EPSILON && count_nonfinite(vec, nq) == 0,
          "attn %s: masked prob exactly +0 (%zu bad), rows sum to 1 (max |sum-1| %.1e, tol "
          "4 eps32)", lbl, masked_bad, rowsum);

    if (t->dropatt == 0) {
        float *vec2 = nan_f(nq);
        attn_forward(NULL, vec2, q, kv, &a, scratch);
        CHECK(same_f(vec, vec2, nq), "attn %s: prob = NULL (inference) gives the same vec", lbl);
        if (Lq == 1) { /* one-token decoding: the same vec, summed in another order */
            float *dscr = alloc_f(attn_decode_scratch_floats(B, klen, dh, 1));
            attn_decode(vec2, q, kv, &a, dscr);
            double ed = tl_max_rel_err(vec2, vref, nq, 1e-30);
            CHECK(ed <= 1e-5, "attn %s: attn_decode vec vs the double formula: %.1e (tol 1e-5)",
                  lbl, ed);
            if (kernel == 0)
                test_decode_bf16(lbl, &a, q, kv, rk, nq);
            free(dscr);
        }
        free(vec2);
    } else {
        attn_args a0 = a;
        a0.dropatt = 0;
        float *p0 = nan_f(np), *v0 = nan_f(nq);
        attn_forward(p0, v0, q, kv, &a0, scratch);
        CHECK(same_f(p0, prob, np) && !same_f(v0, vec, nq),
              "attn %s: prob is the pre-dropatt softmax (same as dropatt=0); vec differs", lbl);
        free(p0), free(v0);
    }

    float *dq = nan_f(nq), *dkv = nan_f(nkv);
    float *drk = rk ? zeros_f(nrk) : NULL, *du = u ? zeros_f(nu) : NULL;
    float *dv = v ? zeros_f(nu) : NULL, *dbias = bias ? zeros_f(nb) : NULL;
    attn_backward(dq, dkv, drk, du, dv, dbias, g, prob, q, kv, &a, scratch);
    CHECK(count_nonfinite(dq, nq) == 0 && count_nonfinite(dkv, nkv) == 0,
          "attn %s: dq, dkv fully overwritten (NaN prefill gone)", lbl);
    if (t->qscale <= 1.0f) {
        attn_ctx c = {a, q, kv, prob, vec, scratch, g, nq};
        char op[200];
        snprintf(op, sizeof op, "attn %s", lbl);
        check_fd(op, "q", attn_loss, &c, q, dq, nq, STEP_SMOOTH, 2e-3, 0);
        check_fd(op, "kv", attn_loss, &c, kv, dkv, nkv, STEP_SMOOTH, 2e-3, 0);
        if (rk)
            check_fd(op, "rk", attn_loss, &c, rk, drk, nrk, STEP_SMOOTH, 2e-3, 0);
        if (u)
            check_fd(op, "u", attn_loss, &c, u, du, nu, STEP_SMOOTH, 2e-3, 0);
        if (v)
            check_fd(op, "v", attn_loss, &c, v, dv, nu, STEP_SMOOTH, 2e-3, 0);
        if (bias)
            check_fd(op, "dist_bias", attn_loss, &c, bias, dbias, nb, STEP_SMOOTH, 2e-3, 0);
        attn_forward(prob, vec, q, kv, &a, scratch); /* prob at the unperturbed point */
    }

    float *dq1 = copy_f(dq, nq), *dkv1 = copy_f(dkv, nkv);
    float *drk1 = rk ? copy_f(drk, nrk) : NULL, *du1 = u ? copy_f(du, nu) : NULL;
    float *dv1 = v ? copy_f(dv, nu) : NULL, *db1 = bias ? copy_f(dbias, nb) : NULL;
    attn_backward(dq, dkv, drk, du, dv, dbias, g, prob, q, kv, &a, scratch);
    CHECK(same_f(dq, dq1, nq) && same_f(dkv, dkv1, nkv),
          "attn %s: dq, dkv overwritten: identical after a second call", lbl);
    char what[200];
    if (rk) {
        snprintf(what, sizeof what, "attn %s drk", lbl);
        check_doubling(what, drk1, drk, nrk);
    }
    if (u) {
        snprintf(what, sizeof what, "attn %s du", lbl);
        check_doubling(what, du1, du, nu);
    }
    if (v) {
        snprintf(what, sizeof what, "attn %s dv", lbl);
        check_doubling(what, dv1, dv, nu);
    }
    if (bias) {
        snprintf(what, sizeof what, "attn %s d_dist_bias", lbl);
        check_doubling(what, db1, dbias, nb);
    }

    /* threads 2 and 3 (pairs split across threads, per-thread partial sums of the
     * accumulated grads): forward and the overwritten grads are per (b, h), so they must
     * be bitwise equal to 1 thread; accumulated grads differ only by the order in which
     * partial sums are added (tol TOL_DOUBLE). Compared against the doubled sums / 2. */
    attn_forward(prob, vec, q, kv, &a, scratch);
    int same_all = 1;
    double acc_err = 0;
    par_set_threads(3);
    for (int th = 2; th <= 3; th++) {
        attn_args at = a;
        at.threads = th;
        float *pt = nan_f(np), *vt = nan_f(nq), *dqt = nan_f(nq), *dkvt = nan_f(nkv);
        float *drkt = rk ? zeros_f(nrk) : NULL, *dut = u ? zeros_f(nu) : NULL;
        float *dvt = v ? zeros_f(nu) : NULL, *dbt = bias ? zeros_f(nb) : NULL;
        attn_forward(pt, vt, q, kv, &at, scratch);
        attn_backward(dqt, dkvt, drkt, dut, dvt, dbt, g, pt, q, kv, &at, scratch);
        same_all &= same_f(pt, prob, np) && same_f(vt, vec, nq) && same_f(dqt, dq1, nq) &&
                    same_f(dkvt, dkv1, nkv);
        if (rk)
            acc_err = fmax(acc_err, doubling_err(drkt, drk, nrk, NULL));
        if (u)
            acc_err = fmax(acc_err, doubling_err(dut, du, nu, NULL));
        if (v)
            acc_err = fmax(acc_err, doubling_err(dvt, dv, nu, NULL));
        if (bias)
            acc_err = fmax(acc_err, doubling_err(dbt, dbias, nb, NULL));
        free(pt), free(vt), free(dqt), free(dkvt), free(drkt), free(dut), free(dvt), free(dbt);
    }
    par_set_threads(1);
    CHECK(same_all && acc_err <= TOL_DOUBLE, "attn %s: threads 2, 3 vs 1: prob, vec, dq, dkv "
          "bitwise equal; accumulated grads max err %.1e", lbl, acc_err);

    free(q), free(kv), free(u), free(v), free(bias), free(Wr), free(rk), free(prob), free(vec);
    free(g), free(scratch), free(keep), free(pref), free(vref), free(dq), free(dkv), free(drk);
    free(du), free(dv), free(dbias), free(dq1), free(dkv1), free(drk1), free(du1), free(dv1);
    free(db1);
}

/* attn_args.same_len (txl eval --same-length): query i sees keys max(0, m+i+1-S) .. m+i.
 * Each kernel (OpenBLAS, fused, fused with 2-row blocks) against the double formula with
 * that lower bound, xl's position terms and a distance bias included: tol 1e-5 (as
 * test_attn_case); the masked keys below the bound are exactly 0; inference (prob NULL)
 * gives the same vec; an S of at least klen changes nothing, bit for bit. */
static void test_attn_same_len(void)
{
    static const int cases[][6] = {/* B, H, dh, Lq, m, S */
                                   {2, 2, 8, 7, 5, 4}, {1, 2, 20, 19, 13, 16},
                                   {1, 1, 16, 37, 50, 60}, {2, 2, 4, 3, 0, 2}};
    static const char *kname[] = {"blas", "fused", "fused rb2"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int B = cases[c][0], H = cases[c][1], dh = cases[c][2], Lq = cases[c][3];
        const int m = cases[c][4], S = cases[c][5], klen = m + Lq, hd = H * dh, dr = 8;
        const size_t nq = (size_t)B * Lq * hd, nkv = (size_t)B * klen * 2 * hd;
        const size_t np = (size_t)B * H * Lq * klen;
        float *q = rand_f(nq, 1.0f), *kv = rand_f(nkv, 1.0f), *u = rand_f((size_t)hd, 0.5f);
        float *v = rand_f((size_t)hd, 0.5f), *bias = rand_f((size_t)H * klen, 0.5f);
        float *R = alloc_f((size_t)klen * dr), *Wr = rand_f((size_t)hd * dr, 0.5f);
        float *rk = alloc_f((size_t)klen * hd);
        pos_sinusoid(R, klen, dr, klen - 1, -1, 0);
        linear_forward(rk, R, Wr, NULL, klen, hd, dr, 0);
        double *pref = alloc_d(np), *vref = alloc_d(nq), *sc = alloc_d((size_t)klen);
        const double scale = 1.0 / sqrt((double)dh);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < Lq; i++) {
                    const float *qi = q + ((size_t)b * Lq + i) * hd + (size_t)h * dh;
                    int lo = m + i + 1 - S > 0 ? m + i + 1 - S : 0;
                    double mx = -INFINITY, sum = 0;
                    for (int j = lo; j <= m + i; j++) {
                        const float *kj = kv + ((size_t)b * klen + j) * 2 * hd + (size_t)h * dh;
                        const float *r = rk + (size_t)(Lq - 1 - i + j) * hd + (size_t)h * dh;
                        double a = 0, p = 0;
                        for (int t = 0; t < dh; t++) {
                            a += ((double)qi[t] + u[h * dh + t]) * kj[t];
                            p += ((double)qi[t] + v[h * dh + t]) * r[t];
                        }
                        sc[j] = scale * (a + p) + bias[(size_t)h * klen + (m + i - j)];
                        mx = fmax(mx, sc[j]);
                    }
                    for (int j = lo; j <= m + i; j++)
                        sum += exp(sc[j] - mx);
                    double *pr = pref + (((size_t)b * H + h) * Lq + i) * klen;
                    double *vo = vref + ((size_t)b * Lq + i) * hd + (size_t)h * dh;
                    for (int j = 0; j < klen; j++)
                        pr[j] = j >= lo && j <= m + i ? exp(sc[j] - mx) / sum : 0;
                    for (int t = 0; t < dh; t++) {
                        vo[t] = 0;
                        for (int j = lo; j <= m + i; j++)
                            vo[t] += pr[j] * kv[((size_t)b * klen + j) * 2 * hd + hd +
                                                (size_t)h * dh + t];
                    }
                }
        float *scratch = alloc_f((size_t)attn_scratch_floats(Lq, klen, dh, H, 1));
        for (int kernel = 0; kernel < 3; kernel++) {
            attn_args a = {.B = B, .H = H, .dh = dh, .Lq = Lq, .m = m,
                           .scale = (float)scale, .u = u, .v = v, .rk = rk, .dist_bias = bias,
                           .threads = 1, .fused = kernel > 0,
                           .row_block = kernel == 2 ? 2 : 0, .same_len = S};
            float *prob = nan_f(np), *vec = nan_f(nq), *vec2 = nan_f(nq);
            attn_forward(prob, vec, q, kv, &a, scratch);
            attn_forward(NULL, vec2, q, kv, &a, scratch);
            double ep = tl_max_rel_err(prob, pref, np, 1e-30);
            double ev = tl_max_rel_err(vec, vref, nq, 1e-30);
            size_t below = 0;
            for (int bh = 0; bh < B * H; bh++)
                for (int i = 0; i < Lq; i++)
                    for (int j = 0; j < m + i + 1 - S; j++)
                        below += prob[((size_t)bh * Lq + i) * klen + j] != 0.0f;
            CHECK(ep <= 1e-5 && ev <= 1e-5 && below == 0 && same_f(vec, vec2, nq),
                  "attn same_len %d, B%d H%d dh%d Lq%d m%d [%s]: prob, vec vs the double formula "
                  "with the lower bound: %.1e, %.1e (tol 1e-5); keys below it exactly 0 (%zu "
                  "not); inference the same vec%s", S, B, H, dh, Lq, m, kname[kernel], ep, ev,
                  below, same_f(vec, vec2, nq) ? "" : " NOT");
            a.same_len = klen; /* no row sees more than klen keys: the plain mask */
            attn_forward(prob, vec2, q, kv, &a, scratch);
            a.same_len = 0;
            float *vec3 = nan_f(nq);
            attn_forward(prob, vec3, q, kv, &a, scratch);
            CHECK(same_f(vec2, vec3, nq) && (S >= klen || !same_f(vec, vec3, nq)),
                  "attn same_len [%s]: same_len klen is the plain mask bit for bit, and S %d "
                  "changes the result", kname[kernel], S);
            free(prob), free(vec), free(vec2), free(vec3);
        }
        free(q), free(kv), free(u), free(v), free(bias), free(R), free(Wr), free(rk);
        free(pref), free(vref), free(sc), free(scratch);
    }
}

static const attn_case attn_cases[] = {
    /*  name                               B  H dh Lq  m  u  v rk bias dr clamp drop  qs */
    {"xl B2 H2 Lq3 m2 (klen > Lq)",        2, 2, 4, 3, 2, 1, 1, 1, 0,  6, 0, 0.0f, 1.0f},
    {"xl m=0",                             1, 2, 4, 4, 0, 1, 1, 1, 0,  8, 0, 0.0f, 1.0f},
    {"xl Lq=1 m=4",                        2, 1, 6, 1, 4, 1, 1, 1, 0,  4, 0, 0.0f, 1.0f},
    {"xl clamp_len=2",                     1, 2, 4, 3, 3, 1, 1, 1, 0,  6, 2, 0.0f, 1.0f},
    {"xl u=v=NULL",                        1, 2, 3, 2, 3, 0, 0, 1, 0,  4, 0, 0.0f, 1.0f},
    {"xl B2 H3 dh8 Lq7 m5",                2, 3, 8, 7, 5, 1, 1, 1, 0, 10, 0, 0.0f, 1.0f},
    {"dist_bias (mlp/alibi) m=3",          1, 3, 5, 4, 3, 0, 0, 0, 1,  0, 0, 0.0f, 1.0f},
    {"content bias u, no rk (+dist_bias)", 1, 2, 4, 3, 2, 1, 0, 0, 1,  0, 0, 0.0f, 1.0f},
    {"none m=0",                           2, 2, 3, 3, 0, 0, 0, 0, 0,  0, 0, 0.0f, 1.0f},
    {"single key (Lq=1 m=0)",              1, 2, 4, 1, 0, 1, 1, 1, 1,  4, 0, 0.0f, 1.0f},
    {"xl+dist_bias dropatt=0.3",           2, 2, 4, 3, 2, 1, 1, 1, 1,  6, 0, 0.3f, 1.0f},
    {"xl dropatt=0.5 m=0",                 1, 2, 4, 5, 0, 1, 1, 1, 0,  6, 0, 0.5f, 1.0f},
    {"saturated scores (|q|~30)",          1, 2, 8, 4, 3, 1, 1, 1, 1,  8, 0, 0.0f, 30.0f},
    /* the fused kernel's edges: dh past a vector (padding), rows past a tile, keys past
     * one and two key tiles, several row blocks (dropatt drawn per row) */
    {"xl dh20 Lq19 m13",                   1, 2, 20, 19, 13, 1, 1, 1, 0, 8, 0, 0.0f, 1.0f},
    {"xl+dist_bias dh64 Lq40 m27 drop.2",  1, 2, 64, 40, 27, 1, 1, 1, 1, 8, 0, 0.2f, 1.0f},
    {"dist_bias dh16 Lq37 m50",            2, 1, 16, 37, 50, 0, 0, 0, 1, 0, 0, 0.0f, 1.0f},
    /* one-token decoding with decode's dh 64 over 21 keys (bf16 cache: whole tiles and
     * chunks of the products, tiles past the last key), 5 streams (qgemm's row groups) */
    {"xl+dist_bias dh64 Lq1 m20 B5",       5, 2, 64, 1, 20, 1, 1, 1, 1, 8, 0, 0.0f, 1.0f},
};

#define N_ATTN_CASES (sizeof attn_cases / sizeof attn_cases[0])

/* ---- the AMX kernel (attn_amx.h) */

static float bfr(float x) { return bf16_to_f32(bf16_from_f32(x)); }

/* Floats of y (shape of ref) against ref, normwise: max |y - ref| / max |ref| */
static double norm_err(const float *y, const double *ref, size_t n)
{
    double e = 0, mx = 1e-30;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)y[i] - ref[i]));
        mx = fmax(mx, fabs(ref[i]));
    }
    return e / mx;
}

/* The AMX kernel's arithmetic in plain loops (attn_amx.h): products of the bf16-rounded
 * operands summed in double and rounded to float where the kernel keeps fp32, with the
 * kernel's own fp32 row passes (fused_*, checked against the double formula above) in
 * between. So every difference from the kernel is the order of its fp32 sums: normwise
 * 1e-5. prob_ref [B,H,Lq,klen] (float, the softmax), vec_ref [B,Lq,hd]. */
static void amx_ref_forward(float *prob_ref, double *vec_ref, const attn_args *a,
                            const float *q, const float *kv)
{
    const int B = a->B, H = a->H, dh = a->dh, Lq = a->Lq, m = a->m, klen = m + Lq;
    const int hd = H * dh;
    float *S = alloc_f(klen), *D = alloc_f(klen);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < Lq; i++) {
                const float *qi = q + ((size_t)b * Lq + i) * hd + (size_t)h * dh;
                for (int j = 0; j < klen; j++) {
                    const float *kj = kv + ((size_t)b * klen + j) * 2 * hd + (size_t)h * dh;
                    double ac = 0, bd = 0;
                    for (int c = 0; c < dh; c++) {
                        float qu = a->scale * (qi[c] + (a->u ? a->u[h * dh + c] : 0.0f));
                        ac += (double)bfr(qu) * bfr(kj[c]);
                        int p = Lq - 1 - i + j;
                        if (a->rk && p < klen) {
                            float qv = a->scale * (qi[c] + (a->v ? a->v[h * dh + c] : 0.0f));
                            bd += (double)bfr(qv) * bfr(a->rk[(size_t)p * hd + h * dh + c]);
                        }
                    }
                    S[j] = (float)ac + (a->rk ? (float)bd : 0.0f);
                }
                fused_add_biases(S, klen, a, b, h, i, i + 1);
                fused_softmax_rows(S, klen, m, a->same_len, i, i + 1, klen);
                memcpy(prob_ref + (((size_t)b * H + h) * Lq + i) * klen, S, klen * sizeof *S);
                const float *Pv = S;
                if (a->dropatt > 0) {
                    fused_drop_rows(D, klen, S, klen, a, b, h, i, i + 1, klen);
                    Pv = D;
                }
                for (int c = 0; c < dh; c++) {
                    double acc = 0;
                    for (int j = 0; j < klen; j++)
                        acc += (double)bfr(Pv[j]) *
                               bfr(kv[((size_t)b * klen + j) * 2 * hd + hd + (size_t)h * dh + c]);
                    vec_ref[((size_t)b * Lq + i) * hd + (size_t)h * dh + c] = acc;
                }
            }
    free(S), free(D);
}

/* The backward likewise, from the kernel's prob and dvec g: dq, dkv overwritten, drk, du,
 * dv, dbias added to (double arrays, zeroed by the caller). */
static void amx_ref_backward(double *dq, double *dkv, double *drk, double *du, double *dv,
                             double *dbias, const float *g, const float *prob,
                             const attn_args *a, const float *q, const float *kv)
{
    const int B = a->B, H = a->H, dh = a->dh, Lq = a->Lq, m = a->m, klen = m + Lq;
    const int hd = H * dh;
    float *G = alloc_f(klen), *D = alloc_f(klen), *dS = alloc_f((size_t)Lq * klen);
    float *fb = alloc_f((size_t)H * klen);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *P = prob + ((size_t)b * H + h) * Lq * klen;
            const float *kvb = kv + (size_t)b * klen * 2 * hd + (size_t)h * dh;
            for (int i = 0; i < Lq; i++) {
                const float *gi = g + ((size_t)b * Lq + i) * hd + (size_t)h * dh;
                const float *Pv = P + (size_t)i * klen;
                if (a->dropatt > 0) {
                    fused_drop_rows(D, klen, Pv, klen, a, b, h, i, i + 1, klen);
                    Pv = D;
                }
                for (int j = 0; j < klen; j++) {
                    double gp = 0;
                    for (int c = 0; c < dh; c++) {
                        dkv[((size_t)b * klen + j) * 2 * hd + hd + (size_t)h * dh + c] +=
                            (double)bfr(Pv[j]) * bfr(gi[c]);
                        gp += (double)bfr(gi[c]) * bfr(kvb[(size_t)j * 2 * hd + hd + c]);
                    }
                    G[j] = (float)gp;
                }
                if (a->dropatt > 0)
                    dropout_backward(G, G, (size_t)(m + i + 1), a->dropatt, a->drop_key,
                                     fused_drop_base(a, b, h, i));
                fused_softmax_back_rows(G, klen, P + (size_t)i * klen, klen, m, i, i + 1);
                memcpy(dS + (size_t)i * klen, G, klen * sizeof *G);
                if (dbias) {
                    memset(fb, 0, (size_t)H * klen * sizeof *fb);
                    fused_bias_grads(fb, NULL, G, klen, a, b, h, i, i + 1);
                    for (int t = 0; t < H * klen; t++)
                        dbias[t] += fb[t];
                }
            }
            for (int i = 0; i < Lq; i++) {
                const float *qi = q + ((size_t)b * Lq + i) * hd + (size_t)h * dh;
                for (int c = 0; c < dh; c++) {
                    double cont = 0, pos = 0;
                    for (int j = 0; j < klen; j++) {
                        float ds = bfr(a->scale * dS[(size_t)i * klen + j]);
                        int p = Lq - 1 - i + j;
                        cont += (double)ds * bfr(kvb[(size_t)j * 2 * hd + c]);
                        float qu = a->no_q_content ? 0.0f : qi[c];
                        dkv[((size_t)b * klen + j) * 2 * hd + (size_t)h * dh + c] +=
                            (double)ds * bfr(qu + (a->u ? a->u[h * dh + c] : 0.0f));
                        if (a->rk && p < klen) {
                            pos += (double)ds * bfr(a->rk[(size_t)p * hd + h * dh + c]);
                            float qv = a->no_q_position ? 0.0f : qi[c];
                            drk[(size_t)p * hd + h * dh + c] +=
                                (double)ds * bfr(qv + (a->v ? a->v[h * dh + c] : 0.0f));
                        }
                    }
                    float fc = (float)cont, fp = (float)pos;
                    dq[((size_t)b * Lq + i) * hd + (size_t)h * dh + c] =
                        (a->no_q_content ? 0.0f : fc) + (a->rk && !a->no_q_position ? fp : 0.0f);
                    if (du)
                        du[h * dh + c] += fc;
                    if (dv && a->rk)
                        dv[h * dh + c] += fp;
                }
            }
        }
    free(G), free(D), free(dS), free(fb);
}

static double *zeros_d(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

/* The AMX kernel against its plain-loop twin (normwise 1e-5), forward and backward; the
 * same invariants as the other kernels: inference = training's vec, gradients overwritten or
 * added to, 2 and 3 threads bitwise the one thread's forward and overwritten gradients. */
static void test_attn_amx_case(const attn_case *t)
{
    const int B = t->B, H = t->H, dh = t->dh, Lq = t->Lq, m = t->m, klen = m + Lq;
    const int hd = H * dh;
    const size_t nq = (size_t)B * Lq * hd, nkv = (size_t)B * klen * 2 * hd;
    const size_t np = (size_t)B * H * Lq * klen, nrk = (size_t)klen * hd;
    const size_t nb = (size_t)H * klen, nu = (size_t)hd;
    float *q = rand_f(nq, t->qscale), *kv = rand_f(nkv, 1.0f);
    float *u = t->use_u ? rand_f(nu, 0.5f) : NULL, *v = t->use_v ? rand_f(nu, 0.5f) : NULL;
    float *bias = t->use_bias ? rand_f(nb, 0.5f) : NULL;
    float *rk = t->use_rk ? rand_f(nrk, 1.0f) : NULL;
    float *prob = nan_f(np), *vec = nan_f(nq), *g = rand_f(nq, 1.0f);
    float *scratch = alloc_f((size_t)attn_scratch_floats(Lq, klen, dh, H, 3));
    attn_args a = {.B = B, .H = H, .dh = dh, .Lq = Lq, .m = m,
                   .scale = (float)(1.0 / sqrt((double)dh)), .dropatt = t->dropatt,
                   .drop_key = 0xabcdef, .u = u, .v = v, .rk = rk, .dist_bias = bias,
                   .threads = 1, .fused = 1, .amx = 1};
    attn_forward(prob, vec, q, kv, &a, scratch);
    float *pref = alloc_f(np);
    double *vref = alloc_d(nq);
    amx_ref_forward(pref, vref, &a, q, kv);
    double *pref_d = alloc_d(np);
    for (size_t i = 0; i < np; i++)
        pref_d[i] = pref[i];
    double ep = norm_err(prob, pref_d, np), ev = norm_err(vec, vref, nq);
    CHECK(ep <= 1e-5 && ev <= 1e-5, "attn %s [amx]: prob, vec vs the bf16 twin (normwise): "
          "%.1e, %.1e (tol 1e-5)", t->name, ep, ev);
    if (t->dropatt == 0) {
        float *vec2 = nan_f(nq);
        attn_forward(NULL, vec2, q, kv, &a, scratch);
        CHECK(same_f(vec, vec2, nq), "attn %s [amx]: prob = NULL (inference) gives the same "
              "vec", t->name);
        free(vec2);
    }
    float *dq = nan_f(nq), *dkv = nan_f(nkv);
    float *drk = rk ? zeros_f(nrk) : NULL, *du = u ? zeros_f(nu) : NULL;
    float *dv = v ? zeros_f(nu) : NULL, *dbias = bias ? zeros_f(nb) : NULL;
    attn_backward(dq, dkv, drk, du, dv, dbias, g, prob, q, kv, &a, scratch);
    double *rdq = zeros_d(nq), *rdkv = zeros_d(nkv), *rdrk = zeros_d(nrk), *rdu = zeros_d(nu);
    double *rdv = zeros_d(nu), *rdb = zeros_d(nb);
    amx_ref_backward(rdq, rdkv, rdrk, u ? rdu : NULL, v ? rdv : NULL, bias ? rdb : NULL, g,
                     prob, &a, q, kv);
    double e = fmax(norm_err(dq, rdq, nq), norm_err(dkv, rdkv, nkv));
    if (rk)
        e = fmax(e, norm_err(drk, rdrk, nrk));
    if (u)
        e = fmax(e, norm_err(du, rdu, nu));
    if (v)
        e = fmax(e, norm_err(dv, rdv, nu));
    if (bias)
        e = fmax(e, norm_err(dbias, rdb, nb));
    CHECK(e <= 1e-5, "attn %s [amx]: dq, dkv, drk, du, dv, d_dist_bias vs the bf16 twin "
          "(normwise): %.1e (tol 1e-5)", t->name, e);
    float *dq1 = copy_f(dq, nq), *dkv1 = copy_f(dkv, nkv);
    float *drk1 = rk ? copy_f(drk, nrk) : NULL;
    attn_backward(dq, dkv, drk, du, dv, dbias, g, prob, q, kv, &a, scratch);
    CHECK(same_f(dq, dq1, nq) && same_f(dkv, dkv1, nkv) &&
              (!rk || doubling_err(drk1, drk, nrk, NULL) <= TOL_DOUBLE),
          "attn %s [amx]: dq, dkv overwritten, drk added to (a second call)", t->name);
    int same_all = 1;
    par_set_threads(3);
    for (int th = 2; th <= 3; th++) {
        attn_args at = a;
        at.threads = th;
        float *pt = nan_f(np), *vt = nan_f(nq), *dqt = nan_f(nq), *dkvt = nan_f(nkv);
        float *drkt = rk ? zeros_f(nrk) : NULL, *dut = u ? zeros_f(nu) : NULL;
        float *dvt = v ? zeros_f(nu) : NULL, *dbt = bias ? zeros_f(nb) : NULL;
        attn_forward(pt, vt, q, kv, &at, scratch);
        attn_backward(dqt, dkvt, drkt, dut, dvt, dbt, g, pt, q, kv, &at, scratch);
        same_all &= same_f(pt, prob, np) && same_f(vt, vec, nq) && same_f(dqt, dq1, nq) &&
                    same_f(dkvt, dkv1, nkv);
        free(pt), free(vt), free(dqt), free(dkvt), free(drkt), free(dut), free(dvt), free(dbt);
    }
    par_set_threads(1);
    CHECK(same_all, "attn %s [amx]: threads 2, 3 vs 1: prob, vec, dq, dkv bitwise equal",
          t->name);
    free(q), free(kv), free(u), free(v), free(bias), free(rk), free(prob), free(vec), free(g);
    free(scratch), free(pref), free(vref), free(pref_d), free(dq), free(dkv), free(drk);
    free(du), free(dv), free(dbias), free(rdq), free(rdkv), free(rdrk), free(rdu), free(rdv);
    free(rdb), free(dq1), free(dkv1), free(drk1);
}

/* The AMX kernel on every attention case, and on shapes of the models (dh 64, blocks of 32
 * rows, xl's odd and even first positions), where the CPU has AMX-BF16 */
static void test_attn_amx(void)
{
    if (!amx_attn_available()) {
        printf("  skip attention [amx]: no AMX-BF16 here (or the OS refused the tile state)\n");
        return;
    }
    static const attn_case big[] = {
        /*  name                               B  H dh Lq  m  u  v rk bias dr clamp drop  qs */
        {"xl dh64 Lq70 m45 drop.1",            1, 2, 64, 70, 45, 1, 1, 1, 1, 8, 0, 0.1f, 1.0f},
        {"xl dh41 Lq33 m64",                   2, 1, 41, 33, 64, 1, 1, 1, 0, 8, 0, 0.0f, 1.0f},
        {"dist_bias dh64 Lq64 m64",            1, 2, 64, 64, 64, 0, 0, 0, 1, 0, 0, 0.0f, 1.0f},
    };
    for (size_t i = 0; i < N_ATTN_CASES; i++)
        test_attn_amx_case(&attn_cases[i]);
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        test_attn_amx_case(&big[i]);
}

/* attn_decode's kernels (attn_decode.h: qgemm.h's choice, qgemm_use): the AVX-512 and AVX2
 * ones compute the bits of the plain C twin, over fp32, bf16 and int8 rows (a q8 cache: a
 * scale per row), with xl's position rows transposed (fp32: rkT; bf16 with the bf16 and
 * int8 rows: rkT16, against the rows untransposed to 1e-5) and a distance bias, for heads of 64 (whole chunks), 40 and 8 (tails), 3
 * streams (blocks of 4 and 2 streams part filled), and key counts that fill no block, one
 * and a part. The int8 rows also against the fp32 path over their values (q times the
 * scale, exact in float): the same terms, the scale applied before or after the sum, 1e-5. */
static void test_decode_kernels(void)
{
    static const char *const kernels[] = {"c", "avx2", "avx512"};
    static const int dhs[] = {64, 40, 8}, ms[] = {0, 16, 37, 70};
    int same = 1, cases = 0;
    double worst = 0, worst_q = 0;
    char names[64] = "";
    tl_rng qr = {777};
    for (size_t di = 0; di < 3; di++)
        for (size_t mi = 0; mi < 4; mi++)
            for (int bf = 0; bf < 3; bf++) { /* fp32, bf16, int8 rows */
                const int B = 3, H = 2, dh = dhs[di], m = ms[mi], klen = m + 1, hd = H * dh;
                const int cap = klen + 3; /* each head's rows in a longer window, as decode.c */
                const size_t per_b = (size_t)H * 2 * cap * dh, nrk = (size_t)H * cap * dh;
                float *kv = rand_f((size_t)B * per_b, 1.0f), *rk = rand_f(nrk, 1.0f);
                float *q = rand_f((size_t)B * hd, 1.0f), *u = rand_f((size_t)hd, 0.5f);
                float *v = rand_f((size_t)hd, 0.5f), *bias = rand_f((size_t)H * klen, 0.5f);
                uint16_t *kv16 = malloc(sizeof(uint16_t) * B * per_b), *rk16 = malloc(sizeof(uint16_t) * nrk);
                float *rkT = alloc_f(nrk); /* each head's rows transposed: [dh][cap] */
                uint16_t *rkT16 = calloc(nrk + 16, sizeof(uint16_t)); /* + 16 read past */
                for (int h = 0; h < H; h++)
                    for (int j = 0; j < cap; j++)
                        for (int c = 0; c < dh; c++) {
                            size_t t = ((size_t)h * dh + c) * cap + j, r = ((size_t)h * cap + j) * dh + c;
                            rkT[t] = rk[r];
                            rkT16[t] = bf16_from_f32(rk[r]);
                        }
                for (size_t i = 0; i < (size_t)B * per_b; i++)
                    kv16[i] = bf16_from_f32(kv[i]);
                for (size_t i = 0; i < nrk; i++)
                    rk16[i] = bf16_from_f32(rk[i]);
                const size_t nsc = (size_t)B * H * 2 * cap; /* [B][H][2][cap] */
                int8_t *kv8 = malloc((size_t)B * per_b);
                float *kv8s = alloc_f(nsc), *kvq = alloc_f((size_t)B * per_b);
                for (size_t i = 0; i < nsc; i++)
                    kv8s[i] = (0.6f + tl_uniform(&qr, 0.5f)) / 127.0f;
                for (size_t i = 0; i < (size_t)B * per_b; i++) {
                    kv8[i] = (int8_t)((int)((tl_uniform(&qr, 0.5f) + 0.5f) * 255.0f) - 127);
                    kvq[i] = (float)kv8[i] * kv8s[i / dh]; /* row i / dh: the same order */
                }
                attn_args a = {.B = B, .H = H, .dh = dh, .Lq = 1, .m = m,
                               .scale = (float)(1.0 / sqrt((double)dh)), .u = u, .v = v, .rk = rk,
                               .dist_bias = bias, .kv_bstride = per_b,
                               .kv_hstride = 2 * (size_t)cap * dh, .v_offset = (size_t)cap * dh,
                               .kv_row = dh, .rk_hstride = (size_t)cap * dh, .rk_row = dh,
                               .threads = 1, .kv16 = bf == 1 ? kv16 : NULL,
                               .rk16 = bf ? rk16 : NULL, .rkT = bf ? NULL : rkT,
                               .rkT16 = bf ? rkT16 : NULL,
                               .rkT_hstride = (size_t)cap * dh, .rkT_ld = cap,
                               .kv8 = bf == 2 ? kv8 : NULL, .kv8s = kv8s,
                               .kv8s_bstride = (size_t)H * 2 * cap,
                               .kv8s_hstride = 2 * (size_t)cap, .kv8s_voff = (size_t)cap};
                float *scr = alloc_f(attn_decode_scratch_floats(B, klen, dh, 1));
                float *ref = nan_f((size_t)B * hd), *out = nan_f((size_t)B * hd);
                int ran = 0;
                names[0] = 0;
                for (int k = 0; k < 3; k++) {
                    if (qgemm_use(kernels[k]))
                        continue;
                    attn_decode(ran ? out : ref, q, bf ? NULL : kv, &a, scr);
                    if (ran++)
                        same &= memcmp(ref, out, sizeof(float) * B * hd) == 0;
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                             ran > 1 ? " " : "", kernels[k]);
                }
                { /* the transposed rows against rk's; the int8 rows against fp32 rows of
                   * their values: the same terms, 1e-5 */
                    attn_args ar = a;
                    if (bf == 2)
                        ar.kv8 = NULL;
                    else
                        ar.rkT = NULL, ar.rkT16 = NULL;
                    attn_decode(out, q, bf == 2 ? kvq : kv, &ar, scr);
                    double *d = alloc_d((size_t)B * hd);
                    for (size_t i = 0; i < (size_t)B * hd; i++)
                        d[i] = out[i];
                    double e = tl_max_rel_err(ref, d, (size_t)B * hd, 1e-30);
                    if (bf == 2)
                        worst_q = fmax(worst_q, e);
                    else
                        worst = fmax(worst, e);
                    free(d);
                }
                cases++;
                free(kv8), free(kv8s), free(kvq);
                free(kv), free(rk), free(q), free(u), free(v), free(bias), free(kv16), free(rk16);
                free(rkT), free(rkT16);
                free(scr), free(ref), free(out);
            }
    if (qgemm_use(kernels[2]) && qgemm_use(kernels[1])) /* back to the best */
        qgemm_use(kernels[0]);
    CHECK(same && worst <= 1e-5 && worst_q <= 1e-5 && worst_q > 0,
          "attn_decode: kernels %s give the same bits over fp32, bf16 and int8 rows (%d cases); "
          "xl's transposed fp32 and bf16 rows vs the rows: %.1e, int8 rows vs fp32 rows of their values: "
          "%.1e (tol 1e-5)", names, cases, worst, worst_q);
}

static void test_attention(void)
{
    for (size_t i = 0; i < N_ATTN_CASES; i++)
        for (int kernel = 0; kernel < 3; kernel++)
            test_attn_case(&attn_cases[i], kernel);
    test_attn_same_len();
    test_attn_amx();
    test_decode_kernels();
}

/* ---------------------------------------------------------------- posenc */

/* Sinusoid tables: every value is sin/cos of an angle formed in double and rounded once,
 * so it is within half an ulp of the double value: tol eps32 absolute (values <= 1). */
static void test_pos_sinusoid(void)
{
    static const int cases[][5] = {/* n, d, pos_first, pos_step, clamp */
                                   {7, 8, 6, -1, 0},  {7, 6, 6, -1, 3}, {5, 8, 0, 1, 0},
                                   {3, 16, 1000, -1, 0}, {4, 4, 0, 1, 2}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int n = cases[k][0], d = cases[k][1], first = cases[k][2], step = cases[k][3];
        int clamp = cases[k][4];
        float *out = nan_f((size_t)n * d);
        pos_sinusoid(out, n, d, first, step, clamp);
        double worst = 0;
        for (int r = 0; r < n; r++) {
            double pos = first + (double)r * step;
            if (clamp > 0 && pos > clamp)
                pos = clamp;
            for (int t = 0; t < d / 2; t++) {
                double ang = pos * exp(-2.0 * t / d * log(10000.0));
                worst = fmax(worst, fabs(out[(size_t)r * d + t] - sin(ang)));
                worst = fmax(worst, fabs(out[(size_t)r * d + d / 2 + t] - cos(ang)));
            }
        }
        CHECK(worst <= FLT_EPSILON, "pos_sinusoid n=%d d=%d first=%d step=%d clamp=%d: "
              "[sin | cos] vs double: max abs err %.1e (tol eps32)", n, d, first, step, clamp,
              worst);
        free(out);
    }
}

typedef struct {
    float *x0, *buf, *g, *cosv, *sinv;
    int rows, ld, H, dh, pos_first;
} rope_ctx;

static double rope_loss(void *p)
{
    rope_ctx *c = p;
    memcpy(c->buf, c->x0, (size_t)c->rows * c->ld * sizeof *c->buf);
    rope_apply(c->buf, c->rows, c->ld, c->H, c->dh, c->pos_first, c->cosv, c->sinv, 0);
    return dot_fd(c->buf, c->g, (size_t)c->rows * c->ld);
}

/* Rope: tables within eps32 (as above); rotation vs a double 2x2 rotation per pair
 * (x1_t, x2_t) by angle pos * 10000^(-2t/dh): two float products and a sum, tol 4 eps32
 * norm-relative. Backward (inverse = 1) vs FD: linear map, large step, tol 1e-5. */
static void test_rope(void)
{
    const int rows = 5, H = 2, dh = 6, ld = H * dh + 3, pf = 3, np = pf + rows + 6;
    const int half = dh / 2;
    float *cosv = alloc_f((size_t)np * half), *sinv = alloc_f((size_t)np * half);
    rope_tables(cosv, sinv, 0, np, dh);
    double worst = 0;
    for (int p = 0; p < np; p++)
        for (int t = 0; t < half; t++) {
            double ang = p * exp(-2.0 * t / dh * log(10000.0));
            worst = fmax(worst, fabs(cosv[(size_t)p * half + t] - cos(ang)));
            worst = fmax(worst, fabs(sinv[(size_t)p * half + t] - sin(ang)));
        }
    CHECK(worst <= FLT_EPSILON, "rope_tables n=%d dh=%d vs double: max abs err %.1e (tol "
          "eps32)", np, dh, worst);

    size_t n = (size_t)rows * ld;
    float *x = rand_f(n, 1.0f), *y = copy_f(x, n);
    double *ref = alloc_d(n);
    for (size_t i = 0; i < n; i++)
        ref[i] = x[i]; /* padding columns must stay */
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < half; t++) {
                double ang = (pf + r) * exp(-2.0 * t / dh * log(10000.0));
                size_t i1 = (size_t)r * ld + h * dh + t, i2 = i1 + half;
                ref[i1] = x[i1] * cos(ang) - x[i2] * sin(ang);
                ref[i2] = x[i2] * cos(ang) + x[i1] * sin(ang);
            }
    rope_apply(y, rows, ld, H, dh, pf, cosv, sinv, 0);
    double e = tl_max_rel_err(y, ref, n, 1e-30);
    CHECK(e <= 4 * FLT_EPSILON, "rope_apply (pos_first=%d, ld=%d > H*dh) vs double 2x2 rotation "
          "per pair: %.1e (tol 4 eps32), padding untouched", pf, ld, e);
    float *z = copy_f(y, n);
    rope_apply(z, rows, ld, H, dh, pf, cosv, sinv, 1);
    double *xd = alloc_d(n);
    for (size_t i = 0; i < n; i++)
        xd[i] = x[i];
    double ei = tl_max_rel_err(z, xd, n, 1e-30);
    CHECK(ei <= 8 * FLT_EPSILON, "rope_apply inverse undoes forward: %.1e (tol 8 eps32)", ei);

    float *g = rand_f(n, 1.0f), *dx = copy_f(g, n);
    rope_apply(dx, rows, ld, H, dh, pf, cosv, sinv, 1);
    rope_ctx c = {x, y, g, cosv, sinv, rows, ld, H, dh, pf};
    check_fd("rope_apply", "x (inverse = 1 applied to g)", rope_loss, &c, x, dx, n, STEP_AFFINE,
             1e-5, 0);

    /* only the position difference matters: rot_a(q).rot_b(k) = rot_{a+s}(q).rot_{b+s}(k) */
    float qk[4][6];
    for (int i = 0; i < 6; i++)
        qk[0][i] = qk[2][i] = tl_normal(&rng, 1.0f), qk[1][i] = qk[3][i] = tl_normal(&rng, 1.0f);
    rope_apply(qk[0], 1, dh, 1, dh, 4, cosv, sinv, 0);
    rope_apply(qk[1], 1, dh, 1, dh, 1, cosv, sinv, 0);
    rope_apply(qk[2], 1, dh, 1, dh, 10, cosv, sinv, 0);
    rope_apply(qk[3], 1, dh, 1, dh, 7, cosv, sinv, 0);
    double d1 = dot_fd(qk[0], qk[1], dh), d2 = dot_fd(qk[2], qk[3], dh);
    CHECK(fabs(d1 - d2) <= 1e-5 * (1 + fabs(d1)), "rope: q.k at positions (4,1) equals (10,7): "
          "%.7f vs %.7f", d1, d2);
    free(cosv), free(sinv), free(x), free(y), free(ref), free(z), free(xd), free(g), free(dx);
}

/* ALiBi slopes written out from the reference code of Press et al. (get_slopes). */
static void test_alibi(void)
{
    static const double s8[8] = {-1, -2, -3, -4, -5, -6, -7, -8};
    static const double s6[6] = {-2, -4, -6, -8, -1, -3};
    static const double s12[12] = {-1, -2, -3, -4, -5, -6, -7, -8, -0.5, -1.5, -2.5, -3.5};
    static const double s1[1] = {-8}, s3[3] = {-4, -8, -2}, s5[5] = {-2, -4, -6, -8, -1};
    static const struct { int H; const double *l2; } cases[] = {
        {8, s8}, {6, s6}, {12, s12}, {1, s1}, {3, s3}, {5, s5}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int H = cases[k].H, klen = 7;
        double sl[12];
        alibi_slopes(sl, H);
        double worst = 0;
        for (int h = 0; h < H; h++)
            worst = fmax(worst, fabs(sl[h] / exp2(cases[k].l2[h]) - 1));
        float *bias = nan_f((size_t)H * klen);
        alibi_bias(bias, H, klen);
        int bias_ok = 1;
        for (int h = 0; h < H; h++)
            for (int t = 0; t < klen; t++)
                bias_ok &= bias[(size_t)h * klen + t] == (float)(-exp2(cases[k].l2[h]) * t);
        CHECK(worst <= 1e-15 && bias_ok, "alibi H=%d: slopes = 2^(%g, %g, ..., %g) (max rel err "
              "%.1e); bias[h][delta] = -slope_h * delta", H, cases[k].l2[0],
              H > 1 ? cases[k].l2[1] : 0.0, cases[k].l2[H - 1], worst);
        free(bias);
    }
}

typedef struct {
    float *W1, *b1, *W2, *b2, *bias, *pre, *act, *phi, *g;
    int H, hidden, K, klen;
    float maxd;
} mlp_ctx;

static double mlp_loss(void *p)
{
    mlp_ctx *c = p;
    mlp_bias_forward(c->bias, c->pre, c->act, c->phi, c->W1, c->b1, c->W2, c->b2, c->H,
                     c->hidden, c->K, c->maxd, c->klen);
    return dot_fd(c->bias, c->g, (size_t)c->H * c->klen);
}

/* mlp bias: phi with tau = exp(linspace(0, ln max_dist, K)), pre = W1 phi + b1,
 * act = GELU(pre) = pre/2 (1 + erf(pre/sqrt 2)), bias = W2 act + b2, all in double: tol
 * 1e-6 (float dot products of <= 32 terms). Backward: W1, b1 through the GELU are smooth
 * (step 1e-3, tol 1e-3); W2, b2 enter affinely (large step, tol 1e-5). */
static void test_mlp_case(int H, int hidden, int K, float maxd, int klen)
{
    char lbl[80];
    snprintf(lbl, sizeof lbl, "mlp_bias H=%d hidden=%d K=%d max_dist=%g klen=%d", H, hidden, K,
             maxd, klen);
    size_t n1 = (size_t)hidden * 2 * K, nb = (size_t)H * klen, na = (size_t)klen * hidden;
    float *W1 = rand_f(n1, 1.0f), *b1 = rand_f(hidden, 0.5f);
    float *W2 = rand_f((size_t)H * hidden, 1.0f);
    float *b2 = rand_f(H, 0.5f), *bias = nan_f(nb), *pre = nan_f(na), *act = nan_f(na);
    float *phi = nan_f((size_t)klen * 2 * K), *g = rand_f(nb, 1.0f);
    mlp_bias_forward(bias, pre, act, phi, W1, b1, W2, b2, H, hidden, K, maxd, klen);

    double *phr = alloc_d((size_t)klen * 2 * K), *prr = alloc_d(na), *acr = alloc_d(na);
    double *bir = alloc_d(nb);
    for (int t = 0; t < klen; t++) {
        for (int k = 0; k < K; k++) {
            double tau = exp(K > 1 ? log((double)maxd) * k / (K - 1) : 0.0);
            phr[(size_t)t * 2 * K + k] = sin(t / tau);
            phr[(size_t)t * 2 * K + K + k] = cos(t / tau);
        }
        for (int j = 0; j < hidden; j++) {
            double s = b1[j];
            for (int e = 0; e < 2 * K; e++)
                s += (double)W1[(size_t)j * 2 * K + e] * phr[(size_t)t * 2 * K + e];
            prr[(size_t)t * hidden + j] = s;
            acr[(size_t)t * hidden + j] = 0.5 * s * (1 + erf(s / sqrt(2.0)));
        }
        for (int h = 0; h < H; h++) {
            double s = b2[h];
            for (int j = 0; j < hidden; j++)
                s += (double)W2[(size_t)h * hidden + j] * acr[(size_t)t * hidden + j];
            bir[(size_t)h * klen + t] = s;
        }
    }
    double ef = tl_max_rel_err(phi, phr, (size_t)klen * 2 * K, 1e-30);
    double ep = tl_max_rel_err(pre, prr, na, 1e-30), ea = tl_max_rel_err(act, acr, na, 1e-30);
    double eb = tl_max_rel_err(bias, bir, nb, 1e-30);
    CHECK(ef <= 1e-6 && ep <= 1e-6 && ea <= 1e-6 && eb <= 1e-6,
          "%s: phi, pre, GELU(erf) act, bias vs double: %.1e %.1e %.1e %.1e (tol 1e-6)", lbl, ef,
          ep, ea, eb);
    float *phi2 = nan_f((size_t)klen * 2 * K);
    mlp_bias_features(phi2, K, maxd, klen);
    CHECK(same_f(phi, phi2, (size_t)klen * 2 * K), "%s: mlp_bias_features = forward's phi", lbl);
    free(phi2);

    float *dW1 = zeros_f(n1), *db1 = zeros_f(hidden), *dW2 = zeros_f((size_t)H * hidden);
    float *db2 = zeros_f(H), *dact = nan_f(na), *dt = nan_f((size_t)klen * H);
    mlp_bias_backward(dW1, db1, dW2, db2, g, pre, act, W2, dact, dt, phi, H, hidden, K, maxd,
                      klen);
    mlp_ctx c = {W1, b1, W2, b2, bias, pre, act, phi, g, H, hidden, K, klen, maxd};
    check_fd(lbl, "W1", mlp_loss, &c, W1, dW1, n1, STEP_SMOOTH, 1e-3, 0);
    check_fd(lbl, "b1", mlp_loss, &c, b1, db1, hidden, STEP_SMOOTH, 1e-3, 0);
    check_fd(lbl, "W2", mlp_loss, &c, W2, dW2, (size_t)H * hidden, STEP_AFFINE, 1e-5, 0);
    check_fd(lbl, "b2", mlp_loss, &c, b2, db2, H, STEP_AFFINE, 1e-5, 0);
    mlp_bias_forward(bias, pre, act, phi, W1, b1, W2, b2, H, hidden, K, maxd, klen);

    float *dW11 = copy_f(dW1, n1), *db11 = copy_f(db1, hidden);
    float *dW21 = copy_f(dW2, (size_t)H * hidden), *db21 = copy_f(db2, H);
    mlp_bias_backward(dW1, db1, dW2, db2, g, pre, act, W2, dact, dt, phi, H, hidden, K, maxd,
                      klen);
    check_doubling("mlp_bias dW1", dW11, dW1, n1);
    check_doubling("mlp_bias db1", db11, db1, hidden);
    check_doubling("mlp_bias dW2", dW21, dW2, (size_t)H * hidden);
    check_doubling("mlp_bias db2", db21, db2, H);

    free(W1), free(b1), free(W2), free(b2), free(bias), free(pre), free(act), free(phi), free(g);
    free(phr), free(prr), free(acr), free(bir), free(dW1), free(db1), free(dW2), free(db2);
    free(dact), free(dt), free(dW11), free(db11), free(dW21), free(db21);
}

static void test_mlp(void)
{
    test_mlp_case(3, 5, 4, 64.0f, 6);
    test_mlp_case(2, 3, 1, 16.0f, 1);
    test_mlp_case(4, 8, 16, 4096.0f, 12);
}

/* T5's buckets (bidirectional=False) at the first distance of every bucket, as T5's own
 * formula gives them in float32 (transformers' T5Attention._relative_position_bucket,
 * computed once with torch): 32 buckets to distance 128, and two small tables. */
static void test_t5(void)
{
    static const int first32[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                                    16, 19, 21, 24, 27, 31, 35, 40, 46, 52, 59, 67, 77, 87, 99, 113};
    static const int b6[14] = {0, 1, 2, 3, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5};
    static const int b8[14] = {0, 1, 2, 3, 4, 4, 5, 6, 6, 6, 7, 7, 7, 7};
    int bad = 0;
    for (int k = 0; k < 32; k++) {
        bad += t5_bucket(first32[k], 32, 128) != k;
        bad += k > 0 && t5_bucket(first32[k] - 1, 32, 128) != k - 1;
    }
    bad += t5_bucket(128, 32, 128) != 31 || t5_bucket(1000000, 32, 128) != 31 ||
           t5_bucket(2147483647L, 32, 128) != 31;
    for (int n = 0; n < 14; n++)
        bad += t5_bucket(n, 6, 6) != b6[n] || t5_bucket(n, 8, 12) != b8[n];
    CHECK(bad == 0, "t5_bucket: T5's buckets (32 to 128: exact to 15, 16 at 16, 31 from 113 "
          "on; 6 to 6; 8 to 12): %d differ", bad);
    enum { H = 3, NB = 8, N = 14 };
    float *T = rand_f((size_t)H * NB, 1.0f), *bias = nan_f((size_t)H * N);
    t5_bias(bias, T, H, NB, 12, N);
    int ok = 1;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < N; t++)
            ok &= bias[(size_t)h * N + t] == T[(size_t)h * NB + b8[t]];
    CHECK(ok, "t5_bias: bias[h][delta] = T[h][bucket(delta)]");
    free(T), free(bias);
}

typedef struct {
    float *w1, *b1, *W2, *b2, *c, *lm, *g;
    float thr;
    int m, Lq, H, hidden;
    fire_layout f; /* at the unperturbed weights: where g's entries are */
} fire_tctx;

/* x of (p, delta), written out: psi(delta) / (psi(max(L, p)) + 1e-6), psi(t) = ln(|c| t + 1) */
static double fire_x_ref(double c, double L, int p, int delta)
{
    double N = p > L ? p : L;
    return log(fabs(c) * delta + 1) / (log(fabs(c) * N + 1) + 1e-6);
}

/* b_h(p, delta) in double from the weights, into out[H] */
static void fire_b_ref(double *out, const fire_tctx *t, int p, int delta)
{
    double xv = fire_x_ref(t->c[0], fabs((double)t->lm[0]) * t->thr, p, delta);
    for (int h = 0; h < t->H; h++) {
        double s = t->b2[h];
        for (int k = 0; k < t->hidden; k++)
            s += (double)t->W2[(size_t)h * t->hidden + k] *
                 fmax(0.0, (double)t->w1[k] * xv + t->b1[k]);
        out[h] = s;
    }
}

/* sum of g * T over T's entries (the layout at the unperturbed weights): the shared row's
 * distances under N = L (p = -1), then each own row */
static double fire_loss_ref(void *p)
{
    fire_tctx *t = p;
    double s = 0, b[8];
    for (size_t r = 0; r < t->f.R; r++) {
        int q = -1, d = (int)r;
        for (int k = t->f.p0; r >= (size_t)t->f.n0 && fire_offset(&t->f, k) <= r; k++)
            q = k, d = (int)(r - fire_offset(&t->f, k));
        fire_b_ref(b, t, q, d);
        for (int h = 0; h < t->H; h++)
            s += b[h] * t->g[r * t->H + h];
    }
    return s;
}

/* FIRE's MLP inputs and bias (pos_fire.c) for the queries at window rows m..m+Lq-1 with
 * L = |L_mult| thr among them or not: the layout's count and every query's row against the
 * formula in double (tol 1e-6); the backward (with the chain rule of pos_fire.c through
 * a = |c| and L = |L_mult| thr) against central differences of that double formula, so the
 * step can be 1e-6 of a weight: no round-off, a truncation of order 1e-12 where the loss is
 * smooth (c, L_mult), none where it is linear (w1, b1 between ReLU kinks, W2, b2): tol 1e-5,
 * the kernel's float32. Each hidden unit's kink -b1/w1 sits in the middle of one of the
 * widest gaps between the inputs, at least 1e-4 from any, so no step crosses one; one unit
 * is active everywhere, one nowhere (its w1, b1 have no gradient). */
static void test_fire_case(float c, float lm, float thr, int m, int Lq, int H)
{
    enum { HID = 5 };
    char lbl[96];
    snprintf(lbl, sizeof lbl, "fire c=%g L=%g m=%d Lq=%d H=%d", c, fabs(lm) * thr, m, Lq, H);
    fire_layout f;
    fire_layout_of(&f, c, lm, thr, m, Lq);
    size_t R = f.R, want = 0;
    double L = fabs((double)lm) * thr;
    int p1 = m + Lq - 1, n0 = 0;
    for (int p = m; p <= p1; p++)
        if (p > L)
            want += (size_t)p + 1;
        else
            n0 = p + 1;
    want += (size_t)n0;
    CHECK(R == want && f.n0 == n0, "%s: %zu inputs (%d shared), expected %zu (%d)", lbl, R,
          f.n0, want, n0);
    /* the inputs, sorted, and the widest gaps for the kinks */
    double *xs = alloc_d((size_t)Lq * (p1 + 1)); /* every (p, delta), repeats included */
    size_t nx = 0;
    for (int p = m; p <= p1; p++)
        for (int d = 0; d <= p; d++)
            xs[nx++] = fire_x_ref(c, L, p, d);
    for (size_t i = 1; i < nx; i++) /* insertion sort: a few dozen */
        for (size_t j = i; j > 0 && xs[j - 1] > xs[j]; j--) {
            double s = xs[j];
            xs[j] = xs[j - 1], xs[j - 1] = s;
        }
    float *w1 = alloc_f(HID), *b1 = alloc_f(HID);
    double used[3] = {-1, -1, -1}, margin = 1;
    for (int k = 0; k < 3; k++) {
        double best = -1, at = 0;
        for (size_t i = 1; i < nx; i++) {
            double mid = 0.5 * (xs[i] + xs[i - 1]), gap = xs[i] - xs[i - 1];
            if (gap > best && mid != used[0] && mid != used[1])
                best = gap, at = mid;
        }
        used[k] = at;
        margin = fmin(margin, best / 2);
        w1[k] = k % 2 ? -0.9f : 1.3f;
        b1[k] = (float)(-w1[k] * at);
    }
    w1[3] = 0.7f, b1[3] = 0.3f;   /* active for every x >= 0 */
    w1[4] = -1.1f, b1[4] = -0.2f; /* active for none */
    free(xs);
    CHECK(margin > 1e-4, "%s: every kink at least %.1e from every input", lbl, margin);

    float *W2 = rand_f((size_t)H * HID, 1.0f), *b2 = rand_f(H, 0.5f);
    float *T = nan_f(R * H), *x = nan_f(FIRE_BLOCK), *act = nan_f((size_t)FIRE_BLOCK * HID);
    float *g = rand_f(R * H, 1.0f);
    fire_forward(T, x, act, &f, w1, b1, W2, b2, H, HID);
    double *ref = alloc_d(R * H);
    for (int p = m; p <= p1; p++)
        for (int d = 0; d <= p; d++) {
            double xv = fire_x_ref(c, L, p, d), hid[HID];
            for (int k = 0; k < HID; k++)
                hid[k] = fmax(0.0, (double)w1[k] * xv + b1[k]);
            for (int h = 0; h < H; h++) {
                double s = b2[h];
                for (int k = 0; k < HID; k++)
                    s += (double)W2[(size_t)h * HID + k] * hid[k];
                ref[(fire_offset(&f, p) + (size_t)d) * H + h] = s;
            }
        }
    double ef = tl_max_rel_err(T, ref, R * H, 1e-30);
    CHECK(ef <= 1e-6, "%s: bias of every query and distance vs double: %.1e (tol 1e-6)", lbl, ef);

    float *dw1 = zeros_f(HID), *db1 = zeros_f(HID), *dW2 = zeros_f((size_t)H * HID);
    float *db2 = zeros_f(H), *dact = nan_f((size_t)FIRE_BLOCK * HID);
    double da = 0, dL = 0;
    fire_backward(dw1, db1, dW2, db2, &da, &dL, g, x, act, dact, &f, w1, b1, W2, H, HID);
    float cv = c, lv = lm;
    float dc = (float)(da * (c > 0 ? 1 : -1)), dlm = (float)(dL * (lm > 0 ? 1 : -1) * thr);
    fire_tctx t = {w1, b1, W2, b2, &cv, &lv, g, thr, m, Lq, H, HID, f};
    CHECK(dw1[4] == 0 && db1[4] == 0, "%s: the unit active nowhere has no gradient", lbl);
    check_fd(lbl, "w1", fire_loss_ref, &t, w1, dw1, HID, 1e-6, 1e-5, 0);
    check_fd(lbl, "b1", fire_loss_ref, &t, b1, db1, HID, 1e-6, 1e-5, 0);
    check_fd(lbl, "W2", fire_loss_ref, &t, W2, dW2, (size_t)H * HID, STEP_AFFINE, 1e-5, 0);
    check_fd(lbl, "b2", fire_loss_ref, &t, b2, db2, H, STEP_AFFINE, 1e-5, 0);
    check_fd(lbl, "c", fire_loss_ref, &t, &cv, &dc, 1, 1e-6, 1e-5, 0);
    if (n0 > 0)
        check_fd(lbl, "L_mult", fire_loss_ref, &t, &lv, &dlm, 1, 1e-6, 1e-5, 0);
    else
        CHECK(dL == 0, "%s: no shared row, no gradient for L", lbl);

    float *dw11 = copy_f(dw1, HID), *db11 = copy_f(db1, HID);
    float *dW21 = copy_f(dW2, (size_t)H * HID), *db21 = copy_f(db2, H);
    double da1 = da, dL1 = dL;
    fire_backward(dw1, db1, dW2, db2, &da, &dL, g, x, act, dact, &f, w1, b1, W2, H, HID);
    check_doubling("fire dw1", dw11, dw1, HID);
    check_doubling("fire db1", db11, db1, HID);
    check_doubling("fire dW2", dW21, dW2, (size_t)H * HID);
    check_doubling("fire db2", db21, db2, H);
    CHECK(fabs(da - 2 * da1) <= 1e-12 * fabs(da) && fabs(dL - 2 * dL1) <= 1e-12 * fabs(dL),
          "fire da, dL: second backward doubles them (+=, double sums)");

    free(w1), free(b1), free(W2), free(b2), free(T), free(x), free(act), free(g), free(ref);
    free(dw1), free(db1), free(dW2), free(db2), free(dact), free(dw11), free(db11), free(dW21);
    free(db21);
}

static void test_fire(void)
{
    test_fire_case(-0.35f, 0.45f, 10.0f, 3, 4, 3); /* shared rows 3, 4; own 5, 6 */
    test_fire_case(0.7f, -0.25f, 10.0f, 4, 5, 2);  /* every query past L = 2.5 */
    test_fire_case(0.1f, 1.0f, 512.0f, 6, 5, 2);   /* the defaults: all within L */
    /* more inputs than a block of the hidden layer: rows 31..79 past L = 30.5 */
    test_fire_case(0.2f, 0.61f, 50.0f, 25, 55, 2);
}

/* ---------------------------------------------------------------- optim */

/* torch.optim.Adam / AdamW (single-tensor path) in double. */
static void adam_twin(double *w, const double *g, double *m, double *v, size_t n, long t,
                      double lr, const adam_hparams *h)
{
    double bc1 = 1 - pow(h->beta1, (double)t), bc2 = 1 - pow(h->beta2, (double)t);
    for (size_t i = 0; i < n; i++) {
        double gi = g[i];
        if (h->decoupled)
            w[i] *= 1 - lr * h->weight_decay;
        else
            gi += h->weight_decay * w[i];
        m[i] += (1 - h->beta1) * (gi - m[i]); /* exp_avg.lerp_(grad, 1 - beta1) */
        v[i] = h->beta2 * v[i] + (1 - h->beta2) * gi * gi;
        double denom = sqrt(v[i]) / sqrt(bc2) + h->eps;
        w[i] -= lr / bc1 * m[i] / denom;
    }
}

/* 6 steps on 2000 elements (including exact-zero and eps-sized gradients). The float state
 * rounds ~1 ulp per operation per step, so m, v and w agree with the double twin to a few
 * 1e-7; the displacement w - w0 (what Adam controls) also carries w's own rounding,
 * steps * ulp(max|w|)/2 / (steps * lr) ~ 4e-7 with |w| <~ 0.2 and lr = 1e-2. Tol 2e-6
 * norm-relative for all four. */
static void test_adam(void)
{
    const size_t n = 2000;
    const int steps = 6;
    const double lr = 1e-2;
    adam_hparams hs[3] = {{0.9, 0.999, 1e-8, 0.0, 0},
                          {0.9, 0.999, 1e-8, 0.1, 0},
                          {0.8, 0.99, 1e-6, 0.1, 1}};
    const char *names[3] = {"Adam wd=0", "Adam L2 wd=0.1", "AdamW wd=0.1 b=(0.8,0.99) eps=1e-6"};
    for (int k = 0; k < 3; k++) {
        float *w = rand_f(n, 0.05f), *m = zeros_f(n), *v = zeros_f(n), *g = alloc_f(n);
        double *wd = alloc_d(n), *md = alloc_d(n), *vd = alloc_d(n), *gd = alloc_d(n);
        double *w0 = alloc_d(n), *disp = alloc_d(n);
        for (size_t i = 0; i < n; i++)
            wd[i] = w0[i] = w[i];
        int first_ok = 1;
        for (int t = 1; t <= steps; t++) {
            for (size_t i = 0; i < n; i++) {
                g[i] = tl_normal(&rng, 1.0f);
                if (i % 97 == 0)
                    g[i] = 0.0f;
                if (i % 89 == 0)
                    g[i] = 1e-8f * (float)(i % 3);
                gd[i] = g[i];
            }
            adam_step(w, g, m, v, n, t, lr, &hs[k]);
            adam_twin(wd, gd, md, vd, n, t, lr, &hs[k]);
            if (t == 1 && k == 0) /* step 1 moves each weight by lr * sign(g) when |g| >> eps */
                for (size_t i = 0; i < n; i++)
                    if (fabsf(g[i]) > 1e-3f)
                        first_ok &=
                            fabs((w[i] - w0[i]) + lr * (g[i] > 0 ? 1 : -1)) < 1e-5 * lr + 1e-8;
        }
        float *dispf = alloc_f(n);
        for (size_t i = 0; i < n; i++) {
            dispf[i] = (float)((double)w[i] - w0[i]);
            disp[i] = wd[i] - w0[i];
        }
        double ew = tl_max_rel_err(w, wd, n, 1e-30), ed = tl_max_rel_err(dispf, disp, n, 1e-30);
        double em = tl_max_rel_err(m, md, n, 1e-30), ev = tl_max_rel_err(v, vd, n, 1e-30);
        CHECK(ew <= 2e-6 && ed <= 2e-6 && em <= 2e-6 && ev <= 2e-6 && first_ok,
              "adam_step %s, %d steps vs double torch twin: w %.1e, w-w0 %.1e, m %.1e, v %.1e "
              "(tol 2e-6)%s", names[k], steps, ew, ed, em, ev,
              k == 0 ? "; step 1 = lr*sign(g)" : "");
        free(w), free(m), free(v), free(g), free(wd), free(md), free(vd), free(gd), free(w0);
        free(disp), free(dispf);
    }
}

static void test_clip(void)
{
    const size_t n = 1000;
    float *g = rand_f(n, 1.0f), *g0 = copy_f(g, n);
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)g[i] * g[i];
    double norm = sqrt(s);
    double gn = grad_norm(g, n);
    CHECK(fabs(gn - norm) <= 1e-12 * norm, "grad_norm vs double: %.10g vs %.10g", gn, norm);

    /* clipping: g *= max_norm / (norm + 1e-6): two float roundings per element */
    double maxn = 0.25;
    double ret = grad_clip(g, n, maxn);
    double *ref = alloc_d(n);
    for (size_t i = 0; i < n; i++)
        ref[i] = g0[i] * (maxn / (norm + 1e-6));
    double e = tl_max_rel_err(g, ref, n, 1e-30);
    CHECK(ret == gn && e <= 2 * FLT_EPSILON && fabs(grad_norm(g, n) - maxn) <= 1e-6,
          "grad_clip(0.25) on norm %.3f: returns the pre-clip norm, g = g0 * max/(norm+1e-6) "
          "(err %.1e, tol 2 eps32), new norm %.7f", norm, e, grad_norm(g, n));

    memcpy(g, g0, n * sizeof *g);
    ret = grad_clip(g, n, 2 * norm);
    int same1 = same_f(g, g0, n) && ret == gn;
    ret = grad_clip(g, n, 0.0);
    int same2 = same_f(g, g0, n) && ret == gn;
    ret = grad_clip(g, n, -1.0);
    int same3 = same_f(g, g0, n) && ret == gn;
    CHECK(same1 && same2 && same3, "grad_clip: max_norm > norm, = 0, < 0 leave g untouched and "
          "return the norm");
    /* max_norm == norm: the coefficient norm/(norm+1e-6) < 1 still applies (as torch) */
    ret = grad_clip(g, n, gn);
    for (size_t i = 0; i < n; i++)
        ref[i] = g0[i] * (gn / (gn + 1e-6));
    e = tl_max_rel_err(g, ref, n, 1e-30);
    CHECK(e <= 2 * FLT_EPSILON, "grad_clip(max_norm = norm) scales by norm/(norm+1e-6) as "
          "torch: err %.1e", e);
    float z[4] = {0, 0, 0, 0};
    ret = grad_clip(z, 4, 1.0);
    CHECK(ret == 0 && z[0] == 0 && z[3] == 0, "grad_clip on an all-zero gradient: norm 0, "
          "unchanged");

    /* training fuses the clip into the update: adam_step_scaled(g, clip_coef) must equal
     * grad_clip then adam_step bit for bit, leave g alone, and be adam_step at scale 1 */
    const adam_hparams hp[2] = {{0.9, 0.999, 1e-8, 0.1, 0}, {0.9, 0.98, 1e-8, 0.01, 1}};
    for (int k = 0; k < 2; k++)
        for (int clipped = 0; clipped < 2; clipped++) {
            float *w1 = rand_f(n, 0.1f), *w2 = copy_f(w1, n), *m1 = rand_f(n, 0.01f);
            float *m2 = copy_f(m1, n), *v1 = zeros_f(n), *v2 = zeros_f(n);
            for (size_t i = 0; i < n; i++)
                v1[i] = v2[i] = fabsf(m1[i]) * 0.1f;
            double mx = clipped ? 0.25 : 2 * norm;
            memcpy(g, g0, n * sizeof *g);
            float c = clip_coef(grad_norm(g, n), mx);
            adam_step_scaled(w1, g, c, m1, v1, n, 3, 1e-3, &hp[k]);
            int untouched = same_f(g, g0, n);
            grad_clip(g, n, mx);
            adam_step(w2, g, m2, v2, n, 3, 1e-3, &hp[k]);
            CHECK(untouched && same_f(w1, w2, n) && same_f(m1, m2, n) && same_f(v1, v2, n) &&
                      (clipped ? c < 1.0f : c == 1.0f),
                  "adam_step_scaled(clip_coef %.4f) == grad_clip + adam_step bitwise (%s), "
                  "g untouched", c, hp[k].decoupled ? "AdamW" : "Adam L2");
            free(w1), free(w2), free(m1), free(m2), free(v1), free(v2);
        }
    free(g), free(g0), free(ref);
}

static int close_rel(double a, double b) { return fabs(a - b) <= 1e-12 * fmax(fabs(b), 1e-300); }

static void test_lr(void)
{
    lr_schedule c = {LR_CONSTANT, 1e-3, 0, 10, 100, LR_AS_PLANNED, 0, 0};
    CHECK(close_rel(lr_at(&c, 1), 1e-4) && close_rel(lr_at(&c, 5), 5e-4) &&
              close_rel(lr_at(&c, 10), 1e-3) && close_rel(lr_at(&c, 11), 1e-3) &&
              close_rel(lr_at(&c, 5000), 1e-3),
          "lr constant warmup 10: t=1 lr/10, t=5 lr/2, t=10 lr, t=11 lr, t=5000 lr");

    lr_schedule s = {LR_COSINE, 1e-3, 1e-5, 10, 110, LR_AS_PLANNED, 0, 0};
    double t11 = 1e-5 + (1e-3 - 1e-5) * (1 + cos(PI / 100)) / 2;
    CHECK(close_rel(lr_at(&s, 10), 1e-3) && close_rel(lr_at(&s, 11), t11) &&
              close_rel(lr_at(&s, 60), (1e-3 + 1e-5) / 2) && close_rel(lr_at(&s, 110), 1e-5),
          "lr cosine warmup 10, max 110: t=10 lr (%.6g), t=11 %.8g, t=60 (lr+lr_min)/2 (%.6g), "
          "t=max lr_min (%.6g)", lr_at(&s, 10), lr_at(&s, 11), lr_at(&s, 60), lr_at(&s, 110));
    CHECK(close_rel(lr_at(&s, 500), 1e-5), "lr cosine after max_steps stays at lr_min: %.6g "
          "(header formula silent; cos would rise again)", lr_at(&s, 500));
    lr_schedule s0 = {LR_COSINE, 2e-3, 0, 0, 50, LR_AS_PLANNED, 0, 0};
    CHECK(close_rel(lr_at(&s0, 1), 2e-3 * (1 + cos(PI / 50)) / 2) &&
              fabs(lr_at(&s0, 50)) <= 1e-18 && close_rel(lr_at(&s0, 25), 1e-3),
          "lr cosine warmup 0: t=1 %.8g, t=25 lr/2, t=max %.1e (lr_min 0)", lr_at(&s0, 1),
          lr_at(&s0, 50));

    lr_schedule q = {LR_INV_SQRT, 1e-3, 0, 100, 0, LR_AS_PLANNED, 0, 0};
    CHECK(close_rel(lr_at(&q, 50), 5e-4) && close_rel(lr_at(&q, 100), 1e-3) &&
              close_rel(lr_at(&q, 400), 5e-4) &&
              close_rel(lr_at(&q, 101), 1e-3 * sqrt(100.0 / 101)),
          "lr inv_sqrt warmup 100: t=50 lr/2, t=100 lr (peak), t=101 lr*sqrt(100/101), t=400 "
          "lr/2");
    lr_schedule q0 = {LR_INV_SQRT, 1e-3, 0, 0, 0, LR_AS_PLANNED, 0, 0};
    CHECK(close_rel(lr_at(&q0, 1), 1e-3) && close_rel(lr_at(&q0, 4), 5e-4),
          "lr inv_sqrt warmup 0: t=1 lr, t=4 lr/2");

    /* lr_at_progress (schedule_by time): progress p = t / max_steps is step t, warmup over
     * p <= warmup / max_steps, clamped outside [0, 1] */
    double worst = 0;
    const lr_schedule *all[] = {&c, &s, &s0};
    for (int k = 0; k < 3; k++)
        for (long t = 1; t <= all[k]->max_steps; t++) {
            double a = lr_at(all[k], t), b = lr_at_progress(all[k], (double)t / all[k]->max_steps);
            worst = fmax(worst, fabs(a - b) / fmax(fabs(a), 1e-300));
        }
    lr_schedule q2 = {LR_INV_SQRT, 1e-3, 0, 100, 1000, LR_AS_PLANNED, 0, 0};
    CHECK(worst <= 1e-12 && close_rel(lr_at_progress(&s, 2.0), 1e-5) &&
              fabs(lr_at_progress(&s, -1.0)) <= 1e-18 &&
              close_rel(lr_at_progress(&q2, 0.4), lr_at(&q2, 400)),
          "lr_at_progress(t / max_steps) == lr_at(t) for constant and cosine schedules, with "
          "and without warmup (max rel err %.1e); p > 1 stays at lr_min, p < 0 is 0; inv_sqrt "
          "at p = 0.4 is step 400 of 1000", worst);

    /* train.resume_schedule after a resume at S = 50 (s: cosine, warmup 10, to 110): restart
     * is the schedule of t - S over max_steps - S; continue decays from the lr given at S
     * along the cosine to lr_min at max_steps (inv_sqrt: from it as sqrt(S / t)); up to S
     * both are the plan */
    lr_schedule r = s, k = s, kq = q;
    r.shape = LR_RESTART, r.from_step = 50;
    k.shape = LR_CONTINUE, k.from_step = 50, k.from_lr = 4e-4;
    kq.shape = LR_CONTINUE, kq.from_step = 400, kq.from_lr = 2e-4;
    double k80 = 1e-5 + (4e-4 - 1e-5) * (1 + cos(PI * 30 / 60)) / 2;
    CHECK(close_rel(lr_at(&r, 50), lr_at(&s, 50)) && close_rel(lr_at(&r, 51), 1e-4) &&
              close_rel(lr_at(&r, 60), 1e-3) && close_rel(lr_at(&r, 85), (1e-3 + 1e-5) / 2) &&
              close_rel(lr_at(&r, 110), 1e-5),
          "lr restart at 50: t=50 the plan, t=51 lr/10 (a new warmup), t=60 lr, t=85 (lr+lr_min)"
          "/2, t=110 lr_min");
    CHECK(close_rel(lr_at(&k, 50), lr_at(&s, 50)) && lr_at(&k, 51) < 4e-4 &&
              close_rel(lr_at(&k, 80), k80) && close_rel(lr_at(&k, 110), 1e-5) &&
              close_rel(lr_at(&kq, 1600), 1e-4),
          "lr continue at 50 from 4e-4: t=50 the plan, t=51 below 4e-4, t=80 halfway down the "
          "cosine (%.6g), t=110 lr_min; inv_sqrt from 2e-4 at 400: t=1600 1e-4", lr_at(&k, 80));
}

/* ---------------------------------------------------------------- thread counts */

/* par.h: "static partitions and fixed-order reductions, so results depend on the thread
 * count only". For the ops below each output element is computed by one thread in a fixed
 * order (row or column blocks), so 3 threads must reproduce 1 thread bit for bit. Sizes
 * are above each op's parallel threshold; 3 threads even on smaller machines. */
static void run_gemm_threads(int M, int N, int K, int ta, int tb, double *err, size_t *ndiff,
                             size_t *ntot)
{
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *A = rand_f(na, 1.0f), *B = rand_f(nb, 1.0f), *C1 = rand_f(nc, 1.0f);
    float *C3 = copy_f(C1, nc);
    int lda = ta ? M : K, ldb = tb ? K : N;
    par_set_threads(1);
    gemm(C1, A, B, M, N, K, ta, tb, 0.5f, 1.0f, lda, ldb, N);
    par_set_threads(3);
    gemm(C3, A, B, M, N, K, ta, tb, 0.5f, 1.0f, lda, ldb, N);
    par_set_threads(1);
    double *ref = alloc_d(nc);
    for (size_t i = 0; i < nc; i++)
        ref[i] = C1[i];
    *err = fmax(*err, tl_max_rel_err(C3, ref, nc, 1e-30));
    for (size_t i = 0; i < nc; i++)
        *ndiff += C1[i] != C3[i];
    *ntot += nc;
    free(A), free(B), free(C1), free(C3), free(ref);
}

static void test_threads(void)
{
    /* gemm.c says splitting C keeps every dot product, but OpenBLAS may pick another
     * kernel for a smaller block (seen: edge columns of NN products differ by an ulp), so
     * we hold the split to float round-off of a K-term dot product (1e-6) and report how
     * many elements are not bitwise equal. */
    double gerr = 0;
    size_t ndiff = 0, ntot = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            run_gemm_threads(136, 100, 96, ta, tb, &gerr, &ndiff, &ntot); /* split along M */
            run_gemm_threads(40, 210, 160, ta, tb, &gerr, &ndiff, &ntot); /* split along N */
        }
    CHECK(gerr <= 1e-6, "threads: gemm split into 16-multiple blocks (M and N splits, 4 "
          "transposes) vs 1 thread: max err %.1e, %zu of %zu elements not bitwise equal",
          gerr, ndiff, ntot);

    /* layernorm forward/backward, 200 x 64 */
    {
        int rows = 200, d = 64;
        size_t n = (size_t)rows * d;
        float *x = rand_f(n, 1.0f), *gm = rand_f(d, 1.0f), *bt = rand_f(d, 1.0f);
        float *dy = rand_f(n, 1.0f), *out[2][6];
        for (int k = 0; k < 2; k++) {
            par_set_threads(k ? 3 : 1);
            out[k][0] = alloc_f(n), out[k][1] = alloc_f(n), out[k][2] = alloc_f(rows);
            out[k][3] = alloc_f(n), out[k][4] = zeros_f(d), out[k][5] = zeros_f(d);
            layernorm_forward(out[k][0], out[k][1], out[k][2], x, gm, bt, rows, d);
            layernorm_backward(out[k][3], out[k][4], out[k][5], dy, out[k][1], out[k][2], gm,
                               rows, d, 0);
        }
        par_set_threads(1);
        int same = same_f(out[0][0], out[1][0], n) && same_f(out[0][1], out[1][1], n) &&
                   same_f(out[0][2], out[1][2], rows) && same_f(out[0][3], out[1][3], n) &&
                   same_f(out[0][4], out[1][4], d) && same_f(out[0][5], out[1][5], d);
        CHECK(same, "threads: layernorm 200x64 forward (y, xhat, rstd) and backward (dx, "
              "dgamma, dbeta) equal 1 thread bitwise");
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 6; j++)
                free(out[k][j]);
        free(x), free(gm), free(bt), free(dy);
    }

    /* linear backward (dbias column blocks) and embedding backward, 300 rows */
    {
        int rows = 300, out = 40, in = 20, V = 16, d = 32;
        float *x = rand_f((size_t)rows * in, 1.0f), *W = rand_f((size_t)out * in, 1.0f);
        float *dy = rand_f((size_t)rows * out, 1.0f), *dh = rand_f((size_t)rows * d, 1.0f);
        txl_tok *tok = malloc(rows * sizeof *tok);
        for (int i = 0; i < rows; i++)
            tok[i] = (txl_tok)((i * 7) % V);
        float *r[2][4];
        for (int k = 0; k < 2; k++) {
            par_set_threads(k ? 3 : 1);
            r[k][0] = alloc_f((size_t)rows * in), r[k][1] = zeros_f((size_t)out * in);
            r[k][2] = zeros_f(out), r[k][3] = zeros_f((size_t)V * d);
            linear_backward(r[k][0], r[k][1], r[k][2], dy, x, W, rows, out, in, 0);
            embedding_backward(r[k][3], dh, tok, rows, d, 2.0f);
        }
        par_set_threads(1);
        CHECK(same_f(r[0][0], r[1][0], (size_t)rows * in) &&
                  same_f(r[0][1], r[1][1], (size_t)out * in) && same_f(r[0][2], r[1][2], out) &&
                  same_f(r[0][3], r[1][3], (size_t)V * d),
              "threads: linear_backward (dx, dW, dbias) and embedding_backward (repeated "
              "tokens) over 300 rows equal 1 thread bitwise");
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 4; j++)
                free(r[k][j]);
        free(x), free(W), free(dy), free(dh), free(tok);
    }

    /* xent, 100 rows */
    {
        int rows = 100, d = 16, V = 64;
        float *h = rand_f((size_t)rows * d, 1.0f), *E = rand_f((size_t)V * d, 1.0f);
        float *b = rand_f(V, 1.0f), *r[2][5];
        txl_tok *y = malloc(rows * sizeof *y);
        for (int i = 0; i < rows; i++)
            y[i] = (txl_tok)((i * 13) % V);
        double loss[2];
        for (int k = 0; k < 2; k++) {
            par_set_threads(k ? 3 : 1);
            r[k][0] = alloc_f((size_t)rows * V), r[k][1] = alloc_f(rows), r[k][2] = alloc_f(rows);
            r[k][3] = alloc_f((size_t)rows * d), r[k][4] = zeros_f((size_t)V * d);
            float *db = zeros_f(V);
            loss[k] = xent_forward(r[k][0], r[k][1], r[k][2], h, E, b, y, rows, d, V);
            xent_backward(r[k][3], r[k][4], db, r[k][0], r[k][1], h, E, y, rows, d, V, 0.01f);
            free(db);
        }
        par_set_threads(1);
        CHECK(loss[0] == loss[1] && same_f(r[0][1], r[1][1], rows) &&
                  same_f(r[0][2], r[1][2], rows) && same_f(r[0][0], r[1][0], (size_t)rows * V) &&
                  same_f(r[0][3], r[1][3], (size_t)rows * d) &&
                  same_f(r[0][4], r[1][4], (size_t)V * d),
              "threads: xent 100 rows: loss, lse, row loss, dlogits, dh, dE equal 1 thread "
              "bitwise");
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 5; j++)
                free(r[k][j]);
        free(h), free(E), free(b), free(y);
    }

    /* elementwise: dropout, ff activation (n = 20000); adam, grad_norm (n = 70000) */
    {
        size_t n = 20000, na = 70000;
        float *x = rand_f(na, 1.0f), *r[2][7];
        adam_hparams hp = {0.9, 0.999, 1e-8, 0.1, 1};
        double norm[2];
        for (int k = 0; k < 2; k++) {
            par_set_threads(k ? 3 : 1);
            r[k][0] = alloc_f(n), r[k][1] = alloc_f(n), r[k][2] = alloc_f(n);
            dropout_forward(r[k][0], x, n, 0.2f, 9, 3);
            dropout_relu(r[k][1], x, n, 0.2f, 9, 3);
            dropout_relu_backward(r[k][2], x + n, r[k][1], n, 0.2f);
            r[k][3] = copy_f(x, na), r[k][4] = zeros_f(na), r[k][5] = zeros_f(na);
            r[k][6] = NULL;
            adam_step(r[k][3], x, r[k][4], r[k][5], na, 1, 1e-3, &hp);
            adam_step(r[k][3], x, r[k][4], r[k][5], na, 2, 1e-3, &hp);
            norm[k] = grad_norm(x, na);
        }
        par_set_threads(1);
        int same = 1;
        for (int j = 0; j < 3; j++)
            same &= same_f(r[0][j], r[1][j], n);
        for (int j = 3; j < 6; j++)
            same &= same_f(r[0][j], r[1][j], na);
        /* grad_norm adds per-thread partial sums: equal up to double round-off */
        CHECK(same && fabs(norm[0] - norm[1]) <= 1e-13 * norm[0],
              "threads: dropout, dropout_relu fwd/bwd (n=%zu), 2 AdamW steps (n=%zu) equal 1 thread "
              "bitwise; grad_norm rel diff %.1e", n, na, fabs(norm[0] - norm[1]) / norm[0]);
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 6; j++)
                free(r[k][j]);
        free(x);
    }
}

/* vmath.h: the softmax's exp, max and sums against libm and plain double loops */
static void test_vmath(void)
{
    /* exp: every 97th float in [-87.3, 88.7], whose results are normal floats, within 2 ulp */
    double worst = 0, wx = 0;
    long count = 0;
    for (int sign = 0; sign < 2; sign++) { /* bit patterns of |x| from 0 up, either sign */
        float lim = sign ? 87.33f : 88.72f;
        for (uint32_t bits = 0;; bits += 97) {
            uint32_t b = bits | (uint32_t)sign << 31;
            float x;
            memcpy(&x, &b, sizeof x);
            if (fabsf(x) > lim)
                break;
            double ref = exp((double)x), ulp = ldexp(1.0, ilogb(ref) - 23);
            double err = fabs((double)vm_expf(x) - ref) / ulp;
            if (err > worst)
                worst = err, wx = x;
            count++;
        }
    }
    CHECK(worst <= 2.0, "vm_expf within 2 ulp of exp on %ld floats in [-87.3, 88.7]: worst "
          "%.2f ulp at %g", count, worst, wx);
    CHECK(vm_expf(0.0f) == 1.0f && vm_expf(-88.0f) == 0.0f && vm_expf(-INFINITY) == 0.0f &&
              isinf(vm_expf(89.0f)) && isinf(vm_expf(INFINITY)) && isnan(vm_expf(NAN)),
          "vm_expf: e^0 = 1, 0 below ln 2^-126 and at -inf, +inf above ln 2^128, NaN for NaN");
    /* vm_expf_neg: vm_expf's bits on every 7th float <= 0 (from -0 to -NaN), +0, and
     * NaN; under FTZ too (par_set_threads sets it: subnormal results flush alike) */
    long diff = 0, tried = 0;
    for (uint64_t u = 0x80000000u; u <= 0xffffffffu; u += 7, tried++) {
        uint32_t w = (uint32_t)u;
        float x, a, b;
        memcpy(&x, &w, sizeof x);
        a = vm_expf(x), b = vm_expf_neg(x);
        diff += memcmp(&a, &b, sizeof a) != 0 && !(isnan(a) && isnan(b));
    }
    float pz = 0.0f, nan = NAN, e0 = vm_expf_neg(pz), en = vm_expf_neg(nan), ref0 = vm_expf(pz);
    CHECK(diff == 0 && memcmp(&e0, &ref0, sizeof e0) == 0 && isnan(en),
          "vm_expf_neg == vm_expf bit for bit on %ld floats <= 0 (%ld differ), +0 and NaN",
          tried, diff);

    /* max, exp_sum, dot, sum, sumsq on every length 1..70 (tails and whole lanes) */
    int ok_max = 1, ok_sum = 1, nan_max = 1;
    double worst_sum = 0;
    tl_rng rng = {7};
    for (int n = 1; n <= 70; n++) {
        float a[70], b[70], e[70];
        for (int j = 0; j < n; j++) {
            a[j] = tl_normal(&rng, 3.0f) - 2.0f;
            b[j] = tl_normal(&rng, 1.0f);
        }
        float mx = a[0];
        for (int j = 1; j < n; j++)
            mx = a[j] > mx ? a[j] : mx;
        ok_max &= vm_max(a, n) == mx;
        memcpy(e, a, sizeof a);
        double s = vm_exp_sum(e, n, mx), rs = 0, rd = 0, rsum = 0, rsq = 0;
        for (int j = 0; j < n; j++) {
            rs += exp((double)a[j] - mx);
            double ej = exp((double)(a[j] - mx)); /* the float difference, as the softmax */
            ok_sum &= fabs(e[j] - ej) <= 2.5e-7 * ej;
            rd += (double)a[j] * b[j];
            rsum += a[j];
            rsq += ((double)a[j] - 0.5) * ((double)a[j] - 0.5);
        }
        worst_sum = fmax(worst_sum, fabs(s - rs) / rs);
        worst_sum = fmax(worst_sum, fabs(vm_dot(a, b, n) - rd) / fmax(fabs(rd), 1.0));
        worst_sum = fmax(worst_sum, fabs(vm_sum(a, (size_t)n) - rsum) / fmax(fabs(rsum), 1.0));
        worst_sum = fmax(worst_sum, fabs(vm_sumsq(a, (size_t)n, 0.5) - rsq) / rsq);
        a[n / 2] = NAN;
        nan_max &= isnan(vm_max(a, n));
    }
    float neg[3] = {-3.0f, -0.0f, -1.0f};
    CHECK(ok_max && vm_max(neg, 3) == 0.0f && signbit(vm_max(neg, 3)),
          "vm_max equals the running maximum for n = 1..70, and orders negatives and -0");
    CHECK(nan_max, "vm_max of scores holding a NaN is NaN (a NaN is not hidden by the softmax)");
    CHECK(ok_sum && worst_sum < 1e-6, "vm_exp_sum writes exp(x - max) to 2.5e-7 and returns its "
          "sum; vm_dot, vm_sum, vm_sumsq match double loops (worst rel %.1e)", worst_sum);
}

int main(void)
{
    /* One thread for the bulk: every OpenMP fork/join costs far more than these tiny ops,
     * and thousands of FD probes would take minutes on a busy machine. test_threads() and
     * the attention cases compare 2-3 threads (more than the cores, if need be) with 1. */
    par_set_threads(1);
    test_vmath();
    test_gemm();
    test_gemm_bf16();
    test_gemm_accounting();
    test_linear();
    test_layernorm();
    test_embedding();
    test_xent();
    test_adaptive();
    test_dropout();
    test_ff();
    test_attention();
    test_pos_sinusoid();
    test_rope();
    test_alibi();
    test_mlp();
    test_t5();
    test_fire();
    test_adam();
    test_clip();
    test_lr();
    test_threads();
    return tl_done("test_ops");
}

/* qgemm.c: see qgemm.h. A tile of R rows of W times S rows of A keeps R x S sums of 16
 * lanes in registers; each block of a row of W is converted once per tile (q8: its int8
 * values sign-extended and converted to floats, exactly; bf16: shifted into the high half
 * of a float) and multiplied into the S rows. A tile past W's last row repeats that row
 * and drops its results. The kernels are compiled for their instruction sets with target
 * attributes and picked at the first call by what the CPU (and the OS) offers.
 *
 * The sums, lane l of 16 (each kernel computes exactly these, in this order):
 *   bf16: lane_l = fma(w_k, x_k, lane_l) for k = l, l + 16, ...
 *   q8, block b (k0 = 32 b + l, k1 = k0 + 16): t = q_k0 x_k0; t = fma(q_k1, x_k1, t);
 *         lane_l = fma(t, s_b, lane_l)
 * then the lanes in gemm.c's tree. q8 multiplies each block's sum by its scale rather than
 * each weight (w = q s exactly, so this is the dequantized product, rounded otherwise):
 * per 32 weights of a row and a row of A, 2 conversions and 3 products instead of 2
 * conversions and 4, which one stream (a product bound by the CPU, not by its reads of
 * W) measured 1.4x faster; and its scale is a float broadcast from memory (quant.h, sf). */
#include "qgemm.h"

#include <math.h>
#include <string.h>

#include "gemm_bf16.h"

/* The 16 lanes added in gemm.c's fixed tree: i + (i + 8), then i + (i + 4), then
 * (0 + 2) + (1 + 3). */
static float tree16(const float *l)
{
    float u[8], v[4];
    for (int i = 0; i < 8; i++)
        u[i] = l[i] + l[i + 8];
    for (int i = 0; i < 4; i++)
        v[i] = u[i] + u[i + 4];
    return (v[0] + v[2]) + (v[1] + v[3]);
}

static inline float bf16_at(const qmat *W, size_t o, size_t k)
{
    return bf16_to_f32(W->bf16[o * (size_t)W->cols + k]);
}

static inline void store(float *c, float sum, float beta)
{
    *c = sum + (beta == 0.0f ? 0.0f : beta * *c);
}

/* The plain C twin: the same sums, one element at a time. */
static void qgemm_c(float *C, const float *A, const qmat *W, int M, float beta, int lda, int ldc)
{
    const int N = W->rows, K = W->cols, K16 = K / 16 * 16, nb = K / QK;
    for (int o = 0; o < N; o++)
        for (int b = 0; b < M; b++) {
            const float *x = A + (size_t)b * lda;
            float lane[16] = {0};
            if (W->type == QT_Q8) {
                const int8_t *q = W->q + (size_t)o * K;
                for (int k = 0; k < nb; k++) {
                    float s = W->sf[(size_t)o * nb + k];
                    for (int l = 0; l < 16; l++) {
                        int k0 = k * QK + l, k1 = k0 + 16;
                        float t = (float)q[k0] * x[k0];
                        t = fmaf((float)q[k1], x[k1], t);
                        lane[l] = fmaf(t, s, lane[l]);
                    }
                }
            } else {
                for (int k = 0; k < K16; k += 16)
                    for (int l = 0; l < 16; l++)
                        lane[l] = fmaf(bf16_at(W, (size_t)o, (size_t)(k + l)), x[k + l], lane[l]);
            }
            float s = tree16(lane);
            for (int k = K16; W->type == QT_BF16 && k < K; k++)
                s = fmaf(bf16_at(W, (size_t)o, (size_t)k), x[k], s);
            store(C + (size_t)b * ldc + o, s, beta);
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_SIMD 1

/* The K mod 16 tail of one row of W against one row of A, after the tree (bf16 only: q8
 * rows are whole blocks). */
static inline float tail(float s, const qmat *W, size_t o, const float *x, int K16, int K)
{
    for (int k = K16; W->type == QT_BF16 && k < K; k++)
        s = fmaf(bf16_at(W, o, (size_t)k), x[k], s);
    return s;
}

/* ---------------------------------------------------------------- AVX-512 */
#define T512 __attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) inline

/* The trees of four sums at once: lanes 0..3 of the result are those of a, b, c, d. */
static T512 __m128 sum4_512(__m512 a, __m512 b, __m512 c, __m512 d)
{
    __m512 uab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
    __m512 ucd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xee));
    /* lanes i + (i + 8) of each in its 8 lanes; then i + (i + 4): a quarter each */
    __m512 v = _mm512_add_ps(_mm512_shuffle_f32x4(uab, ucd, 0x88),
                             _mm512_shuffle_f32x4(uab, ucd, 0xdd));
    __m512 w = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4e)); /* v0 + v2, v1 + v3 */
    __m512 z = _mm512_add_ps(w, _mm512_permute_ps(w, 0xb1)); /* (v0 + v2) + (v1 + v3) */
    return _mm512_castps512_ps128(
        _mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), z));
}

static T512 __m512 cvt_q8_512(const int8_t *q)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)q)));
}

static T512 __m512 deq_bf16_512(const uint16_t *p)
{
    __m512i i = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(i, 16));
}

/* Rows o0 .. o0 + R - 1 of W (the last repeated past N) times rows b0 .. b0 + S - 1 of A. */
static T512 void tile512(float *C, const float *A, const qmat *W, int o0, int b0, int R, int S,
                         float beta, int lda, int ldc)
{
    enum { RM = 4, SM = 8 };
    const int N = W->rows, K = W->cols, K16 = K / 16 * 16, nb = K / QK;
    size_t o[RM];
    const float *x[SM];
    __m512 acc[RM][SM];
    for (int r = 0; r < R; r++)
        o[r] = (size_t)(o0 + r < N ? o0 + r : N - 1);
    for (int t = 0; t < S; t++)
        x[t] = A + (size_t)(b0 + t) * lda;
    for (int r = 0; r < R; r++)
        for (int t = 0; t < S; t++)
            acc[r][t] = _mm512_setzero_ps();
    if (W->type == QT_Q8) {
        for (int b = 0; b < nb; b++) {
            __m512 w0[RM], w1[RM], sc[RM];
            for (int r = 0; r < R; r++) {
                const int8_t *q = W->q + o[r] * K + b * QK;
                w0[r] = cvt_q8_512(q);
                w1[r] = cvt_q8_512(q + 16);
                sc[r] = _mm512_set1_ps(W->sf[o[r] * nb + b]);
            }
            for (int t = 0; t < S; t++) {
                __m512 x0 = _mm512_loadu_ps(x[t] + b * QK), x1 = _mm512_loadu_ps(x[t] + b * QK + 16);
                for (int r = 0; r < R; r++) {
                    __m512 tb = _mm512_fmadd_ps(w1[r], x1, _mm512_mul_ps(w0[r], x0));
                    acc[r][t] = _mm512_fmadd_ps(tb, sc[r], acc[r][t]);
                }
            }
        }
    } else {
        for (int k = 0; k < K16; k += 16) {
            __m512 w[RM];
            for (int r = 0; r < R; r++)
                w[r] = deq_bf16_512(W->bf16 + o[r] * K + k);
            for (int t = 0; t < S; t++) {
                __m512 xv = _mm512_loadu_ps(x[t] + k);
                for (int r = 0; r < R; r++)
                    acc[r][t] = _mm512_fmadd_ps(w[r], xv, acc[r][t]);
            }
        }
    }
    for (int t = 0; t < S; t++) {
        float sum[4];
        _mm_storeu_ps(sum, sum4_512(acc[0][t], acc[R > 1 ? 1 : 0][t], acc[R > 2 ? 2 : 0][t],
                                    acc[R > 3 ? 3 : 0][t]));
        for (int r = 0; r < R && o0 + r < N; r++)
            store(C + (size_t)(b0 + t) * ldc + o0 + r, tail(sum[r], W, o[r], x[t], K16, K), beta);
    }
}

#define TILE512(R, S)                                                                        \
    static __attribute__((target("avx512f,avx2,fma,f16c"))) void tile512_##R##_##S(          \
        float *C, const float *A, const qmat *W, int o0, int b0, float beta, int lda,         \
        int ldc)                                                                             \
    {                                                                                        \
        tile512(C, A, W, o0, b0, R, S, beta, lda, ldc);                                       \
    }
TILE512(4, 1)
TILE512(4, 2)
TILE512(4, 3)
TILE512(4, 4)
TILE512(2, 5)
TILE512(2, 6)
TILE512(2, 7)
TILE512(2, 8)

typedef void (*tile_fn)(float *, const float *, const qmat *, int, int, float, int, int);

static const struct {
    int R;
    tile_fn f;
} tiles512[QG_ROWS + 1] = {{0, NULL},        {4, tile512_4_1}, {4, tile512_4_2},
                           {4, tile512_4_3}, {4, tile512_4_4}, {2, tile512_2_5},
                           {2, tile512_2_6}, {2, tile512_2_7}, {2, tile512_2_8}};

/* ---------------------------------------------------------------- AVX2 */
/* The 16 lanes as two 8-lane parts (lanes 0-7, 8-15): the same sums. */
#define T256 __attribute__((target("avx2,fma,f16c"), always_inline)) inline

static T256 float sum256(__m256 a0, __m256 a1)
{
    __m256 u = _mm256_add_ps(a0, a1);
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
    __m128 w = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(w, _mm_shuffle_ps(w, w, 1)));
}

static T256 __m256 cvt_q8_256(const int8_t *q)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)q)));
}

static T256 __m256 deq_bf16_256(const uint16_t *p)
{
    __m256i i = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(i, 16));
}

static T256 void tile256(float *C, const float *A, const qmat *W, int o0, int b0, int R, int S,
                         float beta, int lda, int ldc)
{
    enum { RM = 2, SM = 4 };
    const int N = W->rows, K = W->cols, K16 = K / 16 * 16, nb = K / QK;
    size_t o[RM];
    const float *x[SM];
    __m256 acc[RM][SM][2];
    for (int r = 0; r < R; r++)
        o[r] = (size_t)(o0 + r < N ? o0 + r : N - 1);
    for (int t = 0; t < S; t++)
        x[t] = A + (size_t)(b0 + t) * lda;
    for (int r = 0; r < R; r++)
        for (int t = 0; t < S; t++)
            acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();
    if (W->type == QT_Q8) {
        for (int b = 0; b < nb; b++) {
            __m256 sc[RM];
            for (int r = 0; r < R; r++)
                sc[r] = _mm256_broadcast_ss(W->sf + o[r] * nb + b);
            for (int p = 0; p < 2; p++) { /* lanes 0-7, then 8-15 */
                __m256 w0[RM], w1[RM];
                for (int r = 0; r < R; r++) {
                    const int8_t *q = W->q + o[r] * K + b * QK + 8 * p;
                    w0[r] = cvt_q8_256(q);
                    w1[r] = cvt_q8_256(q + 16);
                }
                for (int t = 0; t < S; t++) {
                    const float *xp = x[t] + b * QK + 8 * p;
                    __m256 x0 = _mm256_loadu_ps(xp), x1 = _mm256_loadu_ps(xp + 16);
                    for (int r = 0; r < R; r++) {
                        __m256 tb = _mm256_fmadd_ps(w1[r], x1, _mm256_mul_ps(w0[r], x0));
                        acc[r][t][p] = _mm256_fmadd_ps(tb, sc[r], acc[r][t][p]);
                    }
                }
            }
        }
    } else {
        for (int k0 = 0; k0 < K16; k0 += 16)
            for (int p = 0; p < 2; p++) {
                int k = k0 + 8 * p;
                __m256 w[RM];
                for (int r = 0; r < R; r++)
                    w[r] = deq_bf16_256(W->bf16 + o[r] * K + k);
                for (int t = 0; t < S; t++) {
                    __m256 xv = _mm256_loadu_ps(x[t] + k);
                    for (int r = 0; r < R; r++)
                        acc[r][t][p] = _mm256_fmadd_ps(w[r], xv, acc[r][t][p]);
                }
            }
    }
    for (int r = 0; r < R && o0 + r < N; r++)
        for (int t = 0; t < S; t++)
            store(C + (size_t)(b0 + t) * ldc + o0 + r,
                  tail(sum256(acc[r][t][0], acc[r][t][1]), W, o[r], x[t], K16, K), beta);
}

#define TILE256(R, S)                                                                        \
    static __attribute__((target("avx2,fma,f16c"))) void tile256_##R##_##S(                  \
        float *C, const float *A, const qmat *W, int o0, int b0, float beta, int lda,         \
        int ldc)                                                                             \
    {                                                                                        \
        tile256(C, A, W, o0, b0, R, S, beta, lda, ldc);                                       \
    }
TILE256(2, 1)
TILE256(2, 2)
TILE256(1, 3)
TILE256(1, 4)

static const struct {
    int R;
    tile_fn f;
} tiles256[5] = {{0, NULL}, {2, tile256_2_1}, {2, tile256_2_2}, {1, tile256_1_3}, {1, tile256_1_4}};
#endif /* __x86_64__ */

enum { K_C, K_AVX2, K_AVX512 };
static const char *const kernel_names[] = {"c", "avx2", "avx512"};
static int kernel = -1;

static int best_kernel(void)
{
#ifdef HAVE_SIMD
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"))
        return K_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return K_AVX2;
#endif
    return K_C;
}

const char *qgemm_kernel(void)
{
    if (kernel < 0)
        kernel = best_kernel();
    return kernel_names[kernel];
}

int qgemm_use(const char *name)
{
    int best = best_kernel();
    for (int k = 0; k <= best; k++)
        if (strcmp(name, kernel_names[k]) == 0) {
            kernel = k;
            return 0;
        }
    return -1;
}

void qgemm(float *C, const float *A, const qmat *W, int M, float beta, int lda, int ldc)
{
    if (kernel < 0)
        kernel = best_kernel();
    const int N = W->rows;
    if (M <= 0 || N <= 0)
        return;
    if (W->cols <= 0) {
        for (int b = 0; b < M; b++)
            for (int o = 0; o < N; o++)
                store(C + (size_t)b * ldc + o, 0.0f, beta);
        return;
    }
#ifdef HAVE_SIMD
    if (kernel != K_C) {
        int smax = kernel == K_AVX512 ? QG_ROWS : 4;
        for (int b0 = 0; b0 < M; b0 += smax) {
            int S = M - b0 < smax ? M - b0 : smax;
            int R = kernel == K_AVX512 ? tiles512[S].R : tiles256[S].R;
            tile_fn f = kernel == K_AVX512 ? tiles512[S].f : tiles256[S].f;
            for (int o0 = 0; o0 < N; o0 += R)
                f(C, A, W, o0, b0, beta, lda, ldc);
        }
        return;
    }
#endif
    qgemm_c(C, A, W, M, beta, lda, ldc);
}

void qlinear(float *y, const float *x, const qmat *W, const float *bias, int rows)
{
    const int out = W->rows;
    for (int r = 0; bias && r < rows; r++)
        memcpy(y + (size_t)r * out, bias, (size_t)out * sizeof(float));
    qgemm(y, x, W, rows, bias ? 1.0f : 0.0f, W->cols, out);
}

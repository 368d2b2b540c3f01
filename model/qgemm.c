/* qgemm.c: see qgemm.h.
 *
 * q8 reads the panels (qmat.h): a column of a panel is QP = 16 rows' weights, one load,
 * sign-extended and converted to floats exactly, and multiplied by the broadcast value of
 * that column of A into 16 lanes that are the 16 rows' sums: no sums across lanes, and a
 * block's scale multiplies its 16 rows' sums at once (per 16 weights of a row of A: a
 * sign extension, a conversion and a product; the row-major tiles before took 7
 * operations for 32, and one stream's products, bound by the CPU rather than the reads,
 * ran 1.2-1.3x faster this way). A pass takes P panels (4 for one row of A, fewer for more
 * rows: the sums in registers) times S rows of A; the padding rows of the last panel are
 * computed and dropped.
 *
 * bf16 reads the row-major matrix: a tile of R rows of W times S rows of A keeps R x S
 * sums of 16 lanes in registers; each chunk of a row of W is converted once per tile (each
 * pair of values, one 32-bit word, shifted (the first) or masked (the second) into floats,
 * exactly, A's values deinterleaved to match: per 32 weights 3 operations to convert
 * instead of 4) and multiplied into the S rows. A tile past W's last row repeats that row
 * and drops its results; the next tile's rows are prefetched while one is computed.
 *
 * The kernels are compiled for their instruction sets with target attributes and picked at
 * the first call by what the CPU (and the OS) offers. The sums, which each kernel computes
 * exactly, in this order:
 *   q8, row o of W, row x of A: for each block b, e and d start at 0, then for k = 32 b,
 *         32 b + 2, ..., 32 b + 30: e = fma(q_k, x_k, e); d = fma(q_k+1, x_k+1, d); and
 *         sum = fma(e + d, s_b, sum)
 *         (each block's sum times its scale rather than each weight: w = q s exactly, so
 *         this is the dequantized product, rounded otherwise; two sums a block, the even
 *         and the odd columns, to halve the chain of dependent products)
 *   bf16, chunk c of 32, lane l of 16 (k0 = 32 c + 2 l, k1 = k0 + 1):
 *         lane_l = fma(w_k0, x_k0, lane_l); lane_l = fma(w_k1, x_k1, lane_l)
 *         then the lanes in gemm.c's tree, then the K mod 32 tail in order.
 * and the result alpha sum + beta c (beta 0: + 0), a product and a sum. The kernels write
 * every fma as one and never fuse a product with a sum the C code keeps apart: the build's
 * -std=c11 turns GCC's contraction off (-ffp-contract=off), which the same bits need. */
#include "qgemm.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../common/cpu.h"
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

static inline void store(float *c, float sum, float alpha, float beta)
{
    *c = alpha * sum + (beta == 0.0f ? 0.0f : beta * *c);
}

/* The K mod 32 tail of one bf16 row of W against one row of A, after the tree (q8 rows
 * are whole blocks and go through the panels: no tail). */
static inline float tail(float s, const qmat *W, size_t o, const float *x, int K32, int K)
{
    for (int k = K32; k < K; k++)
        s = fmaf(bf16_at(W, o, (size_t)k), x[k], s);
    return s;
}

/* The plain C twin: the same sums, one element at a time (q8 from the file's row-major
 * values, which the panels hold too). */
static void qgemm_c(float *C, const float *A, const qmat *W, int M, float alpha, float beta,
                    int lda, int ldc)
{
    const int N = W->rows, K = W->cols, K32 = K / 32 * 32, nb = K / QK;
    for (int o = 0; o < N; o++)
        for (int b = 0; b < M; b++) {
            const float *x = A + (size_t)b * lda;
            float *c = C + (size_t)b * ldc + o;
            if (W->type == QT_Q8) {
                const int8_t *q = W->q + (size_t)o * K;
                float sum = 0;
                for (int j = 0; j < nb; j++) {
                    float e = 0, d = 0;
                    for (int k = j * QK; k < j * QK + QK; k += 2) {
                        e = fmaf((float)q[k], x[k], e);
                        d = fmaf((float)q[k + 1], x[k + 1], d);
                    }
                    sum = fmaf(e + d, bf16_to_f32(W->scale[(size_t)o * nb + j]), sum);
                }
                store(c, sum, alpha, beta);
                continue;
            }
            float lane[16] = {0};
            for (int k = 0; k < K32; k += 32)
                for (int l = 0; l < 16; l++) {
                    int k0 = k + 2 * l;
                    lane[l] = fmaf(bf16_at(W, (size_t)o, (size_t)k0), x[k0], lane[l]);
                    lane[l] = fmaf(bf16_at(W, (size_t)o, (size_t)k0 + 1), x[k0 + 1], lane[l]);
                }
            store(c, tail(tree16(lane), W, (size_t)o, x, K32, K), alpha, beta);
        }
}

/* qgemv_t's twin: each element's terms in k order, one fma each. */
static void gemv_t_c(float *y, const float *a, const uint16_t *W, int K, int N, int ldw, int n0)
{
    for (int n = n0; n < N; n++) {
        float s = 0;
        for (int k = 0; k < K; k++)
            s = fmaf(a[k], bf16_to_f32(W[(size_t)k * ldw + n]), s);
        y[n] = s;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_SIMD 1

/* The next tile's bytes at p + ahead (an address, never dereferenced: a prefetch past the
 * end of W is a no-op) */
#define PREFETCH(p, ahead) _mm_prefetch((const char *)((uintptr_t)(p) + (ahead)), _MM_HINT_T0)

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

/* 32 bf16 values: the first of each pair (even k) and the second (odd k) as floats */
static T512 void bf16_pair512(const uint16_t *p, __m512 *e, __m512 *o)
{
    __m512i v = _mm512_loadu_si512(p);
    *e = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    *o = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
}

/* 32 floats: those of even k and of odd k */
static T512 void x_pair512(const float *x, __m512 *e, __m512 *o)
{
    __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i io = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    *e = _mm512_permutex2var_ps(a, ie, b);
    *o = _mm512_permutex2var_ps(a, io, b);
}

static T512 __m512 deq_bf16_512(const uint16_t *p)
{
    __m512i i = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(i, 16));
}

/* Rows o0 .. o0 + R - 1 of W (the last repeated past N) times rows b0 .. b0 + S - 1 of A. */
static T512 void tile512(float *C, const float *A, const qmat *W, int o0, int b0, int R, int S,
                         float alpha, float beta, int lda, int ldc)
{
    enum { RM = 4, SM = QG_ROWS };
    const int N = W->rows, K = W->cols, K32 = K / 32 * 32;
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
    /* the next tile's rows, or (short rows: attention's keys) 2 KiB on */
    const size_t ahead = (size_t)R * K * 2 > 2048 ? (size_t)R * K * 2 : 2048;
    for (int k = 0; k < K32; k += 32) {
        __m512 we[RM], wo[RM];
        for (int r = 0; r < R; r++) {
            const uint16_t *w = W->bf16 + o[r] * K + k;
            PREFETCH(w, ahead);
            bf16_pair512(w, &we[r], &wo[r]);
        }
        for (int t = 0; t < S; t++) {
            __m512 xe, xo;
            x_pair512(x[t] + k, &xe, &xo);
            for (int r = 0; r < R; r++)
                acc[r][t] = _mm512_fmadd_ps(wo[r], xo, _mm512_fmadd_ps(we[r], xe, acc[r][t]));
        }
    }
    const int whole = R == 4 && o0 + 3 < N && K32 == K; /* 4 results, no tails: one store */
    const __m128 va = _mm_set1_ps(alpha), vb = _mm_set1_ps(beta);
    for (int t = 0; t < S; t++) {
        __m128 s4 = sum4_512(acc[0][t], acc[R > 1 ? 1 : 0][t], acc[R > 2 ? 2 : 0][t],
                             acc[R > 3 ? 3 : 0][t]);
        float *c = C + (size_t)(b0 + t) * ldc + o0;
        if (whole) {
            __m128 prev = beta == 0.0f ? _mm_setzero_ps() : _mm_mul_ps(vb, _mm_loadu_ps(c));
            _mm_storeu_ps(c, _mm_add_ps(_mm_mul_ps(va, s4), prev));
            continue;
        }
        float sum[4];
        _mm_storeu_ps(sum, s4);
        for (int r = 0; r < R && o0 + r < N; r++)
            store(c + r, tail(sum[r], W, o[r], x[t], K32, K), alpha, beta);
    }
}

/* qgemv_t, 64 columns at a time (then 16), the rest in C. 64 columns are two loads of 32
 * bf16 values, each split into its even and odd columns (a shift, a mask), with an
 * accumulator each; the columns go back in order at the store. */
static __attribute__((target("avx512f,avx2,fma,f16c"))) void gemv_t512(float *y, const float *a,
                                                                     const uint16_t *W, int K,
                                                                     int N, int ldw)
{
    int n0 = 0;
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    for (; n0 + 64 <= N; n0 += 64) {
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                         _mm512_setzero_ps()}; /* even, odd of columns 0-31; of 32-63 */
        for (int k = 0; k < K; k++) {
            __m512 ak = _mm512_set1_ps(a[k]), e, o;
            const uint16_t *w = W + (size_t)k * ldw + n0;
            PREFETCH(w, (size_t)16 * ldw * 2); /* 16 rows on */
            bf16_pair512(w, &e, &o);
            acc[0] = _mm512_fmadd_ps(ak, e, acc[0]);
            acc[1] = _mm512_fmadd_ps(ak, o, acc[1]);
            bf16_pair512(w + 32, &e, &o);
            acc[2] = _mm512_fmadd_ps(ak, e, acc[2]);
            acc[3] = _mm512_fmadd_ps(ak, o, acc[3]);
        }
        for (int c = 0; c < 2; c++) {
            _mm512_storeu_ps(y + n0 + 32 * c, _mm512_permutex2var_ps(acc[2 * c], lo, acc[2 * c + 1]));
            _mm512_storeu_ps(y + n0 + 32 * c + 16,
                             _mm512_permutex2var_ps(acc[2 * c], hi, acc[2 * c + 1]));
        }
    }
    for (; n0 + 16 <= N; n0 += 16) {
        __m512 acc = _mm512_setzero_ps();
        for (int k = 0; k < K; k++)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(a[k]), deq_bf16_512(W + (size_t)k * ldw + n0), acc);
        _mm512_storeu_ps(y + n0, acc);
    }
    gemv_t_c(y, a, W, K, N, ldw, n0);
}

/* q8: panels p0 .. p0 + P - 1 of W (qmat.h) times rows b0 .. b0 + S - 1 of A. */
static T512 void panel512(float *C, const float *A, const qmat *W, int p0, int P, int b0, int S,
                          float alpha, float beta, int lda, int ldc)
{
    enum { PM = 4, SM = QG_ROWS };
    const int N = W->rows, K = W->cols, nb = K / QK;
    const int8_t *q[PM];
    const uint16_t *sp[PM];
    const float *x[SM];
    __m512 acc[PM][SM];
    for (int p = 0; p < P; p++) {
        q[p] = W->qp + (size_t)(p0 + p) * K * QP;
        sp[p] = W->sp + (size_t)(p0 + p) * nb * QP;
    }
    for (int t = 0; t < S; t++)
        x[t] = A + (size_t)(b0 + t) * lda;
    for (int p = 0; p < P; p++)
        for (int t = 0; t < S; t++)
            acc[p][t] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m512 e[PM][SM], d[PM][SM];
        for (int p = 0; p < P; p++)
            for (int t = 0; t < S; t++)
                e[p][t] = d[p][t] = _mm512_setzero_ps();
        for (int k = b * QK; k < b * QK + QK; k += 2)
            for (int p = 0; p < P; p++) {
                __m512 w0 = cvt_q8_512(q[p] + (size_t)k * QP);
                __m512 w1 = cvt_q8_512(q[p] + (size_t)(k + 1) * QP);
                for (int t = 0; t < S; t++) {
                    e[p][t] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[t][k]), e[p][t]);
                    d[p][t] = _mm512_fmadd_ps(w1, _mm512_set1_ps(x[t][k + 1]), d[p][t]);
                }
            }
        for (int p = 0; p < P; p++) {
            __m512 s = deq_bf16_512(sp[p] + (size_t)b * QP);
            for (int t = 0; t < S; t++)
                acc[p][t] = _mm512_fmadd_ps(_mm512_add_ps(e[p][t], d[p][t]), s, acc[p][t]);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int p = 0; p < P; p++)
        for (int t = 0; t < S; t++) {
            const int o0 = (p0 + p) * QP;
            float *c = C + (size_t)(b0 + t) * ldc + o0;
            if (o0 + QP <= N) {
                __m512 prev = beta == 0.0f ? _mm512_setzero_ps() : _mm512_mul_ps(vb, _mm512_loadu_ps(c));
                _mm512_storeu_ps(c, _mm512_add_ps(_mm512_mul_ps(va, acc[p][t]), prev));
                continue;
            }
            float sum[QP];
            _mm512_storeu_ps(sum, acc[p][t]);
            for (int r = 0; o0 + r < N; r++)
                store(c + r, sum[r], alpha, beta);
        }
}

#define TILE512(R, S)                                                                        \
    static __attribute__((target("avx512f,avx2,fma,f16c"))) void tile512_##R##_##S(          \
        float *C, const float *A, const qmat *W, int o0, int b0, float alpha, float beta,     \
        int lda, int ldc)                                                                    \
    {                                                                                        \
        tile512(C, A, W, o0, b0, R, S, alpha, beta, lda, ldc);                                \
    }
TILE512(4, 1)
TILE512(4, 2)
TILE512(4, 3)
TILE512(4, 4)

#define PANEL512(P, S)                                                                       \
    static __attribute__((target("avx512f,avx2,fma,f16c"))) void panel512_##P##_##S(        \
        float *C, const float *A, const qmat *W, int p0, int b0, float alpha, float beta,     \
        int lda, int ldc)                                                                    \
    {                                                                                        \
        panel512(C, A, W, p0, P, b0, S, alpha, beta, lda, ldc);                               \
    }
PANEL512(4, 1)
PANEL512(1, 1)
PANEL512(2, 2)
PANEL512(1, 2)
PANEL512(2, 3)
PANEL512(1, 3)
PANEL512(1, 4)

typedef void (*tile_fn)(float *, const float *, const qmat *, int, int, float, float, int, int);

/* (2 x 8 tiles measured slower than two 4 x 4: 870 against 714 us for S's products of 8
 * rows) */
static const struct {
    int R;
    tile_fn f;
} tiles512[QG_ROWS + 1] = {{0, NULL}, {4, tile512_4_1}, {4, tile512_4_2}, {4, tile512_4_3},
                           {4, tile512_4_4}};

/* q8's passes by rows of A: P panels at once (the sums of P x S x 3 registers), and one
 * panel for the rest */
static const struct {
    int P;
    tile_fn f, f1;
} panels512[QG_ROWS + 1] = {{0, NULL, NULL},
                            {4, panel512_4_1, panel512_1_1},
                            {2, panel512_2_2, panel512_1_2},
                            {2, panel512_2_3, panel512_1_3},
                            {1, panel512_1_4, panel512_1_4}};

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

/* 16 bf16 values (lanes 8p .. 8p + 7 of a chunk): the first and the second of each pair */
static T256 void bf16_pair256(const uint16_t *p, __m256 *e, __m256 *o)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    *e = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    *o = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
}

/* 16 floats: those of even and of odd k */
static T256 void x_pair256(const float *x, __m256 *e, __m256 *o)
{
    __m256 a = _mm256_loadu_ps(x), b = _mm256_loadu_ps(x + 8);
    *e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8));
    *o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8));
}

static T256 __m256 deq_bf16_256(const uint16_t *p)
{
    __m256i i = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(i, 16));
}

static T256 void tile256(float *C, const float *A, const qmat *W, int o0, int b0, int R, int S,
                         float alpha, float beta, int lda, int ldc)
{
    enum { RM = 2, SM = QG_ROWS };
    const int N = W->rows, K = W->cols, K32 = K / 32 * 32;
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
    for (int k0 = 0; k0 < K32; k0 += 32)
        for (int p = 0; p < 2; p++) {
            int k = k0 + 16 * p;
            __m256 we[RM], wo[RM];
            for (int r = 0; r < R; r++) {
                const uint16_t *w = W->bf16 + o[r] * K + k;
                PREFETCH(w, (size_t)R * K * 2);
                bf16_pair256(w, &we[r], &wo[r]);
            }
            for (int t = 0; t < S; t++) {
                __m256 xe, xo;
                x_pair256(x[t] + k, &xe, &xo);
                for (int r = 0; r < R; r++)
                    acc[r][t][p] = _mm256_fmadd_ps(wo[r], xo,
                                                   _mm256_fmadd_ps(we[r], xe, acc[r][t][p]));
            }
        }
    for (int r = 0; r < R && o0 + r < N; r++)
        for (int t = 0; t < S; t++)
            store(C + (size_t)(b0 + t) * ldc + o0 + r,
                  tail(sum256(acc[r][t][0], acc[r][t][1]), W, o[r], x[t], K32, K), alpha, beta);
}

/* q8: the 8-row halves g0 .. g0 + G - 1 of W's panels (half g: panel g / 2, its rows
 * 8 (g % 2) ..) times rows b0 .. b0 + S - 1 of A: the lanes of panel512, 8 at a time. */
static T256 void panel256(float *C, const float *A, const qmat *W, int g0, int G, int b0, int S,
                          float alpha, float beta, int lda, int ldc)
{
    enum { GM = 4, SM = QG_ROWS };
    const int N = W->rows, K = W->cols, nb = K / QK;
    const int8_t *q[GM];
    const uint16_t *sp[GM];
    const float *x[SM];
    __m256 acc[GM][SM];
    for (int g = 0; g < G; g++) {
        int pn = (g0 + g) / 2, h = (g0 + g) % 2 * 8;
        q[g] = W->qp + (size_t)pn * K * QP + h;
        sp[g] = W->sp + (size_t)pn * nb * QP + h;
    }
    for (int t = 0; t < S; t++)
        x[t] = A + (size_t)(b0 + t) * lda;
    for (int g = 0; g < G; g++)
        for (int t = 0; t < S; t++)
            acc[g][t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256 e[GM][SM], d[GM][SM];
        for (int g = 0; g < G; g++)
            for (int t = 0; t < S; t++)
                e[g][t] = d[g][t] = _mm256_setzero_ps();
        for (int k = b * QK; k < b * QK + QK; k += 2)
            for (int g = 0; g < G; g++) {
                __m256 w0 = cvt_q8_256(q[g] + (size_t)k * QP);
                __m256 w1 = cvt_q8_256(q[g] + (size_t)(k + 1) * QP);
                for (int t = 0; t < S; t++) {
                    e[g][t] = _mm256_fmadd_ps(w0, _mm256_broadcast_ss(x[t] + k), e[g][t]);
                    d[g][t] = _mm256_fmadd_ps(w1, _mm256_broadcast_ss(x[t] + k + 1), d[g][t]);
                }
            }
        for (int g = 0; g < G; g++) {
            __m256 s = deq_bf16_256(sp[g] + (size_t)b * QP);
            for (int t = 0; t < S; t++)
                acc[g][t] = _mm256_fmadd_ps(_mm256_add_ps(e[g][t], d[g][t]), s, acc[g][t]);
        }
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    for (int g = 0; g < G; g++)
        for (int t = 0; t < S; t++) {
            const int o0 = (g0 + g) * 8;
            float *c = C + (size_t)(b0 + t) * ldc + o0;
            if (o0 + 8 <= N) {
                __m256 prev = beta == 0.0f ? _mm256_setzero_ps() : _mm256_mul_ps(vb, _mm256_loadu_ps(c));
                _mm256_storeu_ps(c, _mm256_add_ps(_mm256_mul_ps(va, acc[g][t]), prev));
                continue;
            }
            float sum[8];
            _mm256_storeu_ps(sum, acc[g][t]);
            for (int r = 0; o0 + r < N; r++)
                store(c + r, sum[r], alpha, beta);
        }
}

static __attribute__((target("avx2,fma,f16c"))) void gemv_t256(float *y, const float *a,
                                                              const uint16_t *W, int K, int N,
                                                              int ldw)
{
    int n0 = 0;
    for (; n0 + 32 <= N; n0 += 32) {
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                         _mm256_setzero_ps()};
        for (int k = 0; k < K; k++) {
            __m256 ak = _mm256_broadcast_ss(a + k);
            const uint16_t *w = W + (size_t)k * ldw + n0;
            for (int c = 0; c < 4; c++)
                acc[c] = _mm256_fmadd_ps(ak, deq_bf16_256(w + 8 * c), acc[c]);
        }
        for (int c = 0; c < 4; c++)
            _mm256_storeu_ps(y + n0 + 8 * c, acc[c]);
    }
    for (; n0 + 8 <= N; n0 += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int k = 0; k < K; k++)
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(a + k), deq_bf16_256(W + (size_t)k * ldw + n0),
                                  acc);
        _mm256_storeu_ps(y + n0, acc);
    }
    gemv_t_c(y, a, W, K, N, ldw, n0);
}

#define TILE256(R, S)                                                                        \
    static __attribute__((target("avx2,fma,f16c"))) void tile256_##R##_##S(                  \
        float *C, const float *A, const qmat *W, int o0, int b0, float alpha, float beta,     \
        int lda, int ldc)                                                                    \
    {                                                                                        \
        tile256(C, A, W, o0, b0, R, S, alpha, beta, lda, ldc);                                \
    }
TILE256(2, 1)
TILE256(2, 2)
TILE256(1, 3)
TILE256(1, 4)

#define PANEL256(G, S)                                                                       \
    static __attribute__((target("avx2,fma,f16c"))) void panel256_##G##_##S(                 \
        float *C, const float *A, const qmat *W, int g0, int b0, float alpha, float beta,     \
        int lda, int ldc)                                                                    \
    {                                                                                        \
        panel256(C, A, W, g0, G, b0, S, alpha, beta, lda, ldc);                               \
    }
PANEL256(4, 1)
PANEL256(1, 1)
PANEL256(2, 2)
PANEL256(1, 2)
PANEL256(1, 3)
PANEL256(1, 4)

static const struct {
    int R;
    tile_fn f;
} tiles256[QG_ROWS + 1] = {{0, NULL}, {2, tile256_2_1}, {2, tile256_2_2}, {1, tile256_1_3}, {1, tile256_1_4}};

/* q8's passes by rows of A, in 8-row halves of the panels (16 registers) */
static const struct {
    int P;
    tile_fn f, f1;
} panels256[QG_ROWS + 1] = {{0, NULL, NULL},
                            {4, panel256_4_1, panel256_1_1},
                            {2, panel256_2_2, panel256_1_2},
                            {1, panel256_1_3, panel256_1_3},
                            {1, panel256_1_4, panel256_1_4}};
#endif /* __x86_64__ */

enum { K_C, K_AVX2, K_AVX512 };
static const char *const kernel_names[] = {"c", "avx2", "avx512"};
static int kernel = -1;

/* The best kernel the CPU and the OS run; DNNL_MAX_CPU_ISA below AVX-512 (oneDNN's cap,
 * which make bench-avx2 sets to emulate an AVX2 CPU: common/cpu.h) caps it at AVX2 too. */
static int best_kernel(void)
{
#ifdef HAVE_SIMD
    __builtin_cpu_init();
    if (!cpu_detect()->avx512_capped && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("fma"))
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

void qgemm(float *C, const float *A, const qmat *W, int M, float alpha, float beta, int lda,
           int ldc)
{
    if (kernel < 0)
        kernel = best_kernel();
    const int N = W->rows;
    if (M <= 0 || N <= 0)
        return;
    if (W->cols <= 0) {
        for (int b = 0; b < M; b++)
            for (int o = 0; o < N; o++)
                store(C + (size_t)b * ldc + o, 0.0f, alpha, beta);
        return;
    }
#ifdef HAVE_SIMD
    if (kernel != K_C && W->type == QT_Q8) {
        /* units of P panels (AVX2: P halves of a panel, none past the last row), the rest
         * one at a time */
        const int n = kernel == K_AVX512 ? (N + QP - 1) / QP : (N + 7) / 8;
        for (int b0 = 0; b0 < M; b0 += QG_ROWS) {
            int S = M - b0 < QG_ROWS ? M - b0 : QG_ROWS;
            int P = kernel == K_AVX512 ? panels512[S].P : panels256[S].P;
            tile_fn f = kernel == K_AVX512 ? panels512[S].f : panels256[S].f;
            tile_fn f1 = kernel == K_AVX512 ? panels512[S].f1 : panels256[S].f1;
            int u = 0;
            for (; u + P <= n; u += P)
                f(C, A, W, u, b0, alpha, beta, lda, ldc);
            for (; u < n; u++)
                f1(C, A, W, u, b0, alpha, beta, lda, ldc);
        }
        return;
    }
    if (kernel != K_C) {
        const int smax = QG_ROWS;
        for (int b0 = 0; b0 < M; b0 += smax) {
            int S = M - b0 < smax ? M - b0 : smax;
            int R = kernel == K_AVX512 ? tiles512[S].R : tiles256[S].R;
            tile_fn f = kernel == K_AVX512 ? tiles512[S].f : tiles256[S].f;
            for (int o0 = 0; o0 < N; o0 += R)
                f(C, A, W, o0, b0, alpha, beta, lda, ldc);
        }
        return;
    }
#endif
    qgemm_c(C, A, W, M, alpha, beta, lda, ldc);
}

void qgemv_t(float *y, const float *a, const uint16_t *W, int K, int N, int ldw)
{
    if (kernel < 0)
        kernel = best_kernel();
#ifdef HAVE_SIMD
    if (kernel == K_AVX512) {
        gemv_t512(y, a, W, K, N, ldw);
        return;
    }
    if (kernel == K_AVX2) {
        gemv_t256(y, a, W, K, N, ldw);
        return;
    }
#endif
    gemv_t_c(y, a, W, K, N, ldw, 0);
}

void qlinear(float *y, const float *x, const qmat *W, const float *bias, int rows)
{
    const int out = W->rows;
    for (int r = 0; bias && r < rows; r++)
        memcpy(y + (size_t)r * out, bias, (size_t)out * sizeof(float));
    qgemm(y, x, W, rows, 1.0f, bias ? 1.0f : 0.0f, W->cols, out);
}

/* attn_decode.c: see attn_decode.h. Per head (the heads over txl's OpenMP threads when the
 * step is large enough to pay for it), then per stream: the scores (xl's position term over
 * the shared rows first, then the content term over the stream's keys added to it:
 * s = scale c + s), the biases, the softmax, the weighted values.
 *
 * The sums (every kernel computes exactly these, in this order), x the query (+ u or v):
 *   score j, fp32 rows: lane_l = fma(x_c, r_jc, lane_l) for c = l, l + 16, ... < dh16 (dh
 *            rounded down to 16); then the lanes in gemm.c's tree (i + (i + 8), then
 *            i + (i + 4), then (0 + 2) + (1 + 3)), then s = fma(x_c, r_jc, s) for c = dh16 ..
 *            dh - 1
 *   score j, bf16 rows: qgemm.h's sums: lane_l = fma(r_jc, x_c, lane_l), then c + 1, for
 *            c = 32 k + 2 l < dh32 (a 32-bit word of the row holds the pair, shifted or
 *            masked into floats: no shuffle); the same tree, then the dh mod 32 tail in order
 *            (so a bf16 cache decodes the bits the products of qgemm.h gave it before)
 *   score j, int8 rows (a q8 cache): the fp32 rows' sums of the integers (exact in
 *            float), then times the row's scale: s = t sc_j
 *   score j, xl's fp32 (or bf16: rkT16) position rows transposed (attn_args.rkT):
 *            s = fma(x_c, r_jc, s) for
 *            c = 0 .. dh - 1, no lanes (64 keys of 4 streams at a time: a row of the table
 *            loaded once for them)
 *   all stored as alpha s + (beta 0: 0, else beta S_j)
 *   vec c:   y = fma(p_j, v_jc, y) for j = 0 .. klen - 1 (qgemv_t's); int8 rows: p_j sc_j
 *            for p_j, and two such chains, over the even and the odd j, then added
 * The SIMD kernels take 16 keys (AVX-512) or 4 (AVX2) at a time, each key's 16 lanes in
 * registers, one row after the other as they lie, and add the lanes of all of them at once
 * by shuffles that pair the lanes as the tree does; a block past the last key repeats it
 * and drops its results. */
#include "attn_decode.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../common/par.h"
#include "../common/vmath.h"
#include "gemm_bf16.h"
#include "qgemm.h"

/* Rows of dh values, fp32 (f), bf16 (h) or int8 (q, with sc[j] row j's scale), the first
 * of them not NULL; row j at j ld. */
typedef struct {
    const float *f;
    const uint16_t *h;
    size_t ld;
    const int8_t *q;
    const float *sc;
} rows_ref;

static inline float row_at(rows_ref R, size_t o)
{
    return R.f ? R.f[o] : R.h ? bf16_to_f32(R.h[o]) : (float)R.q[o];
}

static inline float store_val(float s, float alpha, float beta, const float *c)
{
    return alpha * s + (beta == 0.0f ? 0.0f : beta * *c);
}

/* ---------------------------------------------------------------- plain C */
static void dots_c(float *S, const float *x, rows_ref R, int n, int dh, float alpha, float beta)
{
    const int d16 = dh / 16 * 16;
    for (int j = 0; j < n; j++) {
        size_t o = (size_t)j * R.ld;
        float lane[16] = {0}, u[8], v[4];
        for (int c0 = 0; c0 < d16; c0 += 16)
            for (int l = 0; l < 16; l++)
                lane[l] = fmaf(x[c0 + l], row_at(R, o + (size_t)c0 + l), lane[l]);
        for (int i = 0; i < 8; i++)
            u[i] = lane[i] + lane[i + 8];
        for (int i = 0; i < 4; i++)
            v[i] = u[i] + u[i + 4];
        float s = (v[0] + v[2]) + (v[1] + v[3]);
        for (int c = d16; c < dh; c++)
            s = fmaf(x[c], row_at(R, o + (size_t)c), s);
        if (R.sc) /* int8 rows: the sum of exact integers' products, times the row's scale */
            s *= R.sc[j];
        S[j] = store_val(s, alpha, beta, S + j);
    }
}

/* bf16 rows: qgemm's pairs */
static void dots_c_h(float *S, const float *x, rows_ref R, int n, int dh, float alpha,
                     float beta)
{
    const int d32 = dh / 32 * 32;
    for (int j = 0; j < n; j++) {
        size_t o = (size_t)j * R.ld;
        float lane[16] = {0}, u[8], v[4];
        for (int c0 = 0; c0 < d32; c0 += 32)
            for (int l = 0; l < 16; l++) {
                size_t k = o + (size_t)c0 + 2 * (size_t)l;
                lane[l] = fmaf(bf16_to_f32(R.h[k]), x[c0 + 2 * l], lane[l]);
                lane[l] = fmaf(bf16_to_f32(R.h[k + 1]), x[c0 + 2 * l + 1], lane[l]);
            }
        for (int i = 0; i < 8; i++)
            u[i] = lane[i] + lane[i + 8];
        for (int i = 0; i < 4; i++)
            v[i] = u[i] + u[i + 4];
        float s = (v[0] + v[2]) + (v[1] + v[3]);
        for (int c = d32; c < dh; c++)
            s = fmaf(bf16_to_f32(R.h[o + (size_t)c]), x[c], s);
        S[j] = store_val(s, alpha, beta, S + j);
    }
}

/* y[c] = sum_j p_j V_jc for columns c0 .. dh - 1 */
static void wsum_c(float *y, const float *p, rows_ref V, int n, int dh, int c0)
{
    for (int c = c0; c < dh; c++) {
        float s = 0;
        for (int j = 0; j < n; j++)
            s = fmaf(p[j], row_at(V, (size_t)j * V.ld + (size_t)c), s);
        y[c] = s;
    }
}

/* int8 rows: y[c] = (sum over even j) + (sum over odd j) of p_j V_jc, each in j order, for
 * columns c0 .. dh - 1 (two chains: a row's products wait on the row before otherwise) */
static void wsum_c_q2(float *y, const float *p, rows_ref V, int n, int dh, int c0)
{
    for (int c = c0; c < dh; c++) {
        float s[2] = {0, 0};
        for (int j = 0; j < n; j++)
            s[j & 1] = fmaf(p[j], (float)V.q[(size_t)j * V.ld + (size_t)c], s[j & 1]);
        y[c] = s[0] + s[1];
    }
}

/* xl's fp32 position rows transposed (RT [dh][ld]: row c holds r_jc for the keys j): the
 * scores of nb streams (X [nb][xs], their q + v) for keys j0 .. j1 - 1, each a chain of one
 * fma per term in c order, no lanes to add: S[b][j] = alpha s + 0 (row stride ks). */
static void post_c(float *S, size_t ks, const float *X, size_t xs, const void *RTv, size_t ld,
                   int nb, int j0, int j1, int dh, float alpha)
{
    const float *RT = RTv;
    for (int b = 0; b < nb; b++)
        for (int j = j0; j < j1; j++) {
            float t = 0;
            for (int c = 0; c < dh; c++)
                t = fmaf(X[(size_t)b * xs + c], RT[(size_t)c * ld + j], t);
            S[(size_t)b * ks + j] = alpha * t + 0.0f;
        }
}

/* post_c over bf16 rows transposed (a bf16 or q8 cache's) */
static void post_c_h(float *S, size_t ks, const float *X, size_t xs, const void *RT, size_t ld,
                     int nb, int j0, int j1, int dh, float alpha)
{
    const uint16_t *R = RT;
    for (int b = 0; b < nb; b++)
        for (int j = j0; j < j1; j++) {
            float t = 0;
            for (int c = 0; c < dh; c++)
                t = fmaf(X[(size_t)b * xs + c], bf16_to_f32(R[(size_t)c * ld + j]), t);
            S[(size_t)b * ks + j] = alpha * t + 0.0f;
        }
}

/* The tail c = d0 .. dh - 1 of keys j0 .. j0 + cnt - 1 after their trees t[] (fmaf's
 * operands commute: the same bits for both orders of the row types' sums). */
static void dots_tail(float *t, const float *x, rows_ref R, int j0, int cnt, int d0, int dh)
{
    for (int k = 0; k < cnt; k++)
        for (int c = d0; c < dh; c++)
            t[k] = fmaf(x[c], row_at(R, (size_t)(j0 + k) * R.ld + (size_t)c), t[k]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_SIMD 1

/* The row 2 KiB on (qgemm's distance for attention's keys: a block of rows ahead) */
#ifndef PF_AHEAD
#define PF_AHEAD 2048
#endif
#define PREFETCH_AHEAD(p) _mm_prefetch((const char *)(p) + PF_AHEAD, _MM_HINT_T0)

/* ---------------------------------------------------------------- AVX-512 */
#define T512 __attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) inline

/* The trees of 16 sums of 16 lanes: lane t of the result is acc[t]'s. */
static T512 __m512 tree16x16(const __m512 *acc)
{
    __m512 x[8], z[4];
    for (int p = 0; p < 8; p++) /* i + (i + 8): keys 2p, 2p + 1 in the two halves */
        x[p] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * p], acc[2 * p + 1], 0x44),
                             _mm512_shuffle_f32x4(acc[2 * p], acc[2 * p + 1], 0xee));
    for (int p = 0; p < 4; p++) /* i + (i + 4): keys 4p .. 4p + 3 in the quarters */
        z[p] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * p], x[2 * p + 1], 0x88),
                             _mm512_shuffle_f32x4(x[2 * p], x[2 * p + 1], 0xdd));
    /* 0 + 2, 1 + 3: quarter q holds keys q, 4 + q (t0) and 8 + q, 12 + q (t1) */
    __m512 t0 = _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], 0x44), _mm512_shuffle_ps(z[0], z[1], 0xee));
    __m512 t1 = _mm512_add_ps(_mm512_shuffle_ps(z[2], z[3], 0x44), _mm512_shuffle_ps(z[2], z[3], 0xee));
    /* (0 + 2) + (1 + 3): lane 4q + r holds key 4r + q */
    __m512 f = _mm512_add_ps(_mm512_shuffle_ps(t0, t1, 0x88), _mm512_shuffle_ps(t0, t1, 0xdd));
    return _mm512_permutexvar_ps(
        _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0), f);
}

/* 16 int8 values from p, sign-extended and converted (exactly) */
static T512 __m512 q8x16(const int8_t *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

/* Keys j0 .. j0 + 15 (the last repeated past cnt), columns c0 .. c0 + 16 nc - 1 of fp32
 * rows (Q 0) or int8 rows (Q 1: 16 values a load, prefetched a block of rows ahead), added
 * to acc: one row after the other, x in registers. */
static T512 void keys512(__m512 *acc, const float *x, rows_ref R, int j0, int cnt, int c0,
                         const int nc, const int Q)
{
    __m512 xv[4];
    for (int i = 0; i < nc; i++)
        xv[i] = _mm512_loadu_ps(x + c0 + 16 * i);
#pragma GCC unroll 16
    for (int t = 0; t < 16; t++) {
        size_t o = (size_t)(j0 + (t < cnt ? t : cnt - 1)) * R.ld + (size_t)c0;
        if (Q)
            PREFETCH_AHEAD(R.q + o);
#pragma GCC unroll 4
        for (int i = 0; i < nc; i++)
            acc[t] = _mm512_fmadd_ps(xv[i], Q ? q8x16(R.q + o + 16 * i)
                                              : _mm512_loadu_ps(R.f + o + 16 * i), acc[t]);
    }
}

/* The same for bf16 rows, chunks of 32 from c0 (nc of them): a 32-bit word holds the pair
 * c, c + 1 (the first shifted into a float, the second masked), x split into its even and
 * odd columns once. */
static T512 void keys512_h(__m512 *acc, const float *x, rows_ref R, int j0, int cnt, int c0,
                           const int nc)
{
    const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i io = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    __m512 xe[2], xo[2];
    for (int i = 0; i < nc; i++) {
        __m512 a = _mm512_loadu_ps(x + c0 + 32 * i), b = _mm512_loadu_ps(x + c0 + 32 * i + 16);
        xe[i] = _mm512_permutex2var_ps(a, ie, b);
        xo[i] = _mm512_permutex2var_ps(a, io, b);
    }
#pragma GCC unroll 16
    for (int t = 0; t < 16; t++) {
        const uint16_t *r = R.h + (size_t)(j0 + (t < cnt ? t : cnt - 1)) * R.ld + c0;
#pragma GCC unroll 2
        for (int i = 0; i < nc; i++) {
            PREFETCH_AHEAD(r + 32 * i);
            __m512i v = _mm512_loadu_si512(r + 32 * i);
            __m512 e = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
            __m512 o = _mm512_castsi512_ps(_mm512_and_si512(v, hi));
            acc[t] = _mm512_fmadd_ps(o, xo[i], _mm512_fmadd_ps(e, xe[i], acc[t]));
        }
    }
}

/* S[j0 .. j0 + cnt - 1] = alpha s + beta S (beta 0: + 0), s the tails' sums after the
 * trees */
static T512 void store512(float *S, __m512 s, const float *x, rows_ref R, int j0, int cnt,
                          int d0, int dh, float alpha, float beta)
{
    if (d0 < dh) {
        float t[16];
        _mm512_storeu_ps(t, s);
        dots_tail(t, x, R, j0, cnt, d0, dh);
        s = _mm512_loadu_ps(t);
    }
    __mmask16 k = (__mmask16)(cnt == 16 ? 0xffff : (1u << cnt) - 1);
    if (R.sc)
        s = _mm512_mul_ps(s, _mm512_maskz_loadu_ps(k, R.sc + j0));
    __m512 prev = beta == 0.0f ? _mm512_setzero_ps()
                               : _mm512_mul_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(k, S + j0));
    _mm512_mask_storeu_ps(S + j0, k, _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(alpha), s), prev));
}

/* fp32 (Q 0) or int8 (Q 1) rows */
static T512 void dots512(float *S, const float *x, rows_ref R, int n, int dh, float alpha,
                         float beta, const int Q)
{
    const int d16 = dh / 16 * 16;
    for (int j0 = 0; j0 < n; j0 += 16) {
        const int cnt = n - j0 < 16 ? n - j0 : 16;
        __m512 acc[16];
        for (int t = 0; t < 16; t++)
            acc[t] = _mm512_setzero_ps();
        for (int c0 = 0; c0 < d16; c0 += 64)
            switch ((d16 - c0) / 16) { /* the chunk count a constant in each copy */
            case 1: keys512(acc, x, R, j0, cnt, c0, 1, Q); break;
            case 2: keys512(acc, x, R, j0, cnt, c0, 2, Q); break;
            case 3: keys512(acc, x, R, j0, cnt, c0, 3, Q); break;
            default: keys512(acc, x, R, j0, cnt, c0, 4, Q); break;
            }
        store512(S, tree16x16(acc), x, R, j0, cnt, d16, dh, alpha, beta);
    }
}

static __attribute__((target("avx512f,avx2,fma,f16c"))) void
dots512_f(float *S, const float *x, rows_ref R, int n, int dh, float alpha, float beta)
{
    dots512(S, x, R, n, dh, alpha, beta, 0);
}

static __attribute__((target("avx512f,avx2,fma,f16c"))) void
dots512_q(float *S, const float *x, rows_ref R, int n, int dh, float alpha, float beta)
{
    dots512(S, x, R, n, dh, alpha, beta, 1);
}

static __attribute__((target("avx512f,avx2,fma,f16c"))) void
dots512_h(float *S, const float *x, rows_ref R, int n, int dh, float alpha, float beta)
{
    const int d32 = dh / 32 * 32;
    for (int j0 = 0; j0 < n; j0 += 16) {
        const int cnt = n - j0 < 16 ? n - j0 : 16;
        __m512 acc[16];
        for (int t = 0; t < 16; t++)
            acc[t] = _mm512_setzero_ps();
        for (int c0 = 0; c0 < d32; c0 += 64)
            if (d32 - c0 >= 64)
                keys512_h(acc, x, R, j0, cnt, c0, 2);
            else
                keys512_h(acc, x, R, j0, cnt, c0, 1);
        store512(S, tree16x16(acc), x, R, j0, cnt, d32, dh, alpha, beta);
    }
}

/* int8 rows, p already times each row's scale: wsum_c_q2's sums */
static __attribute__((target("avx512f,avx2,fma,f16c"))) void
wsum512_q(float *y, const float *p, rows_ref V, int n, int dh)
{
    int c0 = 0;
    for (; c0 + 64 <= dh; c0 += 64) {
        __m512 e[4], o[4]; /* the even rows' sums, the odd rows' */
        for (int i = 0; i < 4; i++)
            e[i] = o[i] = _mm512_setzero_ps();
        const int8_t *v = V.q + c0;
        int j = 0;
        for (; j + 1 < n; j += 2, v += 2 * V.ld) {
            __m512 pe = _mm512_set1_ps(p[j]), po = _mm512_set1_ps(p[j + 1]);
            PREFETCH_AHEAD(v);
            PREFETCH_AHEAD(v + V.ld);
            for (int i = 0; i < 4; i++) {
                e[i] = _mm512_fmadd_ps(pe, q8x16(v + 16 * i), e[i]);
                o[i] = _mm512_fmadd_ps(po, q8x16(v + V.ld + 16 * i), o[i]);
            }
        }
        if (j < n)
            for (int i = 0; i < 4; i++)
                e[i] = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), q8x16(v + 16 * i), e[i]);
        for (int i = 0; i < 4; i++)
            _mm512_storeu_ps(y + c0 + 16 * i, _mm512_add_ps(e[i], o[i]));
    }
    for (; c0 + 16 <= dh; c0 += 16) {
        __m512 e = _mm512_setzero_ps(), o = _mm512_setzero_ps();
        const int8_t *v = V.q + c0;
        int j = 0;
        for (; j + 1 < n; j += 2, v += 2 * V.ld) {
            e = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), q8x16(v), e);
            o = _mm512_fmadd_ps(_mm512_set1_ps(p[j + 1]), q8x16(v + V.ld), o);
        }
        if (j < n)
            e = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), q8x16(v), e);
        _mm512_storeu_ps(y + c0, _mm512_add_ps(e, o));
    }
    wsum_c_q2(y, p, V, n, dh, c0);
}

/* fp32 rows (a bf16 cache's values: qgemv_t, the same sums) */
static __attribute__((target("avx512f,avx2,fma,f16c"))) void
wsum512(float *y, const float *p, rows_ref V, int n, int dh)
{
    int c0 = 0;
    for (; c0 + 64 <= dh; c0 += 64) {
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                         _mm512_setzero_ps()};
        for (int j = 0; j < n; j++) {
            __m512 pj = _mm512_set1_ps(p[j]);
            const float *v = V.f + (size_t)j * V.ld + c0;
            for (int i = 0; i < 4; i++)
                acc[i] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + 16 * i), acc[i]);
        }
        for (int i = 0; i < 4; i++)
            _mm512_storeu_ps(y + c0 + 16 * i, acc[i]);
    }
    for (; c0 + 16 <= dh; c0 += 16) {
        __m512 acc = _mm512_setzero_ps();
        for (int j = 0; j < n; j++)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(V.f + (size_t)j * V.ld + c0),
                                  acc);
        _mm512_storeu_ps(y + c0, acc);
    }
    wsum_c(y, p, V, n, dh, c0);
}

/* post_c for up to 4 streams and 4 vectors of 16 keys from j0 (masked past n): each row of
 * RT loaded once for the streams, their x_c broadcast. */
static T512 void post512_blk(float *S, size_t ks, const float *X, size_t xs, const void *RTv,
                             size_t ld, int j0, int n, int dh, float alpha, const int NB,
                             const int NZ, const int H16)
{
    const float *RT = RTv;
    const uint16_t *RT16 = RTv;
    __m512 acc[4][4];
    __mmask16 m[4];
    for (int z = 0; z < NZ; z++) {
        int left = n - j0 - 16 * z;
        m[z] = (__mmask16)(left >= 16 ? 0xffff : left > 0 ? (1u << left) - 1 : 0);
        for (int b = 0; b < NB; b++)
            acc[b][z] = _mm512_setzero_ps();
    }
    for (int c = 0; c < dh; c++) {
        __m512 rv[4];
        if (H16) { /* bf16: 16 read past the keys (decode.h pads the table), dropped at store */
            const uint16_t *r = RT16 + (size_t)c * ld + j0;
            for (int z = 0; z < NZ; z++)
                rv[z] = _mm512_castsi512_ps(_mm512_slli_epi32(
                    _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r + 16 * z))), 16));
        } else {
            const float *r = RT + (size_t)c * ld + j0;
            for (int z = 0; z < NZ; z++)
                rv[z] = _mm512_maskz_loadu_ps(m[z], r + 16 * z);
        }
        for (int b = 0; b < NB; b++) {
            __m512 xb = _mm512_set1_ps(X[(size_t)b * xs + c]);
            for (int z = 0; z < NZ; z++)
                acc[b][z] = _mm512_fmadd_ps(xb, rv[z], acc[b][z]);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), zero = _mm512_setzero_ps();
    for (int b = 0; b < NB; b++)
        for (int z = 0; z < NZ; z++)
            _mm512_mask_storeu_ps(S + (size_t)b * ks + j0 + 16 * z, m[z],
                                  _mm512_add_ps(_mm512_mul_ps(va, acc[b][z]), zero));
}

static T512 void post512_any(float *S, size_t ks, const float *X, size_t xs, const void *RT,
                             size_t ld, int nb, int j0, int j1, int dh, float alpha, const int H16)
{
    for (int b0 = 0; b0 < nb; b0 += 4) {
        const int NB = nb - b0 < 4 ? nb - b0 : 4;
        float *Sb = S + (size_t)b0 * ks;
        const float *Xb = X + (size_t)b0 * xs;
        for (int j = j0; j < j1; j += 64) {
            const int NZ = (j1 - j + 15) / 16 < 4 ? (j1 - j + 15) / 16 : 4;
#define POST512(nbc, nzc) post512_blk(Sb, ks, Xb, xs, RT, ld, j, j1, dh, alpha, nbc, nzc, H16)
            switch (NB * 4 + NZ - 5) { /* the counts constants in each copy */
            case 0: POST512(1, 1); break;
            case 1: POST512(1, 2); break;
            case 2: POST512(1, 3); break;
            case 3: POST512(1, 4); break;
            case 4: POST512(2, 1); break;
            case 5: POST512(2, 2); break;
            case 6: POST512(2, 3); break;
            case 7: POST512(2, 4); break;
            case 8: POST512(3, 1); break;
            case 9: POST512(3, 2); break;
            case 10: POST512(3, 3); break;
            case 11: POST512(3, 4); break;
            case 12: POST512(4, 1); break;
            case 13: POST512(4, 2); break;
            case 14: POST512(4, 3); break;
            default: POST512(4, 4); break;
            }
#undef POST512
        }
    }
}

static __attribute__((target("avx512f,avx2,fma,f16c"))) void
post512(float *S, size_t ks, const float *X, size_t xs, const void *RT, size_t ld, int nb,
        int j0, int j1, int dh, float alpha)
{
    post512_any(S, ks, X, xs, RT, ld, nb, j0, j1, dh, alpha, 0);
}

static __attribute__((target("avx512f,avx2,fma,f16c"))) void
post512_h(float *S, size_t ks, const float *X, size_t xs, const void *RT, size_t ld, int nb,
          int j0, int j1, int dh, float alpha)
{
    post512_any(S, ks, X, xs, RT, ld, nb, j0, j1, dh, alpha, 1);
}

/* ---------------------------------------------------------------- AVX2 */
/* The 16 lanes of a sum as two 8-lane parts (lanes 0-7, 8-15): the same sums. */
#define T256 __attribute__((target("avx2,fma,f16c"), always_inline)) inline

/* The trees of 4 sums (parts lo, hi each): lanes 0-3 of the result */
static T256 __m128 tree16x4(__m256 acc[4][2])
{
    __m256 u[4];
    for (int t = 0; t < 4; t++) /* i + (i + 8) */
        u[t] = _mm256_add_ps(acc[t][0], acc[t][1]);
    /* i + (i + 4): keys 0, 1 (z0) and 2, 3 (z1) in the halves */
    __m256 z0 = _mm256_add_ps(_mm256_permute2f128_ps(u[0], u[1], 0x20),
                              _mm256_permute2f128_ps(u[0], u[1], 0x31));
    __m256 z1 = _mm256_add_ps(_mm256_permute2f128_ps(u[2], u[3], 0x20),
                              _mm256_permute2f128_ps(u[2], u[3], 0x31));
    /* 0 + 2, 1 + 3: half q holds keys q and 2 + q */
    __m256 t = _mm256_add_ps(_mm256_shuffle_ps(z0, z1, 0x44), _mm256_shuffle_ps(z0, z1, 0xee));
    /* (0 + 2) + (1 + 3): lanes 0, 1 keys 0, 2; lanes 4, 5 keys 1, 3 */
    __m256 f = _mm256_add_ps(_mm256_shuffle_ps(t, t, 0x88), _mm256_shuffle_ps(t, t, 0xdd));
    return _mm256_castps256_ps128(
        _mm256_permutevar8x32_ps(f, _mm256_set_epi32(7, 3, 6, 2, 5, 1, 4, 0)));
}

static T256 void store256(float *S, __m128 s4, const float *x, rows_ref R, int j0, int cnt,
                          int d0, int dh, float alpha, float beta)
{
    float s[4];
    _mm_storeu_ps(s, s4);
    if (d0 < dh)
        dots_tail(s, x, R, j0, cnt, d0, dh);
    for (int t = 0; t < cnt; t++)
        S[j0 + t] = store_val(R.sc ? s[t] * R.sc[j0 + t] : s[t], alpha, beta, S + j0 + t);
}

/* 8 int8 values from p, sign-extended and converted */
static T256 __m256 q8x8(const int8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

/* fp32 (Q 0) or int8 (Q 1, prefetched a block of rows ahead) rows */
static T256 void dots256(float *S, const float *x, rows_ref R, int n, int dh, float alpha,
                         float beta, const int Q)
{
    const int d16 = dh / 16 * 16;
    for (int j0 = 0; j0 < n; j0 += 4) {
        const int cnt = n - j0 < 4 ? n - j0 : 4;
        size_t o[4];
        __m256 acc[4][2];
        for (int t = 0; t < 4; t++) {
            o[t] = (size_t)(j0 + (t < cnt ? t : cnt - 1)) * R.ld;
            if (Q)
                PREFETCH_AHEAD(R.q + o[t]);
            acc[t][0] = acc[t][1] = _mm256_setzero_ps();
        }
        for (int c = 0; c < d16; c += 16) {
            __m256 x0 = _mm256_loadu_ps(x + c), x1 = _mm256_loadu_ps(x + c + 8);
            for (int t = 0; t < 4; t++) {
                const size_t k = o[t] + (size_t)c;
                acc[t][0] = _mm256_fmadd_ps(x0, Q ? q8x8(R.q + k) : _mm256_loadu_ps(R.f + k),
                                            acc[t][0]);
                acc[t][1] = _mm256_fmadd_ps(x1, Q ? q8x8(R.q + k + 8) : _mm256_loadu_ps(R.f + k + 8),
                                            acc[t][1]);
            }
        }
        store256(S, tree16x4(acc), x, R, j0, cnt, d16, dh, alpha, beta);
    }
}

static __attribute__((target("avx2,fma,f16c"))) void
dots256_f(float *S, const float *x, rows_ref R, int n, int dh, float alpha, float beta)
{
    dots256(S, x, R, n, dh, alpha, beta, 0);
}

static __attribute__((target("avx2,fma,f16c"))) void
dots256_q(float *S, const float *x, rows_ref R, int n, int dh, float alpha, float beta)
{
    dots256(S, x, R, n, dh, alpha, beta, 1);
}

/* 16 floats: those of even and of odd columns */
static T256 void x_pair256(const float *x, __m256 *e, __m256 *o)
{
    __m256 a = _mm256_loadu_ps(x), b = _mm256_loadu_ps(x + 8);
    *e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8));
    *o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8));
}

/* bf16 rows: each 16 values of a chunk (lanes 8p .. 8p + 7, p = 0, 1) as pairs, against x's
 * even and odd columns of them */
static __attribute__((target("avx2,fma,f16c"))) void
dots256_h(float *S, const float *x, rows_ref R, int n, int dh, float alpha, float beta)
{
    const int d32 = dh / 32 * 32;
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    for (int j0 = 0; j0 < n; j0 += 4) {
        const int cnt = n - j0 < 4 ? n - j0 : 4;
        const uint16_t *r[4];
        __m256 acc[4][2];
        for (int t = 0; t < 4; t++) {
            r[t] = R.h + (size_t)(j0 + (t < cnt ? t : cnt - 1)) * R.ld;
            acc[t][0] = acc[t][1] = _mm256_setzero_ps();
        }
        for (int c = 0; c < d32; c += 32)
            for (int p = 0; p < 2; p++) {
                __m256 xe, xo;
                x_pair256(x + c + 16 * p, &xe, &xo);
                for (int t = 0; t < 4; t++) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)(r[t] + c + 16 * p));
                    __m256 e = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
                    __m256 o = _mm256_castsi256_ps(_mm256_and_si256(v, hi));
                    acc[t][p] = _mm256_fmadd_ps(o, xo, _mm256_fmadd_ps(e, xe, acc[t][p]));
                }
            }
        store256(S, tree16x4(acc), x, R, j0, cnt, d32, dh, alpha, beta);
    }
}

static __attribute__((target("avx2,fma,f16c"))) void
wsum256(float *y, const float *p, rows_ref V, int n, int dh)
{
    int c0 = 0;
    for (; c0 + 32 <= dh; c0 += 32) {
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                         _mm256_setzero_ps()};
        for (int j = 0; j < n; j++) {
            __m256 pj = _mm256_broadcast_ss(p + j);
            const float *v = V.f + (size_t)j * V.ld + c0;
            for (int i = 0; i < 4; i++)
                acc[i] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8 * i), acc[i]);
        }
        for (int i = 0; i < 4; i++)
            _mm256_storeu_ps(y + c0 + 8 * i, acc[i]);
    }
    for (; c0 + 8 <= dh; c0 += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int j = 0; j < n; j++)
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), _mm256_loadu_ps(V.f + (size_t)j * V.ld + c0),
                                  acc);
        _mm256_storeu_ps(y + c0, acc);
    }
    wsum_c(y, p, V, n, dh, c0);
}

static __attribute__((target("avx2,fma,f16c"))) void
wsum256_q(float *y, const float *p, rows_ref V, int n, int dh)
{
    int c0 = 0;
    for (; c0 + 32 <= dh; c0 += 32) {
        __m256 e[4], o[4]; /* the even rows' sums, the odd rows' */
        for (int i = 0; i < 4; i++)
            e[i] = o[i] = _mm256_setzero_ps();
        const int8_t *v = V.q + c0;
        int j = 0;
        for (; j + 1 < n; j += 2, v += 2 * V.ld) {
            __m256 pe = _mm256_broadcast_ss(p + j), po = _mm256_broadcast_ss(p + j + 1);
            PREFETCH_AHEAD(v);
            PREFETCH_AHEAD(v + V.ld);
            for (int i = 0; i < 4; i++) {
                e[i] = _mm256_fmadd_ps(pe, q8x8(v + 8 * i), e[i]);
                o[i] = _mm256_fmadd_ps(po, q8x8(v + V.ld + 8 * i), o[i]);
            }
        }
        if (j < n)
            for (int i = 0; i < 4; i++)
                e[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), q8x8(v + 8 * i), e[i]);
        for (int i = 0; i < 4; i++)
            _mm256_storeu_ps(y + c0 + 8 * i, _mm256_add_ps(e[i], o[i]));
    }
    for (; c0 + 8 <= dh; c0 += 8) {
        __m256 e = _mm256_setzero_ps(), o = _mm256_setzero_ps();
        const int8_t *v = V.q + c0;
        int j = 0;
        for (; j + 1 < n; j += 2, v += 2 * V.ld) {
            e = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), q8x8(v), e);
            o = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j + 1), q8x8(v + V.ld), o);
        }
        if (j < n)
            e = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), q8x8(v), e);
        _mm256_storeu_ps(y + c0, _mm256_add_ps(e, o));
    }
    wsum_c_q2(y, p, V, n, dh, c0);
}

/* post512's twin: up to 2 streams and 4 vectors of 8 keys */
static T256 void post256_blk(float *S, size_t ks, const float *X, size_t xs, const void *RTv,
                             size_t ld, int j0, int n, int dh, float alpha, const int NB,
                             const int NZ, const int H16)
{
    const float *RT = RTv;
    const uint16_t *RT16 = RTv;
    __m256 acc[2][4];
    __m256i m[4];
    for (int z = 0; z < NZ; z++) {
        int left = n - j0 - 8 * z;
        m[z] = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0));
        for (int b = 0; b < NB; b++)
            acc[b][z] = _mm256_setzero_ps();
    }
    for (int c = 0; c < dh; c++) {
        __m256 rv[4];
        if (H16) { /* bf16: read past the keys as post512_blk */
            const uint16_t *r = RT16 + (size_t)c * ld + j0;
            for (int z = 0; z < NZ; z++)
                rv[z] = _mm256_castsi256_ps(_mm256_slli_epi32(
                    _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(r + 8 * z))), 16));
        } else {
            const float *r = RT + (size_t)c * ld + j0;
            for (int z = 0; z < NZ; z++)
                rv[z] = _mm256_maskload_ps(r + 8 * z, m[z]);
        }
        for (int b = 0; b < NB; b++) {
            __m256 xb = _mm256_broadcast_ss(X + (size_t)b * xs + c);
            for (int z = 0; z < NZ; z++)
                acc[b][z] = _mm256_fmadd_ps(xb, rv[z], acc[b][z]);
        }
    }
    const __m256 va = _mm256_set1_ps(alpha), zero = _mm256_setzero_ps();
    for (int b = 0; b < NB; b++)
        for (int z = 0; z < NZ; z++)
            _mm256_maskstore_ps(S + (size_t)b * ks + j0 + 8 * z, m[z],
                                _mm256_add_ps(_mm256_mul_ps(va, acc[b][z]), zero));
}

static T256 void post256_any(float *S, size_t ks, const float *X, size_t xs, const void *RT,
                             size_t ld, int nb, int j0, int j1, int dh, float alpha, const int H16)
{
    for (int b0 = 0; b0 < nb; b0 += 2) {
        const int NB = nb - b0 < 2 ? nb - b0 : 2;
        float *Sb = S + (size_t)b0 * ks;
        const float *Xb = X + (size_t)b0 * xs;
        for (int j = j0; j < j1; j += 32) {
            const int NZ = (j1 - j + 7) / 8 < 4 ? (j1 - j + 7) / 8 : 4;
#define POST256(nbc, nzc) post256_blk(Sb, ks, Xb, xs, RT, ld, j, j1, dh, alpha, nbc, nzc, H16)
            switch (NB * 4 + NZ - 5) {
            case 0: POST256(1, 1); break;
            case 1: POST256(1, 2); break;
            case 2: POST256(1, 3); break;
            case 3: POST256(1, 4); break;
            case 4: POST256(2, 1); break;
            case 5: POST256(2, 2); break;
            case 6: POST256(2, 3); break;
            default: POST256(2, 4); break;
            }
#undef POST256
        }
    }
}

static __attribute__((target("avx2,fma,f16c"))) void
post256(float *S, size_t ks, const float *X, size_t xs, const void *RT, size_t ld, int nb,
        int j0, int j1, int dh, float alpha)
{
    post256_any(S, ks, X, xs, RT, ld, nb, j0, j1, dh, alpha, 0);
}

static __attribute__((target("avx2,fma,f16c"))) void
post256_h(float *S, size_t ks, const float *X, size_t xs, const void *RT, size_t ld, int nb,
          int j0, int j1, int dh, float alpha)
{
    post256_any(S, ks, X, xs, RT, ld, nb, j0, j1, dh, alpha, 1);
}
#endif /* __x86_64__ */

typedef void (*dots_fn)(float *, const float *, rows_ref, int, int, float, float);
typedef void (*wsum_fn)(float *, const float *, rows_ref, int, int);

typedef void (*post_fn)(float *, size_t, const float *, size_t, const void *, size_t, int,
                        int, int, int, float);

typedef struct {
    post_fn post[2]; /* xl's transposed position rows: fp32, bf16 */
    dots_fn dots[3]; /* fp32 rows, bf16 rows, int8 rows */
    wsum_fn wsum[2]; /* fp32 rows (bf16: qgemv_t), int8 rows */
} kernels;

static void wsum_c0(float *y, const float *p, rows_ref V, int n, int dh)
{
    wsum_c(y, p, V, n, dh, 0);
}

static void wsum_c_q0(float *y, const float *p, rows_ref V, int n, int dh)
{
    wsum_c_q2(y, p, V, n, dh, 0);
}

/* qgemm's kernel (qgemm_use picks it for tests) */
static kernels pick(void)
{
    const char *k = qgemm_kernel();
#ifdef HAVE_SIMD
    if (strcmp(k, "avx512") == 0)
        return (kernels){{post512, post512_h}, {dots512_f, dots512_h, dots512_q}, {wsum512, wsum512_q}};
    if (strcmp(k, "avx2") == 0)
        return (kernels){{post256, post256_h}, {dots256_f, dots256_h, dots256_q}, {wsum256, wsum256_q}};
#endif
    (void)k;
    return (kernels){{post_c, post_c_h}, {dots_c, dots_c_h, dots_c}, {wsum_c0, wsum_c_q0}};
}

/* out[dh] = x (or 0 when NULL) + bias (or + 0) */
static void add_bias(float *out, const float *x, const float *bias, int dh)
{
    for (int c = 0; c < dh; c++)
        out[c] = (x ? x[c] : 0.0f) + (bias ? bias[c] : 0.0f);
}

/* Stream b, head h: S [klen] scores, then probabilities; qx [dh] scratch. */
/* Stream b, head h: S [klen] scores (the position terms already in it when pos), then
 * probabilities; qx [dh] scratch. */
static void decode_pair(float *vec, const float *q, const float *kv, const attn_args *a,
                        const kernels *k, float *S, float *qx, int b, int h, int pos)
{
    const int dh = a->dh, m = a->m, klen = m + 1, hd = a->H * dh;
    const size_t hs = a->kv_hstride ? a->kv_hstride : (size_t)dh;
    const size_t vo = a->v_offset ? a->v_offset : (size_t)hd;
    const size_t row = a->kv_row ? (size_t)a->kv_row : 2 * (size_t)hd;
    const size_t bs = a->kv_bstride ? a->kv_bstride : (size_t)klen * 2 * hd;
    const float *qbh = q + (size_t)b * hd + (size_t)h * dh;
    const int bf = a->kv16 != NULL, q8 = !bf && a->kv8 != NULL;
    if (a->rk && !pos) { /* (q + v)·rk_j over the shared rows */
        size_t o = (size_t)h * (a->rk_hstride ? a->rk_hstride : (size_t)dh);
        size_t ld = a->rk_row ? (size_t)a->rk_row : (size_t)hd;
        rows_ref R = a->rk16 ? (rows_ref){.h = a->rk16 + o, .ld = ld}
                             : (rows_ref){.f = a->rk + o, .ld = ld};
        add_bias(qx, a->no_q_position ? NULL : qbh, a->v ? a->v + (size_t)h * dh : NULL, dh);
        k->dots[a->rk16 != NULL](S, qx, R, klen, dh, a->scale, 0.0f);
    }
    size_t o = (size_t)b * bs + (size_t)h * hs;
    rows_ref K = bf ? (rows_ref){.h = a->kv16 + o, .ld = row} : (rows_ref){.f = kv + o, .ld = row};
    rows_ref V = bf ? (rows_ref){.h = a->kv16 + o + vo, .ld = row}
                    : (rows_ref){.f = kv + o + vo, .ld = row};
    if (q8) {
        const float *sc = a->kv8s + (size_t)b * a->kv8s_bstride + (size_t)h * a->kv8s_hstride;
        K = (rows_ref){.q = a->kv8 + o, .sc = sc, .ld = row};
        V = (rows_ref){.q = a->kv8 + o + vo, .sc = sc + a->kv8s_voff, .ld = row};
    }
    add_bias(qx, a->no_q_content ? NULL : qbh, a->u ? a->u + (size_t)h * dh : NULL, dh);
    k->dots[q8 ? 2 : bf](S, qx, K, klen, dh, a->scale, a->rk ? 1.0f : 0.0f);
    if (a->dist_bias) {
        const float *tb = a->dist_bias + (size_t)h * (a->bias_ld > 0 ? a->bias_ld : klen);
        for (int j = 0; j <= m; j++)
            S[j] += tb[m - j];
    }
    if (a->score_bias)
        a->score_bias->add(a->score_bias, S, klen, b, h, 0, 1, m);
    double sum = vm_exp_sum(S, klen, vm_max(S, klen));
    float inv = (float)(1.0 / sum);
    if (q8) /* and each value row's scale, once per row */
        for (int j = 0; j < klen; j++)
            S[j] = S[j] * inv * V.sc[j];
    else
        for (int j = 0; j < klen; j++)
            S[j] *= inv;
    float *y = vec + (size_t)b * hd + (size_t)h * dh;
    if (bf) {
        qgemv_t(y, S, V.h, klen, dh, (int)V.ld);
    } else if (q8) {
        k->wsum[1](y, S, V, klen, dh);
    } else {
        k->wsum[0](y, S, V, klen, dh);
    }
}

static size_t pad16(size_t n) { return (n + 15) / 16 * 16; }

/* Head h of every stream: S [B][klen padded] scores, qx [B][dh padded] scratch. xl's
 * position rows in bf16 (contiguous, as decode.c keeps them): one qgemm of all the
 * streams' queries, each row of them converted once for up to QG_ROWS streams (the same
 * sums as the one-stream dots: qgemm's); else each stream's pass reads them. */
static void decode_head(float *vec, const float *q, const float *kv, const attn_args *a,
                        const kernels *k, float *S, float *qx, int h)
{
    const int B = a->B, dh = a->dh, klen = a->m + 1, hd = a->H * dh;
    const size_t ks = pad16((size_t)klen), xs = pad16((size_t)dh);
    const size_t ld = a->rk_row ? (size_t)a->rk_row : (size_t)hd;
    const int t16 = a->rkT16 != NULL; /* bf16 rows transposed (all B): before rk16's */
    const int bfpos = !t16 && a->rk16 && ld == (size_t)dh && B > 1;
    const int tpos = t16 || (a->rkT && !a->rk16);
    if (bfpos) {
        for (int b = 0; b < B; b++)
            add_bias(qx + (size_t)b * dh,
                     a->no_q_position ? NULL : q + (size_t)b * hd + (size_t)h * dh,
                     a->v ? a->v + (size_t)h * dh : NULL, dh);
        qmat R = {.type = QT_BF16, .rows = klen, .cols = dh,
                  .bf16 = a->rk16 + (size_t)h * (a->rk_hstride ? a->rk_hstride : (size_t)dh)};
        qgemm(S, qx, &R, B, a->scale, 0.0f, dh, (int)ks);
    } else if (tpos) {
        for (int b = 0; b < B; b++)
            add_bias(qx + (size_t)b * xs,
                     a->no_q_position ? NULL : q + (size_t)b * hd + (size_t)h * dh,
                     a->v ? a->v + (size_t)h * dh : NULL, dh);
        const void *RT = t16 ? (const void *)(a->rkT16 + (size_t)h * a->rkT_hstride)
                             : (const void *)(a->rkT + (size_t)h * a->rkT_hstride);
        k->post[t16](S, ks, qx, xs, RT, (size_t)a->rkT_ld, B, 0, klen, dh, a->scale);
    }
    const int pos = bfpos || tpos;
    for (int b = 0; b < B; b++)
        decode_pair(vec, q, kv, a, k, S + (size_t)b * ks, qx + (size_t)b * xs, b, h, pos);
}

static size_t per_thread(int B, int klen, int dh)
{
    return (size_t)B * (pad16((size_t)klen) + pad16((size_t)dh));
}

size_t attn_decode_scratch_floats(int B, int klen, int dh, int threads)
{
    return per_thread(B, klen, dh) * (size_t)(threads > 0 ? threads : 1);
}

void attn_decode(float *vec, const float *q, const float *kv, const attn_args *a,
                 float *scratch)
{
    const int klen = a->m + 1;
    const size_t per = per_thread(a->B, klen, a->dh), qo = (size_t)a->B * pad16((size_t)klen);
    const kernels k = pick();
    /* threads only when the step is worth a fork (one stream's is a few microseconds) */
    int nt = par_threads();
    if (nt > a->threads)
        nt = a->threads > 0 ? a->threads : 1;
    if ((double)a->B * a->H * klen * a->dh < (1 << 18))
        nt = 1;
    if (nt > a->H)
        nt = a->H;
    if (nt <= 1) {
        for (int h = 0; h < a->H; h++)
            decode_head(vec, q, kv, a, &k, scratch, scratch + qo, h);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int h = 0; h < a->H; h++) {
        float *S = scratch + per * (size_t)par_thread_id();
        decode_head(vec, q, kv, a, &k, S, S + qo, h);
    }
}

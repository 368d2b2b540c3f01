/* attn_amx.c: see attn_amx.h.
 *
 * AMX in brief: 8 tile registers of up to 16 rows x 64 bytes; TDPBF16PS adds to a 16 x 16
 * fp32 tile C the product of a 16 x 32 bf16 tile A (row-major) and a 32 x 16 bf16 matrix B
 * held "VNNI": as 16 rows of 16 pairs, row t holding B[2t][n], B[2t+1][n] for each n. Every
 * tile here is 16 rows x 64 bytes (one configuration); the buffers are padded so that every
 * tile is whole: the depth of a product (K) in 32s, with zeros past the real depth; rows and
 * columns in 16s, the extra results computed and ignored.
 *
 * One product kernel serves every product of the block (amx_mm: C = A B, or C += A B), so
 * each product is a matter of laying its operands out:
 *   "rows"   A [rows, K] row-major bf16
 *   "pairs"  B as VNNI: [K/2][N][2] (two consecutive rows of a row-major [K, N] matrix
 *            interleaved): the values for P V, the keys for dS K, the positions for
 *            xl's dBD R, P' and dS for the transposed sums below
 *   "keys"   B = X^T for X [N, K] row-major (the keys for q k^T): [K/2][N][2], pairs of a
 *            row of X: what the score products read
 * The backward's sums over the block's rows, dV += P'^T dO, dK += dS^T qu and dR += dBD^T
 * qv, are kept transposed (dV^T += dO^T P', A = dO^T "rows" of [dh, rb], B = P' "pairs"), so
 * no operand is transposed per block but the small dO; the sums are transposed back once
 * per (b, h).
 *
 * Per (b, h), scratch holds (dq = dh rounded up to 32, klp = klen rounded up to 32, Lqp and
 * Lqt = Lq rounded up to 16 and 32, rlp = the positions' span, rb = RB rows per block; bf16
 * arrays in float-sized slots):
 *   forward   Qb, Qvb [Lqp, dq] rows: scale (q + u), scale (q + v)
 *             Kb [dq, klp] keys: k;  Rb [dq, rlp] keys: rk;  Vb [klp, dq] pairs: v
 *             S [rb, klp] fp32 scores -> P;  D [rb, rlp] fp32 xl's band, then P dropped;
 *             Pb [rb, klp] rows: P;  O [rb, dq] fp32
 *   backward  QuT, QvT [dq, Lqt] rows: (q + u)^T, (q + v)^T
 *             Vk [dq, klp] keys: v;  Kr [klp, dq] pairs: k;  Rr [rlp, dq] pairs: rk
 *             dOb [rb, dq] rows: dO;  dOT [dq, rb] rows: dO^T;  Pp [rb, klp] pairs: P'
 *             S [rb, klp] fp32 dP -> dS;  D [rb, klp] fp32 P';  dSb (rb zeros, then) [rb,
 *             lds] rows: scale dS;  Sp [rb, rlp] pairs: scale dS, or xl's scale dBD
 *             O, O2 [rb, dq] fp32;  dKt, dVt [dq, klp], dRt [dq, rlp] fp32 sums
 */
#include "attn_amx.h"

#include <string.h>

#include "../common/cpu.h"
#include "../common/vmath.h"
#include "attn_fused.h"
#include "dropout.h"
#include "gemm_bf16.h"

#if defined(__GNUC__) && __GNUC__ >= 11 && defined(__x86_64__)
#define HAVE_AMX 1
#include <immintrin.h>
#define AMX_FN \
    __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define HAVE_AMX 0
#endif

enum { RB = 32 }; /* query rows per block: the depth of the transposed sums, one tile's 32 */

static inline int pad(int n, int to) { return (n + to - 1) / to * to; }

typedef struct {
    int dq, klp, rlp, Lqp, Lqt, lds;
    uint16_t *Qb, *Qvb, *Kb, *Rb, *Vb, *Pb;           /* forward */
    uint16_t *QuT, *QvT, *Vk, *Kr, *Rr, *dOb, *dOT, *Pp, *dSb, *Sp; /* backward */
    float *S, *D, *O, *O2, *dKt, *dVt, *dRt;
} abufs;

/* Hands out scratch in whole cache lines (only counts when base is NULL) */
typedef struct {
    float *base;
    size_t used; /* floats */
} bump;

static float *take(bump *b, size_t n)
{
    float *p = b->base ? b->base + b->used : NULL;
    b->used += (n + 15) / 16 * 16;
    return p;
}

/* bf16 values in float-sized slots */
static uint16_t *take16(bump *b, size_t n) { return (uint16_t *)take(b, (n + 1) / 2); }

/* forward and backward share the fp32 planes; each lays out its own operands. Returns the
 * floats used. */
static size_t layout(abufs *f, float *s, int Lq, int klen, int dh, int backward)
{
    bump b = {s, 0};
    memset(f, 0, sizeof *f);
    f->dq = pad(dh, 32), f->klp = pad(klen, 32), f->Lqp = pad(Lq, 16), f->Lqt = pad(Lq, 32);
    f->rlp = pad(klen + RB + 16, 32);
    f->lds = f->klp + 32;
    size_t dq = (size_t)f->dq, klp = (size_t)f->klp, rlp = (size_t)f->rlp;
    size_t Lqp = (size_t)f->Lqp, Lqt = (size_t)f->Lqt;
    f->S = take(&b, (size_t)RB * klp);
    f->D = take(&b, (size_t)RB * rlp);
    f->O = take(&b, (size_t)RB * dq);
    f->O2 = take(&b, (size_t)RB * dq);
    if (!backward) {
        f->Qb = take16(&b, Lqp * dq);
        f->Qvb = take16(&b, Lqp * dq);
        f->Kb = take16(&b, dq * klp);
        f->Rb = take16(&b, dq * rlp);
        f->Vb = take16(&b, klp * dq);
        f->Pb = take16(&b, (size_t)RB * klp);
        return b.used;
    }
    f->QuT = take16(&b, dq * Lqt);
    f->QvT = take16(&b, dq * Lqt);
    f->Vk = take16(&b, dq * klp);
    f->Kr = take16(&b, klp * dq);
    f->Rr = take16(&b, rlp * dq);
    f->dOb = take16(&b, (size_t)RB * dq);
    f->dOT = take16(&b, dq * RB);
    f->Pp = take16(&b, (size_t)RB * klp);
    f->dSb = take16(&b, (size_t)RB + (size_t)RB * f->lds);
    if (f->dSb)
        f->dSb += RB; /* RB zeros before row 0 */
    f->Sp = take16(&b, (size_t)RB * rlp);
    f->dKt = take(&b, dq * klp);
    f->dVt = take(&b, dq * klp);
    f->dRt = take(&b, dq * rlp);
    return b.used;
}

double amx_scratch_floats(int Lq, int klen, int dh)
{
    abufs f;
    size_t fwd = layout(&f, NULL, Lq, klen, dh, 0), bwd = layout(&f, NULL, Lq, klen, dh, 1);
    return (double)(fwd > bwd ? fwd : bwd);
}

/* ---- operand layouts (fp32 in, bf16 out, zero padded), AVX-512 ----
 * bf16 rounding here is AVX512_BF16's VCVTNE2PS2BF16: to nearest even, like gemm_bf16's,
 * but with denormal inputs taken as zero. */

#if HAVE_AMX
typedef __m512i v32h; /* 32 bf16 values (16 pairs) */

static inline __mmask16 first(int n) /* the first n of 16 lanes (n may be <= 0 or > 16) */
{
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* bf16 of scale (x[0..n) + bias[0..n)) (n <= 32, zeros past n; x or bias may be NULL) */
AMX_FN static inline v32h cvt32(const float *x, const float *bias, int n, float scale)
{
    __m512 sc = _mm512_set1_ps(scale), lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
    __mmask16 m0 = first(n), m1 = first(n - 16);
    if (x)
        lo = _mm512_maskz_loadu_ps(m0, x), hi = _mm512_maskz_loadu_ps(m1, x + 16);
    if (bias)
        lo = _mm512_add_ps(lo, _mm512_maskz_loadu_ps(m0, bias)),
        hi = _mm512_add_ps(hi, _mm512_maskz_loadu_ps(m1, bias + 16));
    return (v32h)_mm512_cvtne2ps_pbh(_mm512_mul_ps(hi, sc), _mm512_mul_ps(lo, sc));
}

/* 16 bf16 of scale x[0..n) (zeros past n) in the low halves of 16 32-bit lanes */
AMX_FN static inline __m512i cvt16w(const float *x, int n, float scale)
{
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(first(n), x), _mm512_set1_ps(scale));
    return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(v));
}

/* 16 x 16 32-bit transpose of r[0..16) in place */
AMX_FN static inline __attribute__((always_inline)) void t16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) { /* 128-bit blocks: rows i, i+4, i+8, i+12 */
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
        r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

/* rows: dst[j][c] = bf16(scale (src[j][c] + bias[c])) for j < n, c < dh; zero for c in [dh,
 * dq) and rows [n, np). src NULL: zeros (+ bias). */
AMX_FN static void lay_rows(uint16_t *dst, int dq, const float *src, size_t ss, int n, int np,
                            int dh, const float *bias, float scale)
{
    for (int j = 0; j < n; j++)
        for (int c = 0; c < dq; c += 32)
            _mm512_storeu_si512(dst + (size_t)j * dq + c,
                                cvt32(src ? src + (size_t)j * ss + c : NULL,
                                      bias ? bias + c : NULL, dh - c, scale));
    memset(dst + (size_t)n * dq, 0, (size_t)(np - n) * dq * sizeof *dst);
}

/* keys: dst[t][j][e] = bf16(src[j][2t + e]) for j < n, 2t + e < dh: [dq/2][np][2]; zero
 * elsewhere. By 16 keys x 16 pairs: each key's 32 values are 16 pairs, transposed. */
AMX_FN static void lay_keys(uint16_t *dst, int np, const float *src, size_t ss, int n, int dh,
                            int dq)
{
    uint32_t *d = (uint32_t *)dst; /* [dq/2][np] pairs */
    for (int j0 = 0; j0 < np; j0 += 16)
        for (int c0 = 0; c0 < dq; c0 += 32) {
            __m512i r[16];
            for (int k = 0; k < 16; k++)
                r[k] = j0 + k < n ? cvt32(src + (size_t)(j0 + k) * ss + c0, NULL, dh - c0, 1.0f)
                                  : _mm512_setzero_si512();
            t16(r);
            for (int k = 0; k < 16; k++)
                _mm512_storeu_si512(d + (size_t)(c0 / 2 + k) * np + j0, r[k]);
        }
}

/* keys from bf16 rows: dst[t][j][e] = src[j][2t + e] for j < n, 2t + e < dh, zero elsewhere
 * ([dq/2][np][2]): each key's bf16 pairs, transposed */
AMX_FN static void lay_keys16(uint16_t *dst, int np, const uint16_t *src, size_t ss, int n,
                              int dh, int dq)
{
    uint32_t *d = (uint32_t *)dst;
    for (int c0 = 0; c0 < dq; c0 += 32) {
        int left = dh - c0;
        __mmask32 m = left >= 32 ? ~(__mmask32)0 : left <= 0 ? 0 : (((__mmask32)1 << left) - 1);
        for (int j0 = 0; j0 < np; j0 += 16) {
            __m512i r[16];
            for (int k = 0; k < 16; k++)
                r[k] = j0 + k < n ? _mm512_maskz_loadu_epi16(m, src + (size_t)(j0 + k) * ss + c0)
                                  : _mm512_setzero_si512();
            t16(r);
            for (int k = 0; k < 16; k++)
                _mm512_storeu_si512(d + (size_t)(c0 / 2 + k) * np + j0, r[k]);
        }
    }
}

/* pairs: dst[t][c][e] = bf16(scale src[2t + e][c]) for rows 2t + e < n, c < cols: [np/2][cp]
 * [2]; zero elsewhere (np even, cp a multiple of 16) */
AMX_FN static void lay_pairs(uint16_t *dst, int cp, const float *src, size_t ss, int n, int np,
                             int cols, float scale)
{
    for (int t = 0; t < np / 2; t++) {
        uint32_t *d = (uint32_t *)dst + (size_t)t * cp;
        const float *x0 = src + (size_t)(2 * t) * ss, *x1 = x0 + ss;
        int n0 = 2 * t < n ? cols : 0, n1 = 2 * t + 1 < n ? cols : 0;
        for (int c = 0; c < cp; c += 16) {
            __m512i lo = n0 > c ? cvt16w(x0 + c, n0 - c, scale) : _mm512_setzero_si512();
            __m512i hi = n1 > c ? cvt16w(x1 + c, n1 - c, scale) : _mm512_setzero_si512();
            _mm512_storeu_si512(d + c, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
    }
}

/* pairs of bf16 rows: dst[t][p][e] = s[2t+e][p] (s row r at src + r * ss) for 2t + e < n, p <
 * w, zero elsewhere up to cp (a multiple of 16): [np/2][cp][2] */
AMX_FN static void lay_pairs_h(uint16_t *dst, int cp, const uint16_t *src, size_t ss, int n,
                               int np, int w)
{
    for (int t = 0; t < np / 2; t++) {
        uint32_t *d = (uint32_t *)dst + (size_t)t * cp;
        const uint16_t *x0 = src + (size_t)(2 * t) * ss, *x1 = x0 + ss;
        int n0 = 2 * t < n ? w : 0, n1 = 2 * t + 1 < n ? w : 0;
        for (int c = 0; c < cp; c += 16) {
            __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(first(n0 - c), x0 + c));
            __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(first(n1 - c), x1 + c));
            _mm512_storeu_si512(d + c, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
    }
}

/* transposed rows: dst[c][j] = bf16(src[j][c] + bias[c]) for c < dh, j < n: [dq][np] (np a
 * multiple of 16); zero elsewhere. src NULL: zeros (+ bias). */
AMX_FN static void lay_trans(uint16_t *dst, int np, const float *src, size_t ss, int n, int dh,
                             int dq, const float *bias)
{
    for (int j0 = 0; j0 < np; j0 += 16)
        for (int c0 = 0; c0 < dq; c0 += 16) {
            __m512i r[16];
            __m512 b = bias ? _mm512_maskz_loadu_ps(first(dh - c0), bias + c0)
                            : _mm512_setzero_ps();
            for (int k = 0; k < 16; k++) {
                __m512 x = j0 + k < n && src
                               ? _mm512_maskz_loadu_ps(first(dh - c0), src + (size_t)(j0 + k) * ss + c0)
                               : _mm512_setzero_ps();
                r[k] = _mm512_castps_si512(j0 + k < n ? _mm512_add_ps(x, b) : x);
            }
            t16(r); /* r[k]: column c0 + k of rows j0 .. j0+15 */
            for (int k = 0; k < 16; k++)
                _mm256_storeu_si256((__m256i *)(dst + (size_t)(c0 + k) * np + j0),
                                    (__m256i)_mm512_cvtneps_pbh(_mm512_castsi512_ps(r[k])));
        }
}

/* dst[j][c] (row stride ld) = (or += when add) src[c][j] (row stride ls) for j < n, c < dh:
 * fp32, by 16 x 16 blocks; src has rows up to dh rounded up to 16 and columns up to n
 * rounded up to 16 (read, finite) */
AMX_FN static void untranspose(float *dst, size_t ld, const float *src, size_t ls, int n, int dh,
                               int add)
{
    for (int c0 = 0; c0 < dh; c0 += 16) {
        const __mmask16 m = first(dh - c0);
        for (int j0 = 0; j0 < n; j0 += 16) {
            __m512i r[16];
            for (int k = 0; k < 16; k++)
                r[k] = _mm512_loadu_si512(src + (size_t)(c0 + k) * ls + j0);
            t16(r); /* r[k]: row j0 + k, columns c0 .. c0+15 */
            const int rows = n - j0 < 16 ? n - j0 : 16;
            float *d = dst + (size_t)j0 * ld + c0;
            if (add)
                for (int k = 0; k < rows; k++, d += ld)
                    _mm512_mask_storeu_ps(d, m, _mm512_add_ps(_mm512_castsi512_ps(r[k]),
                                                              _mm512_maskz_loadu_ps(m, d)));
            else
                for (int k = 0; k < rows; k++, d += ld)
                    _mm512_mask_storeu_ps(d, m, _mm512_castsi512_ps(r[k]));
        }
    }
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* every tile 16 rows x 64 bytes */
AMX_FN static void amx_configure(void)
{
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++)
        c.colsb[i] = 64, c.rows[i] = 16;
    _tile_loadconfig(&c);
}

/* C [M, N] (fp32, row stride ldc) = (or += when acc) A [M, K] (rows, stride lda) times B
 * (VNNI [K/2][N][2]: row stride ldb bf16 values, N's pairs from column 0); M and N multiples
 * of 16, K of 32. Tiles: C 0-3, A 4-5, B 6-7. */
AMX_FN static void amx_mm(float *C, int ldc, const uint16_t *A, int lda, const uint16_t *B,
                          int ldb, int M, int N, int K, int acc)
{
    const size_t sa = (size_t)lda * 2, sb = (size_t)ldb * 2, sc = (size_t)ldc * 4;
    for (int m0 = 0; m0 < M; m0 += 32) {
        const int two_m = M - m0 >= 32;
        const uint16_t *a0 = A + (size_t)m0 * lda, *a1 = a0 + (size_t)16 * lda;
        float *c0 = C + (size_t)m0 * ldc, *c1 = c0 + (size_t)16 * ldc;
        for (int n0 = 0; n0 < N; n0 += 32) {
            const int two_n = N - n0 >= 32;
            if (acc) {
                _tile_loadd(0, c0 + n0, sc);
                if (two_n)
                    _tile_loadd(1, c0 + n0 + 16, sc);
                if (two_m)
                    _tile_loadd(2, c1 + n0, sc);
                if (two_m && two_n)
                    _tile_loadd(3, c1 + n0 + 16, sc);
            } else {
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
            }
            for (int k0 = 0; k0 < K; k0 += 32) {
                const uint16_t *b = B + (size_t)(k0 / 2) * ldb + (size_t)n0 * 2;
                _tile_loadd(4, a0 + k0, sa);
                _tile_loadd(6, b, sb);
                _tile_dpbf16ps(0, 4, 6);
                if (two_n) {
                    _tile_loadd(7, b + 32, sb);
                    _tile_dpbf16ps(1, 4, 7);
                }
                if (two_m) {
                    _tile_loadd(5, a1 + k0, sa);
                    _tile_dpbf16ps(2, 5, 6);
                    if (two_n)
                        _tile_dpbf16ps(3, 5, 7);
                }
            }
            _tile_stored(0, c0 + n0, sc);
            if (two_n)
                _tile_stored(1, c0 + n0 + 16, sc);
            if (two_m)
                _tile_stored(2, c1 + n0, sc);
            if (two_m && two_n)
                _tile_stored(3, c1 + n0 + 16, sc);
        }
    }
}

AMX_FN static void amx_done(void) { _tile_release(); }

/* ---- forward ---- */

/* fused_softmax_rows's probabilities (the same float operations: vm_exp_sum, then each
 * times 1 / sum), each written where it is needed in one pass: the prob plane's rows (P, row
 * stride klen, zeros to klen; NULL in inference), the scores' rows (keep_s: for dropatt) and
 * Pb's bf16 rows (no dropatt), zeros to wk; Pb's rows from `rows` to Mt zero */
AMX_FN static void softmax_out(float *S, int lds, float *P, int klen, int keep_s, uint16_t *Pb,
                               int ldb, int m, int same_len, int i0, int rows, int Mt, int wk)
{
    for (int r = 0; r < Mt; r++) {
        uint16_t *pb = Pb ? Pb + (size_t)r * ldb : NULL;
        if (r >= rows) {
            if (pb)
                memset(pb, 0, (size_t)wk * sizeof *pb);
            continue;
        }
        float *srow = S + (size_t)r * lds, *prow = P ? P + (size_t)(i0 + r) * klen : NULL;
        int nv = m + i0 + r + 1, lo = same_len > 0 && nv > same_len ? nv - same_len : 0;
        double sum = vm_exp_sum(srow + lo, nv - lo, vm_max(srow + lo, nv - lo));
        __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
        for (int j = 0; j < wk; j += 32) {
            __mmask16 m0 = first(nv - j) & (__mmask16)~first(lo - j);
            __mmask16 m1 = first(nv - j - 16) & (__mmask16)~first(lo - j - 16);
            __m512 a = _mm512_maskz_mul_ps(m0, _mm512_maskz_loadu_ps(m0, srow + j), inv);
            __m512 b = _mm512_maskz_mul_ps(m1, _mm512_maskz_loadu_ps(m1, srow + j + 16), inv);
            if (keep_s) {
                _mm512_storeu_ps(srow + j, a);
                _mm512_storeu_ps(srow + j + 16, b);
            }
            if (prow) {
                _mm512_mask_storeu_ps(prow + j, first(klen - j), a);
                _mm512_mask_storeu_ps(prow + j + 16, first(klen - j - 16), b);
            }
            if (pb)
                _mm512_storeu_si512(pb + j, (v32h)_mm512_cvtne2ps_pbh(b, a));
        }
        if (prow && wk < klen)
            memset(prow + wk, 0, (size_t)(klen - wk) * sizeof *prow);
    }
}

AMX_FN void amx_forward_bh(float *prob, float *vec, const float *q, const float *kv,
                           const attn_args *a, float *scratch, int b, int h)
{
    const int H = a->H, dh = a->dh, Lq = a->Lq, m = a->m, klen = m + Lq, hd = H * dh;
    abufs f;
    layout(&f, scratch, Lq, klen, dh, 0);
    const int dq = f.dq, klp = f.klp, rlp = f.rlp;
    const float *qbh = q + (size_t)b * Lq * hd + (size_t)h * dh;
    const float *kbh = kv ? kv + (size_t)b * fused_kv_stride(a, klen) + (size_t)h * dh : NULL;
    float *P = prob ? prob + ((size_t)b * H + h) * Lq * klen : NULL;
    float *vout = vec + (size_t)b * Lq * hd + (size_t)h * dh;

    lay_rows(f.Qb, dq, a->no_q_content ? NULL : qbh, hd, Lq, f.Lqp, dh,
             a->u ? a->u + (size_t)h * dh : NULL, a->scale);
    if (a->kvh) { /* a bf16 key cache: the values already rounded */
        const uint16_t *kh = a->kvh + (size_t)b * fused_kv_stride(a, klen) + (size_t)h * dh;
        lay_keys16(f.Kb, klp, kh, 2 * (size_t)hd, klen, dh, dq);
        lay_pairs_h(f.Vb, dq, kh + hd, 2 * (size_t)hd, klen, klp, dh);
    } else {
        lay_keys(f.Kb, klp, kbh, 2 * (size_t)hd, klen, dh, dq);
        lay_pairs(f.Vb, dq, kbh + hd, 2 * (size_t)hd, klen, klp, dh, 1.0f);
    }
    if (a->rk) {
        lay_rows(f.Qvb, dq, a->no_q_position ? NULL : qbh, hd, Lq, f.Lqp, dh,
                 a->v ? a->v + (size_t)h * dh : NULL, a->scale);
        lay_keys(f.Rb, rlp, a->rk + (size_t)h * dh, hd, klen, dh, dq);
    }
    amx_configure();
    for (int i0 = 0; i0 < Lq; i0 += RB) {
        int i1 = i0 + RB < Lq ? i0 + RB : Lq, rows = i1 - i0, w = m + i1;
        int Mt = pad(rows, 16), wk = pad(w, 32);
        amx_mm(f.S, klp, f.Qb + (size_t)i0 * dq, dq, f.Kb, 2 * klp, Mt, pad(w, 16), dq, 0);
        if (a->rk) { /* BD[r][p'] = scale (q_r + v) . rk[Lq - i1 + p'], S[r][j] += BD[r][j +
                        rows-1-r]: row i reads rk[Lq-1-i+j] */
            amx_mm(f.D, rlp, f.Qvb + (size_t)i0 * dq, dq, f.Rb + (size_t)(Lq - i1) * 2,
                   2 * rlp, Mt, pad(w + rows - 1, 16), dq, 0);
            for (int r = 0; r < rows; r++) {
                float *srow = f.S + (size_t)r * klp;
                const float *bd = f.D + (size_t)r * rlp + (rows - 1 - r);
                for (int j = 0; j < w; j++)
                    srow[j] += bd[j];
            }
        }
        fused_add_biases(f.S, klp, a, b, h, i0, i1);
        /* the probabilities, and P's bf16 rows for O = P V: from the softmax itself, or
         * after dropatt's mask */
        int drop = a->dropatt > 0.0f && P;
        softmax_out(f.S, klp, P, klen, drop, drop ? NULL : f.Pb, klp, m, a->same_len, i0, rows,
                    Mt, wk);
        if (drop) {
            fused_drop_rows(f.D, rlp, f.S, klp, a, b, h, i0, i1, wk);
            for (int r = 0; r < Mt; r++)
                for (int j = 0; j < wk; j += 32)
                    _mm512_storeu_si512(f.Pb + (size_t)r * klp + j,
                                        r < rows ? cvt32(f.D + (size_t)r * rlp + j, NULL, 32, 1.0f)
                                                 : _mm512_setzero_si512());
        }
        amx_mm(f.O, dq, f.Pb, klp, f.Vb, 2 * dq, Mt, dq, wk, 0);
        for (int r = 0; r < rows; r++)
            memcpy(vout + (size_t)(i0 + r) * hd, f.O + (size_t)r * dq, (size_t)dh * sizeof(float));
    }
    amx_done();
}

/* ---- backward ---- */

/* per (b, h): the operands, the sums zeroed */
AMX_FN static void backward_lay(const abufs *f, const float *qbh, const float *kbh,
                                const attn_args *a, int h)
{
    const int dh = a->dh, Lq = a->Lq, klen = a->m + Lq, hd = a->H * dh, dq = f->dq;
    lay_trans(f->QuT, f->Lqt, a->no_q_content ? NULL : qbh, hd, Lq, dh, dq,
              a->u ? a->u + (size_t)h * dh : NULL);
    lay_keys(f->Vk, f->klp, kbh + hd, 2 * (size_t)hd, klen, dh, dq);
    lay_pairs(f->Kr, dq, kbh, 2 * (size_t)hd, klen, f->klp, dh, 1.0f);
    memset(f->dSb - RB, 0, (size_t)RB * sizeof *f->dSb);
    memset(f->dKt, 0, (size_t)dq * f->klp * sizeof(float));
    memset(f->dVt, 0, (size_t)dq * f->klp * sizeof(float));
    if (a->rk) {
        lay_trans(f->QvT, f->Lqt, a->no_q_position ? NULL : qbh, hd, Lq, dh, dq,
                  a->v ? a->v + (size_t)h * dh : NULL);
        lay_pairs(f->Rr, dq, a->rk + (size_t)h * dh, hd, klen, f->rlp, dh, 1.0f);
        memset(f->dRt, 0, (size_t)dq * f->rlp * sizeof(float));
    }
}

/* the block's dS (fp32, f->S) into bf16: dSb (scale dS, rows; zero past wk to lds, rows
 * past `rows` zero) and Sp (its pairs of rows, zero rows to RB) */
AMX_FN static void backward_ds(const abufs *f, float scale, int rows, int wk)
{
    for (int r = 0; r < RB; r++) {
        uint16_t *d = f->dSb + (size_t)r * f->lds;
        const float *g = f->S + (size_t)r * f->klp;
        for (int j = 0; j < f->lds; j += 32)
            _mm512_storeu_si512(d + j, r < rows && j < wk ? cvt32(g + j, NULL, wk - j, scale)
                                                          : _mm512_setzero_si512());
    }
    lay_pairs_h(f->Sp, f->klp, f->dSb, (size_t)f->lds, rows, RB, wk);
}

AMX_FN void amx_backward_bh(float *dq, float *dkv, float *drk, float *du, float *dv,
                            float *d_dist_bias, float *d_score_bias, const float *dvec,
                            const float *prob, const float *q, const float *kv,
                            const attn_args *a, float *scratch, int b, int h)
{
    const int H = a->H, dh = a->dh, Lq = a->Lq, m = a->m, klen = m + Lq, hd = H * dh;
    abufs f;
    layout(&f, scratch, Lq, klen, dh, 1);
    const int dqp = f.dq, klp = f.klp, rlp = f.rlp;
    const float *qbh = q + (size_t)b * Lq * hd + (size_t)h * dh;
    const float *kbh = kv + (size_t)b * klen * 2 * hd + (size_t)h * dh;
    const float *dvbh = dvec + (size_t)b * Lq * hd + (size_t)h * dh;
    const float *P = prob + ((size_t)b * H + h) * Lq * klen;
    float *dkbh = dkv + (size_t)b * klen * 2 * hd + (size_t)h * dh;
    float *dqbh = dq + (size_t)b * Lq * hd + (size_t)h * dh;

    backward_lay(&f, qbh, kbh, a, h);
    amx_configure();
    for (int i0 = 0; i0 < Lq; i0 += RB) {
        int i1 = i0 + RB < Lq ? i0 + RB : Lq, rows = i1 - i0, w = m + i1;
        int Mt = pad(rows, 16), wn = pad(w, 16), wk = pad(w, 32);
        const float *Pb = P + (size_t)i0 * klen;
        const float *Pv = Pb;
        int ldv = klen;
        if (a->dropatt > 0.0f) {
            fused_drop_rows(f.D, klp, Pb, klen, a, b, h, i0, i1, w);
            Pv = f.D, ldv = klp;
        }
        /* dV^T += dO^T P' */
        lay_rows(f.dOb, dqp, dvbh + (size_t)i0 * hd, hd, rows, RB, dh, NULL, 1.0f);
        lay_trans(f.dOT, RB, dvbh + (size_t)i0 * hd, hd, rows, dh, dqp, NULL);
        lay_pairs(f.Pp, klp, Pv, (size_t)ldv, rows, RB, w, 1.0f);
        amx_mm(f.dVt, klp, f.dOT, RB, f.Pp, 2 * klp, dqp, wn, RB, 1);
        /* dP' = dO V^T, then dropatt's and the softmax's backward: dS */
        amx_mm(f.S, klp, f.dOb, dqp, f.Vk, 2 * klp, Mt, wn, dqp, 0);
        if (a->dropatt > 0.0f)
            for (int i = i0; i < i1; i++)
                dropout_backward(f.S + (size_t)(i - i0) * klp, f.S + (size_t)(i - i0) * klp,
                                 (size_t)(m + i + 1), a->dropatt, a->drop_key,
                                 fused_drop_base(a, b, h, i));
        fused_softmax_back_rows(f.S, klp, Pb, klen, m, i0, i1);
        backward_ds(&f, a->scale, rows, wk);
        /* dq (content) = scale dS k; dK^T += (q + u)^T scale dS */
        amx_mm(f.O, dqp, f.dSb, f.lds, f.Kr, 2 * dqp, Mt, dqp, wk, 0);
        amx_mm(f.dKt, klp, f.QuT + i0, f.Lqt, f.Sp, 2 * klp, dqp, wn, RB, 1);
        if (a->rk) { /* dq (position) = scale dBD rk[Lq-i1 ..]; dR^T += (q + v)^T scale dBD.
                      * dBD[r][p] = dS[r][p - (rows-1-r)] (0 where negative): dS's rows read at
                      * stride lds + 1 from rows-1 values before row 0 (zeros there and past
                      * each row's keys); an odd first position starts one earlier, dBD shifted
                      * a column right */
            int p0 = Lq - i1, odd = p0 & 1;
            const uint16_t *dbd = f.dSb - (rows - 1);
            amx_mm(f.O2, dqp, dbd - odd, f.lds + 1, f.Rr + (size_t)(p0 - odd) * dqp, 2 * dqp,
                   Mt, dqp, pad(w + odd, 32), 0);
            lay_pairs_h(f.Sp, rlp, dbd, (size_t)f.lds + 1, rows, RB, w);
            amx_mm(f.dRt + p0, rlp, f.QvT + i0, f.Lqt, f.Sp, 2 * rlp, dqp, wn, RB, 1);
        }
        for (int r = 0; r < rows; r++) {
            float *d = dqbh + (size_t)(i0 + r) * hd;
            const float *o = f.O + (size_t)r * dqp, *o2 = f.O2 + (size_t)r * dqp;
            for (int c = 0; c < dh; c++) {
                d[c] = a->no_q_content ? 0.0f : o[c];
                if (a->rk && !a->no_q_position)
                    d[c] += o2[c];
            }
            for (int c = 0; du && c < dh; c++)
                du[(size_t)h * dh + c] += o[c];
            for (int c = 0; dv && a->rk && c < dh; c++)
                dv[(size_t)h * dh + c] += o2[c];
        }
        fused_bias_grads(d_dist_bias, d_score_bias, f.S, klp, a, b, h, i0, i1);
    }
    amx_done();
    untranspose(dkbh, 2 * (size_t)hd, f.dKt, (size_t)klp, klen, dh, 0);
    untranspose(dkbh + hd, 2 * (size_t)hd, f.dVt, (size_t)klp, klen, dh, 0);
    if (drk && a->rk)
        untranspose(drk + (size_t)h * dh, (size_t)hd, f.dRt, (size_t)rlp, klen, dh, 1);
}

#else /* no AMX in this build: never called (amx_attn_available is 0) */
void amx_forward_bh(float *prob, float *vec, const float *q, const float *kv,
                    const attn_args *a, float *scratch, int b, int h)
{
    (void)prob, (void)vec, (void)q, (void)kv, (void)a, (void)scratch, (void)b, (void)h;
}

void amx_backward_bh(float *dq, float *dkv, float *drk, float *du, float *dv,
                     float *d_dist_bias, float *d_score_bias, const float *dvec,
                     const float *prob, const float *q, const float *kv, const attn_args *a,
                     float *scratch, int b, int h)
{
    (void)dq, (void)dkv, (void)drk, (void)du, (void)dv, (void)d_dist_bias, (void)d_score_bias,
        (void)dvec, (void)prob, (void)q, (void)kv, (void)a, (void)scratch, (void)b, (void)h;
}
#endif

int amx_attn_available(void)
{
    const cpu_features *f = cpu_detect();
    return HAVE_AMX && f->amx_bf16 && f->amx_tile && f->os_amx && f->avx512f &&
           f->avx512bw && f->avx512_bf16 && f->os_avx512;
}

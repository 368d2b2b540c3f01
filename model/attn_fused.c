/* attn_fused.c: see attn_fused.h. Per (b, h), scratch holds (klp = klen rounded up to
 * AT_KEYS, dhp = dh rounded up to AT_W, rb rows per block):
 *   T   [dh, klp]   keys transposed (forward) / values transposed (backward)
 *   R   forward: xl's positions transposed [dh, klp + rb + AT_KEYS]; backward: [klen, dhp]
 *   X   [klen, dhp] values (forward) / keys (backward), padded rows
 *   qu, qv [Lq, dhp] q + u, q + v (zero past dh)
 *   S   rb zeros, then [rb, klp]: the block's scores, then dP and dS in place
 *   D   [rb, klp + rb + AT_KEYS]  xl's position term of the block (forward), then the
 *                   dropped probabilities (dropatt)
 *   O, O2, dO [rb, dhp]
 *   dK, dV, dR [klen, dhp]  the backward's sums over the blocks
 * Padding columns are zero, so the tiles run over whole vectors. */
#include "attn_fused.h"

#include <string.h>

#include "../common/vmath.h"
#include "attn_tile.h"
#include "dropout.h"

typedef struct {
    float *T, *R, *X, *qu, *qv, *S, *D, *O, *O2, *dO, *dK, *dV, *dR;
    int klp, rlp, dhp, rb;
} fbufs;

int fused_row_block(const attn_args *a)
{
    int rb = a->row_block > 0 ? a->row_block : 32;
    return rb < FUSED_RB_MAX ? rb : FUSED_RB_MAX;
}

static fbufs layout(float *s, int Lq, int klen, int dh, int rb)
{
    fbufs f;
    f.klp = at_pad(klen, AT_KEYS), f.dhp = at_pad(dh, AT_W), f.rb = rb;
    f.rlp = f.klp + rb + AT_KEYS;
    size_t rsz = (size_t)dh * f.rlp > (size_t)klen * f.dhp ? (size_t)dh * f.rlp
                                                            : (size_t)klen * f.dhp;
    size_t kd = (size_t)klen * f.dhp, rd = (size_t)rb * f.dhp;
    f.T = s, s += (size_t)dh * f.klp;
    f.R = s, s += rsz;
    f.X = s, s += kd;
    f.qu = s, s += (size_t)Lq * f.dhp;
    f.qv = s, s += (size_t)Lq * f.dhp;
    f.S = s + rb, s += rb + (size_t)rb * f.klp;
    f.D = s, s += (size_t)rb * f.rlp;
    f.O = s, s += rd;
    f.O2 = s, s += rd;
    f.dO = s, s += rd;
    f.dK = s, s += kd;
    f.dV = s, s += kd;
    f.dR = s;
    return f;
}

double fused_scratch_floats(int Lq, int klen, int dh, int rb)
{
    double klp = at_pad(klen, AT_KEYS), dhp = at_pad(dh, AT_W), rlp = klp + rb + AT_KEYS;
    double rsz = dh * rlp > klen * dhp ? dh * rlp : klen * dhp;
    return dh * klp + rsz + 4.0 * klen * dhp + 2.0 * Lq * dhp + rb + rb * klp + rb * rlp +
           3.0 * rb * dhp;
}

#if defined(__AVX__)
#include <immintrin.h>
/* the 8 x 8 block at src (row stride ss) transposed into dst (row stride ld) */
static void t8x8(float *dst, size_t ld, const float *src, size_t ss)
{
    __m256 r[8], t[8];
    for (int k = 0; k < 8; k++)
        r[k] = _mm256_loadu_ps(src + (size_t)k * ss);
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xee);
        r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xee);
    }
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_ps(dst + (size_t)k * ld, _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
        _mm256_storeu_ps(dst + (size_t)(k + 4) * ld,
                         _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
    }
}
#endif

/* dst[c][j] = src[j][c] (src row stride ss) for j < n, zero for n <= j < ld: by 8 x 8 blocks
 * (AVX), the rest one at a time */
static void pack_t(float *dst, int ld, const float *src, size_t ss, int n, int dh)
{
    int j0 = 0, c0 = 0;
#if defined(__AVX__)
    for (c0 = 0; c0 + 8 <= dh; c0 += 8)
        for (j0 = 0; j0 + 8 <= n; j0 += 8)
            t8x8(dst + (size_t)c0 * ld + j0, (size_t)ld, src + (size_t)j0 * ss + c0, ss);
    for (int c = 0; c < c0; c++)
        for (int j = j0; j < n; j++)
            dst[(size_t)c * ld + j] = src[(size_t)j * ss + c];
    j0 = 0;
#endif
    for (int c = c0; c < dh; c++)
        for (int j = j0; j < n; j++)
            dst[(size_t)c * ld + j] = src[(size_t)j * ss + c];
    for (int c = 0; c < dh; c++)
        memset(dst + (size_t)c * ld + n, 0, (size_t)(ld - n) * sizeof *dst);
}

/* dst[j][0..dhp) = src[j][0..dh) then zeros, for j < n; src may be NULL (zeros); bias[dh]
 * (or NULL) is added to every row */
static void pack_rows(float *dst, int dhp, const float *src, size_t ss, int n, int dh,
                      const float *bias)
{
    for (int j = 0; j < n; j++) {
        float *d = dst + (size_t)j * dhp;
        for (int c = 0; c < dh; c++)
            d[c] = (src ? src[(size_t)j * ss + c] : 0.0f) + (bias ? bias[c] : 0.0f);
        memset(d + dh, 0, (size_t)(dhp - dh) * sizeof *d);
    }
}

size_t fused_kv_stride(const attn_args *a, int klen)
{
    return a->kv_bstride ? a->kv_bstride : (size_t)klen * 2 * a->H * a->dh;
}

/* global counter of element (i, 0) of (b, h)'s dropatt plane */
uint64_t fused_drop_base(const attn_args *a, int b, int h, int i)
{
    size_t klen = (size_t)a->m + a->Lq;
    return ((a->b_offset + (size_t)b) * a->H + h) * (size_t)a->Lq * klen + (size_t)i * klen;
}

/* the biases of rows i0..i1-1 onto the block's scores (row stride ld) */
void fused_add_biases(float *S, int ld, const attn_args *a, int b, int h, int i0, int i1)
{
    const int m = a->m, klen = m + a->Lq;
    if (a->dist_bias) {
        const float *tb = a->dist_bias + (size_t)h * (a->bias_ld > 0 ? a->bias_ld : klen);
        for (int i = i0; i < i1; i++) {
            float *srow = S + (size_t)(i - i0) * ld;
            for (int j = 0; j <= m + i; j++)
                srow[j] += tb[m + i - j];
        }
    }
    if (a->score_bias)
        a->score_bias->add(a->score_bias, S, ld, b, h, i0, i1, m);
}

/* the masked row softmax of attention.c, rows i0..i1-1, zero from m+i+1 to `to`, and
 * below the row's first key: max(0, m+i+1-same_len) with same_len (attention.h), else 0 */
void fused_softmax_rows(float *S, int ld, int m, int same_len, int i0, int i1, int to)
{
    for (int i = i0; i < i1; i++) {
        float *srow = S + (size_t)(i - i0) * ld;
        int nv = m + i + 1, lo = same_len > 0 && nv > same_len ? nv - same_len : 0;
        double sum = vm_exp_sum(srow + lo, nv - lo, vm_max(srow + lo, nv - lo));
        float inv = (float)(1.0 / sum);
        memset(srow, 0, (size_t)lo * sizeof *srow);
        for (int j = lo; j < nv; j++)
            srow[j] *= inv;
        memset(srow + nv, 0, (size_t)(to - nv) * sizeof *srow);
    }
}

/* the dropped probabilities of rows i0..i1-1 (P row stride ldp) into D, zero up to w */
void fused_drop_rows(float *D, int ldd, const float *P, int ldp, const attn_args *a, int b,
                      int h, int i0, int i1, int w)
{
    for (int i = i0; i < i1; i++) {
        float *d = D + (size_t)(i - i0) * ldd;
        int nv = a->m + i + 1;
        dropout_forward(d, P + (size_t)(i - i0) * ldp, (size_t)nv, a->dropatt, a->drop_key,
                        fused_drop_base(a, b, h, i));
        memset(d + nv, 0, (size_t)(w - nv) * sizeof *d);
    }
}

/* xl's position term of rows i0..i1-1 onto their scores: BD[r][p'] = scale (qv_r .
 * rk[Lq-i1+p']) over the band of rows + w - 1 positions the block reads (one product with
 * shared loads, into D), then S[r][j] += BD[r][j + rows-1-r]: row i reads rk[Lq-1-i+j] */
static void position_rows(float *S, int lds, const fbufs *f, const attn_args *a, int i0, int i1)
{
    const int rows = i1 - i0, w = a->m + i1;
    at_scores(f->D, f->rlp, f->qv + (size_t)i0 * f->dhp, f->dhp, f->R + (a->Lq - i1), f->rlp,
              rows, at_pad(w + rows - 1, AT_KEYS), a->dh, a->scale);
    for (int r = 0; r < rows; r++) {
        float *srow = S + (size_t)r * lds;
        const float *bd = f->D + (size_t)r * f->rlp + (rows - 1 - r);
        for (int j = 0; j < w; j++)
            srow[j] += bd[j];
    }
}

void fused_forward_bh(float *prob, float *vec, const float *q, const float *kv,
                      const attn_args *a, float *scratch, int b, int h)
{
    const int H = a->H, dh = a->dh, Lq = a->Lq, m = a->m, klen = m + Lq, hd = H * dh;
    const int rb = fused_row_block(a);
    fbufs f = layout(scratch, Lq, klen, dh, rb);
    const float *qbh = q + (size_t)b * Lq * hd + (size_t)h * dh;
    const float *kbh = kv + (size_t)b * fused_kv_stride(a, klen) + (size_t)h * dh;
    float *P = prob ? prob + ((size_t)b * H + h) * Lq * klen : NULL;
    float *vout = vec + (size_t)b * Lq * hd + (size_t)h * dh;

    pack_t(f.T, f.klp, kbh, 2 * (size_t)hd, klen, dh);
    pack_rows(f.X, f.dhp, kbh + hd, 2 * (size_t)hd, klen, dh, NULL);
    pack_rows(f.qu, f.dhp, a->no_q_content ? NULL : qbh, hd, Lq, dh,
              a->u ? a->u + (size_t)h * dh : NULL);
    if (a->rk) {
        pack_t(f.R, f.rlp, a->rk + (size_t)h * dh, hd, klen, dh);
        pack_rows(f.qv, f.dhp, a->no_q_position ? NULL : qbh, hd, Lq, dh,
                  a->v ? a->v + (size_t)h * dh : NULL);
    }
    for (int i0 = 0; i0 < Lq; i0 += rb) {
        int i1 = i0 + rb < Lq ? i0 + rb : Lq, rows = i1 - i0, w = m + i1;
        int wn = at_pad(w, AT_KEYS);
        at_scores(f.S, f.klp, f.qu + (size_t)i0 * f.dhp, f.dhp, f.T, f.klp, rows, wn, dh,
                  a->scale);
        if (a->rk)
            position_rows(f.S, f.klp, &f, a, i0, i1);
        fused_add_biases(f.S, f.klp, a, b, h, i0, i1);
        fused_softmax_rows(f.S, f.klp, m, a->same_len, i0, i1, wn);
        if (P)
            for (int i = i0; i < i1; i++) {
                float *prow = P + (size_t)i * klen;
                memcpy(prow, f.S + (size_t)(i - i0) * f.klp, (size_t)w * sizeof *prow);
                memset(prow + w, 0, (size_t)(klen - w) * sizeof *prow);
            }
        const float *Pv = f.S;
        if (a->dropatt > 0.0f && P) {
            fused_drop_rows(f.D, f.klp, f.S, f.klp, a, b, h, i0, i1, w);
            Pv = f.D;
        }
        at_rows(f.O, f.dhp, Pv, f.klp, f.X, f.dhp, rows, w, f.dhp, 1.0f, 0);
        for (int r = 0; r < rows; r++)
            memcpy(vout + (size_t)(i0 + r) * hd, f.O + (size_t)r * f.dhp, (size_t)dh * sizeof(float));
    }
}

/* softmax's backward on the block: dS = P (dP - sum_j P dP), zero past the visible keys up
 * to ld (the position products read the zeros) */
void fused_softmax_back_rows(float *G, int ld, const float *P, int ldp, int m, int i0, int i1)
{
    for (int i = i0; i < i1; i++) {
        float *g = G + (size_t)(i - i0) * ld;
        const float *p = P + (size_t)(i - i0) * ldp;
        int nv = m + i + 1;
        float fd = (float)vm_dot(p, g, nv);
        for (int j = 0; j < nv; j++)
            g[j] = p[j] * (g[j] - fd);
        memset(g + nv, 0, (size_t)(ld - nv) * sizeof *g);
    }
}

void fused_bias_grads(float *d_dist_bias, float *d_score_bias, const float *dS, int ld,
                      const attn_args *a, int b, int h, int i0, int i1)
{
    const int m = a->m, klen = m + a->Lq;
    if (d_score_bias)
        a->score_bias->grad(a->score_bias, dS, ld, b, h, i1 - i0, m + i0, d_score_bias);
    if (d_dist_bias) {
        float *tb = d_dist_bias + (size_t)h * klen;
        for (int i = i0; i < i1; i++) {
            const float *g = dS + (size_t)(i - i0) * ld;
            for (int j = 0; j <= m + i; j++)
                tb[m + i - j] += g[j];
        }
    }
}

/* the gradients of rows i0..i1 from their dS (f->S): dq's rows (content, then xl's
 * position term), du, dv, and the sums dK, dR; the biases' gradients */
static void block_grads(float *dqbh, float *du, float *dv, float *d_dist_bias,
                        float *d_score_bias, const fbufs *f, const attn_args *a, int b, int h,
                        int i0, int i1)
{
    const int dh = a->dh, Lq = a->Lq, m = a->m, hd = a->H * dh;
    const int rows = i1 - i0, w = m + i1, dhp = f->dhp;
    at_rows(f->O, dhp, f->S, f->klp, f->X, dhp, rows, w, dhp, a->scale, 0);
    at_cols(f->dK, dhp, f->S, f->klp, f->qu + (size_t)i0 * dhp, dhp, rows, w, dhp, a->scale);
    if (a->rk) { /* dBD[r][p] = dS[r][p - (rows-1-r)]: dS at row stride klp + 1 */
        const float *dbd = f->S - (rows - 1);
        const float *rkb = f->R + (size_t)(Lq - i1) * dhp;
        at_rows(f->O2, dhp, dbd, f->klp + 1, rkb, dhp, rows, w, dhp, a->scale, 0);
        at_cols(f->dR + (size_t)(Lq - i1) * dhp, dhp, dbd, f->klp + 1,
                f->qv + (size_t)i0 * dhp, dhp, rows, w, dhp, a->scale);
    }
    for (int r = 0; r < rows; r++) {
        float *d = dqbh + (size_t)(i0 + r) * hd;
        const float *o = f->O + (size_t)r * dhp, *o2 = f->O2 + (size_t)r * dhp;
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
    fused_bias_grads(d_dist_bias, d_score_bias, f->S, f->klp, a, b, h, i0, i1);
}

/* the per-(b, h) packing of the backward; zeroes the sums */
static void backward_pack(const fbufs *f, const float *qbh, const float *kbh,
                          const attn_args *a, int h)
{
    const int dh = a->dh, Lq = a->Lq, klen = a->m + Lq, hd = a->H * dh;
    pack_t(f->T, f->klp, kbh + hd, 2 * (size_t)hd, klen, dh);
    pack_rows(f->X, f->dhp, kbh, 2 * (size_t)hd, klen, dh, NULL);
    pack_rows(f->qu, f->dhp, a->no_q_content ? NULL : qbh, hd, Lq, dh,
              a->u ? a->u + (size_t)h * dh : NULL);
    memset(f->S - f->rb, 0, (size_t)f->rb * sizeof(float));
    memset(f->dK, 0, (size_t)2 * klen * f->dhp * sizeof(float));
    if (a->rk) {
        pack_rows(f->R, f->dhp, a->rk + (size_t)h * dh, hd, klen, dh, NULL);
        pack_rows(f->qv, f->dhp, a->no_q_position ? NULL : qbh, hd, Lq, dh,
                  a->v ? a->v + (size_t)h * dh : NULL);
        memset(f->dR, 0, (size_t)klen * f->dhp * sizeof(float));
    }
}

void fused_backward_bh(float *dq, float *dkv, float *drk, float *du, float *dv,
                       float *d_dist_bias, float *d_score_bias, const float *dvec,
                       const float *prob, const float *q, const float *kv, const attn_args *a,
                       float *scratch, int b, int h)
{
    const int H = a->H, dh = a->dh, Lq = a->Lq, m = a->m, klen = m + Lq, hd = H * dh;
    const int rb = fused_row_block(a);
    fbufs f = layout(scratch, Lq, klen, dh, rb);
    const float *qbh = q + (size_t)b * Lq * hd + (size_t)h * dh;
    const float *kbh = kv + (size_t)b * klen * 2 * hd + (size_t)h * dh;
    const float *dvbh = dvec + (size_t)b * Lq * hd + (size_t)h * dh;
    const float *P = prob + ((size_t)b * H + h) * Lq * klen;
    float *dkbh = dkv + (size_t)b * klen * 2 * hd + (size_t)h * dh;

    backward_pack(&f, qbh, kbh, a, h);
    for (int i0 = 0; i0 < Lq; i0 += rb) {
        int i1 = i0 + rb < Lq ? i0 + rb : Lq, rows = i1 - i0, w = m + i1;
        const float *Pb = P + (size_t)i0 * klen;
        const float *Pv = Pb;
        int ldv = klen;
        if (a->dropatt > 0.0f) {
            fused_drop_rows(f.D, f.klp, Pb, klen, a, b, h, i0, i1, w);
            Pv = f.D, ldv = f.klp;
        }
        pack_rows(f.dO, f.dhp, dvbh + (size_t)i0 * hd, hd, rows, dh, NULL);
        at_cols(f.dV, f.dhp, Pv, ldv, f.dO, f.dhp, rows, w, f.dhp, 1.0f); /* dV += P'^T dO */
        at_scores(f.S, f.klp, f.dO, f.dhp, f.T, f.klp, rows, at_pad(w, AT_KEYS), dh,
                  1.0f); /* dP' = dO V^T */
        if (a->dropatt > 0.0f)
            for (int i = i0; i < i1; i++)
                dropout_backward(f.S + (size_t)(i - i0) * f.klp, f.S + (size_t)(i - i0) * f.klp,
                                 (size_t)(m + i + 1), a->dropatt, a->drop_key,
                                 fused_drop_base(a, b, h, i));
        fused_softmax_back_rows(f.S, f.klp, Pb, klen, m, i0, i1);
        block_grads(dq + (size_t)b * Lq * hd + (size_t)h * dh, du, dv, d_dist_bias,
                    d_score_bias, &f, a, b, h, i0, i1);
    }
    for (int j = 0; j < klen; j++) {
        memcpy(dkbh + (size_t)j * 2 * hd, f.dK + (size_t)j * f.dhp, (size_t)dh * sizeof(float));
        memcpy(dkbh + (size_t)j * 2 * hd + hd, f.dV + (size_t)j * f.dhp,
               (size_t)dh * sizeof(float));
    }
    for (int p = 0; drk && a->rk && p < klen; p++)
        for (int c = 0; c < dh; c++)
            drk[(size_t)p * hd + (size_t)h * dh + c] += f.dR[(size_t)p * f.dhp + c];
}

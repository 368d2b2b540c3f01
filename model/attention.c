/* attention.c: see attention.h for shapes and the score formula.
 *
 * Per (b, h) the forward is: S = scale*(q+u) k^T [+ shifted scale*(q+v) rk^T] [+ bias],
 * masked row softmax (row i sees keys 0..m+i), optional dropatt, vec = P v.
 * The backward is the usual softmax-attention chain, with the xl position term's gradient
 * scattered back onto the diagonals it was read from (dBDraw[i][j+Lq-1-i] = dS[i][j]). */
#include "attention.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/par.h"
#include "../common/rng.h"
#include "../common/vmath.h"
#include "attn_amx.h"
#include "attn_fused.h"
#include "dropout.h"
#include "gemm.h"

/* Per thread: qu, qv, dqa [Lq, dh]; Lq zeros (the backward's, see position_backward); two
 * [Lq, klen] planes (BDraw / dP, P'); and
 * the backward's partial sums of the accumulated gradients: drk [klen, H*dh], du and dv
 * [H, dh], d_dist_bias [H, klen]. */
/* Threads for a call: all of them unless the work is too small to pay for a fork/join
 * (one-token decoding steps are a few microseconds of work). */
static int attn_threads(const attn_args *a)
{
    int nt = par_threads();
    if (nt > a->threads)
        nt = a->threads > 0 ? a->threads : 1;
    double work = (double)a->B * a->H * a->Lq * (a->m + a->Lq) * a->dh;
    return work < (1 << 18) ? 1 : nt;
}

/* the part every (b, h) reuses: qu, qv, dqa, the zeros and the two planes */
static size_t per_pair(int Lq, int klen, int dh)
{
    size_t blas = (size_t)3 * Lq * dh + (size_t)Lq + (size_t)2 * Lq * klen;
    size_t fused = (size_t)fused_scratch_floats(Lq, klen, dh, FUSED_RB_MAX);
    size_t amx = (size_t)amx_scratch_floats(Lq, klen, dh);
    fused = fused > amx ? fused : amx;
    return blas > fused ? blas : fused;
}

static size_t per_thread(int Lq, int klen, int dh, int H)
{
    return per_pair(Lq, klen, dh) + (size_t)klen * H * dh + (size_t)2 * H * dh +
           (size_t)H * klen;
}

double attn_scratch_floats(int Lq, int klen, int dh, int H, int threads)
{
    /* per_thread's sum in doubles: the plan counts configs far too large too */
    double pair = 3.0 * Lq * dh + Lq + 2.0 * Lq * klen;
    double fused = fused_scratch_floats(Lq, klen, dh, FUSED_RB_MAX);
    double amx = amx_scratch_floats(Lq, klen, dh);
    pair = pair > fused ? pair : fused;
    pair = pair > amx ? pair : amx;
    return (pair + (double)klen * H * dh + 2.0 * H * dh + (double)H * klen) *
           (threads > 0 ? threads : 1);
}

/* x[Lq, dh] (row stride ld; NULL: zeros) + bias[dh] (or + 0) -> out [Lq, dh] contiguous. */
static void add_row_bias(float *out, const float *x, int ld, const float *bias, int Lq, int dh)
{
    for (int i = 0; i < Lq; i++)
        for (int c = 0; c < dh; c++)
            out[(size_t)i * dh + c] = (x ? x[(size_t)i * ld + c] : 0.0f) + (bias ? bias[c] : 0.0f);
}

/* Applies dropatt to one (b, h) plane of probabilities: out = P * mask / (1-p). */
static void drop_plane(float *out, const float *P, const attn_args *a, int b, int h, int klen)
{
    size_t n = (size_t)a->Lq * klen;
    uint64_t base = ((a->b_offset + (size_t)b) * a->H + h) * n;
    dropout_forward(out, P, n, a->dropatt, a->drop_key, base);
}

/* Rows are processed in blocks of `rb`: block [i0, i1) sees keys 0..m+i1-1 only, so the
 * GEMMs skip most of the masked triangle (for Lq = klen/2 and 4 blocks, 19% of the work
 * instead of 25% is wasted; one block reproduces the full-rectangle computation). Each block
 * packs the head's keys and values again, so with a memory of at least twice the segment,
 * where the triangle is a small part of every row, one block is faster (S eval on one
 * thread, CPU time: 3% at mem_len 512 and 1024; even at 256; 2.5% slower at 128). */
static int row_block(const attn_args *a)
{
    if (a->row_block > 0)
        return a->row_block;
    return a->m >= 2 * a->Lq ? a->Lq : 64;
}

static size_t kv_stride(const attn_args *a, int klen)
{
    return a->kv_bstride ? a->kv_bstride : (size_t)klen * 2 * a->H * a->dh;
}

static int bias_ld(const attn_args *a, int klen) { return a->bias_ld > 0 ? a->bias_ld : klen; }

/* The first key row i sees: 0, or with same_len the last same_len keys up to m+i. */
static int first_key(const attn_args *a, int i)
{
    int lo = a->m + i + 1 - a->same_len;
    return a->same_len > 0 && lo > 0 ? lo : 0;
}

static void forward_bh(float *prob, float *vec, const float *q, const float *kv,
                       const attn_args *a, float *scratch, int b, int h)
{
    const int H = a->H, dh = a->dh, Lq = a->Lq, m = a->m, klen = m + Lq;
    const int hd = H * dh, rb = row_block(a);
    float *qu = scratch, *qv = qu + (size_t)Lq * dh;
    float *plane = qv + 2 * (size_t)Lq * dh; /* skip dqa (backward only) */
    float *plane2 = plane + (size_t)Lq * klen;
    const float *qbh = q + (size_t)b * Lq * hd + (size_t)h * dh;
    const float *kbh = kv + (size_t)b * kv_stride(a, klen) + (size_t)h * dh;
    const float *vbh = kbh + hd;
    /* inference keeps no probabilities: one plane of scratch per (b, h) */
    float *P = prob ? prob + ((size_t)b * H + h) * Lq * klen : plane2;
    float *vout = vec + (size_t)b * Lq * hd + (size_t)h * dh;

    add_row_bias(qu, a->no_q_content ? NULL : qbh, hd, a->u ? a->u + (size_t)h * dh : NULL, Lq,
                 dh);
    if (a->rk)
        add_row_bias(qv, a->no_q_position ? NULL : qbh, hd, a->v ? a->v + (size_t)h * dh : NULL,
                     Lq, dh);
    for (int i0 = 0; i0 < Lq; i0 += rb) {
        int i1 = i0 + rb < Lq ? i0 + rb : Lq, rows = i1 - i0, w = m + i1;
        /* content (+ global content bias) */
        gemm(P + (size_t)i0 * klen, qu + (size_t)i0 * dh, kbh, rows, w, dh, 0, 1, a->scale,
             0.0f, dh, 2 * hd, klen);
        if (a->rk) { /* position terms: BDraw columns p = Lq-i1 .., read along diagonals */
            gemm(plane + (size_t)i0 * klen, qv + (size_t)i0 * dh,
                 a->rk + (size_t)(Lq - i1) * hd + (size_t)h * dh, rows, w, dh, 0, 1, a->scale,
                 0.0f, dh, hd, klen);
            for (int i = i0; i < i1; i++) {
                const float *bd = plane + (size_t)i * klen + (i1 - 1 - i);
                float *srow = P + (size_t)i * klen;
                for (int j = 0; j <= m + i; j++)
                    srow[j] += bd[j];
            }
        }
    }
    if (a->dist_bias) {
        const float *tb = a->dist_bias + (size_t)h * bias_ld(a, klen);
        for (int i = 0; i < Lq; i++) {
            float *srow = P + (size_t)i * klen;
            for (int j = 0; j <= m + i; j++)
                srow[j] += tb[m + i - j];
        }
    }
    if (a->score_bias)
        a->score_bias->add(a->score_bias, P, klen, b, h, 0, Lq, m);

    /* causal softmax: row i sees keys lo..m+i (lo = first_key: 0 unless same_len); masked
     * entries become exact zeros */
    for (int i = 0; i < Lq; i++) {
        float *srow = P + (size_t)i * klen;
        int nv = m + i + 1, lo = first_key(a, i);
        double sum = vm_exp_sum(srow + lo, nv - lo, vm_max(srow + lo, nv - lo));
        float inv = (float)(1.0 / sum);
        for (int j = 0; j < lo; j++)
            srow[j] = 0.0f;
        for (int j = lo; j < nv; j++)
            srow[j] *= inv;
        for (int j = nv; j < klen; j++)
            srow[j] = 0.0f;
    }

    const float *Pv = P;
    if (a->dropatt > 0.0f && prob) {
        drop_plane(plane2, P, a, b, h, klen);
        Pv = plane2;
    }
    for (int i0 = 0; i0 < Lq; i0 += rb) {
        int i1 = i0 + rb < Lq ? i0 + rb : Lq, w = m + i1;
        gemm(vout + (size_t)i0 * hd, Pv + (size_t)i0 * klen, vbh, i1 - i0, dh, w, 0, 0, 1.0f,
             0.0f, klen, 2 * hd, hd);
    }
}

void attn_forward(float *prob, float *vec, const float *q, const float *kv,
                  const attn_args *a, float *scratch)
{
    const int pairs = a->B * a->H;
    const size_t per = per_thread(a->Lq, a->m + a->Lq, a->dh, a->H);
    int nt = attn_threads(a);
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int p = 0; p < pairs; p++) {
        float *scr = scratch + per * (size_t)par_thread_id();
        if (a->amx)
            amx_forward_bh(prob, vec, q, kv, a, scr, p / a->H, p % a->H);
        else if (a->fused)
            fused_forward_bh(prob, vec, q, kv, a, scr, p / a->H, p % a->H);
        else
            forward_bh(prob, vec, q, kv, a, scr, p / a->H, p % a->H);
    }
}

/* xl's position terms of one (b, h): dq += scale dBD rk, drk += scale dBD^T (q+v), dv +=
 * colsum, where a block's dBDraw (columns p = Lq-i1 ..) holds dS along its diagonals:
 * dBDraw[i][p] = dS[i][p - (i1-1-i)], zero where that column is negative. That matrix is dS
 * itself read with a row stride of klen + 1 from i1-1 floats before the block's first row:
 * a negative column lands on the end of the row above, masked (zero in dS) because
 * klen - (i1-1-i) >= m + i, and row 0's on the Lq zeros kept before dS. So the products read
 * the very numbers a shifted copy would hold, without the copy. dqa, qv: scratch [Lq, dh]. */
static void position_backward(float *dqbh, float *drk, float *dv, float *dqa, float *qv,
                              const float *dS, const float *qbh, const attn_args *a, int h)
{
    const int H = a->H, dh = a->dh, Lq = a->Lq, m = a->m, klen = m + Lq;
    const int hd = H * dh, rb = row_block(a);
    add_row_bias(qv, a->no_q_position ? NULL : qbh, hd, a->v ? a->v + (size_t)h * dh : NULL, Lq,
                 dh);
    for (int i0 = 0; i0 < Lq; i0 += rb) {
        int i1 = i0 + rb < Lq ? i0 + rb : Lq, rows = i1 - i0, w = m + i1;
        const float *dbd = dS + (size_t)i0 * (klen + 1) - (i1 - 1);
        const float *rkb = a->rk + (size_t)(Lq - i1) * hd + (size_t)h * dh;
        gemm(dqa + (size_t)i0 * dh, dbd, rkb, rows, dh, w, 0, 0, a->scale, 0.0f, klen + 1, hd,
             dh);
        gemm(drk + (size_t)(Lq - i1) * hd + (size_t)h * dh, dbd, qv + (size_t)i0 * dh, w, dh,
             rows, 1, 0, a->scale, 1.0f, klen + 1, dh, hd);
    }
    for (int i = 0; i < Lq && !a->no_q_position; i++)
        for (int c = 0; c < dh; c++)
            dqbh[(size_t)i * hd + c] += dqa[(size_t)i * dh + c];
    if (dv)
        for (int i = 0; i < Lq; i++)
            for (int c = 0; c < dh; c++)
                dv[(size_t)h * dh + c] += dqa[(size_t)i * dh + c];
}

static void backward_bh(float *dq, float *dkv, float *drk, float *du, float *dv,
                        float *d_dist_bias, float *d_score_bias, const float *dvec,
                        const float *prob, const float *q, const float *kv, const attn_args *a,
                        float *scratch, int b, int h)
{
    const int H = a->H, dh = a->dh, Lq = a->Lq, m = a->m, klen = m + Lq;
    const int hd = H * dh, rb = row_block(a);
    float *qu = scratch, *qv = qu + (size_t)Lq * dh, *dqa = qv + (size_t)Lq * dh;
    float *dS = dqa + (size_t)Lq * dh + Lq;    /* dP, then dS in place, after Lq zeros */
    float *plane2 = dS + (size_t)Lq * klen;     /* P' (dropatt) */
    memset(dS - Lq, 0, (size_t)Lq * sizeof *dS); /* the forward uses this scratch too */
    const float *qbh = q + (size_t)b * Lq * hd + (size_t)h * dh;
    const float *kbh = kv + (size_t)b * klen * 2 * hd + (size_t)h * dh;
    const float *vbh = kbh + hd;
    const float *dvbh = dvec + (size_t)b * Lq * hd + (size_t)h * dh;
    const float *P = prob + ((size_t)b * H + h) * Lq * klen;
    float *dqbh = dq + (size_t)b * Lq * hd + (size_t)h * dh;
    float *dkbh = dkv + (size_t)b * klen * 2 * hd + (size_t)h * dh;
    float *dvalbh = dkbh + hd;

    /* the blocks add into dk and dv; the first block writes their rows [0, w0), the rest
     * start at zero */
    const int w0 = m + (rb < Lq ? rb : Lq);
    for (int j = w0; j < klen; j++) {
        memset(dkbh + (size_t)j * 2 * hd, 0, (size_t)dh * sizeof(float));
        memset(dvalbh + (size_t)j * 2 * hd, 0, (size_t)dh * sizeof(float));
    }
    /* vec = P' v: dv = P'^T dvec, dP' = dvec v^T */
    const float *Pv = P;
    if (a->dropatt > 0.0f) {
        drop_plane(plane2, P, a, b, h, klen);
        Pv = plane2;
    }
    for (int i0 = 0; i0 < Lq; i0 += rb) {
        int i1 = i0 + rb < Lq ? i0 + rb : Lq, rows = i1 - i0, w = m + i1;
        gemm(dvalbh, Pv + (size_t)i0 * klen, dvbh + (size_t)i0 * hd, w, dh, rows, 1, 0, 1.0f,
             i0 ? 1.0f : 0.0f, klen, hd, 2 * hd);
        gemm(dS + (size_t)i0 * klen, dvbh + (size_t)i0 * hd, vbh, rows, w, dh, 0, 1, 1.0f, 0.0f,
             hd, 2 * hd, klen);
    }
    if (a->dropatt > 0.0f) { /* masked entries of dS are not read below */
        size_t n = (size_t)Lq * klen;
        dropout_backward(dS, dS, n, a->dropatt, a->drop_key,
                         ((a->b_offset + (size_t)b) * H + h) * n);
    }

    /* softmax: dS = P * (dP - sum_j P dP), zero on masked entries */
    for (int i = 0; i < Lq; i++) {
        float *g = dS + (size_t)i * klen;
        const float *p = P + (size_t)i * klen;
        int nv = m + i + 1;
        float fd = (float)vm_dot(p, g, nv);
        for (int j = 0; j < nv; j++)
            g[j] = p[j] * (g[j] - fd);
        for (int j = nv; j < klen; j++)
            g[j] = 0.0f;
    }

    /* content: dq = scale dS k, dk = scale dS^T (q+u), du += colsum(dq part) */
    add_row_bias(qu, a->no_q_content ? NULL : qbh, hd, a->u ? a->u + (size_t)h * dh : NULL, Lq,
                 dh);
    for (int i0 = 0; i0 < Lq; i0 += rb) {
        int i1 = i0 + rb < Lq ? i0 + rb : Lq, rows = i1 - i0, w = m + i1;
        gemm(dqa + (size_t)i0 * dh, dS + (size_t)i0 * klen, kbh, rows, dh, w, 0, 0, a->scale,
             0.0f, klen, 2 * hd, dh);
        gemm(dkbh, dS + (size_t)i0 * klen, qu + (size_t)i0 * dh, w, dh, rows, 1, 0, a->scale,
             i0 ? 1.0f : 0.0f, klen, dh, 2 * hd);
    }
    for (int i = 0; i < Lq; i++)
        for (int c = 0; c < dh; c++)
            dqbh[(size_t)i * hd + c] = a->no_q_content ? 0.0f : dqa[(size_t)i * dh + c];
    if (du)
        for (int i = 0; i < Lq; i++)
            for (int c = 0; c < dh; c++)
                du[(size_t)h * dh + c] += dqa[(size_t)i * dh + c];

    if (a->rk)
        position_backward(dqbh, drk, dv, dqa, qv, dS, qbh, a, h);
    if (d_score_bias)
        a->score_bias->grad(a->score_bias, dS, klen, b, h, Lq, m, d_score_bias);
    if (d_dist_bias) {
        float *tb = d_dist_bias + (size_t)h * klen;
        for (int i = 0; i < Lq; i++) {
            const float *g = dS + (size_t)i * klen;
            for (int j = 0; j <= m + i; j++)
                tb[m + i - j] += g[j];
        }
    }
}

void attn_backward(float *dq, float *dkv, float *drk, float *du, float *dv, float *d_dist_bias,
                   const float *dvec, const float *prob, const float *q, const float *kv,
                   const attn_args *a, float *scratch)
{
    const int H = a->H, dh = a->dh, Lq = a->Lq, klen = a->m + Lq, hd = H * dh;
    const int pairs = a->B * H;
    const size_t per = per_thread(Lq, klen, dh, H);
    const size_t work = per_pair(Lq, klen, dh);
    const size_t n_rk = (size_t)klen * hd, n_uv = (size_t)H * dh, n_db = (size_t)H * klen;
    int nt = attn_threads(a);
    const attn_bias_fn *sb = a->score_bias;
    assert(a->same_len == 0); /* an evaluation setting: training has none */
    /* the accumulated gradients go to per-thread partial sums, added in thread order after
     * the loop: the result depends on the thread count, never on scheduling */
#pragma omp parallel num_threads(nt)
    {
        float *scr = scratch + per * (size_t)par_thread_id();
        float *p_rk = scr + work, *p_u = p_rk + n_rk, *p_v = p_u + n_uv, *p_db = p_v + n_uv;
        float *p_sb = sb ? sb->partials + sb->grad_floats * (size_t)par_thread_id() : NULL;
        memset(p_rk, 0, (n_rk + 2 * n_uv + n_db) * sizeof(float));
        if (p_sb)
            memset(p_sb, 0, sb->grad_floats * sizeof(float));
#pragma omp for schedule(static)
        for (int p = 0; p < pairs; p++)
            (a->amx ? amx_backward_bh : a->fused ? fused_backward_bh : backward_bh)(
                dq, dkv, drk ? p_rk : NULL, du ? p_u : NULL, dv ? p_v : NULL,
                d_dist_bias ? p_db : NULL, p_sb, dvec, prob, q, kv, a, scr, p / H, p % H);
    }
    for (int t = 0; sb && t < nt; t++) {
        const float *p_sb = sb->partials + sb->grad_floats * (size_t)t;
        for (size_t i = 0; i < sb->grad_floats; i++)
            sb->d_out[i] += p_sb[i];
    }
    for (int t = 0; t < nt; t++) {
        const float *p_rk = scratch + per * (size_t)t + work, *p_u = p_rk + n_rk;
        const float *p_v = p_u + n_uv, *p_db = p_v + n_uv;
        if (drk && a->rk)
            for (size_t i = 0; i < n_rk; i++)
                drk[i] += p_rk[i];
        if (du)
            for (size_t i = 0; i < n_uv; i++)
                du[i] += p_u[i];
        if (dv && a->rk)
            for (size_t i = 0; i < n_uv; i++)
                dv[i] += p_v[i];
        if (d_dist_bias)
            for (size_t i = 0; i < n_db; i++)
                d_dist_bias[i] += p_db[i];
    }
}

void attn_term_stats(double acc[4][2], double *count, const float *q, const float *kv,
                     const attn_args *a)
{
    const int B = a->B, H = a->H, dh = a->dh, Lq = a->Lq, m = a->m, klen = m + Lq;
    const int hd = H * dh;
    float *sbrow = a->score_bias ? calloc((size_t)klen, sizeof *sbrow) : NULL;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < Lq; i++) {
                const float *qi = q + ((size_t)b * Lq + i) * hd + (size_t)h * dh;
                if (sbrow) { /* this row's text-dependent bias: add() onto zeros */
                    memset(sbrow, 0, (size_t)klen * sizeof *sbrow);
                    a->score_bias->add(a->score_bias, sbrow, klen, b, h, i, i + 1, m);
                }
                for (int j = first_key(a, i); j <= m + i; j++) {
                    const float *kj = kv + (size_t)b * kv_stride(a, klen) + (size_t)j * 2 * hd + (size_t)h * dh;
                    double t[4] = {0, 0, 0, 0};
                    for (int c = 0; c < dh && !a->no_q_content; c++)
                        t[0] += (double)qi[c] * kj[c];
                    if (a->u)
                        for (int c = 0; c < dh; c++)
                            t[2] += (double)a->u[(size_t)h * dh + c] * kj[c];
                    if (a->rk) {
                        const float *r = a->rk + (size_t)(Lq - 1 - i + j) * hd + (size_t)h * dh;
                        for (int c = 0; c < dh; c++) {
                            t[1] += a->no_q_position ? 0.0 : (double)qi[c] * r[c];
                            if (a->v)
                                t[3] += (double)a->v[(size_t)h * dh + c] * r[c];
                        }
                    }
                    for (int k = 0; k < 4; k++)
                        t[k] *= a->scale;
                    if (a->dist_bias)
                        t[1] = a->dist_bias[(size_t)h * bias_ld(a, klen) + (m + i - j)];
                    if (sbrow)
                        t[1] = sbrow[j];
                    for (int k = 0; k < 4; k++) {
                        acc[k][0] += t[k];
                        acc[k][1] += t[k] * t[k];
                    }
                    *count += 1;
                }
            }
    free(sbrow);
}

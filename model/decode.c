/* decode.c: see decode.h. Batch 1; the layer math mirrors model.c's layer_forward for a
 * segment of one token (Lq = 1, i = 0, so the xl shift p = Lq-1-i+j is just j). */
#include "decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/vmath.h"
#include "gemm.h"
#include "layernorm.h"
#include "posenc.h"

static size_t sz_layer_kv(const decode_state *s) { return (size_t)s->M * s->H * s->dh; }

int decode_init(decode_state *s, const model *mdl, int M, txl_err *e)
{
    const model_config *c = &mdl->cfg;
    memset(s, 0, sizeof *s);
    s->n_layer = c->n_layer;
    s->M = M;
    s->d = c->d_model;
    s->H = c->n_head;
    s->dh = c->d_head;
    int N = c->n_layer, d = c->d_model, hd = c->n_head * c->d_head, H = c->n_head;
    int K = M + 1, hid = c->mlp_hidden, K2 = 2 * c->mlp_num_freqs;
    size_t n_kv = 2 * (size_t)N * sz_layer_kv(s);
    size_t n_rk = c->pos == POS_XL ? (size_t)N * K * hd : 0;
    size_t n_bias = c->pos == POS_MLP || c->pos == POS_ALIBI ? (size_t)N * H * K : 0;
    size_t n_work = (size_t)d * 6 + (size_t)3 * hd + hd + (size_t)c->d_inner + (size_t)K +
                    (size_t)c->vocab;
    size_t n_scr = (size_t)K * d; /* R_full at init */
    if (c->pos == POS_MLP) {
        size_t m = (size_t)K * (2 * (size_t)hid + K2);
        n_scr = n_scr > m ? n_scr : m;
    }
    s->buf = calloc(n_kv + n_rk + n_bias + n_work + n_scr + 16, sizeof(float));
    if (!s->buf)
        return err_set(e, ERR_RUNTIME, "out of memory for the decoding caches (mem_len %d)", M);
    float *p = s->buf;
    s->kc = p, p += n_kv / 2;
    s->vc = p, p += n_kv / 2;
    s->rk_full = n_rk ? p : NULL, p += n_rk;
    s->bias_full = n_bias ? p : NULL, p += n_bias;
    s->x = p, p += d;
    s->xn = p, p += d;
    s->h1 = p, p += d;
    s->ffin = p, p += d;
    s->tmp = p, p += 2 * (size_t)d;
    s->qkv = p, p += 3 * (size_t)hd;
    s->vec = p, p += hd;
    s->a = p, p += c->d_inner;
    s->scores = p, p += K;
    s->logits = p, p += c->vocab;
    s->mlp_scratch = p;

    return 0;
}

void decode_free(decode_state *s)
{
    free(s->buf);
    memset(s, 0, sizeof *s);
}

/* Rotates one row of H heads by absolute position pos (rope), in place. */
static void rope_row(float *x, int H, int dh, long pos, int inverse)
{
    int half = dh / 2;
    for (int t = 0; t < half; t++) {
        double ang = (double)pos * pow(10000.0, -2.0 * t / dh);
        float cs = (float)cos(ang), sn = (float)sin(ang);
        if (inverse)
            sn = -sn;
        for (int h = 0; h < H; h++) {
            float *x1 = x + (size_t)h * dh, *x2 = x1 + half;
            float a = x1[t], b = x2[t];
            x1[t] = a * cs - b * sn;
            x2[t] = b * cs + a * sn;
        }
    }
}

/* k and v of one memory row (the layer input h_j) of layer l into the caches at row j. */
static void cache_row(decode_state *s, const model *mdl, int l, const float *hrow, int j,
                      long abs_pos)
{
    const model_config *c = &mdl->cfg;
    const layer_tensors *L = &mdl->W.layer[l];
    int d = s->d, hd = s->H * s->dh;
    const float *X = hrow;
    if (c->pre_lnorm) {
        layernorm_forward(s->xn, NULL, NULL, hrow, L->attn_ln_w, L->attn_ln_b, 1, d);
        X = s->xn;
    }
    float *kv = s->qkv; /* [2*hd] of the [3*hd] scratch */
    linear_forward(kv, X, L->qkv_w + (size_t)hd * d, NULL, 1, 2 * hd, d, 0);
    float *kr = s->kc + (size_t)l * sz_layer_kv(s) + (size_t)j * hd;
    float *vr = s->vc + (size_t)l * sz_layer_kv(s) + (size_t)j * hd;
    memcpy(kr, kv, (size_t)hd * sizeof(float));
    memcpy(vr, kv + hd, (size_t)hd * sizeof(float));
    if (c->pos == POS_ROPE)
        rope_row(kr, s->H, s->dh, abs_pos, 0);
}

/* Position tables for every klen <= M + 1, from the current weights. */
static void build_tables(decode_state *s, const model *mdl)
{
    const model_config *c = &mdl->cfg;
    int N = c->n_layer, d = c->d_model, hd = c->n_head * c->d_head, H = c->n_head;
    int K = s->M + 1, hid = c->mlp_hidden;
    for (int l = 0; l < N; l++) {
        const layer_tensors *L = &mdl->W.layer[l];
        if (c->pos == POS_XL) {
            pos_sinusoid(s->mlp_scratch, K, d, K - 1, -1, c->clamp_len);
            linear_forward(s->rk_full + (size_t)l * K * hd, s->mlp_scratch, L->r_w, NULL, K, hd,
                           d, 0);
        } else if (c->pos == POS_MLP) {
            float *pre = s->mlp_scratch, *act = pre + (size_t)K * hid, *phi = act + (size_t)K * hid;
            mlp_bias_forward(s->bias_full + (size_t)l * H * K, pre, act, phi, L->mlp0_w,
                             L->mlp0_b, L->mlp2_w, L->mlp2_b, H, hid, c->mlp_num_freqs,
                             c->mlp_max_dist, K);
        } else if (c->pos == POS_ALIBI) {
            alibi_bias(s->bias_full + (size_t)l * H * K, H, K);
        }
    }
}

void decode_prime(decode_state *s, const model *mdl, const model_mem *mem, long pos)
{
    s->pos = pos;
    build_tables(s, mdl);
    for (int l = 0; l < s->n_layer; l++)
        for (int j = 0; j < mem->m; j++)
            cache_row(s, mdl, l, mem_layer(mem, l) + (size_t)j * s->d, j, pos - mem->m + j);
}

void decode_step(decode_state *s, const model *mdl, model_mem *mem, uint8_t tok)
{
    const model_config *c = &mdl->cfg;
    int d = s->d, H = s->H, dh = s->dh, hd = H * dh, di = c->d_inner, M = s->M;
    int m = mem->m, klen = m + 1, K = M + 1;
    float scale = (float)(1.0 / sqrt((double)dh));
    float *x = s->x;
    const float *E = mdl->W.word_emb + (size_t)tok * d;
    float es = sqrtf((float)d);
    for (int k = 0; k < d; k++)
        x[k] = E[k] * es;
    if (c->pos == POS_ABSOLUTE) { /* a 1-token segment sits at segment position 0 */
        pos_sinusoid(s->tmp, 1, d, 0, 1, 0);
        for (int k = 0; k < d; k++)
            x[k] += s->tmp[k];
    }
    for (int l = 0; l < s->n_layer; l++) {
        const layer_tensors *L = &mdl->W.layer[l];
        float *kc = s->kc + (size_t)l * sz_layer_kv(s), *vc = s->vc + (size_t)l * sz_layer_kv(s);
        const float *X = x;
        if (c->pre_lnorm) {
            layernorm_forward(s->xn, NULL, NULL, x, L->attn_ln_w, L->attn_ln_b, 1, d);
            X = s->xn;
        }
        linear_forward(s->qkv, X, L->qkv_w, NULL, 1, 3 * hd, d, 0);
        float *q = s->qkv, *kn = q + hd, *vn = kn + hd;
        if (c->pos == POS_ROPE) {
            rope_row(q, H, dh, s->pos, 0);
            rope_row(kn, H, dh, s->pos, 0);
        }
        const float *rk = c->pos == POS_XL ? s->rk_full + ((size_t)l * K + (K - klen)) * hd : NULL;
        const float *bias = s->bias_full ? s->bias_full + (size_t)l * H * K : NULL;
        for (int h = 0; h < H; h++) {
            const float *qh = q + (size_t)h * dh;
            const float *u = c->pos == POS_XL ? L->r_w_bias + (size_t)h * dh : NULL;
            const float *v = c->pos == POS_XL ? L->r_r_bias + (size_t)h * dh : NULL;
            float *sc = s->scores;
            float mx = -INFINITY;
            for (int j = 0; j < klen; j++) {
                const float *kj = (j < m ? kc + (size_t)j * hd : kn) + (size_t)h * dh;
                float ac = 0, bd = 0;
                for (int t = 0; t < dh; t++)
                    ac += (qh[t] + (u ? u[t] : 0.0f)) * kj[t];
                if (rk) {
                    const float *r = rk + (size_t)j * hd + (size_t)h * dh;
                    for (int t = 0; t < dh; t++)
                        bd += (qh[t] + v[t]) * r[t];
                }
                float sj = scale * ac + scale * bd;
                if (bias)
                    sj += bias[(size_t)h * K + (m - j)];
                sc[j] = sj;
                mx = sj > mx ? sj : mx;
            }
            double sum = vm_exp_sum(sc, klen, mx);
            float inv = (float)(1.0 / sum);
            float *o = s->vec + (size_t)h * dh;
            for (int t = 0; t < dh; t++)
                o[t] = 0;
            for (int j = 0; j < klen; j++) {
                const float *vj = (j < m ? vc + (size_t)j * hd : vn) + (size_t)h * dh;
                float w = sc[j] * inv;
                for (int t = 0; t < dh; t++)
                    o[t] += w * vj[t];
            }
        }
        /* the memory of layer l gets this layer's input x, with its k and v */
        if (M > 0) {
            float *ml = mem_layer(mem, l);
            int row = m;
            if (m == M) { /* full: drop the oldest row */
                memmove(ml, ml + d, (size_t)(M - 1) * d * sizeof(float));
                memmove(kc, kc + hd, (size_t)(M - 1) * hd * sizeof(float));
                memmove(vc, vc + hd, (size_t)(M - 1) * hd * sizeof(float));
                row = M - 1;
            }
            memcpy(ml + (size_t)row * d, x, (size_t)d * sizeof(float));
            memcpy(kc + (size_t)row * hd, kn, (size_t)hd * sizeof(float));
            memcpy(vc + (size_t)row * hd, vn, (size_t)hd * sizeof(float));
        }
        linear_forward(s->tmp, s->vec, L->o_w, NULL, 1, d, hd, 0);
        for (int k = 0; k < d; k++)
            s->h1[k] = x[k] + s->tmp[k];
        const float *ffin = s->h1;
        if (!c->pre_lnorm) {
            layernorm_forward(s->h1, NULL, NULL, s->h1, L->attn_ln_w, L->attn_ln_b, 1, d);
        } else {
            layernorm_forward(s->ffin, NULL, NULL, s->h1, L->ff_ln_w, L->ff_ln_b, 1, d);
            ffin = s->ffin;
        }
        linear_forward(s->a, ffin, L->ff0_w, L->ff0_b, 1, di, d, 0);
        for (int k = 0; k < di; k++)
            s->a[k] = s->a[k] > 0 ? s->a[k] : 0.0f;
        linear_forward(s->tmp, s->a, L->ff3_w, L->ff3_b, 1, d, di, 0);
        for (int k = 0; k < d; k++)
            x[k] = s->h1[k] + s->tmp[k];
        if (!c->pre_lnorm)
            layernorm_forward(x, NULL, NULL, x, L->ff_ln_w, L->ff_ln_b, 1, d);
    }
    if (M > 0 && m < M)
        mem->m = m + 1;
    s->pos++;
    linear_forward(s->logits, x, mdl->W.word_emb, mdl->W.out_bias, 1, c->vocab, d, 0);
}

/* pos_xl.c: Transformer-XL's relative encoding (Dai et al. 2019, §3.3; doc/design.md).
 *
 *   s_ij = (q_i + u)·k_j + (q_i + v)·(W_r R_{i-j}),   each scaled by 1/sqrt(dh)
 *
 * R [klen, d] holds the sinusoids of the distances klen-1 .. 0 (clamped to clamp_len when
 * clamp_len > 0), with dropout in training; rk = R W_r^T [klen, hd] per layer. The attention
 * kernel reads rk along the diagonals (attention.h), so no (Lq, klen, dh) tensor exists.
 * u, v [H, dh] are shared by the layers unless untie_r.
 * Slots: model-wide pos[0] = u, pos[1] = v (shared); per layer pos[0] = W_r [hd, d], and
 * pos[1] = u, pos[2] = v with untie_r. Buffers: acts R; layer rk; backward d_rk.
 * Ablations (model.xl_terms): each of the four terms can be switched off; the tensors stay
 * (their gradient is then exactly zero). */
#include <string.h>

#include "dropout.h"
#include "gemm.h"
#include "model.h"
#include "posenc.h"

enum { P_WR = 0, P_U_LAYER = 1, P_V_LAYER = 2, P_U = 0, P_V = 1 }; /* parameter views */
enum { B_R = 0 };                                                  /* acts */
enum { B_RK = 0 };                                                 /* layer */
enum { B_DRK = 0 };                                                /* backward */

static const char *const xl_terms[] = {"content", "content_position", "global_content_bias",
                                       "global_position_bias", NULL};

static int xl_params(param_table *t, const model_config *c, int layer)
{
    int H = c->n_head, dh = c->d_head, hd = H * dh;
    int rc = 0;
    if (layer < 0) {
        if (!c->untie_r) {
            rc |= param_add(t, H, dh, INIT_NORMAL, "r_w_bias");
            rc |= param_add(t, H, dh, INIT_NORMAL, "r_r_bias");
        }
        return rc;
    }
    rc |= param_add(t, hd, c->d_model, INIT_NORMAL, "layers.%d.attn.r.weight", layer);
    if (c->untie_r) {
        rc |= param_add(t, H, dh, INIT_NORMAL, "layers.%d.attn.r_w_bias", layer);
        rc |= param_add(t, H, dh, INIT_NORMAL, "layers.%d.attn.r_r_bias", layer);
    }
    return rc;
}

/* This layer's u and v (or their gradients). */
static void xl_uv(const model_config *c, const layer_tensors *L, const model_tensors *M,
                  float **u, float **v)
{
    *u = c->untie_r ? L->pos[P_U_LAYER] : M->pos[P_U];
    *v = c->untie_r ? L->pos[P_V_LAYER] : M->pos[P_V];
}

static void xl_plan(const model_config *c, const pos_dims *d, pos_alloc *a, pos_acts *acts,
                    pos_layer *bw)
{
    double klen = (double)d->Lq + d->M; /* doubles: pos_alloc */
    acts->buf[B_R] = a->take(a->arena, klen * c->d_model);
    if (d->training)
        bw->buf[B_DRK] = a->take(a->arena, klen * c->n_head * c->d_head);
}

static void xl_plan_layer(const model_config *c, const pos_dims *d, pos_alloc *a, pos_layer *lc)
{
    lc->buf[B_RK] = a->take(a->arena, ((double)d->Lq + d->M) * c->n_head * c->d_head);
}

/* R of a segment: without dropout (evaluation, inference) it depends on klen and clamp_len
 * only, and stays in place from one segment to the next. */
enum { T_KLEN, T_CLAMP };

static void xl_segment(const pos_seg *s)
{
    pos_acts *pa = s->acts;
    int klen = s->m + s->Lq, d = s->c->d_model, clamp = s->c->clamp_len;
    int clean = s->dropout <= 0.0f;
    if (clean && pa->valid && pa->tag[T_KLEN] == klen && pa->tag[T_CLAMP] == clamp)
        return;
    float *R = pa->buf[B_R];
    pos_sinusoid(R, klen, d, klen - 1, -1, clamp);
    dropout_forward(R, R, (size_t)klen * d, s->dropout, pos_site_key(s->drop_key, -1, SITE_R), 0);
    pa->tag[T_KLEN] = klen;
    pa->tag[T_CLAMP] = clamp;
    pa->valid = clean;
}

/* Some position term is in use: (b) q·rk or (d) v·rk. */
static int has_position(const model_config *c)
{
    return (c->xl_off & (XL_TERM_B | XL_TERM_D)) != (XL_TERM_B | XL_TERM_D);
}

/* The ablation flags and u, v as the terms in use need them. */
static void xl_set_terms(const model_config *c, float *u, float *v, const float *rk, attn_args *a)
{
    a->no_q_content = (c->xl_off & XL_TERM_A) != 0;
    a->no_q_position = (c->xl_off & XL_TERM_B) != 0;
    a->u = c->xl_off & XL_TERM_C ? NULL : u;
    a->v = c->xl_off & XL_TERM_D ? NULL : v;
    a->rk = has_position(c) ? rk : NULL;
}

static void xl_layer_forward(pos_ctx *x)
{
    const model_config *c = x->s->c;
    if (!has_position(c))
        return;
    int klen = x->s->m + x->s->Lq;
    linear_forward(x->lc->buf[B_RK], x->s->acts->buf[B_R], x->W->pos[P_WR], NULL, klen,
                   c->n_head * c->d_head, c->d_model, 0);
}

static void xl_attn_args(const pos_ctx *x, attn_args *a)
{
    float *u, *v;
    xl_uv(x->s->c, x->W, x->MW, &u, &v);
    xl_set_terms(x->s->c, u, v, x->lc->buf[B_RK], a);
}

static void xl_grad_args(pos_ctx *x, attn_grads *g)
{
    const model_config *c = x->s->c;
    int klen = x->s->m + x->s->Lq;
    if (has_position(c)) {
        g->drk = x->bw->buf[B_DRK];
        memset(g->drk, 0, (size_t)klen * c->n_head * c->d_head * sizeof(float));
    }
    xl_uv(c, x->G, x->MG, &g->du, &g->dv);
    if (c->xl_off & XL_TERM_C)
        g->du = NULL;
    if (c->xl_off & XL_TERM_D)
        g->dv = NULL;
}

static void xl_layer_backward(pos_ctx *x, float *d_q, float *d_kv)
{
    (void)d_q;
    (void)d_kv;
    const model_config *c = x->s->c;
    if (!has_position(c))
        return;
    int klen = x->s->m + x->s->Lq, hd = c->n_head * c->d_head, d = c->d_model;
    /* rk = R W_r^T with R a constant: dW_r += d_rk^T R */
    gemm(x->G->pos[P_WR], x->bw->buf[B_DRK], x->s->acts->buf[B_R], hd, d, klen, 1, 0, 1.0f,
         1.0f, hd, d, d);
}

/* Decoding: rk for klen = M + 1 (distances M .. 0), head-major [H][M+1][dh] so that each
 * head's rows are one contiguous block (attn_decode); a query with m memory rows reads the
 * last m + 1 rows of each head's block. */
static size_t xl_decode_floats(const model_config *c, int M)
{
    return ((size_t)M + 1) * c->n_head * c->d_head;
}

static size_t xl_decode_scratch(const model_config *c, int M)
{
    return ((size_t)M + 1) * ((size_t)c->d_model + (size_t)c->n_head * c->d_head);
}

static void xl_decode_tables(const model_config *c, const layer_tensors *W,
                             const model_tensors *MW, int M, float *tables, float *scratch)
{
    (void)MW;
    int K = M + 1, H = c->n_head, dh = c->d_head, hd = H * dh;
    float *R = scratch, *rk = scratch + (size_t)K * c->d_model;
    pos_sinusoid(R, K, c->d_model, K - 1, -1, c->clamp_len);
    linear_forward(rk, R, W->pos[P_WR], NULL, K, hd, c->d_model, 0);
    for (int h = 0; h < H; h++)
        for (int p = 0; p < K; p++)
            memcpy(tables + ((size_t)h * K + p) * dh, rk + (size_t)p * hd + (size_t)h * dh,
                   (size_t)dh * sizeof(float));
}

static void xl_decode_args(const pos_decode *d, attn_args *a)
{
    float *u, *v;
    int dh = d->c->d_head;
    xl_uv(d->c, d->W, d->MW, &u, &v);
    xl_set_terms(d->c, u, v, d->tables + (size_t)(d->M - d->m) * dh, a);
    a->rk_hstride = ((size_t)d->M + 1) * dh;
    a->rk_row = dh;
}

const pos_ops pos_xl = {
    .name = "xl",
    .term_names = xl_terms,
    .params = xl_params,
    .plan = xl_plan,
    .plan_layer = xl_plan_layer,
    .segment = xl_segment,
    .layer_forward = xl_layer_forward,
    .attn_args = xl_attn_args,
    .grad_args = xl_grad_args,
    .layer_backward = xl_layer_backward,
    .decode_floats = xl_decode_floats,
    .decode_scratch = xl_decode_scratch,
    .decode_tables = xl_decode_tables,
    .decode_args = xl_decode_args,
};

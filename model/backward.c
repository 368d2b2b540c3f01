/* backward.c: the backward of the segment forward.c ran last (doc/design.md, "The model"),
 * layer by layer from the loss down to the embedding. Gradients are added into mdl->g (+=
 * rule; the trainer zeroes them once per step); the memory is a constant (stop-gradient). */
#include <assert.h>
#include <math.h>

#include "../common/par.h"
#include "dropout.h"
#include "embedding.h"
#include "gemm.h"
#include "layernorm.h"
#include "xent.h"
#include "model_impl.h"

/* Post-LN: d(x) += d(q) Wq + d(kv)[segment rows] Wkv, and dWq += d(q)^T x. */
static void qkv_dx(float *d_in, float *dWq, const float *d_q, const float *d_kv,
                   const uint16_t *d_kvh, const float *x, const uint16_t *xh, const float *Wqkv,
                   int B, int Lq, int m, int d, int hd)
{
    const float *Wkv = Wqkv + (size_t)hd * d;
    int klen = m + Lq;
    linear_backward_x(d_in, dWq, NULL, d_q, NULL, x, xh, Wqkv, B * Lq, hd, d, 1);
#pragma omp parallel for schedule(static) if (B > 1)
    for (int b = 0; b < B; b++) {
        size_t r = ((size_t)b * klen + m) * 2 * hd;
        gemm_x(d_in + (size_t)b * Lq * d, d_kv + r, d_kvh ? d_kvh + r : NULL, Wkv, NULL, Lq, d,
               2 * hd, 0, 0, 1.0f, 1.0f, 2 * hd, d, d);
    }
}

/* The trainer's poll between a layer's ops (model_acts.backward_poll), if it set one. */
static void poll(const model_acts *A)
{
    if (A->backward_poll)
        A->backward_poll(A->layer_grads_ctx);
}

/* Backward of layer_tail_forward: d_out (w.r.t. the layer's output) -> A->d_vec (w.r.t. the
 * attention output) and d_in = d(x) through the residual branch (overwritten). */
static void layer_tail_backward(model *mdl, model_acts *A, int l, const float *d_out,
                                float *d_in)
{
    const model_config *c = &A->cfg;
    const layer_tensors *L = &mdl->W.layer[l];
    const layer_tensors *G = &mdl->G.layer[l];
    int B = A->B, d = c->d_model, hd = c->n_head * c->d_head, di = c->d_inner, Lq = A->cur_Lq;
    size_t BL = (size_t)B * Lq, n = BL * d;
    float p = c->dropout;
    uint64_t key = A->cur_key;
    layer_cache *lc = &A->lc[l];
    float *d_r2 = A->d_tmp, *d_h1 = A->d_h1;

    /* out = LN_ff(h1 + z2) (post) or h1 + z2 (pre) */
    /* bf16: the products' dy rounded where they are made (their twins), else NULL */
    const int h = gemm_get_precision() == GEMM_BF16;
    uint16_t *d_r2h = h ? A->d_tmpb : NULL, *d_ah = h ? A->d_ab : NULL;
    uint16_t *d_h1h = h ? A->d_h1b : NULL;
    if (!c->pre_lnorm) {
        layernorm_backward(d_r2, G->ff_ln_w, G->ff_ln_b, d_out, lc->ln2_xhat, lc->ln2_rstd,
                           L->ff_ln_w, (int)BL, d, 0);
    }
    /* d_h1 = d(h1 + z2) (the residual branch); d_r2 = its masked copy (the ff branch) */
    dropout_backward_copy_h(d_r2, d_r2h, d_h1, c->pre_lnorm ? d_out : d_r2, n, p,
                            pos_site_key(key, l, SITE_FF_OUT), A->b_offset * (n / B));
    /* z2 = a @ W3^T + b3; a = drop(relu(z1)); z1 = ffin @ W0^T + b0 */
    linear_backward_x(A->d_a, G->ff3_w, G->ff3_b, d_r2, d_r2h, lc->a, lc->ab, L->ff3_w,
                      (int)BL, d, di, 0);
    poll(A);
    dropout_relu_backward_h(A->d_a, d_ah, A->d_a, lc->a, BL * di, p);
    const float *ffin = c->pre_lnorm ? lc->ffin : lc->h1;
    if (!c->pre_lnorm) {
        /* ffin is h1 itself: its gradient adds straight onto the residual branch's */
        linear_backward_x(d_h1, G->ff0_w, G->ff0_b, A->d_a, d_ah, ffin, lc->ffinb, L->ff0_w,
                          (int)BL, di, d, 1);
        /* h1 = LN_attn(x + drop(ao)): d_h1 becomes d(x + drop(ao)) */
        layernorm_backward(d_h1, G->attn_ln_w, G->attn_ln_b, d_h1, lc->ln1_xhat, lc->ln1_rstd,
                           L->attn_ln_w, (int)BL, d, 0);
    } else { /* d_r2 = d(ffin) = d(LN_ff(h1)) */
        linear_backward_x(d_r2, G->ff0_w, G->ff0_b, A->d_a, d_ah, ffin, lc->ffinb, L->ff0_w,
                          (int)BL, di, d, 0);
        layernorm_backward(d_h1, G->ff_ln_w, G->ff_ln_b, d_r2, lc->ln1_xhat, lc->ln1_rstd,
                           L->ff_ln_w, (int)BL, d, 1);
    }
    poll(A);
    /* residual to x, then through the dropout and the output projection */
    dropout_backward_copy_h(d_h1, d_h1h, d_in, d_h1, n, p, pos_site_key(key, l, SITE_ATTN_OUT),
                            A->b_offset * (n / B)); /* d_in = d_h1 before the mask */
    linear_backward_x(A->d_vec, G->o_w, NULL, d_h1, d_h1h, lc->vec, lc->vecb, L->o_w, (int)BL, d, hd,
                      0);
}

/* Pre-LN: d(cat) from d(kv) and d(q), through LN_attn; the memory rows give the LN
 * parameters gradients only, the segment rows add onto d_in. */
static void qkv_backward_pre(model *mdl, model_acts *A, int l, float *d_in)
{
    const model_config *c = &A->cfg;
    const layer_tensors *L = &mdl->W.layer[l];
    const layer_tensors *G = &mdl->G.layer[l];
    int B = A->B, d = c->d_model, hd = c->n_head * c->d_head;
    int Lq = A->cur_Lq, m = A->cur_m, klen = m + Lq;
    layer_cache *lc = &A->lc[l];
    linear_backward_x(A->d_cat, G->qkv_w + (size_t)hd * d, NULL, A->d_kv, NULL, lc->catn, lc->catb,
                      L->qkv_w + (size_t)hd * d, B * klen, 2 * hd, d, 0);
    /* d(LN(cat) segment rows) = d(q) Wq, parked in d_tmp (free by now) */
    linear_backward_x(A->d_tmp, G->qkv_w, NULL, A->d_q, NULL, lc->xq, lc->xqb, L->qkv_w, B * Lq, hd,
                      d, 0);
    for (int b = 0; b < B; b++) {
        float *dcb = A->d_cat + (size_t)b * klen * d;
        size_t r0 = (size_t)b * klen;
        const float *dq_rows = A->d_tmp + (size_t)b * Lq * d;
        float *seg = dcb + (size_t)m * d;
        for (size_t i = 0; i < (size_t)Lq * d; i++)
            seg[i] += dq_rows[i];
        layernorm_backward(NULL, G->attn_ln_w, G->attn_ln_b, dcb, lc->ln0_xhat + r0 * d,
                           lc->ln0_rstd + r0, L->attn_ln_w, m, d, 0);
        layernorm_backward(d_in + (size_t)b * Lq * d, G->attn_ln_w, G->attn_ln_b,
                           dcb + (size_t)m * d, lc->ln0_xhat + (r0 + m) * d,
                           lc->ln0_rstd + r0 + m, L->attn_ln_w, Lq, d, 1);
    }
}

/* d_out: gradient w.r.t. this layer's output [B,Lq,d]; writes d_in (w.r.t. its input). */
static void layer_backward(model *mdl, model_acts *A, const pos_seg *s, int l,
                           const float *d_out, float *d_in)
{
    const model_config *c = &A->cfg;
    const layer_tensors *L = &mdl->W.layer[l];
    const layer_tensors *G = &mdl->G.layer[l];
    int B = A->B, d = c->d_model, hd = c->n_head * c->d_head;
    int Lq = A->cur_Lq, m = A->cur_m, klen = m + Lq;
    layer_cache *lc = &A->lc[l];
    const float *x = A->hs + (size_t)l * B * Lq * d;

    layer_tail_backward(mdl, A, l, d_out, d_in);

    pos_ctx pc = layer_ctx(mdl, A, s, l, lc);
    attn_args aa = attn_base(A, s, l);
    attn_grads ag = {0};
    if (A->pos->attn_args)
        A->pos->attn_args(&pc, &aa);
    if (A->pos->grad_args)
        A->pos->grad_args(&pc, &ag);
    poll(A);
    attn_backward(A->d_q, A->d_kv, ag.drk, ag.du, ag.dv, ag.d_bias, A->d_vec, lc->prob, lc->q,
                  lc->kv, &aa, A->attn_scratch);
    poll(A);
    if (A->pos->layer_backward)
        A->pos->layer_backward(&pc, A->d_q, A->d_kv);

    if (c->pre_lnorm) {
        qkv_backward_pre(mdl, A, l, d_in);
        return;
    }
    /* post-LN: kv from all klen rows of cat, q from the segment rows x. The memory is a
     * constant: only the segment rows of d(cat) are needed, so d(x) += d(q) Wq +
     * d(kv)[segment rows] Wkv, and dWkv still sums over all rows. Two threads and m = Lq:
     * two halves of equal FLOPs side by side, dWkv over all rows on one, dx (q and kv
     * parts) and dWq on the other, each product whole on its thread (nothing packed twice,
     * the 1-thread result); otherwise one after the other */
    const float *Wkv = L->qkv_w + (size_t)hd * d;
    /* bf16: d_kv rounded once, for dWkv and for the segment rows' dx */
    const uint16_t *d_kvh = A->d_kvb && linear_in_bf16(B * klen, 2 * hd, d)
                                ? linear_round(A->d_kvb, A->d_kv, B * klen, 2 * hd)
                                : NULL;
#pragma omp parallel sections num_threads(2) if (par_threads() == 2 && m == Lq)
    {
#pragma omp section
        linear_backward_x(NULL, G->qkv_w + (size_t)hd * d, NULL, A->d_kv, d_kvh,
                          lc->cat_h_only ? NULL : lc->cat, lc->catb, Wkv, B * klen, 2 * hd, d,
                          0);
#pragma omp section
        qkv_dx(d_in, G->qkv_w, A->d_q, A->d_kv, d_kvh, x, lc->xqb, L->qkv_w, B, Lq, m, d, hd);
    }
}

void model_backward(model *mdl, model_acts *A, model_mem *mem, float loss_scale)
{
    (void)mem;
    const model_config *c = &A->cfg;
    int B = A->B, d = c->d_model, N = c->n_layer, Lq = A->cur_Lq;
    size_t BL = (size_t)B * Lq, n = BL * d;
    float p = c->dropout;
    uint64_t key = A->cur_key;
    fwd_opts o = {.training = 1, .drop_key = key, .pos_offset = A->cur_pos_offset};
    pos_seg s = segment_of(A, Lq, A->cur_m, &o);

    const int ad = adapt_in_use(c);
    adapt_shape as;
    adapt_tensors aw, ag;
    if (ad) {
        adapt_shape_of(c, &as);
        model_adapt_view(c, &mdl->W, &aw);
        model_adapt_view(c, &mdl->G, &ag);
        assert(!A->xent_scale || A->xent_scale == loss_scale);
        if (!A->xent_scale) /* else done by the forward (fwd_opts.loss_scale) */
            adapt_xent_backward(A->d_out, &ag, A->hfin, &aw, &as, A->cur_y, (int)BL,
                                loss_scale, &A->ad);
        A->xent_scale = 0;
    } else {
        xent_backward(A->d_out, mdl->G.word_emb, mdl->G.out_bias, A->logits, A->lse, A->hfin,
                      mdl->W.word_emb, A->cur_y, (int)BL, d, c->vocab, loss_scale);
    }
    dropout_backward(A->d_out, A->d_out, n, p, pos_site_key(key, -1, SITE_FINAL),
                     A->b_offset * (n / B));
    float *dout = A->d_out, *din = A->d_in;
    for (int l = N - 1; l >= 0; l--) {
        layer_backward(mdl, A, &s, l, dout, din);
        if (A->layer_grads_done)
            A->layer_grads_done(A->layer_grads_ctx, l);
        float *t = dout;
        dout = din;
        din = t;
    }
    /* dout = gradient w.r.t. hs[0] = drop(E[x] sqrt(d) (+ P)) */
    dropout_backward(dout, dout, n, p, pos_site_key(key, -1, SITE_EMB), A->b_offset * (n / B));
    if (ad)
        adapt_embed_backward(&ag, &aw, &as, dout, A->cur_x, (int)BL, sqrtf((float)d), &A->ad);
    else
        embedding_backward(mdl->G.word_emb, dout, A->cur_x, (int)BL, d, sqrtf((float)d));
}

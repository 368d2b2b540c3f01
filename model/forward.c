/* forward.c: the forward of one segment (doc/design.md, "The model"); backward.c is its
 * backward, params.c the parameter table, plan.c the buffers. The positional scheme is a pos_ops (pos.h): its hooks add
 * its tensors, buffers and terms around the shared attention kernel; nothing here asks
 * which scheme runs.
 *
 * Per layer l (x = input [B,Lq,d], cat = [mem[l]; x] [B,klen,d]):
 *   X    = cat (post-LN) or LN_attn(cat) (pre-LN)
 *   kv   = X @ Wkv^T (all klen rows);  q = X[m:] @ Wq^T (segment rows)
 *   vec  = attention(q, kv) (attention.c; the scheme prepares rk / bias / rotations)
 *   post: h1 = LN_attn(x + drop(vec @ Wo^T));  out = LN_ff(h1 + drop(FF(h1)))
 *   pre:  h1 = x + drop(vec @ Wo^T);           out = h1 + drop(FF(LN_ff(h1)))
 *   FF(z) = W3 drop(relu(W0 z + b0)) + b3
 * Gradients are added into mdl->g (+= rule; the trainer zeroes them once per step). */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "dropout.h"
#include "embedding.h"
#include "gemm.h"
#include "kv_cache.h"
#include "layernorm.h"
#include "xent.h"
#include "model_impl.h"

/* cat_coords = [memory rows' coordinates; the segment's], per stream. Along a stream a
 * coordinate grows by 0 or 1 from one token to the next (a token starts at most one unit of
 * each level, data/units.c). Damaged input (a checkpoint's memory that does not continue
 * the text) is brought to that rule: a row below its predecessor stays level with it, a row
 * further above it is one above. So every difference a scheme reads is >= 0 and below the
 * window's span (klen), which the schemes' tables are planned for; valid rows are kept. */
static void gather_coords(model_acts *A, const model_mem *mem, const int32_t *seg, int Lq)
{
    const int NC = TXL_N_COORDS, m = mem->m, klen = m + Lq;
    for (int b = 0; b < A->B; b++) {
        int32_t *dst = A->cat_coords + (size_t)b * klen * NC;
        memcpy(dst, mem->coords + (size_t)b * mem->M * NC, (size_t)m * NC * sizeof *dst);
        memcpy(dst + (size_t)m * NC, seg + (size_t)b * Lq * NC, (size_t)Lq * NC * sizeof *dst);
        for (int k = 0; k < NC; k++) {
            int32_t in_prev = dst[k]; /* the predecessor as it came */
            for (int j = 1; j < klen; j++) {
                int32_t *v = &dst[(size_t)j * NC + k], in = *v;
                int64_t step = (int64_t)in - in_prev, out = (int64_t)v[-NC] + (step > 0);
                *v = out > INT32_MAX ? INT32_MAX : (int32_t)out;
                in_prev = in;
            }
        }
    }
}

/* The memory keeps the coordinates of its last rows, like their states. */
static void keep_coords(const model_acts *A, model_mem *mem, int klen)
{
    const int NC = TXL_N_COORDS, keep = klen < mem->M ? klen : mem->M;
    for (int b = 0; A->cat_coords && b < A->B; b++)
        memcpy(mem->coords + (size_t)b * mem->M * NC,
               A->cat_coords + ((size_t)b * klen + (klen - keep)) * NC,
               (size_t)keep * NC * sizeof(int32_t));
}



/* y = x W^T + bias for the tail: through linear_forward_few (decoding), or linear_forward
 * with x's bf16 twin xb (bf16 precision: rounded here, kept for the backward) */
static void tail_linear(const layer_tail_bufs *t, uint16_t *xb, float *y, const float *x,
                        const float *W, const float *bias, int rows, int out, int in)
{
    if (t->few_rows)
        linear_forward_few(y, x, W, bias, rows, out, in);
    else
        linear_forward_x(y, x, linear_round(xb, x, rows, in), W, bias, rows, out, in, 0);
}

void layer_tail_forward(const model_config *c, const layer_tensors *L, int l, int rows,
                        const float *x, const float *vec, float *out, const layer_tail_bufs *t,
                        float p, uint64_t key, size_t base_row)
{
    int d = c->d_model, hd = c->n_head * c->d_head, di = c->d_inner;
    size_t n = (size_t)rows * d;
    /* output projection, dropout, residual (+ LN when post) */
    if (t->lin) /* decoding's own products (decode.c) */
        t->lin(t->lin_ctx, l, LIN_O, t->tmp, vec, NULL, rows);
    else
        tail_linear(t, t->vecb, t->tmp, vec, L->o_w, NULL, rows, d, hd);
    dropout_add(t->h1, x, t->tmp, n, p, pos_site_key(key, l, SITE_ATTN_OUT), base_row * d);
    const float *ffin = t->h1;
    if (!c->pre_lnorm) {
        layernorm_forward(t->h1, t->ln1_xhat, t->ln1_rstd, t->h1, L->attn_ln_w, L->attn_ln_b,
                          rows, d);
    } else {
        layernorm_forward(t->ffin, t->ln1_xhat, t->ln1_rstd, t->h1, L->ff_ln_w, L->ff_ln_b,
                          rows, d);
        ffin = t->ffin;
    }
    /* feed-forward: a = drop(relu(ffin W0^T + b0)), out = h1 + drop(a W3^T + b3) */
    uint16_t *ab = gemm_get_precision() == GEMM_BF16 ? t->ab : NULL;
    if (t->lin) { /* decoding's own products (decode.c) */
        t->lin(t->lin_ctx, l, LIN_FF0, t->a, ffin, L->ff0_b, rows);
        dropout_relu_h(t->a, NULL, t->a, (size_t)rows * di, p, pos_site_key(key, l, SITE_FF_ACT),
                       base_row * di);
        t->lin(t->lin_ctx, l, LIN_FF3, t->tmp, t->a, L->ff3_b, rows);
    } else if (ab && t->infer && p <= 0.0f && !t->few_rows &&
        linear_relu_h(ab, ffin, linear_round(t->ffinb, ffin, rows, d), L->ff0_w, L->ff0_b, rows,
                      di, d) == 0) { /* inference in bf16: a is made in bf16 by its product */
        linear_forward_x(t->tmp, NULL, ab, L->ff3_w, L->ff3_b, rows, d, di, 0);
    } else {
        tail_linear(t, t->ffinb, t->a, ffin, L->ff0_w, L->ff0_b, rows, di, d);
        /* a's bf16 twin made with it (bf16 precision) */
        dropout_relu_h(t->a, ab, t->a, (size_t)rows * di, p, pos_site_key(key, l, SITE_FF_ACT),
                       base_row * di);
        if (ab)
            linear_forward_x(t->tmp, t->a, ab, L->ff3_w, L->ff3_b, rows, d, di, 0);
        else
            tail_linear(t, NULL, t->tmp, t->a, L->ff3_w, L->ff3_b, rows, d, di);
    }
    dropout_add(out, t->h1, t->tmp, n, p, pos_site_key(key, l, SITE_FF_OUT), base_row * d);
    if (!c->pre_lnorm)
        layernorm_forward(out, t->ln2_xhat, t->ln2_rstd, out, L->ff_ln_w, L->ff_ln_b, rows, d);
}

/* cat = [mem[l]; x], its LN (pre-LN), and the projections kv (all klen rows) and q (the
 * segment rows). Post-LN in bf16, where the kv product and its dW run in bf16, cat is made
 * only as its bf16 twin catb: the segment rows copied from x's rounding (the queries'
 * input), the memory's rounded; nothing reads an fp32 cat then (the memory advances from
 * the layer input, push_mem_rows). */
static void layer_project(const model_config *c, const layer_tensors *L, layer_cache *lc,
                          const float *x, const model_mem *mem, int l, int B, int Lq)
{
    int d = c->d_model, hd = c->n_head * c->d_head, m = mem->m, klen = m + Lq, M = mem->M;
    const float *ml = mem_layer(mem, l);
    lc->cat_h_only = !c->pre_lnorm && lc->catb && linear_in_bf16(B * klen, 2 * hd, d);
    if (lc->cat_h_only) {
        const uint16_t *xh = linear_round(lc->xqb, x, B * Lq, d);
        for (int b = 0; b < B; b++) {
            uint16_t *cb = lc->catb + (size_t)b * klen * d;
            linear_round(cb, ml + (size_t)b * M * d, m, d);
            memcpy(cb + (size_t)m * d, xh + (size_t)b * Lq * d, (size_t)Lq * d * sizeof *xh);
        }
        linear_forward_x(lc->kv, NULL, lc->catb, L->qkv_w + (size_t)hd * d, NULL, B * klen,
                         2 * hd, d, 0);
        linear_forward_x(lc->q, x, xh, L->qkv_w, NULL, B * Lq, hd, d, 0);
        return;
    }
#pragma omp parallel for schedule(static) if ((size_t)B * klen * d > 65536)
    for (int b = 0; b < B; b++) {
        memcpy(lc->cat + (size_t)b * klen * d, ml + (size_t)b * M * d, (size_t)m * d * sizeof(float));
        memcpy(lc->cat + ((size_t)b * klen + m) * d, x + (size_t)b * Lq * d, (size_t)Lq * d * sizeof(float));
    }
    const float *X = lc->cat, *Xq = x;
    if (c->pre_lnorm) {
        layernorm_forward(lc->catn, lc->ln0_xhat, lc->ln0_rstd, lc->cat, L->attn_ln_w,
                          L->attn_ln_b, B * klen, d);
        X = lc->catn;
        /* queries come from the segment rows [m, klen) of each stream: a contiguous copy of
         * those rows of LN(cat), so q is one GEMM */
        for (int b = 0; b < B; b++)
            memcpy(lc->xq + (size_t)b * Lq * d, X + ((size_t)b * klen + m) * d,
                   (size_t)Lq * d * sizeof(float));
        Xq = lc->xq;
    }
    linear_forward_x(lc->kv, X, linear_round(lc->catb, X, B * klen, d),
                     L->qkv_w + (size_t)hd * d, NULL, B * klen, 2 * hd, d, 0);
    linear_forward_x(lc->q, Xq, linear_round(lc->xqb, Xq, B * Lq, d), L->qkv_w, NULL, B * Lq,
                     hd, d, 0);
}

/* new mem[l] = the last M rows of [mem[l]; x] in place, m the memory's rows before (the
 * rows of x past them copied in behind what is kept of the old) */
static void push_mem_rows(model_mem *mem, int l, const float *x, int m, int Lq)
{
    int B = mem->B, M = mem->M, d = mem->d;
    int keep = m + Lq < M ? m + Lq : M, nx = Lq < keep ? Lq : keep, nm = keep - nx;
    float *dst = mem_layer(mem, l);
#pragma omp parallel for schedule(static) if ((size_t)B * keep * d > 65536)
    for (int b = 0; b < B; b++) {
        float *w = dst + (size_t)b * M * d;
        memmove(w, w + (size_t)(m - nm) * d, (size_t)nm * d * sizeof(float));
        memcpy(w + (size_t)nm * d, x + ((size_t)b * Lq + (Lq - nx)) * d,
               (size_t)nx * d * sizeof(float));
    }
}

/* The projections with the memory's keys and values in k: q and kv of the segment rows
 * only (LN first when pre-LN), the kv rows written behind the memory's in every window. */
static void layer_project_cached(const model_config *c, const layer_tensors *L,
                                 layer_cache *lc, const float *x, kv_cache *k, int l, int B,
                                 int Lq, int m)
{
    int d = c->d_model, hd = c->n_head * c->d_head;
    const float *X = x;
    if (c->pre_lnorm) {
        layernorm_forward(lc->xq, NULL, NULL, x, L->attn_ln_w, L->attn_ln_b, B * Lq, d);
        X = lc->xq;
    }
    const uint16_t *Xh = linear_round(lc->xqb, X, B * Lq, d); /* bf16: once for both */
    linear_forward_x(lc->q, X, Xh, L->qkv_w, NULL, B * Lq, hd, d, 0);
    linear_forward_x(lc->kv, X, Xh, L->qkv_w + (size_t)hd * d, NULL, B * Lq, 2 * hd, d, 0);
#pragma omp parallel for schedule(static) if ((size_t)B * Lq * k->row > 65536)
    for (int b = 0; b < B; b++)
        kv_cache_put(k, l, b, k->start + m, lc->kv + (size_t)b * Lq * k->row, Lq);
}

/* Whether this forward can use the cache k: it has one; a bf16 one only for the AMX
 * attention (which reads it) and without the term statistics (which read fp32 keys) */
static int cache_usable(const kv_cache *k, const model_acts *A, const fwd_opts *o)
{
    return kv_cache_on(k) && (!k->hbuf || (A->attn_amx && !A->attn_blas && !o->stats));
}

/* The cache put in step with mem: per layer, the keys and values of the memory's m rows
 * projected a segment's worth of rows at a time (after LN_attn when pre-LN) into rows
 * 0..m-1 of every window. The same rows times the same weights as a whole window's
 * projection (a row may round its last bit differently in a GEMM of other rows), in
 * buffers of a segment: ACTS_CACHED plans no window-sized ones. */
static void prime_cache(const model *mdl, model_acts *A, const model_mem *mem, kv_cache *k)
{
    const model_config *c = &A->cfg;
    const int B = A->B, d = c->d_model, hd = c->n_head * c->d_head, m = mem->m, T = A->Lq_max;
    layer_cache *lc = &A->lc[0];
    for (int l = 0; l < c->n_layer && m > 0; l++) {
        const layer_tensors *L = &mdl->W.layer[l];
        const float *ml = mem_layer(mem, l);
        for (int r0 = 0; r0 < m; r0 += T) {
            int rows = m - r0 < T ? m - r0 : T;
            for (int b = 0; b < B; b++)
                memcpy(A->tmp + (size_t)b * rows * d, ml + ((size_t)b * mem->M + r0) * d,
                       (size_t)rows * d * sizeof(float));
            const float *X = A->tmp;
            if (c->pre_lnorm) {
                layernorm_forward(lc->xq, NULL, NULL, A->tmp, L->attn_ln_w, L->attn_ln_b,
                                  B * rows, d);
                X = lc->xq;
            }
            linear_forward_x(lc->kv, X, linear_round(lc->xqb, X, B * rows, d),
                             L->qkv_w + (size_t)hd * d, NULL, B * rows, 2 * hd, d, 0);
            for (int b = 0; b < B; b++)
                kv_cache_put(k, l, b, r0, lc->kv + (size_t)b * rows * k->row, rows);
        }
    }
    k->start = 0;
    k->m = m;
    k->of = mem->buf;
    k->gen = mem->gen;
}

static void layer_forward(model *mdl, model_acts *A, model_mem *mem, const pos_seg *s, int l,
                          const fwd_opts *o, int cached)
{
    const model_config *c = &A->cfg;
    const layer_tensors *L = &mdl->W.layer[l];
    int tr = o->training, B = A->B, Lq = s->Lq;
    size_t n = (size_t)B * Lq * c->d_model;
    layer_cache *lc = tr ? &A->lc[l] : &A->lc[0];
    const float *x = A->hs + (size_t)l * n;
    kv_cache *k = o->kv;

    const float *kv = lc->kv;
    const uint16_t *kvh = NULL;
    if (cached) {
        layer_project_cached(c, L, lc, x, k, l, B, Lq, mem->m);
        if (k->hbuf)
            kv = NULL, kvh = kv_window_h(k, l, 0) + (size_t)k->start * k->row;
        else
            kv = kv_window(k, l, 0) + (size_t)k->start * k->row;
    } else {
        layer_project(c, L, lc, x, mem, l, B, Lq);
    }
    pos_ctx pc = layer_ctx(mdl, A, s, l, lc);
    if (cached)
        pc.kv = NULL;
    if (A->pos->layer_forward)
        A->pos->layer_forward(&pc);
    attn_args aa = attn_base(A, s, l);
    if (cached)
        aa.kv_bstride = (size_t)k->cap * k->row, aa.kvh = kvh;
    aa.same_len = o->same_len;
    if (A->pos->attn_args)
        A->pos->attn_args(&pc, &aa);
    if (o->stats)
        attn_term_stats(o->stats[l].acc, &o->stats[l].count, lc->q, kv, &aa);
    attn_forward(tr ? lc->prob : NULL, lc->vec, lc->q, kv, &aa, A->attn_scratch);

    layer_tail_bufs tb = {lc->h1, lc->ffin, lc->a, A->tmp,
                          lc->ln1_xhat, lc->ln1_rstd, lc->ln2_xhat, lc->ln2_rstd, 0,
                          lc->vecb, lc->ffinb, lc->ab, !tr, NULL, NULL};
    layer_tail_forward(c, L, l, B * Lq, x, lc->vec, A->hs + (size_t)(l + 1) * n, &tb, s->dropout,
                       o->drop_key, A->b_offset * (size_t)Lq);
    if (cached || !tr) /* inference shares one buffer per layer: advance its memory now */
        push_mem_rows(mem, l, x, mem->m, Lq);
}

void model_embed(const model *mdl, const pos_ops *ops, pos_acts *pa, float *h,
                 const txl_tok *tok, int B, int Lq, int m, long pos_offset, const adapt_ws *ws)
{
    const model_config *c = &mdl->cfg;
    if (adapt_in_use(c)) {
        adapt_shape as;
        adapt_tensors at;
        adapt_shape_of(c, &as);
        model_adapt_view(c, &mdl->W, &at);
        adapt_embed_forward(h, &at, &as, tok, B * Lq, sqrtf((float)c->d_model), ws);
    } else {
        embedding_forward(h, mdl->W.word_emb, tok, B * Lq, c->d_model, sqrtf((float)c->d_model));
    }
    if (ops->embed) {
        pos_seg s = {.c = c, .B = B, .Lq = Lq, .m = m, .pos_offset = pos_offset, .acts = pa};
        ops->embed(&s, h);
    }
}

double model_forward(model *mdl, model_acts *A, model_mem *mem, const txl_tok *x,
                     const txl_tok *y, int Lq, const fwd_opts *o)
{
    const model_config *c = &A->cfg;
    int B = A->B, d = c->d_model, N = c->n_layer, m = mem->m, klen = m + Lq;
    assert(A->training || !o->training);
    assert(Lq >= 1 && Lq <= A->Lq_max && m <= A->M && mem->B == B);
    size_t BL = (size_t)B * Lq, n = BL * d;
    assert(!A->pos->needs_coords || (o->coords && mem->coords));
    if (A->cat_coords)
        gather_coords(A, mem, o->coords, Lq);
    pos_seg s = segment_of(A, Lq, m, o);

    float *h0 = A->hs;
    model_embed(mdl, A->pos, &A->pos_acts, h0, x, B, Lq, m, o->pos_offset, &A->ad);
    dropout_forward(h0, h0, n, s.dropout, pos_site_key(o->drop_key, -1, SITE_EMB),
                    A->b_offset * (n / B));
    if (A->pos->segment)
        A->pos->segment(&s);
    assert(!o->kv || !o->training);
    /* inference with a cache: in step with the memory, or put in step with it */
    int cached = cache_usable(o->kv, A, o);
    if (cached && mem->m == 0)
        o->kv->start = 0;
    else if (cached && !kv_cache_valid(o->kv, mem, Lq))
        prime_cache(mdl, A, mem, o->kv);
    assert(cached || !A->cached); /* ACTS_CACHED: the window's buffers hold a segment only */
    for (int l = 0; l < N; l++)
        layer_forward(mdl, A, mem, &s, l, o, cached);

    dropout_forward(A->hfin, A->hs + (size_t)N * n, n, s.dropout,
                    pos_site_key(o->drop_key, -1, SITE_FINAL), A->b_offset * (n / B));
    double loss = 0;
    if (adapt_in_use(c)) { /* the targets' clusters only; no logits without targets */
        adapt_shape as;
        adapt_tensors at;
        adapt_shape_of(c, &as);
        model_adapt_view(c, &mdl->W, &at);
        A->xent_scale = 0;
        if (y && o->training && o->loss_scale != 0 && mdl->g) { /* and its backward */
            adapt_tensors ag;
            model_adapt_view(c, &mdl->G, &ag);
            loss = adapt_xent_train(A->row_loss, A->d_out, &ag, A->hfin, &at, &as, y, (int)BL,
                                    o->loss_scale, &A->ad);
            A->xent_scale = o->loss_scale;
        } else if (y) {
            loss = adapt_xent_forward(A->row_loss, A->hfin, &at, &as, y, (int)BL, &A->ad);
        }
    } else {
        loss = xent_forward(A->logits, A->lse, A->row_loss, A->hfin, mdl->W.word_emb,
                            mdl->W.out_bias, y, (int)BL, d, c->vocab);
    }
    A->cur_Lq = Lq;
    A->cur_m = m;
    A->cur_pos_offset = o->pos_offset;
    A->cur_key = o->drop_key;
    A->cur_x = x;
    A->cur_y = y;
    if (!o->training) {
        keep_coords(A, mem, klen);
        mem->m = klen < mem->M ? klen : mem->M;
        mem->gen++;
        if (cached)
            kv_cache_advance(o->kv, mem, klen);
    }
    return loss;
}

void model_mem_update(model_acts *A, model_mem *mem)
{
    int klen = A->cur_m + A->cur_Lq;
    size_t n = (size_t)A->B * A->cur_Lq * A->cfg.d_model;
    for (int l = 0; l < A->cfg.n_layer; l++) /* from the layer inputs, which the backward keeps */
        push_mem_rows(mem, l, A->hs + (size_t)l * n, A->cur_m, A->cur_Lq);
    keep_coords(A, mem, klen);
    mem->m = klen < mem->M ? klen : mem->M;
    mem->gen++;
}

void model_logprobs(const model *mdl, const float *h, int n, float *out, const adapt_ws *ws,
                    int few)
{
    const model_config *c = &mdl->cfg;
    if (!adapt_in_use(c)) {
        if (few)
            linear_forward_few(out, h, mdl->W.word_emb, mdl->W.out_bias, n, c->vocab, c->d_model);
        else
            linear_forward(out, h, mdl->W.word_emb, mdl->W.out_bias, n, c->vocab, c->d_model, 0);
        return;
    }
    adapt_shape as;
    adapt_tensors at;
    adapt_shape_of(c, &as);
    model_adapt_view(c, &mdl->W, &at);
    adapt_logprobs(out, h, &at, &as, n, few, ws);
}

void model_row_logprobs(const model *mdl, model_acts *A, size_t r0, int n, float *out)
{
    const size_t V = (size_t)A->cfg.vocab;
    assert(r0 + (size_t)n <= (size_t)A->B * A->cur_Lq);
    if (!adapt_in_use(&A->cfg)) /* the forward's own logits */
        memcpy(out, A->logits + r0 * V, (size_t)n * V * sizeof(float));
    else
        model_logprobs(mdl, A->hfin + r0 * (size_t)A->cfg.d_model, n, out, &A->ad, 0);
}

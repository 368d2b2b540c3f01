/* model.c: the parameter table, activation plan, and the forward/backward of one segment
 * (DESIGN.md §3). This is the only file that knows positional schemes exist: one switch per
 * phase picks what each scheme adds around the shared attention kernel.
 *
 * Per layer l (x = input [B,Lq,d], cat = [mem[l]; x] [B,klen,d]):
 *   X    = cat (post-LN) or LN_attn(cat) (pre-LN)
 *   kv   = X @ Wkv^T (all klen rows);  q = X[m:] @ Wq^T (segment rows)
 *   vec  = attention(q, kv) (attention.c; rk / bias / rope by scheme)
 *   post: h1 = LN_attn(x + drop(vec @ Wo^T));  out = LN_ff(h1 + drop(FF(h1)))
 *   pre:  h1 = x + drop(vec @ Wo^T);           out = h1 + drop(FF(LN_ff(h1)))
 *   FF(z) = W3 drop(relu(W0 z + b0)) + b3
 * Gradients are added into mdl->g (+= rule; the trainer zeroes them once per step). */
#include "model.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/par.h"
#include "../common/rng.h"
#include "attention.h"
#include "dropout.h"
#include "embedding.h"
#include "ff.h"
#include "gemm.h"
#include "layernorm.h"
#include "posenc.h"
#include "xent.h"

#define ALIGN_FLOATS 16 /* 64-byte alignment of every tensor and buffer */

static size_t align_up(size_t n) { return (n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS; }

/* ---------------------------------------------------------------- parameter table */

typedef struct {
    param_entry *t;
    int n, cap;
    size_t off, count;
} table_builder;

static int tb_add(table_builder *b, int d0, int d1, param_init init, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int tb_add(table_builder *b, int d0, int d1, param_init init, const char *fmt, ...)
{
    if (b->n == b->cap) {
        int cap = b->cap ? b->cap * 2 : 64;
        param_entry *t = realloc(b->t, (size_t)cap * sizeof *t);
        if (!t)
            return -1;
        b->t = t;
        b->cap = cap;
    }
    param_entry *p = &b->t[b->n++];
    memset(p, 0, sizeof *p);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->name, sizeof p->name, fmt, ap);
    va_end(ap);
    p->ndim = d1 > 0 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1 > 0 ? d1 : 0;
    p->numel = (size_t)d0 * (d1 > 0 ? (size_t)d1 : 1);
    p->init = init;
    p->offset = b->off;
    b->off = align_up(b->off + p->numel);
    b->count += p->numel;
    return 0;
}

/* Builds the table in checkpoint order (DESIGN.md §5). */
static int build_table(table_builder *b, const model_config *c)
{
    int d = c->d_model, hd = c->n_head * c->d_head, H = c->n_head, dh = c->d_head;
    int xl = c->pos == POS_XL, K2 = 2 * c->mlp_num_freqs;
    int rc = 0;
    rc |= tb_add(b, c->vocab, d, INIT_NORMAL, "word_emb.weight");
    rc |= tb_add(b, c->vocab, 0, INIT_ZERO, "out.bias");
    if (xl && !c->untie_r) {
        rc |= tb_add(b, H, dh, INIT_NORMAL, "r_w_bias");
        rc |= tb_add(b, H, dh, INIT_NORMAL, "r_r_bias");
    }
    for (int l = 0; l < c->n_layer; l++) {
        rc |= tb_add(b, 3 * hd, d, INIT_NORMAL, "layers.%d.attn.qkv.weight", l);
        if (xl) {
            rc |= tb_add(b, hd, d, INIT_NORMAL, "layers.%d.attn.r.weight", l);
            if (c->untie_r) {
                rc |= tb_add(b, H, dh, INIT_NORMAL, "layers.%d.attn.r_w_bias", l);
                rc |= tb_add(b, H, dh, INIT_NORMAL, "layers.%d.attn.r_r_bias", l);
            }
        }
        if (c->pos == POS_MLP) {
            rc |= tb_add(b, c->mlp_hidden, K2, INIT_NORMAL, "layers.%d.attn.bias_mlp.0.weight", l);
            rc |= tb_add(b, c->mlp_hidden, 0, INIT_ZERO, "layers.%d.attn.bias_mlp.0.bias", l);
            rc |= tb_add(b, H, c->mlp_hidden, INIT_NORMAL, "layers.%d.attn.bias_mlp.2.weight", l);
            rc |= tb_add(b, H, 0, INIT_ZERO, "layers.%d.attn.bias_mlp.2.bias", l);
        }
        rc |= tb_add(b, d, hd, INIT_NORMAL, "layers.%d.attn.o.weight", l);
        rc |= tb_add(b, d, 0, INIT_ONE, "layers.%d.attn.ln.weight", l);
        rc |= tb_add(b, d, 0, INIT_ZERO, "layers.%d.attn.ln.bias", l);
        rc |= tb_add(b, c->d_inner, d, INIT_NORMAL, "layers.%d.ff.0.weight", l);
        rc |= tb_add(b, c->d_inner, 0, INIT_ZERO, "layers.%d.ff.0.bias", l);
        rc |= tb_add(b, d, c->d_inner, INIT_NORMAL, "layers.%d.ff.3.weight", l);
        rc |= tb_add(b, d, 0, INIT_ZERO, "layers.%d.ff.3.bias", l);
        rc |= tb_add(b, d, 0, INIT_ONE, "layers.%d.ff.ln.weight", l);
        rc |= tb_add(b, d, 0, INIT_ZERO, "layers.%d.ff.ln.bias", l);
    }
    return rc;
}

const param_entry *model_find_param(const model *mdl, const char *name)
{
    for (int i = 0; i < mdl->n_params; i++)
        if (strcmp(mdl->table[i].name, name) == 0)
            return &mdl->table[i];
    return NULL;
}

static float *view(const model *mdl, float *base, const char *name)
{
    const param_entry *p = model_find_param(mdl, name);
    return p ? base + p->offset : NULL;
}

void model_tensors_view(const model *mdl, float *base, model_tensors *t)
{
    char nm[96];
    t->word_emb = view(mdl, base, "word_emb.weight");
    t->out_bias = view(mdl, base, "out.bias");
    t->r_w_bias = view(mdl, base, "r_w_bias");
    t->r_r_bias = view(mdl, base, "r_r_bias");
    for (int l = 0; l < mdl->cfg.n_layer; l++) {
        layer_tensors *L = &t->layer[l];
#define V(field, suffix) (snprintf(nm, sizeof nm, "layers.%d.%s", l, suffix), L->field = view(mdl, base, nm))
        V(qkv_w, "attn.qkv.weight");
        V(r_w, "attn.r.weight");
        V(o_w, "attn.o.weight");
        V(attn_ln_w, "attn.ln.weight");
        V(attn_ln_b, "attn.ln.bias");
        V(r_w_bias, "attn.r_w_bias");
        V(r_r_bias, "attn.r_r_bias");
        V(mlp0_w, "attn.bias_mlp.0.weight");
        V(mlp0_b, "attn.bias_mlp.0.bias");
        V(mlp2_w, "attn.bias_mlp.2.weight");
        V(mlp2_b, "attn.bias_mlp.2.bias");
        V(ff0_w, "ff.0.weight");
        V(ff0_b, "ff.0.bias");
        V(ff3_w, "ff.3.weight");
        V(ff3_b, "ff.3.bias");
        V(ff_ln_w, "ff.ln.weight");
        V(ff_ln_b, "ff.ln.bias");
#undef V
        if (!L->r_w_bias) { /* shared u, v (or none outside xl) */
            L->r_w_bias = t->r_w_bias;
            L->r_r_bias = t->r_r_bias;
        }
    }
}

int model_init(model *mdl, const model_config *cfg, txl_err *e)
{
    memset(mdl, 0, sizeof *mdl);
    mdl->cfg = *cfg;
    if (cfg->pos == POS_ROPE && cfg->d_head % 2)
        return err_set(e, ERR_INPUT, "model.d_head must be even for pos_scheme rope, found %d",
                       cfg->d_head);
    table_builder b = {0};
    if (build_table(&b, cfg)) {
        free(b.t);
        return err_set(e, ERR_RUNTIME, "out of memory building the parameter table");
    }
    mdl->table = b.t;
    mdl->n_params = b.n;
    mdl->n_floats = b.off;
    mdl->n_weights = b.count;
    mdl->w = aligned_alloc(64, align_up(mdl->n_floats) * sizeof(float));
    mdl->W.layer = calloc((size_t)cfg->n_layer, sizeof(layer_tensors));
    mdl->G.layer = calloc((size_t)cfg->n_layer, sizeof(layer_tensors));
    if (!mdl->w || !mdl->W.layer || !mdl->G.layer) {
        model_free(mdl);
        return err_set(e, ERR_RUNTIME, "out of memory allocating %zu parameters",
                       mdl->n_weights);
    }
    memset(mdl->w, 0, mdl->n_floats * sizeof(float));
    model_tensors_view(mdl, mdl->w, &mdl->W);
    return 0;
}

void model_init_weights(model *mdl, uint64_t seed)
{
    rng_t r = {rng_key(seed, 0x1417)};
    for (int i = 0; i < mdl->n_params; i++) {
        const param_entry *p = &mdl->table[i];
        float *w = mdl->w + p->offset;
        for (size_t k = 0; k < p->numel; k++)
            w[k] = p->init == INIT_NORMAL ? (float)(0.02 * rng_normal(&r))
                   : p->init == INIT_ONE  ? 1.0f
                                          : 0.0f;
    }
}

int model_alloc_grads(model *mdl, txl_err *e)
{
    if (mdl->g)
        return 0;
    mdl->g = aligned_alloc(64, align_up(mdl->n_floats) * sizeof(float));
    if (!mdl->g)
        return err_set(e, ERR_RUNTIME, "out of memory allocating gradients");
    memset(mdl->g, 0, mdl->n_floats * sizeof(float));
    model_tensors_view(mdl, mdl->g, &mdl->G);
    return 0;
}

void model_zero_grads(model *mdl)
{
    if (!mdl->g)
        return;
    const size_t chunk = 1 << 16;
    const long nchunk = (long)((mdl->n_floats + chunk - 1) / chunk);
#pragma omp parallel for schedule(static) if (nchunk > 1)
    for (long c = 0; c < nchunk; c++) {
        size_t i0 = (size_t)c * chunk, len = mdl->n_floats - i0 < chunk ? mdl->n_floats - i0 : chunk;
        memset(mdl->g + i0, 0, len * sizeof(float));
    }
}

void model_free(model *mdl)
{
    free(mdl->table);
    free(mdl->w);
    free(mdl->g);
    free(mdl->W.layer);
    free(mdl->G.layer);
    memset(mdl, 0, sizeof *mdl);
}

/* ---------------------------------------------------------------- memory */

int mem_init(model_mem *mem, const model_config *cfg, int B, int M, txl_err *e)
{
    memset(mem, 0, sizeof *mem);
    mem->n_layer = cfg->n_layer;
    mem->B = B;
    mem->M = M;
    mem->d = cfg->d_model;
    size_t n = (size_t)cfg->n_layer * B * M * cfg->d_model;
    mem->buf = calloc(n ? n : 1, sizeof(float));
    if (!mem->buf)
        return err_set(e, ERR_RUNTIME, "out of memory allocating the memory (%zu floats)", n);
    return 0;
}

void mem_reset(model_mem *mem) { mem->m = 0; }

void mem_free(model_mem *mem)
{
    free(mem->buf);
    memset(mem, 0, sizeof *mem);
}

/* ---------------------------------------------------------------- activation plan */

/* Two passes over the same layout: the first counts, the second hands out pointers into
 * one allocation. */
typedef struct {
    float *base;
    size_t used;
} arena;

static float *take(arena *a, size_t n)
{
    float *p = a->base ? a->base + a->used : NULL;
    a->used += align_up(n ? n : 1);
    return p;
}

static void plan(model_acts *A, arena *ar)
{
    const model_config *c = &A->cfg;
    int B = A->B, Lq = A->Lq_max, M = A->M, klen = Lq + M, d = c->d_model;
    int H = c->n_head, hd = H * c->d_head, di = c->d_inner, N = c->n_layer, V = c->vocab;
    int tr = A->training, hid = c->mlp_hidden;
    size_t BL = (size_t)B * Lq, BK = (size_t)B * klen;
    int nc = tr ? N : 1;
    for (int l = 0; l < nc; l++) {
        layer_cache *lc = &A->lc[l];
        lc->cat = take(ar, BK * d);
        if (c->pre_lnorm) {
            lc->catn = take(ar, BK * d);
            lc->ln0_xhat = tr ? take(ar, BK * d) : NULL;
            lc->ln0_rstd = tr ? take(ar, BK) : NULL;
            lc->ffin = take(ar, BL * d);
            lc->xq = take(ar, BL * d);
        }
        lc->q = take(ar, BL * hd);
        lc->kv = take(ar, BK * 2 * hd);
        lc->rk = c->pos == POS_XL ? take(ar, (size_t)klen * hd) : NULL;
        lc->prob = tr ? take(ar, (size_t)B * H * Lq * klen) : NULL;
        if (c->pos == POS_MLP) {
            lc->bias = take(ar, (size_t)H * klen);
            lc->mlp_pre = take(ar, (size_t)klen * hid);
            lc->mlp_act = take(ar, (size_t)klen * hid);
        } else if (c->pos == POS_ALIBI) {
            lc->bias = take(ar, (size_t)H * klen);
        }
        lc->vec = take(ar, BL * hd);
        lc->h1 = take(ar, BL * d);
        lc->ln1_xhat = tr ? take(ar, BL * d) : NULL;
        lc->ln1_rstd = tr ? take(ar, BL) : NULL;
        lc->a = take(ar, BL * di);
        lc->ln2_xhat = tr && !c->pre_lnorm ? take(ar, BL * d) : NULL;
        lc->ln2_rstd = tr && !c->pre_lnorm ? take(ar, BL) : NULL;
    }
    A->hs = take(ar, (size_t)(N + 1) * BL * d);
    A->hfin = take(ar, BL * d);
    A->logits = take(ar, BL * V);
    A->lse = take(ar, BL);
    A->row_loss = take(ar, BL);
    A->R = c->pos == POS_XL || c->pos == POS_ABSOLUTE ? take(ar, (size_t)klen * d) : NULL;
    if (c->pos == POS_ROPE) {
        A->rope_cos = take(ar, (size_t)klen * (c->d_head / 2));
        A->rope_sin = take(ar, (size_t)klen * (c->d_head / 2));
    }
    A->tmp = take(ar, BL * d);
    size_t as = attn_scratch_floats(Lq, klen, c->d_head, H, A->threads);
    if (c->pos == POS_MLP) { /* phi [klen, 2K]; backward: d_t [klen, H] */
        size_t extra = (size_t)klen * (2 * c->mlp_num_freqs + H);
        as = as > extra ? as : extra;
    }
    A->attn_scratch = take(ar, as);
    if (tr) {
        A->d_out = take(ar, BL * d);
        A->d_in = take(ar, BL * d);
        A->d_h1 = take(ar, BL * d);
        A->d_tmp = take(ar, BL * d);
        A->d_a = take(ar, BL * di);
        A->d_vec = take(ar, BL * hd);
        A->d_q = take(ar, BL * hd);
        A->d_kv = take(ar, BK * 2 * hd);
        A->d_cat = c->pre_lnorm ? take(ar, BK * d) : NULL; /* post-LN needs no d(memory) */
        A->d_rk = c->pos == POS_XL ? take(ar, (size_t)klen * hd) : NULL;
        A->d_bias = c->pos == POS_MLP ? take(ar, (size_t)H * klen) : NULL;
        A->d_mlp = c->pos == POS_MLP ? take(ar, (size_t)klen * hid) : NULL;
    }
}

int acts_init(model_acts *A, const model_config *cfg, int B, int Lq_max, int M, int training,
              txl_err *e)
{
    memset(A, 0, sizeof *A);
    A->cfg = *cfg;
    A->B = B;
    A->Lq_max = Lq_max;
    A->M = M;
    A->training = training;
    A->threads = par_max_threads();
    A->lc = calloc(training ? (size_t)cfg->n_layer : 1, sizeof(layer_cache));
    if (!A->lc)
        return err_set(e, ERR_RUNTIME, "out of memory planning activations");
    arena ar = {NULL, 0};
    plan(A, &ar);
    size_t total = ar.used;
    ar.base = aligned_alloc(64, total * sizeof(float));
    if (!ar.base) {
        acts_free(A);
        return err_set(e, ERR_RUNTIME, "out of memory: activations need %.1f MiB",
                       total * 4.0 / 1048576.0);
    }
    memset(ar.base, 0, total * sizeof(float));
    ar.used = 0;
    plan(A, &ar);
    A->arena_base = ar.base;
    A->arena_floats = total;
    if (cfg->pos == POS_ROPE)
        rope_tables(A->rope_cos, A->rope_sin, Lq_max + M, cfg->d_head);
    return 0;
}

void acts_free(model_acts *A)
{
    free(A->arena_base);
    free(A->lc);
    memset(A, 0, sizeof *A);
}

/* ---------------------------------------------------------------- forward */

enum { SITE_EMB, SITE_R, SITE_ATTN_OUT, SITE_DROPATT, SITE_FF_ACT, SITE_FF_OUT, SITE_FINAL };

static uint64_t site_key(uint64_t key, int layer, int site)
{
    return rng_key(key, (uint64_t)(layer + 1) * 16 + (uint64_t)site);
}

static void copy_mem_rows(model_mem *mem, int l, const float *cat, int klen)
{
    int B = mem->B, M = mem->M, d = mem->d;
    int keep = klen < M ? klen : M;
    float *dst = mem_layer(mem, l);
#pragma omp parallel for schedule(static) if ((size_t)B * keep * d > 65536)
    for (int b = 0; b < B; b++)
        memcpy(dst + (size_t)b * M * d, cat + ((size_t)b * klen + (klen - keep)) * d,
               (size_t)keep * d * sizeof(float));
}

static void layer_forward(model *mdl, model_acts *A, model_mem *mem, int l, int Lq,
                          const fwd_opts *o)
{
    const model_config *c = &A->cfg;
    const layer_tensors *L = &mdl->W.layer[l];
    int tr = o->training, B = A->B, d = c->d_model, H = c->n_head, dh = c->d_head;
    int hd = H * dh, di = c->d_inner, m = mem->m, klen = m + Lq, M = mem->M;
    size_t BL = (size_t)B * Lq, n = BL * d;
    float p = tr ? c->dropout : 0.0f;
    layer_cache *lc = tr ? &A->lc[l] : &A->lc[0];
    const float *x = A->hs + (size_t)l * n;
    float *out = A->hs + (size_t)(l + 1) * n;
    const float *ml = mem_layer(mem, l);

#pragma omp parallel for schedule(static) if ((size_t)B * klen * d > 65536)
    for (int b = 0; b < B; b++) {
        memcpy(lc->cat + (size_t)b * klen * d, ml + (size_t)b * M * d, (size_t)m * d * sizeof(float));
        memcpy(lc->cat + ((size_t)b * klen + m) * d, x + (size_t)b * Lq * d, (size_t)Lq * d * sizeof(float));
    }
    const float *X = lc->cat;
    if (c->pre_lnorm) {
        layernorm_forward(lc->catn, lc->ln0_xhat, lc->ln0_rstd, lc->cat, L->attn_ln_w,
                          L->attn_ln_b, B * klen, d);
        X = lc->catn;
    }
    /* queries come from the segment rows [m, klen) of each stream: x itself (post-LN) or a
     * contiguous copy of those rows of LN(cat) (pre-LN), so q is one GEMM */
    const float *Xq = x;
    if (c->pre_lnorm) {
        for (int b = 0; b < B; b++)
            memcpy(lc->xq + (size_t)b * Lq * d, X + ((size_t)b * klen + m) * d,
                   (size_t)Lq * d * sizeof(float));
        Xq = lc->xq;
    }
    linear_forward(lc->kv, X, L->qkv_w + (size_t)hd * d, NULL, B * klen, 2 * hd, d, 0);
    linear_forward(lc->q, Xq, L->qkv_w, NULL, (int)BL, hd, d, 0);

    attn_args aa = {.B = B, .H = H, .dh = dh, .Lq = Lq, .m = m,
                    .scale = (float)(1.0 / sqrt((double)dh)),
                    .dropatt = tr ? c->dropatt : 0.0f,
                    .drop_key = site_key(o->drop_key, l, SITE_DROPATT), .b_offset = A->b_offset,
                    .threads = A->threads, .row_block = A->attn_row_block};
    switch (c->pos) {
    case POS_XL:
        linear_forward(lc->rk, A->R, L->r_w, NULL, klen, hd, d, 0);
        aa.rk = lc->rk;
        aa.u = L->r_w_bias;
        aa.v = L->r_r_bias;
        break;
    case POS_MLP:
        mlp_bias_forward(lc->bias, lc->mlp_pre, lc->mlp_act, A->attn_scratch, L->mlp0_w,
                         L->mlp0_b, L->mlp2_w, L->mlp2_b, H, c->mlp_hidden, c->mlp_num_freqs,
                         c->mlp_max_dist, klen);
        aa.dist_bias = lc->bias;
        break;
    case POS_ALIBI:
        alibi_bias(lc->bias, H, klen);
        aa.dist_bias = lc->bias;
        break;
    case POS_ROPE:
        for (int b = 0; b < B; b++) {
            rope_apply(lc->q + (size_t)b * Lq * hd, Lq, hd, H, dh, m, A->rope_cos, A->rope_sin, 0);
            rope_apply(lc->kv + (size_t)b * klen * 2 * hd, klen, 2 * hd, H, dh, 0, A->rope_cos,
                       A->rope_sin, 0);
        }
        break;
    case POS_ABSOLUTE:
    case POS_NONE:
        break;
    }
    if (o->stats)
        attn_term_stats(o->stats[l].acc, &o->stats[l].count, lc->q, lc->kv, &aa);
    attn_forward(tr ? lc->prob : NULL, lc->vec, lc->q, lc->kv, &aa, A->attn_scratch);

    /* output projection, dropout, residual (+ LN when post) */
    linear_forward(A->tmp, lc->vec, L->o_w, NULL, (int)BL, d, hd, 0);
    dropout_add(lc->h1, x, A->tmp, n, p, site_key(o->drop_key, l, SITE_ATTN_OUT),
                A->b_offset * (n / B));
    const float *ffin = lc->h1;
    if (!c->pre_lnorm) {
        layernorm_forward(lc->h1, lc->ln1_xhat, lc->ln1_rstd, lc->h1, L->attn_ln_w, L->attn_ln_b,
                          (int)BL, d);
    } else {
        layernorm_forward(lc->ffin, lc->ln1_xhat, lc->ln1_rstd, lc->h1, L->ff_ln_w, L->ff_ln_b,
                          (int)BL, d);
        ffin = lc->ffin;
    }

    /* feed-forward */
    linear_forward(lc->a, ffin, L->ff0_w, L->ff0_b, (int)BL, di, d, 0);
    ff_act_forward(lc->a, lc->a, BL * di, p, site_key(o->drop_key, l, SITE_FF_ACT),
                   A->b_offset * ((size_t)Lq * di));
    linear_forward(A->tmp, lc->a, L->ff3_w, L->ff3_b, (int)BL, d, di, 0);
    dropout_add(out, lc->h1, A->tmp, n, p, site_key(o->drop_key, l, SITE_FF_OUT),
                A->b_offset * (n / B));
    if (!c->pre_lnorm)
        layernorm_forward(out, lc->ln2_xhat, lc->ln2_rstd, out, L->ff_ln_w, L->ff_ln_b, (int)BL,
                          d);

    if (!tr) /* inference shares one cache: advance this layer's memory now */
        copy_mem_rows(mem, l, lc->cat, klen);
}

double model_forward(model *mdl, model_acts *A, model_mem *mem, const uint8_t *x,
                     const uint8_t *y, int Lq, const fwd_opts *o)
{
    const model_config *c = &A->cfg;
    int B = A->B, d = c->d_model, N = c->n_layer, m = mem->m, klen = m + Lq;
    assert(A->training || !o->training);
    assert(Lq >= 1 && Lq <= A->Lq_max && m <= A->M && mem->B == B);
    size_t BL = (size_t)B * Lq, n = BL * d;
    float p = o->training ? c->dropout : 0.0f;

    float *h0 = A->hs;
    embedding_forward(h0, mdl->W.word_emb, x, (int)BL, d, sqrtf((float)d));
    if (c->pos == POS_ABSOLUTE) { /* segment positions 0..Lq-1, restarting every segment */
        pos_sinusoid(A->R, Lq, d, 0, 1, 0);
        for (int b = 0; b < B; b++)
            for (size_t i = 0; i < (size_t)Lq * d; i++)
                h0[(size_t)b * Lq * d + i] += A->R[i];
    }
    dropout_forward(h0, h0, n, p, site_key(o->drop_key, -1, SITE_EMB), A->b_offset * (n / B));
    if (c->pos == POS_XL) {
        pos_sinusoid(A->R, klen, d, klen - 1, -1, c->clamp_len);
        dropout_forward(A->R, A->R, (size_t)klen * d, p, site_key(o->drop_key, -1, SITE_R), 0);
    }

    for (int l = 0; l < N; l++)
        layer_forward(mdl, A, mem, l, Lq, o);

    dropout_forward(A->hfin, A->hs + (size_t)N * n, n, p, site_key(o->drop_key, -1, SITE_FINAL),
                    A->b_offset * (n / B));
    double loss = xent_forward(A->logits, A->lse, A->row_loss, A->hfin, mdl->W.word_emb,
                               mdl->W.out_bias, y, (int)BL, d, c->vocab);
    A->cur_Lq = Lq;
    A->cur_m = m;
    A->cur_key = o->drop_key;
    A->cur_x = x;
    A->cur_y = y;
    if (!o->training)
        mem->m = klen < mem->M ? klen : mem->M;
    return loss;
}

void model_mem_update(model_acts *A, model_mem *mem)
{
    int klen = A->cur_m + A->cur_Lq;
    for (int l = 0; l < A->cfg.n_layer; l++)
        copy_mem_rows(mem, l, A->lc[l].cat, klen);
    mem->m = klen < mem->M ? klen : mem->M;
}

/* ---------------------------------------------------------------- backward */

/* Post-LN: d(x) += d(q) Wq + d(kv)[segment rows] Wkv, and dWq += d(q)^T x. */
static void qkv_dx(float *d_in, float *dWq, const float *d_q, const float *d_kv, const float *x,
                   const float *Wqkv, int B, int Lq, int m, int d, int hd)
{
    const float *Wkv = Wqkv + (size_t)hd * d;
    int klen = m + Lq;
    linear_backward(d_in, dWq, NULL, d_q, x, Wqkv, B * Lq, hd, d, 1);
#pragma omp parallel for schedule(static) if (B > 1)
    for (int b = 0; b < B; b++)
        gemm(d_in + (size_t)b * Lq * d, d_kv + ((size_t)b * klen + m) * 2 * hd, Wkv, Lq, d,
             2 * hd, 0, 0, 1.0f, 1.0f, 2 * hd, d, d);
}

/* d_out: gradient w.r.t. this layer's output [B,Lq,d]; writes d_in (w.r.t. its input). */
static void layer_backward(model *mdl, model_acts *A, int l, const float *d_out, float *d_in)
{
    const model_config *c = &A->cfg;
    const layer_tensors *L = &mdl->W.layer[l];
    const layer_tensors *G = &mdl->G.layer[l];
    int B = A->B, d = c->d_model, H = c->n_head, dh = c->d_head, hd = H * dh, di = c->d_inner;
    int Lq = A->cur_Lq, m = A->cur_m, klen = m + Lq;
    size_t BL = (size_t)B * Lq, n = BL * d;
    float p = c->dropout;
    uint64_t key = A->cur_key;
    layer_cache *lc = &A->lc[l];
    const float *x = A->hs + (size_t)l * n;
    float *d_r2 = A->d_tmp, *d_h1 = A->d_h1;

    /* out = LN_ff(h1 + z2) (post) or h1 + z2 (pre) */
    if (!c->pre_lnorm) {
        layernorm_backward(d_r2, G->ff_ln_w, G->ff_ln_b, d_out, lc->ln2_xhat, lc->ln2_rstd,
                           L->ff_ln_w, (int)BL, d, 0);
    }
    /* d_h1 = d(h1 + z2) (the residual branch); d_r2 = its masked copy (the ff branch) */
    dropout_backward_copy(d_r2, d_h1, c->pre_lnorm ? d_out : d_r2, n, p,
                          site_key(key, l, SITE_FF_OUT), A->b_offset * (n / B));
    /* z2 = a @ W3^T + b3; a = drop(relu(z1)); z1 = ffin @ W0^T + b0 */
    linear_backward(A->d_a, G->ff3_w, G->ff3_b, d_r2, lc->a, L->ff3_w, (int)BL, d, di, 0);
    ff_act_backward(A->d_a, A->d_a, lc->a, BL * di, p);
    const float *ffin = c->pre_lnorm ? lc->ffin : lc->h1;
    if (!c->pre_lnorm) {
        /* ffin is h1 itself: its gradient adds straight onto the residual branch's */
        linear_backward(d_h1, G->ff0_w, G->ff0_b, A->d_a, ffin, L->ff0_w, (int)BL, di, d, 1);
        /* h1 = LN_attn(x + drop(ao)): d_h1 becomes d(x + drop(ao)) */
        layernorm_backward(d_h1, G->attn_ln_w, G->attn_ln_b, d_h1, lc->ln1_xhat, lc->ln1_rstd,
                           L->attn_ln_w, (int)BL, d, 0);
    } else { /* d_r2 = d(ffin) = d(LN_ff(h1)) */
        linear_backward(d_r2, G->ff0_w, G->ff0_b, A->d_a, ffin, L->ff0_w, (int)BL, di, d, 0);
        layernorm_backward(d_h1, G->ff_ln_w, G->ff_ln_b, d_r2, lc->ln1_xhat, lc->ln1_rstd,
                           L->ff_ln_w, (int)BL, d, 1);
    }
    /* residual to x, then through the dropout and the output projection */
    dropout_backward_copy(d_h1, d_in, d_h1, n, p, site_key(key, l, SITE_ATTN_OUT),
                          A->b_offset * (n / B)); /* d_in = d_h1 before the mask */
    linear_backward(A->d_vec, G->o_w, NULL, d_h1, lc->vec, L->o_w, (int)BL, d, hd, 0);

    attn_args aa = {.B = B, .H = H, .dh = dh, .Lq = Lq, .m = m,
                    .scale = (float)(1.0 / sqrt((double)dh)),
                    .dropatt = c->dropatt,
                    .drop_key = site_key(key, l, SITE_DROPATT), .b_offset = A->b_offset,
                    .threads = A->threads, .row_block = A->attn_row_block};
    float *du = NULL, *dv = NULL;
    if (c->pos == POS_XL) {
        aa.rk = lc->rk;
        aa.u = L->r_w_bias;
        aa.v = L->r_r_bias;
        du = G->r_w_bias;
        dv = G->r_r_bias;
        memset(A->d_rk, 0, (size_t)klen * hd * sizeof(float));
    } else if (c->pos == POS_MLP || c->pos == POS_ALIBI) {
        aa.dist_bias = lc->bias;
    }
    if (c->pos == POS_MLP)
        memset(A->d_bias, 0, (size_t)H * klen * sizeof(float));
    attn_backward(A->d_q, A->d_kv, A->d_rk, du, dv, c->pos == POS_MLP ? A->d_bias : NULL,
                  A->d_vec, lc->prob, lc->q, lc->kv, &aa, A->attn_scratch);

    switch (c->pos) {
    case POS_XL: /* rk = R @ Wr^T; R is a constant */
        gemm(G->r_w, A->d_rk, A->R, hd, d, klen, 1, 0, 1.0f, 1.0f, hd, d, d);
        break;
    case POS_MLP:
        mlp_bias_backward(G->mlp0_w, G->mlp0_b, G->mlp2_w, G->mlp2_b, A->d_bias, lc->mlp_pre,
                          lc->mlp_act, L->mlp2_w, A->d_mlp, A->attn_scratch,
                          A->attn_scratch + (size_t)klen * H, H, c->mlp_hidden,
                          c->mlp_num_freqs, c->mlp_max_dist, klen);
        break;
    case POS_ROPE: /* gradients w.r.t. the rotated q, k -> w.r.t. the projections */
        for (int b = 0; b < B; b++) {
            rope_apply(A->d_q + (size_t)b * Lq * hd, Lq, hd, H, dh, m, A->rope_cos, A->rope_sin, 1);
            rope_apply(A->d_kv + (size_t)b * klen * 2 * hd, klen, 2 * hd, H, dh, 0, A->rope_cos,
                       A->rope_sin, 1);
        }
        break;
    default:
        break;
    }

    /* projections: kv from all klen rows of X, q from the segment rows */
    const float *X = c->pre_lnorm ? lc->catn : lc->cat;
    const float *Wkv = L->qkv_w + (size_t)hd * d;
    if (!c->pre_lnorm) {
        /* the memory is a constant: only the segment rows of d(cat) are needed, so
         * d(x) += d(q) Wq + d(kv)[segment rows] Wkv, and dWkv still sums over all rows */
        /* two threads and m = Lq: two halves of equal FLOPs side by side, dWkv over all
         * rows on one, dx (q and kv parts) and dWq on the other, each product whole on its
         * thread (nothing packed twice, the 1-thread result); otherwise one after the other */
#pragma omp parallel sections num_threads(2) if (par_threads() == 2 && m == Lq)
        {
#pragma omp section
            linear_backward(NULL, G->qkv_w + (size_t)hd * d, NULL, A->d_kv, X, Wkv, B * klen,
                            2 * hd, d, 0);
#pragma omp section
            qkv_dx(d_in, G->qkv_w, A->d_q, A->d_kv, x, L->qkv_w, B, Lq, m, d, hd);
        }
        return;
    }
    linear_backward(A->d_cat, G->qkv_w + (size_t)hd * d, NULL, A->d_kv, X, Wkv, B * klen,
                    2 * hd, d, 0);
    /* d(LN(cat) segment rows) = d(q) Wq, parked in d_tmp (free by now) */
    linear_backward(A->d_tmp, G->qkv_w, NULL, A->d_q, lc->xq, L->qkv_w, (int)BL, hd, d, 0);
    for (int b = 0; b < B; b++) {
        float *dcb = A->d_cat + (size_t)b * klen * d;
        float *dib = d_in + (size_t)b * Lq * d;
        /* memory rows: LN parameter grads only, no dx */
        size_t r0 = (size_t)b * klen;
        const float *dq_rows = A->d_tmp + (size_t)b * Lq * d;
        float *seg = dcb + (size_t)m * d;
        for (size_t i = 0; i < (size_t)Lq * d; i++)
            seg[i] += dq_rows[i];
        layernorm_backward(NULL, G->attn_ln_w, G->attn_ln_b, dcb, lc->ln0_xhat + r0 * d,
                           lc->ln0_rstd + r0, L->attn_ln_w, m, d, 0);
        layernorm_backward(dib, G->attn_ln_w, G->attn_ln_b, dcb + (size_t)m * d,
                           lc->ln0_xhat + (r0 + m) * d, lc->ln0_rstd + r0 + m, L->attn_ln_w,
                           Lq, d, 1);
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

    xent_backward(A->d_out, mdl->G.word_emb, mdl->G.out_bias, A->logits, A->lse, A->hfin,
                  mdl->W.word_emb, A->cur_y, (int)BL, d, c->vocab, loss_scale);
    dropout_backward(A->d_out, A->d_out, n, p, site_key(key, -1, SITE_FINAL), A->b_offset * (n / B));
    float *dout = A->d_out, *din = A->d_in;
    for (int l = N - 1; l >= 0; l--) {
        layer_backward(mdl, A, l, dout, din);
        float *t = dout;
        dout = din;
        din = t;
    }
    /* dout = gradient w.r.t. hs[0] = drop(E[x] sqrt(d) (+ P)) */
    dropout_backward(dout, dout, n, p, site_key(key, -1, SITE_EMB), A->b_offset * (n / B));
    embedding_backward(mdl->G.word_emb, dout, A->cur_x, (int)BL, d, sqrtf((float)d));
}

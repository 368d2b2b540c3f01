/* model.c: the parameter table, activation plan, and the forward/backward of one segment
 * (doc/design.md, "The model"). The positional scheme is a pos_ops (pos.h): its hooks add
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
#include "gemm.h"
#include "layernorm.h"
#include "xent.h"

#define ALIGN_FLOATS 16 /* 64-byte alignment of every tensor and buffer */

static size_t align_up(size_t n) { return (n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS; }

/* ---------------------------------------------------------------- parameter table */

/* The table as it is built: entries, the running offset, and which layer the positional
 * scheme's params hook is adding to (its tensors take the next pos[] view). */
struct param_table {
    param_entry *t;
    int n, cap;
    size_t off, count;
    int layer, n_pos;
};

#define LAYER_FIELD(f) ((int)(offsetof(layer_tensors, f) / sizeof(float *)))
#define MODEL_FIELD(f) ((int)(offsetof(model_tensors, f) / sizeof(float *)))

static int table_add(param_table *b, int field, int d0, int d1, param_init init,
                     const char *fmt, va_list ap)
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
    vsnprintf(p->name, sizeof p->name, fmt, ap);
    p->ndim = d1 > 0 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1 > 0 ? d1 : 0;
    p->numel = (size_t)d0 * (d1 > 0 ? (size_t)d1 : 1);
    p->init = init;
    p->layer = b->layer;
    p->field = field;
    p->offset = b->off;
    b->off = align_up(b->off + p->numel);
    b->count += p->numel;
    return 0;
}

static int core_add(param_table *b, int field, int d0, int d1, param_init init,
                    const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static int core_add(param_table *b, int field, int d0, int d1, param_init init,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = table_add(b, field, d0, d1, init, fmt, ap);
    va_end(ap);
    return rc;
}

int param_add(param_table *b, int d0, int d1, param_init init, const char *fmt, ...)
{
    if (b->n_pos == POS_SLOTS)
        return -1;
    int field = b->layer < 0 ? MODEL_FIELD(pos) : LAYER_FIELD(pos);
    va_list ap;
    va_start(ap, fmt);
    int rc = table_add(b, field + b->n_pos++, d0, d1, init, fmt, ap);
    va_end(ap);
    return rc;
}

/* The scheme's tensors of `layer` (-1: model-wide), in its own order. */
static int scheme_params(param_table *b, const model_config *c, int layer)
{
    const pos_ops *ops = pos_get(c->pos);
    b->layer = layer;
    b->n_pos = 0;
    return ops->params ? ops->params(b, c, layer) : 0;
}

/* Builds the table in checkpoint order (doc/design.md, "Checkpoints"). */
static int build_table(param_table *b, const model_config *c)
{
    int d = c->d_model, hd = c->n_head * c->d_head, di = c->d_inner;
    int rc = 0;
    b->layer = -1;
    rc |= core_add(b, MODEL_FIELD(word_emb), c->vocab, d, INIT_NORMAL, "word_emb.weight");
    rc |= core_add(b, MODEL_FIELD(out_bias), c->vocab, 0, INIT_ZERO, "out.bias");
    rc |= scheme_params(b, c, -1);
    for (int l = 0; l < c->n_layer; l++) {
        b->layer = l;
        rc |= core_add(b, LAYER_FIELD(qkv_w), 3 * hd, d, INIT_NORMAL, "layers.%d.attn.qkv.weight", l);
        rc |= scheme_params(b, c, l);
        b->layer = l;
        rc |= core_add(b, LAYER_FIELD(o_w), d, hd, INIT_NORMAL, "layers.%d.attn.o.weight", l);
        rc |= core_add(b, LAYER_FIELD(attn_ln_w), d, 0, INIT_ONE, "layers.%d.attn.ln.weight", l);
        rc |= core_add(b, LAYER_FIELD(attn_ln_b), d, 0, INIT_ZERO, "layers.%d.attn.ln.bias", l);
        rc |= core_add(b, LAYER_FIELD(ff0_w), di, d, INIT_NORMAL, "layers.%d.ff.0.weight", l);
        rc |= core_add(b, LAYER_FIELD(ff0_b), di, 0, INIT_ZERO, "layers.%d.ff.0.bias", l);
        rc |= core_add(b, LAYER_FIELD(ff3_w), d, di, INIT_NORMAL, "layers.%d.ff.3.weight", l);
        rc |= core_add(b, LAYER_FIELD(ff3_b), d, 0, INIT_ZERO, "layers.%d.ff.3.bias", l);
        rc |= core_add(b, LAYER_FIELD(ff_ln_w), d, 0, INIT_ONE, "layers.%d.ff.ln.weight", l);
        rc |= core_add(b, LAYER_FIELD(ff_ln_b), d, 0, INIT_ZERO, "layers.%d.ff.ln.bias", l);
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

void model_tensors_view(const model *mdl, float *base, model_tensors *t)
{
    layer_tensors *layers = t->layer;
    memset(t, 0, sizeof *t);
    t->layer = layers;
    memset(layers, 0, (size_t)mdl->cfg.n_layer * sizeof *layers);
    for (int i = 0; i < mdl->n_params; i++) {
        const param_entry *p = &mdl->table[i];
        float **views = p->layer < 0 ? (float **)t : (float **)&layers[p->layer];
        views[p->field] = base + p->offset;
    }
}

/* The scheme's own checks of cfg, then the parameter table (b->t is the caller's to free). */
static int make_table(param_table *b, const model_config *cfg, txl_err *e)
{
    const pos_ops *ops = pos_get(cfg->pos);
    char why[256];
    if (!ops)
        return err_set(e, ERR_INPUT, "model.pos_scheme: unknown scheme %d", (int)cfg->pos);
    if (ops->validate && ops->validate(cfg, why, sizeof why))
        return err_set(e, ERR_INPUT, "%s", why);
    if (build_table(b, cfg)) {
        free(b->t);
        b->t = NULL;
        return err_set(e, ERR_RUNTIME, "out of memory building the parameter table");
    }
    return 0;
}

int model_size(const model_config *cfg, size_t *n_floats, size_t *n_weights, txl_err *e)
{
    param_table b = {0};
    if (make_table(&b, cfg, e))
        return -1;
    *n_floats = b.off;
    *n_weights = b.count;
    free(b.t);
    return 0;
}

int model_init_table(model *mdl, const model_config *cfg, txl_err *e)
{
    memset(mdl, 0, sizeof *mdl);
    mdl->cfg = *cfg;
    param_table b = {0};
    if (make_table(&b, cfg, e))
        return -1;
    mdl->table = b.t;
    mdl->n_params = b.n;
    mdl->n_floats = b.off;
    mdl->n_weights = b.count;
    return 0;
}

int model_init(model *mdl, const model_config *cfg, txl_err *e)
{
    return model_init_table(mdl, cfg, e) || model_alloc_weights(mdl, e) ? -1 : 0;
}

int model_alloc_weights(model *mdl, txl_err *e)
{
    const model_config *cfg = &mdl->cfg;
    mdl->w = aligned_alloc(64, align_up(mdl->n_floats) * sizeof(float));
    mdl->W.layer = calloc((size_t)cfg->n_layer, sizeof(layer_tensors));
    mdl->G.layer = calloc((size_t)cfg->n_layer, sizeof(layer_tensors));
    if (!mdl->w || !mdl->W.layer || !mdl->G.layer) {
        size_t n = mdl->n_weights; /* model_free clears it */
        model_free(mdl);
        return err_set(e, ERR_RUNTIME, "out of memory allocating %zu parameters", n);
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
                   : p->init == INIT_EYES ? (float)((int)(k % (size_t)p->shape[1]) %
                                                    p->shape[0] == (int)(k / (size_t)p->shape[1]))
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

int model_replica(model *r, const model *src, txl_err *e)
{
    *r = *src;
    r->g = NULL;
    r->G.layer = calloc((size_t)src->cfg.n_layer, sizeof *r->G.layer);
    if (!r->G.layer)
        return err_set(e, ERR_RUNTIME, "out of memory allocating a gradient replica");
    return model_alloc_grads(r, e);
}

void model_replica_free(model *r)
{
    free(r->g);
    free(r->G.layer);
    memset(r, 0, sizeof *r);
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

size_t mem_plan_bytes(const model_config *cfg, int B, int M)
{
    size_t rows = (size_t)B * M;
    return rows * cfg->n_layer * cfg->d_model * sizeof(float) +
           (pos_get(cfg->pos)->needs_coords ? rows * TXL_N_COORDS * sizeof(int32_t) : 0);
}

int mem_init(model_mem *mem, const model_config *cfg, int B, int M, txl_err *e)
{
    memset(mem, 0, sizeof *mem);
    mem->n_layer = cfg->n_layer;
    mem->B = B;
    mem->M = M;
    mem->d = cfg->d_model;
    mem->layer_stride = (size_t)B * M * cfg->d_model;
    size_t n = (size_t)cfg->n_layer * B * M * cfg->d_model;
    mem->buf = calloc(n ? n : 1, sizeof(float));
    if (pos_get(cfg->pos)->needs_coords)
        mem->coords = calloc((size_t)B * M * TXL_N_COORDS + 1, sizeof(int32_t));
    if (!mem->buf || (pos_get(cfg->pos)->needs_coords && !mem->coords)) {
        mem_free(mem);
        return err_set(e, ERR_RUNTIME, "out of memory allocating the memory (%zu floats)", n);
    }
    return 0;
}

void mem_reset(model_mem *mem) { mem->m = 0; }

model_mem mem_slice(const model_mem *whole, int b0, int B)
{
    assert(b0 >= 0 && B >= 0 && b0 + B <= whole->B);
    model_mem v = *whole;
    v.B = B;
    v.buf = whole->buf + (size_t)b0 * whole->M * whole->d;
    v.coords = whole->coords ? whole->coords + (size_t)b0 * whole->M * TXL_N_COORDS : NULL;
    return v;
}

void mem_free(model_mem *mem)
{
    free(mem->buf);
    free(mem->coords);
    memset(mem, 0, sizeof *mem);
}

/* ---------------------------------------------------------------- key cache */

size_t kv_cache_plan_floats(const model_config *cfg, int B, int M, int Lq_max)
{
    if (M <= 0 || pos_get(cfg->pos)->window_keys)
        return 0;
    return (size_t)cfg->n_layer * B * (M + 2 * Lq_max) * 2 * cfg->n_head * cfg->d_head;
}

void kv_cache_init(kv_cache *k, const model_config *cfg, int B, int M, int Lq_max)
{
    memset(k, 0, sizeof *k);
    k->m = -1;
    size_t n = kv_cache_plan_floats(cfg, B, M, Lq_max);
    if (!n)
        return;
    k->n_layer = cfg->n_layer;
    k->B = B;
    k->M = M;
    k->Lq_max = Lq_max;
    k->cap = M + 2 * Lq_max;
    k->row = 2 * cfg->n_head * cfg->d_head;
    k->buf = aligned_alloc(64, align_up(n) * sizeof(float)); /* NULL: none */
}

void kv_cache_invalidate(kv_cache *k) { k->m = -1; }

void kv_cache_free(kv_cache *k)
{
    free(k->buf);
    memset(k, 0, sizeof *k);
    k->m = -1;
}

/* Row 0 of stream b's window of layer l. */
static float *kv_window(const kv_cache *k, int l, int b)
{
    return k->buf + ((size_t)l * k->B + b) * k->cap * k->row;
}

/* Whether k holds the keys of mem's rows (an empty memory: nothing to hold). */
static int kv_cache_valid(const kv_cache *k, const model_mem *mem, int Lq)
{
    if (!k || !k->buf)
        return 0;
    assert(k->B == mem->B && k->M == mem->M && Lq <= k->Lq_max);
    return mem->m == 0 || (k->m == mem->m && k->of == mem->buf && k->gen == mem->gen);
}

/* Refill layer l from a window projected whole (kv [B, klen, row]): its last rows that the
 * memory keeps, at the front. */
static void kv_cache_fill(kv_cache *k, int l, const float *kv, int klen)
{
    int keep = klen < k->M ? klen : k->M;
#pragma omp parallel for schedule(static) if ((size_t)k->B * keep * k->row > 65536)
    for (int b = 0; b < k->B; b++)
        memcpy(kv_window(k, l, b), kv + ((size_t)b * klen + (klen - keep)) * k->row,
               (size_t)keep * k->row * sizeof(float));
}

/* After a segment of klen rows ending at start + klen: the memory is its last rows. When
 * the next segment would not fit behind them, they move to the front of every window. */
static void kv_cache_advance(kv_cache *k, const model_mem *mem, int klen, int filled)
{
    int keep = klen < k->M ? klen : k->M;
    int s = filled ? 0 : k->start + klen - keep;
    if (s + keep + k->Lq_max > k->cap) {
        int n = k->n_layer * k->B;
#pragma omp parallel for schedule(static) if ((size_t)n * keep * k->row > 65536)
        for (int i = 0; i < n; i++) {
            float *w = kv_window(k, i / k->B, i % k->B);
            memmove(w, w + (size_t)s * k->row, (size_t)keep * k->row * sizeof(float));
        }
        s = 0;
    }
    k->start = s;
    k->m = keep;
    k->of = mem->buf;
    k->gen = mem->gen;
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

static float *take_cb(void *a, size_t n) { return take(a, n); }

static void plan_layer(model_acts *A, arena *ar, layer_cache *lc, pos_alloc *pa,
                       const pos_dims *pd)
{
    const model_config *c = &A->cfg;
    int B = A->B, Lq = A->Lq_max, klen = Lq + A->M, d = c->d_model;
    int H = c->n_head, hd = H * c->d_head, di = c->d_inner, tr = A->training;
    size_t BL = (size_t)B * Lq, BK = (size_t)B * klen;
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
    lc->prob = tr ? take(ar, (size_t)B * H * Lq * klen) : NULL;
    lc->vec = take(ar, BL * hd);
    lc->h1 = take(ar, BL * d);
    lc->ln1_xhat = tr ? take(ar, BL * d) : NULL;
    lc->ln1_rstd = tr ? take(ar, BL) : NULL;
    lc->a = take(ar, BL * di);
    lc->ln2_xhat = tr && !c->pre_lnorm ? take(ar, BL * d) : NULL;
    lc->ln2_rstd = tr && !c->pre_lnorm ? take(ar, BL) : NULL;
    memset(&lc->pos, 0, sizeof lc->pos);
    if (A->pos->plan_layer)
        A->pos->plan_layer(c, pd, pa, &lc->pos);
}

static void plan(model_acts *A, arena *ar)
{
    const model_config *c = &A->cfg;
    int B = A->B, Lq = A->Lq_max, M = A->M, klen = Lq + M, d = c->d_model;
    int H = c->n_head, hd = H * c->d_head, di = c->d_inner, N = c->n_layer, V = c->vocab;
    int tr = A->training;
    size_t BL = (size_t)B * Lq, BK = (size_t)B * klen;
    pos_dims pd = {.B = B, .Lq = Lq, .M = M, .training = tr};
    pos_alloc pa = {take_cb, ar};
    int nc = tr ? N : 1;
    for (int l = 0; l < nc; l++)
        plan_layer(A, ar, &A->lc[l], &pa, &pd);
    A->hs = take(ar, (size_t)(N + 1) * BL * d);
    A->hfin = take(ar, BL * d);
    A->logits = take(ar, BL * V);
    A->lse = take(ar, BL);
    A->row_loss = take(ar, BL);
    A->tmp = take(ar, BL * d);
    A->attn_scratch = take(ar, attn_scratch_floats(Lq, klen, c->d_head, H, A->threads));
    /* int32 coordinates in float-sized slots of the arena (only ever accessed as int32) */
    A->cat_coords = A->pos->needs_coords ? (int32_t *)take(ar, BK * TXL_N_COORDS) : NULL;
    memset(&A->pos_acts, 0, sizeof A->pos_acts);
    memset(&A->pos_bw, 0, sizeof A->pos_bw);
    if (A->pos->plan)
        A->pos->plan(c, &pd, &pa, &A->pos_acts, &A->pos_bw);
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
    }
}

/* The sizes of A and its layer caches, before plan() lays out the buffers. */
static int acts_begin(model_acts *A, const model_config *cfg, int B, int Lq_max, int M,
                      int training, txl_err *e)
{
    memset(A, 0, sizeof *A);
    A->cfg = *cfg;
    A->pos = pos_get(cfg->pos);
    A->B = B;
    A->Lq_max = Lq_max;
    A->M = M;
    A->training = training;
    A->threads = par_max_threads();
    A->lc = calloc(training ? (size_t)cfg->n_layer : 1, sizeof(layer_cache));
    if (!A->lc)
        return err_set(e, ERR_RUNTIME, "out of memory planning activations");
    return 0;
}

int acts_plan_floats(const model_config *cfg, int B, int Lq_max, int M, int training,
                     size_t *floats, txl_err *e)
{
    model_acts A;
    if (acts_begin(&A, cfg, B, Lq_max, M, training, e))
        return -1;
    arena ar = {NULL, 0}; /* no base: plan() only counts */
    plan(&A, &ar);
    *floats = ar.used;
    free(A.lc);
    return 0;
}

int acts_init(model_acts *A, const model_config *cfg, int B, int Lq_max, int M, int training,
              txl_err *e)
{
    if (acts_begin(A, cfg, B, Lq_max, M, training, e))
        return -1;
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
    return 0;
}

void acts_free(model_acts *A)
{
    free(A->arena_base);
    free(A->lc);
    memset(A, 0, sizeof *A);
}

/* ---------------------------------------------------------------- forward */

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

/* The segment as the scheme's hooks see it. */
static pos_seg segment_of(const model_acts *A, int Lq, int m, const fwd_opts *o)
{
    return (pos_seg){.c = &A->cfg, .B = A->B, .Lq = Lq, .m = m, .training = o->training,
                     .dropout = o->training ? A->cfg.dropout : 0.0f, .drop_key = o->drop_key,
                     .b_offset = A->b_offset, .pos_offset = o->pos_offset,
                     .coords = A->cat_coords, .acts = (pos_acts *)&A->pos_acts};
}

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

static pos_ctx layer_ctx(model *mdl, model_acts *A, const pos_seg *s, int l, layer_cache *lc)
{
    return (pos_ctx){.s = s, .layer = l, .W = &mdl->W.layer[l], .MW = &mdl->W,
                     .G = mdl->g ? &mdl->G.layer[l] : NULL, .MG = mdl->g ? &mdl->G : NULL,
                     .lc = &lc->pos, .bw = &A->pos_bw, .q = lc->q, .kv = lc->kv};
}

static attn_args attn_base(const model_acts *A, const pos_seg *s, int l)
{
    const model_config *c = &A->cfg;
    return (attn_args){.B = s->B, .H = c->n_head, .dh = c->d_head, .Lq = s->Lq, .m = s->m,
                       .scale = (float)(1.0 / sqrt((double)c->d_head)),
                       .dropatt = s->training ? c->dropatt : 0.0f,
                       .drop_key = pos_site_key(s->drop_key, l, SITE_DROPATT),
                       .b_offset = s->b_offset, .threads = A->threads,
                       .row_block = A->attn_row_block};
}

/* linear_forward overwriting y, with linear_forward_few's signature */
static void linear_overwrite(float *y, const float *x, const float *W, const float *bias,
                             int rows, int out, int in)
{
    linear_forward(y, x, W, bias, rows, out, in, 0);
}

void layer_tail_forward(const model_config *c, const layer_tensors *L, int l, int rows,
                        const float *x, const float *vec, float *out, const layer_tail_bufs *t,
                        float p, uint64_t key, size_t base_row)
{
    int d = c->d_model, hd = c->n_head * c->d_head, di = c->d_inner;
    size_t n = (size_t)rows * d;
    void (*lin)(float *, const float *, const float *, const float *, int, int, int) =
        t->few_rows ? linear_forward_few : linear_overwrite;
    /* output projection, dropout, residual (+ LN when post) */
    lin(t->tmp, vec, L->o_w, NULL, rows, d, hd);
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
    lin(t->a, ffin, L->ff0_w, L->ff0_b, rows, di, d);
    dropout_relu(t->a, t->a, (size_t)rows * di, p, pos_site_key(key, l, SITE_FF_ACT),
                 base_row * di);
    lin(t->tmp, t->a, L->ff3_w, L->ff3_b, rows, d, di);
    dropout_add(out, t->h1, t->tmp, n, p, pos_site_key(key, l, SITE_FF_OUT), base_row * d);
    if (!c->pre_lnorm)
        layernorm_forward(out, t->ln2_xhat, t->ln2_rstd, out, L->ff_ln_w, L->ff_ln_b, rows, d);
}

/* cat = [mem[l]; x], its LN (pre-LN), and the projections kv (all klen rows) and q (the
 * segment rows). */
static void layer_project(const model_config *c, const layer_tensors *L, layer_cache *lc,
                          const float *x, const model_mem *mem, int l, int B, int Lq)
{
    int d = c->d_model, hd = c->n_head * c->d_head, m = mem->m, klen = m + Lq, M = mem->M;
    const float *ml = mem_layer(mem, l);
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
    linear_forward(lc->kv, X, L->qkv_w + (size_t)hd * d, NULL, B * klen, 2 * hd, d, 0);
    linear_forward(lc->q, Xq, L->qkv_w, NULL, B * Lq, hd, d, 0);
}

/* new mem[l] = the last M rows of [mem[l]; x] in place (inference with a key cache, which
 * builds no cat): copy_mem_rows's rows. */
static void push_mem_rows(model_mem *mem, int l, const float *x, int Lq)
{
    int B = mem->B, M = mem->M, d = mem->d, m = mem->m;
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
    linear_forward(lc->q, X, L->qkv_w, NULL, B * Lq, hd, d, 0);
    linear_forward(lc->kv, X, L->qkv_w + (size_t)hd * d, NULL, B * Lq, 2 * hd, d, 0);
#pragma omp parallel for schedule(static) if ((size_t)B * Lq * k->row > 65536)
    for (int b = 0; b < B; b++)
        memcpy(kv_window(k, l, b) + (size_t)(k->start + m) * k->row,
               lc->kv + (size_t)b * Lq * k->row, (size_t)Lq * k->row * sizeof(float));
}

static void layer_forward(model *mdl, model_acts *A, model_mem *mem, const pos_seg *s, int l,
                          const fwd_opts *o, int cached)
{
    const model_config *c = &A->cfg;
    const layer_tensors *L = &mdl->W.layer[l];
    int tr = o->training, B = A->B, Lq = s->Lq, klen = mem->m + Lq;
    size_t n = (size_t)B * Lq * c->d_model;
    layer_cache *lc = tr ? &A->lc[l] : &A->lc[0];
    const float *x = A->hs + (size_t)l * n;
    kv_cache *k = o->kv;

    const float *kv = lc->kv;
    if (cached) {
        layer_project_cached(c, L, lc, x, k, l, B, Lq, mem->m);
        kv = kv_window(k, l, 0) + (size_t)k->start * k->row;
    } else {
        layer_project(c, L, lc, x, mem, l, B, Lq);
        if (k && k->buf)
            kv_cache_fill(k, l, lc->kv, klen);
    }
    pos_ctx pc = layer_ctx(mdl, A, s, l, lc);
    if (cached)
        pc.kv = NULL;
    if (A->pos->layer_forward)
        A->pos->layer_forward(&pc);
    attn_args aa = attn_base(A, s, l);
    if (cached)
        aa.kv_bstride = (size_t)k->cap * k->row;
    if (A->pos->attn_args)
        A->pos->attn_args(&pc, &aa);
    if (o->stats)
        attn_term_stats(o->stats[l].acc, &o->stats[l].count, lc->q, kv, &aa);
    attn_forward(tr ? lc->prob : NULL, lc->vec, lc->q, kv, &aa, A->attn_scratch);

    layer_tail_bufs tb = {lc->h1, lc->ffin, lc->a, A->tmp,
                          lc->ln1_xhat, lc->ln1_rstd, lc->ln2_xhat, lc->ln2_rstd, 0};
    layer_tail_forward(c, L, l, B * Lq, x, lc->vec, A->hs + (size_t)(l + 1) * n, &tb, s->dropout,
                       o->drop_key, A->b_offset * (size_t)Lq);
    if (cached)
        push_mem_rows(mem, l, x, Lq);
    else if (!tr) /* inference shares one cache: advance this layer's memory now */
        copy_mem_rows(mem, l, lc->cat, klen);
}

void model_embed(const model *mdl, const pos_ops *ops, pos_acts *pa, float *h,
                 const txl_tok *tok, int B, int Lq, int m, long pos_offset)
{
    const model_config *c = &mdl->cfg;
    embedding_forward(h, mdl->W.word_emb, tok, B * Lq, c->d_model, sqrtf((float)c->d_model));
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
    model_embed(mdl, A->pos, &A->pos_acts, h0, x, B, Lq, m, o->pos_offset);
    dropout_forward(h0, h0, n, s.dropout, pos_site_key(o->drop_key, -1, SITE_EMB),
                    A->b_offset * (n / B));
    if (A->pos->segment)
        A->pos->segment(&s);
    assert(!o->kv || !o->training);
    int cached = kv_cache_valid(o->kv, mem, Lq);
    if (cached && mem->m == 0)
        o->kv->start = 0;
    for (int l = 0; l < N; l++)
        layer_forward(mdl, A, mem, &s, l, o, cached);

    dropout_forward(A->hfin, A->hs + (size_t)N * n, n, s.dropout,
                    pos_site_key(o->drop_key, -1, SITE_FINAL), A->b_offset * (n / B));
    double loss = xent_forward(A->logits, A->lse, A->row_loss, A->hfin, mdl->W.word_emb,
                               mdl->W.out_bias, y, (int)BL, d, c->vocab);
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
        if (o->kv && o->kv->buf)
            kv_cache_advance(o->kv, mem, klen, !cached);
    }
    return loss;
}

void model_mem_update(model_acts *A, model_mem *mem)
{
    int klen = A->cur_m + A->cur_Lq;
    for (int l = 0; l < A->cfg.n_layer; l++)
        copy_mem_rows(mem, l, A->lc[l].cat, klen);
    keep_coords(A, mem, klen);
    mem->m = klen < mem->M ? klen : mem->M;
    mem->gen++;
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
    if (!c->pre_lnorm) {
        layernorm_backward(d_r2, G->ff_ln_w, G->ff_ln_b, d_out, lc->ln2_xhat, lc->ln2_rstd,
                           L->ff_ln_w, (int)BL, d, 0);
    }
    /* d_h1 = d(h1 + z2) (the residual branch); d_r2 = its masked copy (the ff branch) */
    dropout_backward_copy(d_r2, d_h1, c->pre_lnorm ? d_out : d_r2, n, p,
                          pos_site_key(key, l, SITE_FF_OUT), A->b_offset * (n / B));
    /* z2 = a @ W3^T + b3; a = drop(relu(z1)); z1 = ffin @ W0^T + b0 */
    linear_backward(A->d_a, G->ff3_w, G->ff3_b, d_r2, lc->a, L->ff3_w, (int)BL, d, di, 0);
    dropout_relu_backward(A->d_a, A->d_a, lc->a, BL * di, p);
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
    dropout_backward_copy(d_h1, d_in, d_h1, n, p, pos_site_key(key, l, SITE_ATTN_OUT),
                          A->b_offset * (n / B)); /* d_in = d_h1 before the mask */
    linear_backward(A->d_vec, G->o_w, NULL, d_h1, lc->vec, L->o_w, (int)BL, d, hd, 0);
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
    linear_backward(A->d_cat, G->qkv_w + (size_t)hd * d, NULL, A->d_kv, lc->catn,
                    L->qkv_w + (size_t)hd * d, B * klen, 2 * hd, d, 0);
    /* d(LN(cat) segment rows) = d(q) Wq, parked in d_tmp (free by now) */
    linear_backward(A->d_tmp, G->qkv_w, NULL, A->d_q, lc->xq, L->qkv_w, B * Lq, hd, d, 0);
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
    attn_backward(A->d_q, A->d_kv, ag.drk, ag.du, ag.dv, ag.d_bias, A->d_vec, lc->prob, lc->q,
                  lc->kv, &aa, A->attn_scratch);
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
#pragma omp parallel sections num_threads(2) if (par_threads() == 2 && m == Lq)
    {
#pragma omp section
        linear_backward(NULL, G->qkv_w + (size_t)hd * d, NULL, A->d_kv, lc->cat, Wkv, B * klen,
                        2 * hd, d, 0);
#pragma omp section
        qkv_dx(d_in, G->qkv_w, A->d_q, A->d_kv, x, L->qkv_w, B, Lq, m, d, hd);
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

    xent_backward(A->d_out, mdl->G.word_emb, mdl->G.out_bias, A->logits, A->lse, A->hfin,
                  mdl->W.word_emb, A->cur_y, (int)BL, d, c->vocab, loss_scale);
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
    embedding_backward(mdl->G.word_emb, dout, A->cur_x, (int)BL, d, sqrtf((float)d));
}

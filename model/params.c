/* params.c: the parameter table (doc/design.md, "The model"): every tensor's checkpoint name,
 * shape, init and offset into one float array, built from the config and the positional
 * scheme's params hook; the weights and gradients laid out by it, and their lifetimes. The
 * table is the one source of tensor counts and sizes (model_counts). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/rng.h"
#include "../common/sys.h"
#include "gemm.h"
#include "gemm_bf16.h"
#include "model_impl.h"

/* The table as it is built: entries, the running offset, and which layer the positional
 * scheme's params hook is adding to (its tensors take the next pos[] view). */
struct param_table {
    param_entry *t;
    int n, cap;
    size_t off, count;
    int layer, n_pos;
    int counting;              /* model_counts: no entries, the sums in doubles */
    double n_d, off_d, count_d;
};

#define LAYER_FIELD(f) ((int)(offsetof(layer_tensors, f) / sizeof(float *)))
#define MODEL_FIELD(f) ((int)(offsetof(model_tensors, f) / sizeof(float *)))

static int table_add(param_table *b, int field, int d0, int d1, param_init init, float arg,
                     const char *fmt, va_list ap)
{
    if (b->counting) {
        double numel = (double)d0 * (d1 > 0 ? d1 : 1);
        b->n_d += 1;
        b->off_d += ceil(numel / ALIGN_FLOATS) * ALIGN_FLOATS;
        b->count_d += numel;
        return 0;
    }
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
    p->init_arg = arg;
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
    int rc = table_add(b, field, d0, d1, init, 0.0f, fmt, ap);
    va_end(ap);
    return rc;
}

static int pos_add(param_table *b, int d0, int d1, param_init init, float arg, const char *fmt,
                   va_list ap)
{
    if (b->n_pos == POS_SLOTS)
        return -1;
    int field = b->layer < 0 ? MODEL_FIELD(pos) : LAYER_FIELD(pos);
    return table_add(b, field + b->n_pos++, d0, d1, init, arg, fmt, ap);
}

int param_add(param_table *b, int d0, int d1, param_init init, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = pos_add(b, d0, d1, init, 0.0f, fmt, ap);
    va_end(ap);
    return rc;
}

int param_add_init(param_table *b, int d0, int d1, param_init init, float arg,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = pos_add(b, d0, d1, init, arg, fmt, ap);
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

/* Projections exist (adaptive.h): one per cluster with div_val > 1, one for all (P_0) with
 * div_val 1 when d_embed != d_model. */
static int has_proj(const adapt_shape *s, int i)
{
    return s->one_table ? i == 0 && s->dim[0] != s->d : 1;
}

/* The adaptive input and softmax (adaptive.h), named as official Transformer-XL's state_dict
 * names them (word_emb = AdaptiveEmbedding, crit = ProjectedAdaptiveLogSoftmax; the output
 * weights are the embeddings, tied, so crit.out_layers.{i}.weight is not stored): the
 * embeddings, their projections, the cluster logits, the output biases, the output
 * projections that are not tied to the input's. Official's init: N(0, 0.02) for the
 * embeddings and C, N(0, 0.01) for the projections, 0 for the biases. */
static int build_adaptive(param_table *b, const model_config *c)
{
    adapt_shape s;
    adapt_shape_of(c, &s);
    int d = c->d_model, tables = s.one_table ? 1 : s.n, T = s.n - 1, rc = 0;
    for (int i = 0; i < tables; i++)
        rc |= core_add(b, MODEL_FIELD(ad_emb) + i, s.one_table ? s.V : s.hi[i] - s.lo[i],
                       s.dim[i], INIT_NORMAL, "word_emb.emb_layers.%d.weight", i);
    for (int i = 0; i < tables; i++)
        if (has_proj(&s, i))
            rc |= core_add(b, MODEL_FIELD(ad_pin) + i, d, s.dim[i], INIT_PROJ,
                           "word_emb.emb_projs.%d", i);
    if (T > 0) {
        rc |= core_add(b, MODEL_FIELD(ad_cw), T, s.dim[0], INIT_NORMAL, "crit.cluster_weight");
        rc |= core_add(b, MODEL_FIELD(ad_cb), T, 0, INIT_ZERO, "crit.cluster_bias");
    }
    for (int i = 0; i < tables; i++)
        rc |= core_add(b, MODEL_FIELD(ad_bias) + i, s.one_table ? s.V : s.hi[i] - s.lo[i], 0,
                       INIT_ZERO, "crit.out_layers.%d.bias", i);
    for (int i = 0; i < s.n; i++) /* Q_i, unless tied to the input's (the tails) */
        if ((s.one_table ? s.dim[0] != d : 1) && !(c->tie_projs && i > 0))
            rc |= core_add(b, MODEL_FIELD(ad_pout) + i, d, s.dim[i], INIT_PROJ,
                           "crit.out_projs.%d", i);
    return rc;
}

/* The model-wide tensors, in checkpoint order (doc/design.md, "Checkpoints"). */
static int build_model_wide(param_table *b, const model_config *c)
{
    int rc = 0;
    b->layer = -1;
    if (adapt_in_use(c)) {
        rc |= build_adaptive(b, c);
    } else {
        rc |= core_add(b, MODEL_FIELD(word_emb), c->vocab, c->d_model, INIT_NORMAL,
                       "word_emb.weight");
        rc |= core_add(b, MODEL_FIELD(out_bias), c->vocab, 0, INIT_ZERO, "out.bias");
    }
    rc |= scheme_params(b, c, -1);
    return rc;
}

void model_adapt_view(const model_config *c, const model_tensors *t, adapt_tensors *out)
{
    adapt_shape s;
    adapt_shape_of(c, &s);
    memset(out, 0, sizeof *out);
    for (int i = 0; i < s.n; i++) {
        int k = s.one_table ? 0 : i;
        size_t row = s.one_table ? (size_t)s.lo[i] : 0;
        out->emb[i] = t->ad_emb[k] ? t->ad_emb[k] + row * (size_t)s.dim[0] : NULL;
        out->bias[i] = t->ad_bias[k] ? t->ad_bias[k] + row : NULL;
        out->pin[i] = t->ad_pin[k];
        out->pout[i] = t->ad_pout[i] ? t->ad_pout[i] : c->tie_projs && i > 0 ? out->pin[i] : NULL;
    }
    out->cw = t->ad_cw;
    out->cb = t->ad_cb;
}

void model_embed_tensor(const model_config *c, char *name, size_t cap, int shape[2])
{
    adapt_shape s;
    int ad = adapt_in_use(c);
    adapt_shape_of(c, &s);
    snprintf(name, cap, "%s", ad ? "word_emb.emb_layers.0.weight" : "word_emb.weight");
    shape[0] = ad && !s.one_table ? s.hi[0] : c->vocab;
    shape[1] = ad ? s.dim[0] : c->d_model;
}

/* Layer l's tensors, in checkpoint order; every layer has the same shapes. */
static int build_layer(param_table *b, const model_config *c, int l)
{
    int d = c->d_model, hd = c->n_head * c->d_head, di = c->d_inner;
    int rc = 0;
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
    return rc;
}

/* The whole table, in checkpoint order. */
static int build_table(param_table *b, const model_config *c)
{
    int rc = build_model_wide(b, c);
    for (int l = 0; l < c->n_layer; l++)
        rc |= build_layer(b, c, l);
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

/* The scheme's own checks of cfg, and the adaptive softmax's. */
static int check_scheme(const model_config *cfg, txl_err *e)
{
    const pos_ops *ops = pos_get(cfg->pos);
    char why[512];
    if (!ops)
        return err_set(e, ERR_INPUT, "model.pos_scheme: unknown scheme %d", (int)cfg->pos);
    if ((ops->validate && ops->validate(cfg, why, sizeof why)) ||
        adapt_validate(cfg, why, sizeof why))
        return err_set(e, ERR_INPUT, "%s", why);
    return 0;
}

int model_counts(const model_config *cfg, model_count *out, txl_err *e)
{
    param_table b = {.counting = 1};
    if (check_scheme(cfg, e))
        return -1;
    build_model_wide(&b, cfg);
    model_count wide = {b.n_d, b.count_d, b.off_d};
    build_layer(&b, cfg, 0);
    double L = cfg->n_layer;
    *out = (model_count){.tensors = wide.tensors + L * (b.n_d - wide.tensors),
                         .weights = wide.weights + L * (b.count_d - wide.weights),
                         .floats = wide.floats + L * (b.off_d - wide.floats)};
    return 0;
}

/* The scheme's own checks of cfg, then the parameter table (b->t is the caller's to free). */
static int make_table(param_table *b, const model_config *cfg, txl_err *e)
{
    if (check_scheme(cfg, e))
        return -1;
    if (build_table(b, cfg)) {
        free(b->t);
        b->t = NULL;
        return err_set(e, ERR_RUNTIME, "out of memory building the parameter table");
    }
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
    mdl->w = sys_alloc(align_up(mdl->n_floats) * sizeof(float));
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
                   : p->init == INIT_PROJ ? (float)(0.01 * rng_normal(&r))
                   : p->init == INIT_ONE  ? 1.0f
                   : p->init == INIT_CONST ? p->init_arg
                   : p->init == INIT_UNIFORM ? (float)(p->init_arg * (2.0 * rng_uniform(&r) - 1.0))
                   : p->init == INIT_EYES ? (float)((int)(k % (size_t)p->shape[1]) %
                                                    p->shape[0] == (int)(k / (size_t)p->shape[1]))
                                          : 0.0f;
    }
}

int model_alloc_grads(model *mdl, txl_err *e)
{
    if (mdl->g)
        return 0;
    mdl->g = sys_alloc(align_up(mdl->n_floats) * sizeof(float));
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

int model_bf16_sync(model *mdl, int force)
{
    if (gemm_get_precision() != GEMM_BF16 || !mdl->w) {
        if (mdl->wb)
            gemm_bf16_unshadow(mdl->w);
        mdl->wb_fresh = 0;
        return 0;
    }
    if (mdl->wb_fresh && !force)
        return 0;
    if (!mdl->wb && !(mdl->wb = malloc(mdl->n_floats * sizeof *mdl->wb)))
        return -1;
    /* in rows of 4096 floats, so that gemm_bf16_round splits them over the threads */
    enum { ROW = 4096 };
    size_t rows = mdl->n_floats / ROW, tail = mdl->n_floats - rows * ROW;
    if (rows)
        gemm_bf16_round(mdl->wb, mdl->w, (int)rows, ROW, ROW);
    if (tail)
        gemm_bf16_round(mdl->wb + rows * ROW, mdl->w + rows * ROW, 1, (int)tail, (int)tail);
    mdl->wb_fresh = 1;
    return gemm_bf16_shadow(mdl->w, mdl->n_floats, mdl->wb);
}

void model_free(model *mdl)
{
    if (mdl->wb) {
        gemm_bf16_unshadow(mdl->w);
        free(mdl->wb);
    }
    free(mdl->table);
    free(mdl->w);
    free(mdl->g);
    free(mdl->W.layer);
    free(mdl->G.layer);
    free(mdl->qm);
    free(mdl->qbuf);
    memset(mdl, 0, sizeof *mdl);
}

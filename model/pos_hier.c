/* pos_hier.c: the hierarchical relative bias (doc/design.md, "Positional schemes").
 *
 * Several relative coordinates, one per level (token, word, sentence, paragraph): for query
 * i and key j, delta_l = c_l(i) - c_l(j) >= 0, where c_token is the position and the other
 * coordinates count the units started so far (data/units.h; they come with the tokens and
 * stay with the memory rows). Each level has its own multi-frequency MLP, as the mlp
 * scheme's, with its own largest distance (mlp_max_dist / 1, 4, 32, 128 for token, word,
 * sentence, paragraph, at least 2):
 *
 *   b_l(delta) = W2_l GELU(W1_l phi_l(delta) + b1_l) + b2_l  in R^H
 *   bias_h(i, j) = sum_l sum_h' C[h, l*H + h'] b_l,h'(delta_l) + c_h
 *
 * Cost: per layer and segment, each level's MLP runs on the distinct deltas 0..D_l-1 that
 * occur in the window (D_token = klen; D_l <= klen), and C folds into one table per level,
 * T_l = C_l b_l (+ c on the token level) [H, D_l]; the attention kernel adds
 * sum_l T_l[h][delta_l] to each score (attn_bias_fn), the order of work of the scores
 * themselves. The backward scatters dS into dT_l (per-thread partials), then dC, dc and
 * d b_l = C_l^T dT_l go back through each MLP. No (B, H, Lq, klen, levels) tensor exists.
 * With the token level alone and C = I, c = 0 this is the mlp scheme.
 *
 * Slots: per layer, level k's W1, b1, W2, b2 at pos[4k..4k+3], then C [H, L*H] and c [H].
 * C starts as identity blocks (every level feeds its own head), so all levels learn from the
 * first step. Buffers: acts phi, d_t (the MLP scratch), the bias context and the per-thread
 * partials; per layer, per level: b, pre, act, T; backward: dT (all levels), d_b, d_act. */
#include <stdio.h>
#include <string.h>

#include "../common/par.h"
#include "gemm.h"
#include "model.h"
#include "posenc.h"

#define MAX_LEVELS 4
static const char *const level_names[MAX_LEVELS] = {"token", "word", "sent", "para"};
static const int level_div[MAX_LEVELS] = {1, 4, 32, 128};

static const char *const hier_terms[] = {"content", "hier_bias", NULL};

typedef struct {
    int n;                 /* levels in use */
    int id[MAX_LEVELS];    /* 0 token, 1 word, 2 sent, 3 para */
    float max_dist[MAX_LEVELS];
} levels;

static void levels_of(const model_config *c, levels *L)
{
    L->n = 0;
    for (int id = 0; id < MAX_LEVELS; id++)
        if (c->hier_levels & (1 << id)) {
            float md = c->mlp_max_dist / (float)level_div[id];
            L->id[L->n] = id;
            L->max_dist[L->n++] = md > 2.0f ? md : 2.0f;
        }
}

enum { B_PHI, B_DT, B_CTX, B_PARTIALS };        /* acts */
enum { B_TABLES };                              /* layer: per level b, pre, act, T */
enum { B_DTAB, B_DB, B_DACT };                  /* backward */

/* The bias context handed to the attention kernel (lives in the arena, acts B_CTX). */
typedef struct {
    attn_bias_fn fn;       /* first: the kernel passes &fn back */
    int n, id[MAX_LEVELS], H;
    const float *T[MAX_LEVELS];
    int ld;                /* row stride of each T (klen, or M+1 when decoding) */
    int D[MAX_LEVELS];     /* distances evaluated per level (the window's span) */
    const int32_t *coords; /* coordinates of the rows 0..klen-1 of stream 0 */
    size_t bstride;        /* int32s from one stream's rows to the next */
} hier_ctx;

_Static_assert(sizeof(hier_ctx) <= POS_BIAS_STATE, "hier_ctx must fit the decode storage");

static size_t ctx_floats(void) { return (sizeof(hier_ctx) + sizeof(float) - 1) / sizeof(float); }

/* delta of level k between the query row q and key row j of one stream */
static inline int level_delta(const hier_ctx *x, const int32_t *co, int k, int q, int j)
{
    int id = x->id[k];
    if (id == 0)
        return q - j;
    return co[(size_t)q * TXL_N_COORDS + id - 1] - co[(size_t)j * TXL_N_COORDS + id - 1];
}

static void hier_add(const attn_bias_fn *f, float *S, int ldS, int b, int h, int i0, int i1,
                     int m)
{
    const hier_ctx *x = (const hier_ctx *)f;
    const int32_t *co = x->coords + (size_t)b * x->bstride;
    for (int i = i0; i < i1; i++) {
        float *row = S + (size_t)(i - i0) * ldS;
        int q = m + i;
        for (int k = 0; k < x->n; k++) {
            const float *t = x->T[k] + (size_t)h * x->ld;
            if (x->id[k] == 0) {
                for (int j = 0; j <= q; j++)
                    row[j] += t[q - j];
            } else {
                const int32_t *cq = co + (size_t)q * TXL_N_COORDS + x->id[k] - 1;
                const int32_t *cj = co + x->id[k] - 1;
                for (int j = 0; j <= q; j++)
                    row[j] += t[*cq - cj[(size_t)j * TXL_N_COORDS]];
            }
        }
    }
}

/* partial [n][H][ld]: level k's dT, head h's row at (k * H + h) * ld */
static void hier_grad(const attn_bias_fn *f, const float *dS, int ldS, int b, int h, int Lq,
                      int m, float *partial)
{
    const hier_ctx *x = (const hier_ctx *)f;
    const int32_t *co = x->coords + (size_t)b * x->bstride;
    for (int k = 0; k < x->n; k++) {
        float *t = partial + ((size_t)k * x->H + h) * x->ld;
        for (int i = 0; i < Lq; i++) {
            const float *g = dS + (size_t)i * ldS;
            int q = m + i;
            for (int j = 0; j <= q; j++)
                t[level_delta(x, co, k, q, j)] += g[j];
        }
    }
}

static int hier_params(param_table *t, const model_config *c, int layer)
{
    if (layer < 0)
        return 0;
    levels L;
    levels_of(c, &L);
    int hid = c->mlp_hidden, K2 = 2 * c->hier_num_freqs, H = c->n_head, rc = 0;
    for (int k = 0; k < L.n; k++) {
        const char *nm = level_names[L.id[k]];
        rc |= param_add(t, hid, K2, INIT_NORMAL, "layers.%d.attn.hier.%s.0.weight", layer, nm);
        rc |= param_add(t, hid, 0, INIT_ZERO, "layers.%d.attn.hier.%s.0.bias", layer, nm);
        rc |= param_add(t, H, hid, INIT_NORMAL, "layers.%d.attn.hier.%s.2.weight", layer, nm);
        rc |= param_add(t, H, 0, INIT_ZERO, "layers.%d.attn.hier.%s.2.bias", layer, nm);
    }
    rc |= param_add(t, H, L.n * H, INIT_EYES, "layers.%d.attn.hier.mix.weight", layer);
    rc |= param_add(t, H, 0, INIT_ZERO, "layers.%d.attn.hier.mix.bias", layer);
    return rc;
}

static int hier_validate(const model_config *c, char *why, size_t cap)
{
    if (c->hier_levels > 0 && c->hier_levels <= HIER_ALL)
        return 0;
    snprintf(why, cap, "model.hier_levels must name at least one of token, word, sent, para");
    return -1;
}

/* Per level, the layer block holds b [H, klen], pre and act [klen, hidden], T [H, klen]. */
static double level_floats(const model_config *c, double klen)
{
    return klen * (2.0 * c->n_head + 2.0 * c->mlp_hidden); /* a double: pos_alloc */
}

typedef struct {
    float *b, *pre, *act, *T;
} level_bufs;

static level_bufs level_at(const model_config *c, float *block, size_t klen, int k)
{
    float *p = block + (size_t)k * (size_t)level_floats(c, (double)klen);
    size_t H = (size_t)c->n_head, hid = (size_t)c->mlp_hidden;
    return (level_bufs){p, p + H * klen, p + H * klen + hid * klen, p + H * klen + 2 * hid * klen};
}

static void hier_plan(const model_config *c, const pos_dims *d, pos_alloc *a, pos_acts *acts,
                      pos_layer *bw)
{
    levels L;
    levels_of(c, &L);
    double klen = (double)d->Lq + d->M, H = c->n_head; /* doubles: pos_alloc */
    acts->buf[B_PHI] = a->take(a->arena, klen * 2 * c->hier_num_freqs);
    acts->buf[B_CTX] = a->take(a->arena, ctx_floats());
    if (!d->training)
        return;
    acts->buf[B_DT] = a->take(a->arena, klen * H);
    acts->buf[B_PARTIALS] = a->take(a->arena, (double)par_max_threads() * L.n * H * klen);
    bw->buf[B_DTAB] = a->take(a->arena, L.n * H * klen);
    bw->buf[B_DB] = a->take(a->arena, H * klen);
    bw->buf[B_DACT] = a->take(a->arena, klen * c->mlp_hidden);
}

static void hier_plan_layer(const model_config *c, const pos_dims *d, pos_alloc *a,
                            pos_layer *lc)
{
    levels L;
    levels_of(c, &L);
    lc->buf[B_TABLES] = a->take(a->arena, L.n * level_floats(c, (double)d->Lq + d->M));
}

/* The window's span per level, D_l = 1 + the largest delta (coordinates only grow along a
 * stream, model.c), into the context; and the context's fixed parts. */
static void hier_segment(const pos_seg *s)
{
    hier_ctx *x = (hier_ctx *)s->acts->buf[B_CTX];
    levels L;
    levels_of(s->c, &L);
    int klen = s->m + s->Lq;
    memset(x, 0, sizeof *x);
    x->n = L.n;
    x->H = s->c->n_head;
    x->ld = klen;
    x->coords = s->coords;
    x->bstride = (size_t)klen * TXL_N_COORDS;
    for (int k = 0; k < L.n; k++) {
        x->id[k] = L.id[k];
        int D = 1;
        for (int b = 0; b < s->B; b++) {
            const int32_t *co = s->coords + (size_t)b * x->bstride;
            int span = level_delta(x, co, k, klen - 1, 0) + 1;
            D = span > D ? span : D;
        }
        x->D[k] = D;
    }
}

/* T_k = C_k b_k (+ c for the first level) [H, D], C_k the k-th [H, H] block of C. */
static void fold(const model_config *c, float *T, const float *b, const float *C,
                 const float *cb, int k, int n, int D, int ld)
{
    int H = c->n_head;
    gemm(T, C + (size_t)k * H, b, H, D, H, 0, 0, 1.0f, 0.0f, n * H, D, ld);
    if (k == 0)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < D; t++)
                T[(size_t)h * ld + t] += cb[h];
}

/* b_k [H, D] of every level from its MLP, folded into T_k (row stride ld). */
static void level_tables(const model_config *c, const layer_tensors *W, const levels *L,
                         float *block, size_t blk_klen, const int *D, int ld, float *phi)
{
    int H = c->n_head, hid = c->mlp_hidden, K = c->hier_num_freqs;
    const float *C = W->pos[4 * L->n], *cb = W->pos[4 * L->n + 1];
    for (int k = 0; k < L->n; k++) {
        level_bufs lb = level_at(c, block, blk_klen, k);
        const float *const *p = (const float *const *)&W->pos[4 * k];
        mlp_bias_forward(lb.b, lb.pre, lb.act, phi, p[0], p[1], p[2], p[3], H, hid, K,
                         L->max_dist[k], D[k]);
        fold(c, lb.T, lb.b, C, cb, k, L->n, D[k], ld);
    }
}

static void hier_layer_forward(pos_ctx *x)
{
    const hier_ctx *hx = (const hier_ctx *)x->s->acts->buf[B_CTX];
    levels L;
    levels_of(x->s->c, &L);
    size_t klen = (size_t)x->s->m + x->s->Lq;
    level_tables(x->s->c, x->W, &L, x->lc->buf[B_TABLES], klen, hx->D, (int)klen,
                 x->s->acts->buf[B_PHI]);
}

static void point_tables(hier_ctx *hx, const model_config *c, float *block, size_t blk_klen)
{
    for (int k = 0; k < hx->n; k++)
        hx->T[k] = level_at(c, block, blk_klen, k).T;
}

static void hier_attn_args(const pos_ctx *x, attn_args *a)
{
    hier_ctx *hx = (hier_ctx *)x->s->acts->buf[B_CTX];
    point_tables(hx, x->s->c, x->lc->buf[B_TABLES], (size_t)x->s->m + x->s->Lq);
    hx->fn.add = hier_add;
    hx->fn.grad = hier_grad;
    a->score_bias = &hx->fn;
}

static void hier_grad_args(pos_ctx *x, attn_grads *g)
{
    (void)g;
    hier_ctx *hx = (hier_ctx *)x->s->acts->buf[B_CTX];
    size_t n = (size_t)hx->n * hx->H * hx->ld;
    hx->fn.grad_floats = n;
    hx->fn.partials = x->s->acts->buf[B_PARTIALS];
    hx->fn.d_out = x->bw->buf[B_DTAB];
    memset(hx->fn.d_out, 0, n * sizeof(float));
}

static void hier_layer_backward(pos_ctx *x, float *d_q, float *d_kv)
{
    (void)d_q;
    (void)d_kv;
    const model_config *c = x->s->c;
    const hier_ctx *hx = (const hier_ctx *)x->s->acts->buf[B_CTX];
    levels L;
    levels_of(c, &L);
    int H = c->n_head, ld = hx->ld, n = L.n;
    const float *C = x->W->pos[4 * n];
    float *dC = x->G->pos[4 * n], *dcb = x->G->pos[4 * n + 1], *db = x->bw->buf[B_DB];
    for (int k = 0; k < n; k++) {
        level_bufs lb = level_at(c, x->lc->buf[B_TABLES], (size_t)ld, k);
        const float *dT = x->bw->buf[B_DTAB] + (size_t)k * H * ld;
        int D = hx->D[k];
        /* T_k = C_k b_k (+ c): dC_k += dT_k b_k^T, dc += rowsum dT_0, d b_k = C_k^T dT_k */
        gemm(dC + (size_t)k * H, dT, lb.b, H, H, D, 0, 1, 1.0f, 1.0f, ld, D, n * H);
        if (k == 0)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < D; t++)
                    dcb[h] += dT[(size_t)h * ld + t];
        gemm(db, C + (size_t)k * H, dT, H, D, H, 1, 0, 1.0f, 0.0f, n * H, ld, D);
        float *const *g = &x->G->pos[4 * k];
        mlp_bias_backward(g[0], g[1], g[2], g[3], db, lb.pre, lb.act, x->W->pos[4 * k + 2],
                          x->bw->buf[B_DACT], x->s->acts->buf[B_DT], x->s->acts->buf[B_PHI], H,
                          c->mlp_hidden, c->hier_num_freqs, L.max_dist[k], D);
    }
}

/* Decoding: every level's T for deltas 0..M (a delta never exceeds the token distance). */
static size_t hier_decode_floats(const model_config *c, int M)
{
    levels L;
    levels_of(c, &L);
    return (size_t)L.n * (size_t)level_floats(c, (double)M + 1);
}

static size_t hier_decode_scratch(const model_config *c, int M)
{
    return ((size_t)M + 1) * 2 * c->hier_num_freqs;
}

static void hier_decode_tables(const model_config *c, const layer_tensors *W,
                               const model_tensors *MW, int M, float *tables, float *scratch)
{
    (void)MW;
    levels L;
    levels_of(c, &L);
    int D[MAX_LEVELS];
    for (int k = 0; k < L.n; k++)
        D[k] = M + 1;
    level_tables(c, W, &L, tables, (size_t)M + 1, D, M + 1, scratch);
}

static void hier_decode_args(const pos_decode *d, attn_args *a)
{
    hier_ctx *hx = d->bias_state;
    levels L;
    levels_of(d->c, &L);
    memset(hx, 0, sizeof *hx);
    hx->n = L.n;
    hx->H = d->c->n_head;
    hx->ld = d->M + 1;
    for (int k = 0; k < L.n; k++) {
        hx->id[k] = L.id[k];
        hx->D[k] = d->M + 1;
    }
    hx->coords = d->coords;
    hx->bstride = d->coords_bstride;
    point_tables(hx, d->c, d->tables, (size_t)d->M + 1);
    hx->fn.add = hier_add;
    a->score_bias = &hx->fn;
}

const pos_ops pos_hier = {
    .name = "hier",
    .term_names = hier_terms,
    .needs_coords = 1,
    .batch_tables = 1,
    .params = hier_params,
    .validate = hier_validate,
    .plan = hier_plan,
    .plan_layer = hier_plan_layer,
    .segment = hier_segment,
    .layer_forward = hier_layer_forward,
    .attn_args = hier_attn_args,
    .grad_args = hier_grad_args,
    .layer_backward = hier_layer_backward,
    .decode_floats = hier_decode_floats,
    .decode_scratch = hier_decode_scratch,
    .decode_tables = hier_decode_tables,
    .decode_args = hier_decode_args,
};

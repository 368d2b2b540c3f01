/* pos_t5.c: T5's relative attention bias (Raffel et al. 2020), causal (doc/design.md).
 *
 *   s_ij = q_i·k_j / sqrt(dh) + T[h][bucket(delta)],  delta = m+i-j >= 0,
 *
 * T [H, NB] learned; bucket() is T5's _relative_position_bucket with bidirectional=False
 * (t5_bucket: one bucket per distance below NB/2, logarithmic ones up to t5_max_dist, the
 * last bucket beyond). The table is one for all layers (t5_shared, T5's choice: model-wide
 * pos[0]) or one per layer (the layer's pos[0]). The bias [H, klen] is a distance bias
 * (attention.h) looked up once per segment (shared) or per layer; the backward sums the
 * distance-bias gradient [H, klen] into T by bucket. Nothing of the bias is kept for the
 * backward, so one buffer serves every layer.
 * Buffers: acts the buckets of the distances 0..klen-1 (int32 in float-sized slots) and
 * the bias [H, klen]; backward d_bias [H, klen]. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "posenc.h"

enum { B_BUCKET, B_BIAS }; /* acts */
enum { B_DBIAS };          /* backward */

static const char *const bias_terms[] = {"content", "distance_bias", NULL};

int t5_bucket(long n, int NB, int max_dist)
{
    int E = NB / 2;
    if (n < E)
        return (int)n;
    /* the truncation of T5's .to(torch.long): a floor, the value being >= 0 */
    double v = log((double)n / E) / log((double)max_dist / E) * (NB - E);
    return v < NB - 1 - E ? E + (int)v : NB - 1;
}

void t5_bias(float *bias, const float *T, int H, int NB, int max_dist, int n)
{
    for (int t = 0; t < n; t++) {
        int k = t5_bucket(t, NB, max_dist);
        for (int h = 0; h < H; h++)
            bias[(size_t)h * n + t] = T[(size_t)h * NB + k];
    }
}

static int t5_params(param_table *t, const model_config *c, int layer)
{
    if (c->t5_shared && layer < 0)
        return param_add(t, c->n_head, c->t5_buckets, INIT_NORMAL, "t5.rel_bias");
    if (!c->t5_shared && layer >= 0)
        return param_add(t, c->n_head, c->t5_buckets, INIT_NORMAL, "layers.%d.attn.t5.rel_bias",
                         layer);
    return 0;
}

static int t5_validate(const model_config *c, char *why, size_t cap)
{
    int E = c->t5_buckets / 2;
    if (c->t5_max_dist > E)
        return 0;
    snprintf(why, cap, "model.t5_max_dist must be greater than t5_buckets / 2 (the exact "
             "buckets, %d: the logarithmic ones span the distances from there to "
             "t5_max_dist), found %d", E, c->t5_max_dist);
    return -1;
}

static void t5_plan(const model_config *c, const pos_dims *d, pos_alloc *a, pos_acts *acts,
                    pos_layer *bw)
{
    double klen = (double)d->Lq + d->M; /* doubles: pos_alloc */
    acts->buf[B_BUCKET] = a->take(a->arena, klen);
    acts->buf[B_BIAS] = a->take(a->arena, klen * c->n_head);
    if (d->training)
        bw->buf[B_DBIAS] = a->take(a->arena, klen * c->n_head);
}

static const float *table_of(const model_config *c, const layer_tensors *W,
                             const model_tensors *MW)
{
    return c->t5_shared ? MW->pos[0] : W->pos[0];
}

/* the buckets of this window's distances (the weights come with the layers) */
static void t5_segment(const pos_seg *s)
{
    const model_config *c = s->c;
    int klen = s->m + s->Lq;
    int32_t *bk = (int32_t *)s->acts->buf[B_BUCKET];
    for (int t = 0; t < klen; t++)
        bk[t] = t5_bucket(t, c->t5_buckets, c->t5_max_dist);
}

static void lookup(const pos_ctx *x, const float *T)
{
    const model_config *c = x->s->c;
    int klen = x->s->m + x->s->Lq, NB = c->t5_buckets;
    const int32_t *bk = (const int32_t *)x->s->acts->buf[B_BUCKET];
    float *bias = x->s->acts->buf[B_BIAS];
    for (int h = 0; h < c->n_head; h++)
        for (int t = 0; t < klen; t++)
            bias[(size_t)h * klen + t] = T[(size_t)h * NB + bk[t]];
}

/* the bias of this layer's table (a shared table: layer 0's lookup serves them all) */
static void t5_layer_forward(pos_ctx *x)
{
    if (!x->s->c->t5_shared || x->layer == 0)
        lookup(x, table_of(x->s->c, x->W, x->MW));
}

static void t5_attn_args(const pos_ctx *x, attn_args *a) { a->dist_bias = x->s->acts->buf[B_BIAS]; }

static void t5_grad_args(pos_ctx *x, attn_grads *g)
{
    g->d_bias = x->bw->buf[B_DBIAS];
    memset(g->d_bias, 0, (size_t)x->s->c->n_head * (x->s->m + x->s->Lq) * sizeof(float));
}

static void t5_layer_backward(pos_ctx *x, float *d_q, float *d_kv)
{
    (void)d_q;
    (void)d_kv;
    const model_config *c = x->s->c;
    int klen = x->s->m + x->s->Lq, NB = c->t5_buckets;
    const int32_t *bk = (const int32_t *)x->s->acts->buf[B_BUCKET];
    const float *db = x->bw->buf[B_DBIAS];
    float *dT = c->t5_shared ? x->MG->pos[0] : x->G->pos[0];
    for (int h = 0; h < c->n_head; h++)
        for (int t = 0; t < klen; t++)
            dT[(size_t)h * NB + bk[t]] += db[(size_t)h * klen + t];
}

/* Decoding: the bias of every distance 0..M, [H, M+1]. */
static size_t t5_decode_floats(const model_config *c, int M)
{
    return ((size_t)M + 1) * c->n_head;
}

static void t5_decode_tables(const model_config *c, const layer_tensors *W,
                             const model_tensors *MW, int M, float *tables, float *scratch)
{
    (void)scratch;
    t5_bias(tables, table_of(c, W, MW), c->n_head, c->t5_buckets, c->t5_max_dist, M + 1);
}

const pos_ops pos_t5 = {
    .name = "t5",
    .term_names = bias_terms,
    .params = t5_params,
    .validate = t5_validate,
    .plan = t5_plan,
    .segment = t5_segment,
    .layer_forward = t5_layer_forward,
    .attn_args = t5_attn_args,
    .grad_args = t5_grad_args,
    .layer_backward = t5_layer_backward,
    .decode_floats = t5_decode_floats,
    .decode_tables = t5_decode_tables,
    .decode_args = pos_decode_dist_bias,
};

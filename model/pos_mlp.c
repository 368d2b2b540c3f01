/* pos_mlp.c: the multi-frequency MLP relative bias (doc/design.md).
 *
 *   s_ij = q_i·k_j / sqrt(dh) + bias_h(delta),  delta = i - j >= 0 (absolute rows)
 *   bias(delta) = W2 GELU(W1 phi(delta) + b1) + b2  in R^H
 *   phi(delta) = [sin(delta / tau_k), cos(delta / tau_k)]_k,  tau_k = max_dist^(k/(K-1))
 *
 * The MLP runs once per layer and segment on the klen distinct distances 0..klen-1, giving
 * bias [H, klen]; the attention kernel adds bias[h][m+i-j] to each score.
 * Slots: per layer pos[0..3] = W1 [hidden, 2K], b1 [hidden], W2 [H, hidden], b2 [H].
 * Buffers: layer bias [H, klen], pre and act [klen, hidden] (the MLP's GELU input and
 * output, for the backward); acts phi [klen, 2K] and d_t [klen, H]; backward d_bias,
 * d_act. */
#include <math.h>
#include <string.h>

#include "gemm.h"
#include "model.h"
#include "posenc.h"

enum { P_W1, P_B1, P_W2, P_B2 };
enum { B_PHI, B_DT };        /* acts */
enum { B_BIAS, B_PRE, B_ACT }; /* layer */
enum { B_DBIAS, B_DACT };    /* backward */

static const char *const bias_terms[] = {"content", "distance_bias", NULL};

void mlp_bias_features(float *phi, int K, float max_dist, int klen)
{
    double lmax = log((double)max_dist);
    for (int t = 0; t < klen; t++)
        for (int k = 0; k < K; k++) {
            double tau = K > 1 ? exp(lmax * k / (K - 1)) : 1.0;
            double ang = (double)t / tau;
            phi[(size_t)t * 2 * K + k] = (float)sin(ang);
            phi[(size_t)t * 2 * K + K + k] = (float)cos(ang);
        }
}

static const double SQRT1_2 = 0.70710678118654752440;
static const double INV_SQRT_2PI = 0.39894228040143267794;

void mlp_bias_forward(float *bias, float *pre, float *act, float *phi, const float *W1,
                      const float *b1, const float *W2, const float *b2, int H, int hidden,
                      int K, float max_dist, int klen)
{
    mlp_bias_features(phi, K, max_dist, klen);
    linear_forward(pre, phi, W1, b1, klen, hidden, 2 * K, 0);
    for (size_t i = 0; i < (size_t)klen * hidden; i++) {
        double x = pre[i];
        act[i] = (float)(0.5 * x * (1.0 + erf(x * SQRT1_2)));
    }
    /* out[klen, H] = act @ W2^T + b2, stored transposed as bias[H, klen] */
    for (int t = 0; t < klen; t++)
        for (int h = 0; h < H; h++) {
            double s = b2[h];
            const float *w = W2 + (size_t)h * hidden, *a = act + (size_t)t * hidden;
            for (int j = 0; j < hidden; j++)
                s += (double)w[j] * a[j];
            bias[(size_t)h * klen + t] = (float)s;
        }
}

void mlp_bias_backward(float *dW1, float *db1, float *dW2, float *db2, const float *d_bias,
                       const float *pre, const float *act, const float *W2, float *d_act,
                       float *d_t, float *phi, int H, int hidden, int K, float max_dist,
                       int klen)
{
    for (int t = 0; t < klen; t++)
        for (int h = 0; h < H; h++)
            d_t[(size_t)t * H + h] = d_bias[(size_t)h * klen + t];
    linear_backward(d_act, dW2, db2, d_t, act, W2, klen, H, hidden, 0);
    for (size_t i = 0; i < (size_t)klen * hidden; i++) {
        double x = pre[i];
        double g = 0.5 * (1.0 + erf(x * SQRT1_2)) + x * exp(-0.5 * x * x) * INV_SQRT_2PI;
        d_act[i] = (float)(d_act[i] * g);
    }
    mlp_bias_features(phi, K, max_dist, klen);
    linear_backward(NULL, dW1, db1, d_act, phi, NULL, klen, hidden, 2 * K, 0);
}

static int mlp_params(param_table *t, const model_config *c, int layer)
{
    if (layer < 0)
        return 0;
    int hid = c->mlp_hidden, K2 = 2 * c->mlp_num_freqs, H = c->n_head;
    int rc = 0;
    rc |= param_add(t, hid, K2, INIT_NORMAL, "layers.%d.attn.bias_mlp.0.weight", layer);
    rc |= param_add(t, hid, 0, INIT_ZERO, "layers.%d.attn.bias_mlp.0.bias", layer);
    rc |= param_add(t, H, hid, INIT_NORMAL, "layers.%d.attn.bias_mlp.2.weight", layer);
    rc |= param_add(t, H, 0, INIT_ZERO, "layers.%d.attn.bias_mlp.2.bias", layer);
    return rc;
}

static void mlp_plan(const model_config *c, const pos_dims *d, pos_alloc *a, pos_acts *acts,
                     pos_layer *bw)
{
    double klen = (double)d->Lq + d->M; /* doubles: pos_alloc */
    acts->buf[B_PHI] = a->take(a->arena, klen * 2 * c->mlp_num_freqs);
    acts->buf[B_DT] = d->training ? a->take(a->arena, klen * c->n_head) : NULL;
    if (d->training) {
        bw->buf[B_DBIAS] = a->take(a->arena, klen * c->n_head);
        bw->buf[B_DACT] = a->take(a->arena, klen * c->mlp_hidden);
    }
}

static void mlp_plan_layer(const model_config *c, const pos_dims *d, pos_alloc *a,
                           pos_layer *lc)
{
    double klen = (double)d->Lq + d->M; /* doubles: pos_alloc */
    lc->buf[B_BIAS] = a->take(a->arena, klen * c->n_head);
    lc->buf[B_PRE] = a->take(a->arena, klen * c->mlp_hidden);
    lc->buf[B_ACT] = a->take(a->arena, klen * c->mlp_hidden);
}

static void mlp_layer_forward(pos_ctx *x)
{
    const model_config *c = x->s->c;
    const layer_tensors *W = x->W;
    mlp_bias_forward(x->lc->buf[B_BIAS], x->lc->buf[B_PRE], x->lc->buf[B_ACT],
                     x->s->acts->buf[B_PHI], W->pos[P_W1], W->pos[P_B1], W->pos[P_W2],
                     W->pos[P_B2], c->n_head, c->mlp_hidden, c->mlp_num_freqs, c->mlp_max_dist,
                     x->s->m + x->s->Lq);
}

static void mlp_attn_args(const pos_ctx *x, attn_args *a) { a->dist_bias = x->lc->buf[B_BIAS]; }

static void mlp_grad_args(pos_ctx *x, attn_grads *g)
{
    g->d_bias = x->bw->buf[B_DBIAS];
    memset(g->d_bias, 0, (size_t)x->s->c->n_head * (x->s->m + x->s->Lq) * sizeof(float));
}

static void mlp_layer_backward(pos_ctx *x, float *d_q, float *d_kv)
{
    (void)d_q;
    (void)d_kv;
    const model_config *c = x->s->c;
    layer_tensors *G = x->G;
    mlp_bias_backward(G->pos[P_W1], G->pos[P_B1], G->pos[P_W2], G->pos[P_B2],
                      x->bw->buf[B_DBIAS], x->lc->buf[B_PRE], x->lc->buf[B_ACT], x->W->pos[P_W2],
                      x->bw->buf[B_DACT], x->s->acts->buf[B_DT], x->s->acts->buf[B_PHI],
                      c->n_head, c->mlp_hidden, c->mlp_num_freqs, c->mlp_max_dist,
                      x->s->m + x->s->Lq);
}

/* Decoding: the bias of every distance 0..M, [H, M+1]. */
static size_t mlp_decode_floats(const model_config *c, int M)
{
    return ((size_t)M + 1) * c->n_head;
}

static size_t mlp_decode_scratch(const model_config *c, int M)
{
    return ((size_t)M + 1) * (2 * (size_t)c->mlp_hidden + 2 * (size_t)c->mlp_num_freqs);
}

static void mlp_decode_tables(const model_config *c, const layer_tensors *W,
                              const model_tensors *MW, int M, float *tables, float *scratch)
{
    (void)MW;
    size_t K = (size_t)M + 1;
    float *pre = scratch, *act = pre + K * c->mlp_hidden, *phi = act + K * c->mlp_hidden;
    mlp_bias_forward(tables, pre, act, phi, W->pos[P_W1], W->pos[P_B1], W->pos[P_W2],
                     W->pos[P_B2], c->n_head, c->mlp_hidden, c->mlp_num_freqs, c->mlp_max_dist,
                     M + 1);
}

/* A distance-bias table [H, M+1] of any scheme (mlp, alibi, t5). */
void pos_decode_dist_bias(const pos_decode *d, attn_args *a)
{
    a->dist_bias = d->tables;
    a->bias_ld = d->M + 1;
}

const pos_ops pos_mlp = {
    .name = "mlp",
    .term_names = bias_terms,
    .params = mlp_params,
    .plan = mlp_plan,
    .plan_layer = mlp_plan_layer,
    .layer_forward = mlp_layer_forward,
    .attn_args = mlp_attn_args,
    .grad_args = mlp_grad_args,
    .layer_backward = mlp_layer_backward,
    .decode_floats = mlp_decode_floats,
    .decode_scratch = mlp_decode_scratch,
    .decode_tables = mlp_decode_tables,
    .decode_args = pos_decode_dist_bias,
};

/* pos_fire.c: FIRE, functional interpolation for relative positions (Li et al. 2023;
 * doc/design.md, "Positional schemes").
 *
 *   s_ij = q_i·k_j / sqrt(dh) + b_h(p, delta),  p = m+i (the query's row in its window),
 *   delta = p - j >= 0,  b = W2 relu(w1 x + b1) + b2  in R^H,
 *   x = psi(delta) / (psi(N) + 1e-6),  psi(t) = ln(a t + 1),  N = L if p <= L, else p,
 *   a = |c|,  L = |L_mult| fire_threshold.
 *
 * The MLP's inputs of a layer and segment (fire_layout, posenc.h): one shared row of the
 * distances the queries with p <= L see, then a row of distances 0..p per query past L. The
 * MLP runs once per input (blocks of FIRE_BLOCK through the hidden layer, one product each
 * for all H heads) into T [R, H]; the attention kernel adds T[off(p) + delta][h] through the
 * score-bias callback, and its backward scatters dS into dT [R, H] (per-thread partials),
 * which goes back through the MLP to w1, b1, W2, b2, c and L_mult. The backward reads only
 * T's layout, which it recomputes from the weights, so one T serves every layer.
 * Slots: per layer pos[0..5] = w1 [hidden, 1], b1 [hidden], W2 [H, hidden], b2 [H], c [1],
 * L_mult [1]. Buffers: acts the bias context, T [Rmax, H], x [FIRE_BLOCK], act [FIRE_BLOCK,
 * hidden], the backward's partials [threads][Rmax, H]; backward dT [Rmax, H], d_act
 * [FIRE_BLOCK, hidden]. Rmax = klen + Lq M + Lq (Lq+1) / 2, every query past L. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "../common/par.h"
#include "gemm.h"
#include "model.h"
#include "posenc.h"

enum { P_W1, P_B1, P_W2, P_B2, P_C, P_LMULT };
enum { B_CTX, B_T, B_X, B_ACT, B_PARTIALS }; /* acts */
enum { B_DT, B_DACT };                       /* backward */

static const char *const fire_terms[] = {"content", "fire_bias", NULL};

/* The bias context handed to the attention kernel (acts B_CTX, or decoding's storage). */
typedef struct {
    attn_bias_fn fn; /* first: the kernel passes &fn back */
    const float *T;  /* [R, H] */
    int H;
    fire_layout f;
} fire_ctx;

_Static_assert(sizeof(fire_ctx) <= POS_BIAS_STATE, "fire_ctx must fit the decode storage");

static double ctx_floats(void) { return (double)((sizeof(fire_ctx) + sizeof(float) - 1) / sizeof(float)); }

void fire_layout_of(fire_layout *f, float c, float L_mult, float threshold, int m, int Lq)
{
    f->a = fabs((double)c);
    f->L = fabs((double)L_mult) * threshold;
    f->p1 = m + Lq - 1;
    if ((double)m > f->L) { /* every query past L */
        f->n0 = 0;
        f->p0 = m;
    } else if ((double)f->p1 <= f->L) { /* none */
        f->n0 = f->p1 + 1;
        f->p0 = f->p1 + 1;
    } else { /* m <= floor(L) < p1 */
        f->p0 = (int)floor(f->L) + 1;
        f->n0 = f->p0;
    }
    size_t rows = f->p0 <= f->p1 ? (size_t)(f->p1 - f->p0 + 1) : 0;
    f->R = (size_t)f->n0 + rows * ((size_t)f->p0 + f->p1 + 2) / 2;
}

void fire_layout_row(fire_layout *f, float c, float L_mult, float threshold, int n, int own)
{
    f->a = fabs((double)c);
    f->L = fabs((double)L_mult) * threshold;
    if (own < 0) {
        f->n0 = n;
        f->p0 = INT_MAX;
        f->p1 = INT_MAX - 1;
        f->R = (size_t)n;
    } else {
        f->n0 = 0;
        f->p0 = f->p1 = own;
        f->R = (size_t)own + 1;
    }
}

/* Input r: its query's row p (-1: the shared row) and distance. */
static void input_at(const fire_layout *f, size_t r, int *p, int *delta)
{
    if (r < (size_t)f->n0) {
        *p = -1, *delta = (int)r;
        return;
    }
    size_t s = r - (size_t)f->n0;
    int q = f->p0;
    while (s > (size_t)q)
        s -= (size_t)q + 1, q++;
    *p = q, *delta = (int)s;
}

static void input_next(const fire_layout *f, int *p, int *delta)
{
    if (++*delta == (*p < 0 ? f->n0 : *p + 1))
        *p = *p < 0 ? f->p0 : *p + 1, *delta = 0;
}

/* x of input (p, delta); with dxa, its derivatives in a and L (0 on a query's own row,
 * whose N = p is no parameter). In double. */
static double input_x(const fire_layout *f, int p, int delta, double *dxa, double *dxL)
{
    double N = p < 0 ? f->L : p, a = f->a;
    double den = log1p(a * N) + FIRE_EPS, x = log1p(a * delta) / den;
    if (dxa) {
        *dxa = (delta / (1.0 + a * delta) - x * N / (1.0 + a * N)) / den;
        *dxL = p < 0 ? -x * a / (1.0 + a * N) / den : 0.0;
    }
    return x;
}

/* x [n] and act = relu(w1 x + b1) [n, hidden] of inputs r0..r0+n-1 */
static void block_hidden(float *x, float *act, const fire_layout *f, size_t r0, int n,
                         const float *w1, const float *b1, int hidden)
{
    int p, delta;
    input_at(f, r0, &p, &delta);
    for (int r = 0; r < n; r++, input_next(f, &p, &delta)) {
        x[r] = (float)input_x(f, p, delta, NULL, NULL);
        float *ar = act + (size_t)r * hidden;
        for (int k = 0; k < hidden; k++) {
            float z = (float)((double)w1[k] * x[r] + b1[k]);
            ar[k] = z > 0.0f ? z : 0.0f;
        }
    }
}

static int block_len(const fire_layout *f, size_t r0)
{
    return f->R - r0 < FIRE_BLOCK ? (int)(f->R - r0) : FIRE_BLOCK;
}

void fire_forward(float *T, float *x, float *act, const fire_layout *f, const float *w1,
                  const float *b1, const float *W2, const float *b2, int H, int hidden)
{
    for (size_t r = 0; r < f->R; r++)
        memcpy(T + r * H, b2, (size_t)H * sizeof(float));
    for (size_t r0 = 0; r0 < f->R; r0 += FIRE_BLOCK) {
        int n = block_len(f, r0);
        block_hidden(x, act, f, r0, n, w1, b1, hidden);
        gemm(T + r0 * H, act, W2, n, H, hidden, 0, 1, 1.0f, 1.0f, hidden, hidden, H);
    }
}

void fire_backward(float *dw1, float *db1, float *dW2, float *db2, double *da, double *dL,
                   const float *dT, float *x, float *act, float *d_act, const fire_layout *f,
                   const float *w1, const float *b1, const float *W2, int H, int hidden)
{
    for (int h = 0; h < H; h++) {
        double s = 0;
        for (size_t r = 0; r < f->R; r++)
            s += dT[r * H + h];
        db2[h] += (float)s;
    }
    for (size_t r0 = 0; r0 < f->R; r0 += FIRE_BLOCK) {
        int n = block_len(f, r0);
        const float *dTb = dT + r0 * H;
        block_hidden(x, act, f, r0, n, w1, b1, hidden);
        gemm(dW2, dTb, act, H, hidden, n, 1, 0, 1.0f, 1.0f, H, hidden, hidden);
        gemm(d_act, dTb, W2, n, hidden, H, 0, 0, 1.0f, 0.0f, H, hidden, hidden);
        for (size_t i = 0; i < (size_t)n * hidden; i++) /* relu': 0 where act is 0 */
            d_act[i] = act[i] > 0.0f ? d_act[i] : 0.0f;
        for (int k = 0; k < hidden; k++) {
            double sw = 0, sb = 0;
            for (int r = 0; r < n; r++) {
                double g = d_act[(size_t)r * hidden + k];
                sw += g * x[r];
                sb += g;
            }
            dw1[k] += (float)sw;
            db1[k] += (float)sb;
        }
        int p, delta;
        input_at(f, r0, &p, &delta);
        for (int r = 0; r < n; r++, input_next(f, &p, &delta)) {
            double dx = 0, dxa, dxL;
            for (int k = 0; k < hidden; k++)
                dx += (double)d_act[(size_t)r * hidden + k] * w1[k];
            input_x(f, p, delta, &dxa, &dxL);
            *da += dx * dxa;
            *dL += dx * dxL;
        }
    }
}

/* The attention kernel's callbacks: rows i0..i1-1 of (b, h)'s scores get T[off(p) +
 * p - j][h], p = m + i; the backward adds dS into the same places of its partial [R, H]. */
static void fire_add(const attn_bias_fn *fn, float *S, int ldS, int b, int h, int i0, int i1,
                     int m)
{
    (void)b;
    const fire_ctx *x = (const fire_ctx *)fn;
    for (int i = i0; i < i1; i++) {
        int p = m + i;
        const float *t = x->T + (fire_offset(&x->f, p) + (size_t)p) * x->H + h;
        float *row = S + (size_t)(i - i0) * ldS;
        for (int j = 0; j <= p; j++)
            row[j] += t[-(ptrdiff_t)j * x->H];
    }
}

static void fire_grad(const attn_bias_fn *fn, const float *dS, int ldS, int b, int h, int Lq,
                      int m, float *partial)
{
    (void)b;
    const fire_ctx *x = (const fire_ctx *)fn;
    for (int i = 0; i < Lq; i++) {
        int p = m + i;
        float *t = partial + (fire_offset(&x->f, p) + (size_t)p) * x->H + h;
        const float *g = dS + (size_t)i * ldS;
        for (int j = 0; j <= p; j++)
            t[-(ptrdiff_t)j * x->H] += g[j];
    }
}

static int fire_params(param_table *t, const model_config *c, int layer)
{
    if (layer < 0)
        return 0;
    int hid = c->fire_hidden, H = c->n_head, rc = 0;
    /* PyTorch's nn.Linear init, as the paper's listing: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
    rc |= param_add_init(t, hid, 1, INIT_UNIFORM, 1.0f, "layers.%d.attn.fire.mlp.0.weight", layer);
    rc |= param_add_init(t, hid, 0, INIT_UNIFORM, 1.0f, "layers.%d.attn.fire.mlp.0.bias", layer);
    rc |= param_add_init(t, H, hid, INIT_UNIFORM, (float)(1.0 / sqrt(hid)),
                         "layers.%d.attn.fire.mlp.2.weight", layer);
    rc |= param_add(t, H, 0, INIT_ZERO, "layers.%d.attn.fire.mlp.2.bias", layer);
    rc |= param_add_init(t, 1, 0, INIT_CONST, 0.1f, "layers.%d.attn.fire.c", layer);
    rc |= param_add(t, 1, 0, INIT_ONE, "layers.%d.attn.fire.L_mult", layer);
    return rc;
}

/* every query of the window past L: klen + Lq M + Lq (Lq+1) / 2 inputs */
static double max_inputs(const pos_dims *d)
{
    return (double)d->Lq + d->M + (double)d->Lq * d->M + (double)d->Lq * (d->Lq + 1) / 2;
}

static void fire_plan(const model_config *c, const pos_dims *d, pos_alloc *a, pos_acts *acts,
                      pos_layer *bw)
{
    double R = max_inputs(d), H = c->n_head, blk = FIRE_BLOCK; /* doubles: pos_alloc */
    acts->buf[B_CTX] = a->take(a->arena, ctx_floats());
    acts->buf[B_T] = a->take(a->arena, R * H);
    acts->buf[B_X] = a->take(a->arena, blk);
    acts->buf[B_ACT] = a->take(a->arena, blk * c->fire_hidden);
    if (!d->training)
        return;
    acts->buf[B_PARTIALS] = a->take(a->arena, (double)par_max_threads() * R * H);
    bw->buf[B_DT] = a->take(a->arena, R * H);
    bw->buf[B_DACT] = a->take(a->arena, blk * c->fire_hidden);
}

static void layout_of(const pos_ctx *x, fire_layout *f)
{
    const model_config *c = x->s->c;
    fire_layout_of(f, x->W->pos[P_C][0], x->W->pos[P_LMULT][0], c->fire_threshold, x->s->m,
                   x->s->Lq);
}

static void fire_layer_forward(pos_ctx *x)
{
    const model_config *c = x->s->c;
    const layer_tensors *W = x->W;
    fire_layout f;
    layout_of(x, &f);
    fire_forward(x->s->acts->buf[B_T], x->s->acts->buf[B_X], x->s->acts->buf[B_ACT], &f,
                 W->pos[P_W1], W->pos[P_B1], W->pos[P_W2], W->pos[P_B2], c->n_head,
                 c->fire_hidden);
}

static void fire_attn_args(const pos_ctx *x, attn_args *a)
{
    fire_ctx *fx = (fire_ctx *)x->s->acts->buf[B_CTX];
    memset(fx, 0, sizeof *fx);
    fx->fn.add = fire_add;
    fx->fn.grad = fire_grad;
    fx->T = x->s->acts->buf[B_T];
    fx->H = x->s->c->n_head;
    layout_of(x, &fx->f);
    a->score_bias = &fx->fn;
}

static void fire_grad_args(pos_ctx *x, attn_grads *g)
{
    (void)g;
    fire_ctx *fx = (fire_ctx *)x->s->acts->buf[B_CTX];
    size_t n = fx->f.R * (size_t)fx->H;
    fx->fn.grad_floats = n;
    fx->fn.partials = x->s->acts->buf[B_PARTIALS];
    fx->fn.d_out = x->bw->buf[B_DT];
    memset(fx->fn.d_out, 0, n * sizeof(float));
}

static float sign_of(float v) { return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : 0.0f; }

static void fire_layer_backward(pos_ctx *x, float *d_q, float *d_kv)
{
    (void)d_q;
    (void)d_kv;
    const model_config *c = x->s->c;
    const layer_tensors *W = x->W;
    layer_tensors *G = x->G;
    fire_layout f;
    layout_of(x, &f);
    double da = 0, dL = 0;
    fire_backward(G->pos[P_W1], G->pos[P_B1], G->pos[P_W2], G->pos[P_B2], &da, &dL,
                  x->bw->buf[B_DT], x->s->acts->buf[B_X], x->s->acts->buf[B_ACT],
                  x->bw->buf[B_DACT], &f, W->pos[P_W1], W->pos[P_B1], W->pos[P_W2], c->n_head,
                  c->fire_hidden);
    /* a = |c|, L = |L_mult| fire_threshold */
    G->pos[P_C][0] += (float)(da * sign_of(W->pos[P_C][0]));
    G->pos[P_LMULT][0] += (float)(dL * sign_of(W->pos[P_LMULT][0]) * c->fire_threshold);
}

/* Decoding, per layer: the shared row of every distance 0..M [M+1, H] (a query with m <=
 * L), the row of the query at hand when m > L [M+1, H], written by decode_args, and its MLP
 * scratch x, act. */
static size_t dec_block(int M) { return (size_t)M + 1 < FIRE_BLOCK ? (size_t)M + 1 : FIRE_BLOCK; }

static size_t fire_decode_floats(const model_config *c, int M)
{
    return 2 * ((size_t)M + 1) * c->n_head + dec_block(M) * (1 + (size_t)c->fire_hidden);
}

typedef struct {
    float *shared, *own, *x, *act;
} dec_bufs;

static dec_bufs dec_at(const model_config *c, float *tables, int M)
{
    size_t n = ((size_t)M + 1) * c->n_head;
    return (dec_bufs){tables, tables + n, tables + 2 * n, tables + 2 * n + dec_block(M)};
}

static void row_forward(const model_config *c, const layer_tensors *W, const dec_bufs *d,
                        float *T, const fire_layout *f)
{
    fire_forward(T, d->x, d->act, f, W->pos[P_W1], W->pos[P_B1], W->pos[P_W2], W->pos[P_B2],
                 c->n_head, c->fire_hidden);
}

static void fire_decode_tables(const model_config *c, const layer_tensors *W,
                               const model_tensors *MW, int M, float *tables, float *scratch)
{
    (void)MW, (void)scratch;
    dec_bufs d = dec_at(c, tables, M);
    fire_layout f;
    fire_layout_row(&f, W->pos[P_C][0], W->pos[P_LMULT][0], c->fire_threshold, M + 1, -1);
    row_forward(c, W, &d, d.shared, &f);
}

/* The query is row m: the shared row while m <= L, else its own, computed now (once per
 * layer and token, for the B streams). */
static void fire_decode_args(const pos_decode *d, attn_args *a)
{
    const model_config *c = d->c;
    fire_ctx *fx = d->bias_state;
    dec_bufs db = dec_at(c, d->tables, d->M);
    memset(fx, 0, sizeof *fx);
    fx->fn.add = fire_add;
    fx->H = c->n_head;
    float cv = d->W->pos[P_C][0], lm = d->W->pos[P_LMULT][0];
    fire_layout_of(&fx->f, cv, lm, c->fire_threshold, d->m, 1);
    fx->T = db.shared;
    if (fx->f.p0 == d->m) { /* m > L */
        fire_layout_row(&fx->f, cv, lm, c->fire_threshold, 0, d->m);
        row_forward(c, d->W, &db, db.own, &fx->f);
        fx->T = db.own;
    }
    a->score_bias = &fx->fn;
}

const pos_ops pos_fire = {
    .name = "fire",
    .term_names = fire_terms,
    .params = fire_params,
    .plan = fire_plan,
    .layer_forward = fire_layer_forward,
    .attn_args = fire_attn_args,
    .grad_args = fire_grad_args,
    .layer_backward = fire_layer_backward,
    .decode_floats = fire_decode_floats,
    .decode_tables = fire_decode_tables,
    .decode_args = fire_decode_args,
};

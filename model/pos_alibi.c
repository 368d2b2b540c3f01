/* pos_alibi.c: ALiBi (Press et al. 2022): a fixed linear penalty per head,
 *
 *   s_ij = q_i·k_j / sqrt(dh) - slope_h (i - j),
 *
 * slopes the geometric sequence 2^(-8(h+1)/H) (non-powers of two as doc/design.md). No
 * parameters; the bias [H, klen] is the same for every layer, computed once per segment. */
#include <math.h>
#include <stddef.h>

#include "model.h"
#include "posenc.h"

enum { B_BIAS };

static const char *const bias_terms[] = {"content", "distance_bias", NULL};

static void slopes_pow2(double *out, int n)
{
    for (int h = 0; h < n; h++)
        out[h] = pow(2.0, -8.0 * (h + 1) / n);
}

void alibi_slopes(double *slopes, int H)
{
    int n = 1;
    while (n * 2 <= H)
        n *= 2;
    slopes_pow2(slopes, n);
    /* the remaining heads take every other slope of a 2n-head model */
    for (int h = n, k = 0; h < H; h++, k += 2)
        slopes[h] = pow(2.0, -8.0 * (k + 1) / (2.0 * n));
}

void alibi_bias(float *bias, int H, int klen)
{
    double slopes[H > 0 ? H : 1];
    alibi_slopes(slopes, H);
    for (int h = 0; h < H; h++)
        for (int t = 0; t < klen; t++)
            bias[(size_t)h * klen + t] = (float)(-slopes[h] * t);
}

static void alibi_plan(const model_config *c, const pos_dims *d, pos_alloc *a, pos_acts *acts,
                       pos_layer *bw)
{
    (void)bw;
    acts->buf[B_BIAS] = a->take(a->arena, ((double)d->Lq + d->M) * c->n_head);
}

static void alibi_segment(const pos_seg *s)
{
    alibi_bias(s->acts->buf[B_BIAS], s->c->n_head, s->m + s->Lq);
}

static void alibi_attn_args(const pos_ctx *x, attn_args *a)
{
    a->dist_bias = x->s->acts->buf[B_BIAS];
}

static size_t alibi_decode_floats(const model_config *c, int M)
{
    return ((size_t)M + 1) * c->n_head;
}

static void alibi_decode_tables(const model_config *c, const layer_tensors *W,
                                const model_tensors *MW, int M, float *tables, float *scratch)
{
    (void)W, (void)MW, (void)scratch;
    alibi_bias(tables, c->n_head, M + 1);
}

const pos_ops pos_alibi = {
    .name = "alibi",
    .term_names = bias_terms,
    .plan = alibi_plan,
    .segment = alibi_segment,
    .attn_args = alibi_attn_args,
    .decode_floats = alibi_decode_floats,
    .decode_tables = alibi_decode_tables,
    .decode_args = pos_decode_dist_bias,
};

/* pos_rope.c: rotary position embedding (Su et al. 2021): q and k are rotated by their
 * absolute positions, pairing dimension t with t + dh/2 of each head, so q_i·k_j depends on
 * i - j only:
 *
 *   rot_p(x)[t] = x[t] cos(p w_t) - x[t+dh/2] sin(p w_t),  w_t = 10000^(-2t/dh)
 *   rot_p(x)[t+dh/2] = x[t+dh/2] cos(p w_t) + x[t] sin(p w_t)
 *
 * Positions are those of the window [mem; segment]: key j at j, query i at m + i, plus the
 * evaluation's position offset. The tables cos/sin [klen, dh/2] are built once per offset
 * and reused while the segments fit. Decoding rotates each new row at its absolute position
 * with one table row from the same builder. No parameters. */
#include <math.h>
#include <stdio.h>
#include <stddef.h>

#include "model.h"
#include "posenc.h"

enum { B_COS, B_SIN };
enum { T_OFFSET, T_ROWS }; /* pos_acts.tag */

static const char *const rope_terms[] = {"content", NULL};

void rope_tables(float *cosv, float *sinv, long pos_first, int n, int dh)
{
    int half = dh / 2;
    for (int r = 0; r < n; r++)
        for (int t = 0; t < half; t++) {
            double ang = (double)(pos_first + r) * pow(10000.0, -2.0 * t / dh);
            cosv[(size_t)r * half + t] = (float)cos(ang);
            sinv[(size_t)r * half + t] = (float)sin(ang);
        }
}

void rope_apply(float *x, int rows, int ld, int H, int dh, int pos_first, const float *cosv,
                const float *sinv, int inverse)
{
    int half = dh / 2;
    float sgn = inverse ? -1.0f : 1.0f;
    for (int r = 0; r < rows; r++) {
        const float *c = cosv + (size_t)(pos_first + r) * half;
        const float *s = sinv + (size_t)(pos_first + r) * half;
        for (int h = 0; h < H; h++) {
            float *x1 = x + (size_t)r * ld + (size_t)h * dh, *x2 = x1 + half;
            for (int t = 0; t < half; t++) {
                float a = x1[t], b = x2[t], st = sgn * s[t];
                x1[t] = a * c[t] - b * st;
                x2[t] = b * c[t] + a * st;
            }
        }
    }
}

static int rope_validate(const model_config *c, char *why, size_t cap)
{
    if (c->d_head % 2 == 0)
        return 0;
    snprintf(why, cap, "model.d_head must be even with pos_scheme rope (rotations pair its "
             "halves), found %d", c->d_head);
    return -1;
}

static void rope_plan(const model_config *c, const pos_dims *d, pos_alloc *a, pos_acts *acts,
                      pos_layer *bw)
{
    (void)bw;
    double n = ((double)d->Lq + d->M) * (c->d_head / 2); /* doubles: pos_alloc */
    acts->buf[B_COS] = a->take(a->arena, n);
    acts->buf[B_SIN] = a->take(a->arena, n);
}

static void rope_segment(const pos_seg *s)
{
    pos_acts *pa = s->acts;
    int klen = s->m + s->Lq;
    if (pa->valid && pa->tag[T_OFFSET] == s->pos_offset && pa->tag[T_ROWS] >= klen)
        return;
    rope_tables(pa->buf[B_COS], pa->buf[B_SIN], s->pos_offset, klen, s->c->d_head);
    pa->tag[T_OFFSET] = s->pos_offset;
    pa->tag[T_ROWS] = klen;
    pa->valid = 1;
}

/* Rotates (inverse = 0) or un-rotates the segment's q and kv rows of every stream. */
static void rope_rotate(const pos_seg *s, float *q, float *kv, int inverse)
{
    const model_config *c = s->c;
    int H = c->n_head, dh = c->d_head, hd = H * dh, Lq = s->Lq, m = s->m, klen = m + Lq;
    const float *cs = s->acts->buf[B_COS], *sn = s->acts->buf[B_SIN];
    for (int b = 0; b < s->B; b++) {
        rope_apply(q + (size_t)b * Lq * hd, Lq, hd, H, dh, m, cs, sn, inverse);
        rope_apply(kv + (size_t)b * klen * 2 * hd, klen, 2 * hd, H, dh, 0, cs, sn, inverse);
    }
}

static void rope_layer_forward(pos_ctx *x) { rope_rotate(x->s, x->q, x->kv, 0); }

/* gradients w.r.t. the rotated q, k -> w.r.t. the projections: the transpose rotation */
static void rope_layer_backward(pos_ctx *x, float *d_q, float *d_kv)
{
    rope_rotate(x->s, d_q, d_kv, 1);
}

static size_t rope_decode_scratch(const model_config *c, int M)
{
    return ((size_t)M + 1) * (size_t)c->d_head;
}

/* rows rows (stride ld) of q and/or k at positions pos + r * pos_step */
static void rope_decode_qk(const model_config *c, float *q, float *k, int rows, int ld, long pos,
                           int pos_step, float *scratch)
{
    int half = c->d_head / 2, H = c->n_head, dh = c->d_head, n = pos_step ? rows : 1;
    float *cs = scratch, *sn = scratch + (size_t)n * half;
    rope_tables(cs, sn, pos, n, dh);
    for (int r0 = 0; r0 < rows; r0 += n) { /* all rows at once, or one row at a time */
        if (q)
            rope_apply(q + (size_t)r0 * ld, n, ld, H, dh, 0, cs, sn, 0);
        if (k)
            rope_apply(k + (size_t)r0 * ld, n, ld, H, dh, 0, cs, sn, 0);
    }
}

const pos_ops pos_rope = {
    .name = "rope",
    .term_names = rope_terms,
    .window_keys = 1,
    .validate = rope_validate,
    .plan = rope_plan,
    .segment = rope_segment,
    .layer_forward = rope_layer_forward,
    .layer_backward = rope_layer_backward,
    .decode_scratch = rope_decode_scratch,
    .decode_qk = rope_decode_qk,
};

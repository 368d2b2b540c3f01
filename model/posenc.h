/* posenc.h: the kernels of the positional schemes (doc/design.md), declared together so
 * tests can check each against a double-precision twin. Each lives in its scheme's file
 * (pos_rope.c, pos_alibi.c, pos_mlp.c, pos_t5.c, pos_fire.c); the sinusoid table that xl and absolute share is
 * in posenc.c. Angles are formed in double and rounded once. */
#ifndef TXL_POSENC_H
#define TXL_POSENC_H

#include <stddef.h>

/* out[n, d]: row r = [sin(pos_r * f_t), cos(pos_r * f_t)] for t < d/2 (sin half first),
 * f_t = 10000^(-2t/d), pos_r = pos_first + r * pos_step, clamped to clamp_len when
 * clamp_len > 0. xl: pos_first = klen-1, pos_step = -1. absolute: 0, +1. */
void pos_sinusoid(float *out, int n, int d, int pos_first, int pos_step, int clamp_len);

/* Rope tables for positions pos_first..pos_first+n-1: cos/sin [n, dh/2] of
 * pos * 10000^(-2t/dh). */
void rope_tables(float *cosv, float *sinv, long pos_first, int n, int dh);
/* Rotates `rows` rows of H heads in place: row r (stride ld floats) has position
 * pos_first + r; head h occupies columns h*dh .. h*dh+dh-1.
 * inverse = 0: [x1 cos - x2 sin, x2 cos + x1 sin] (forward);
 * inverse = 1: the transpose, which maps d(rot x) to dx (backward). */
void rope_apply(float *x, int rows, int ld, int H, int dh, int pos_first, const float *cosv,
                const float *sinv, int inverse);

/* ALiBi slopes [H] (standard geometric sequence; non-powers of two as in doc/design.md, "Positional
 * schemes"). */
void alibi_slopes(double *slopes, int H);
/* bias[H, klen]: -slope_h * delta for delta = 0..klen-1. */
void alibi_bias(float *bias, int H, int klen);

/* mlp bias: phi(delta) for delta = 0..klen-1 -> W1 -> GELU -> W2 -> bias[H, klen].
 * W1 [hidden, 2K], b1 [hidden], W2 [H, hidden], b2 [H]. Caches pre [klen, hidden] and
 * act [klen, hidden]; `phi` scratch [klen, 2K]. tau_k = exp(k ln(max_dist)/(K-1)). */
void mlp_bias_forward(float *bias, float *pre, float *act, float *phi, const float *W1,
                      const float *b1, const float *W2, const float *b2, int H, int hidden,
                      int K, float max_dist, int klen);
/* d_bias [H, klen] -> dW1, db1, dW2, db2 (+=). Scratch: d_act [klen, hidden],
 * d_t [klen, H], phi [klen, 2K]. */
void mlp_bias_backward(float *dW1, float *db1, float *dW2, float *db2, const float *d_bias,
                       const float *pre, const float *act, const float *W2, float *d_act,
                       float *d_t, float *phi, int H, int hidden, int K, float max_dist,
                       int klen);
/* phi [klen, 2K]: [sin(delta/tau_k) (k < K), cos(delta/tau_k) (k < K)]. */
void mlp_bias_features(float *phi, int K, float max_dist, int klen);

/* T5's bucket of distance n >= 0 (_relative_position_bucket, bidirectional=False): n below
 * E = NB/2, else min(NB-1, E + floor(ln(n/E) / ln(max_dist/E) (NB-E))); max_dist > E. */
int t5_bucket(long n, int NB, int max_dist);
/* bias[H, n]: T[h][bucket(delta)] for delta = 0..n-1, T [H, NB]. */
void t5_bias(float *bias, const float *T, int H, int NB, int max_dist, int n);

/* FIRE's inputs (pos_fire.c): input r is a distance delta under a normaliser N,
 *   x = psi(delta) / (psi(N) + FIRE_EPS),  psi(t) = ln(a t + 1),
 * first the shared row, delta = 0..n0-1 under N = L (the queries at window rows p <= L),
 * then one row per query p = p0..p1 (p > L), delta = 0..p under N = p. */
#define FIRE_EPS 1e-6
#define FIRE_BLOCK 1024 /* inputs per block of the MLP's hidden layer */
typedef struct {
    double a, L;  /* |c|, the threshold |L_mult| fire_threshold */
    int n0;       /* the shared row's length (0: none) */
    int p0, p1;   /* the queries with a row of their own (none when p0 > p1) */
    size_t R;     /* inputs in all */
} fire_layout;
/* The layout of a segment: queries at window rows m..m+Lq-1. */
void fire_layout_of(fire_layout *f, float c, float L_mult, float threshold, int m, int Lq);
/* The layout of one row: the shared one over distances 0..n-1 (own < 0), or query own's. */
void fire_layout_row(fire_layout *f, float c, float L_mult, float threshold, int n, int own);
/* Where query p's row starts among the inputs. */
static inline size_t fire_offset(const fire_layout *f, int p)
{
    return p < f->p0 ? 0 : (size_t)f->n0 + (size_t)(p - f->p0) * (size_t)(p + f->p0 + 1) / 2;
}
/* T [R, H] = W2 relu(w1 x + b1) + b2 of every input (row r: input r's H biases). x
 * [FIRE_BLOCK] and act [FIRE_BLOCK, hidden] scratch. w1 [hidden, 1], b1 [hidden], W2 [H,
 * hidden], b2 [H]. */
void fire_forward(float *T, float *x, float *act, const fire_layout *f, const float *w1,
                  const float *b1, const float *W2, const float *b2, int H, int hidden);
/* dT [R, H] -> dw1, db1, dW2, db2 (+=), and *da, *dL (+=): the gradients of a = |c| and L.
 * Scratch: x [FIRE_BLOCK], act and d_act [FIRE_BLOCK, hidden]. */
void fire_backward(float *dw1, float *db1, float *dW2, float *db2, double *da, double *dL,
                   const float *dT, float *x, float *act, float *d_act, const fire_layout *f,
                   const float *w1, const float *b1, const float *W2, int H, int hidden);

#endif

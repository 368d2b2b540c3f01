/* posenc.h: the kernels of the positional schemes (doc/design.md), declared together so
 * tests can check each against a double-precision twin. Each lives in its scheme's file
 * (pos_rope.c, pos_alibi.c, pos_mlp.c); the sinusoid table that xl and absolute share is
 * in posenc.c. Angles are formed in double and rounded once. */
#ifndef TXL_POSENC_H
#define TXL_POSENC_H

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

#endif

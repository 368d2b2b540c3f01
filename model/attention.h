/* attention.h: multi-head attention scores, causal softmax and weighted values for every
 * positional scheme (doc/design.md, "The model"), forward and backward, per (batch, head).
 *
 * Shapes (doc/design.md notation; klen = m + Lq, m = current memory length):
 *   q    [B, Lq, H*dh]     queries of the segment rows (head h = columns h*dh..h*dh+dh-1)
 *   kv   [B, klen, 2*H*dh] keys (first H*dh columns) then values, rows [mem; segment]
 *   prob [B, H, Lq, klen]  softmax probabilities (before dropatt), cached for backward;
 *                          masked entries (j > m+i) are 0. NULL in inference (dropatt must
 *                          then be 0): each (b, h) plane lives in scratch only.
 *   vec  [B, Lq, H*dh]     sum_j a_ij v_j per head, heads concatenated
 * Score of query i and key j (delta = m+i-j >= 0 visible, else masked):
 *   s_ij = scale * (q_i + u)·k_j                          content (+ global content bias)
 *        + scale * (q_i + v)·rk[Lq-1-i+j]                 xl position terms (when rk)
 *        + dist_bias[h][delta]                            mlp / alibi / t5 bias (when dist_bias)
 *        + score_bias(b, h, i, j)                         hier / fire bias (when score_bias)
 * xl computes the position term as one GEMM per (b, h), BDraw = (q+v) @ rk_h^T [Lq, klen],
 * and reads BD[i][j] = BDraw[i][j+Lq-1-i]: never a (B,H,Lq,klen,dh) tensor.
 * Rope rotates q and k before these kernels and needs nothing here.
 * Gradient rule: dq, dkv are overwritten; drk, du, dv, d_dist_bias are added to (+=). */
#ifndef TXL_ATTENTION_H
#define TXL_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "attn_args.h"


/* Floats of scratch a call needs: the (b, h) pairs run in parallel, each thread with its
 * own working planes and partial gradient sums. */
double attn_scratch_floats(int Lq, int klen, int dh, int H, int threads);

void attn_forward(float *prob, float *vec, const float *q, const float *kv,
                  const attn_args *a, float *scratch);

/* One-token decoding: attn_decode.h. */

void attn_backward(float *dq, float *dkv, float *drk, float *du, float *dv, float *d_dist_bias,
                   const float *dvec, const float *prob, const float *q, const float *kv,
                   const attn_args *a, float *scratch);

/* Diagnostics (doc/design.md, "The model", `txl eval --term-stats`): sums and sums of squares, over
 * every visible (b, h, i, j), of the score's terms, each including the 1/sqrt(dh) scale:
 *   [0] content q_i.k_j       [1] content-position: xl q_i.rk[p]; the scheme's bias
 *   [2] global content u.k_j  [3] global position v.rk[p]
 * acc[t][0] += x, acc[t][1] += x^2; *count += visible entries. Plain loops: for a few
 * segments of evaluation, not for training. */
void attn_term_stats(double acc[4][2], double *count, const float *q, const float *kv,
                     const attn_args *a);

#endif

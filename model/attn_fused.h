/* attn_fused.h: the fused attention of one (batch, head): scores, the scheme's position
 * terms and biases, the mask, the softmax and the weighted values by blocks of query rows,
 * on txl's own tiles (attn_tile.h), with no [Lq, klen] plane (training still stores the
 * probabilities for the backward, as attention.h's `prob`). Same arguments, shapes and
 * gradient rule as attention.h's per-(b, h) work; attention.c picks it (attn_args.fused).
 *
 * A block of rb query rows [i0, i1) sees keys 0..m+i1-1: its scores are one [rb, klen]
 * strip of scratch, computed from the head's keys packed once per (b, h) (transposed, so
 * the tiles run along the keys), softmaxed row by row exactly as the OpenBLAS path does
 * (vmath.h), and multiplied by the values while still in cache. xl's position term is read
 * along its diagonal in the same tile (no shifted copy, no BDraw plane); the backward's
 * position products read dS with a row stride of one more than its own, as attention.c does.
 * Only the sums' order differs from sgemm's: results agree to rounding, not bit for bit. */
#ifndef TXL_ATTN_FUSED_H
#define TXL_ATTN_FUSED_H

#include <stddef.h>

#include "attention.h"

/* Floats of one thread's scratch (fused_forward_bh and fused_backward_bh). */
double fused_scratch_floats(int Lq, int klen, int dh, int rb);

/* Query rows per block of the fused kernel (a->row_block if set). */
int fused_row_block(const attn_args *a);

void fused_forward_bh(float *prob, float *vec, const float *q, const float *kv,
                      const attn_args *a, float *scratch, int b, int h);

/* drk [klen, H*dh], du and dv [H, dh], d_dist_bias [H, klen], d_score_bias: this thread's
 * partial sums (+=), or NULL. */
void fused_backward_bh(float *dq, float *dkv, float *drk, float *du, float *dv,
                       float *d_dist_bias, float *d_score_bias, const float *dvec,
                       const float *prob, const float *q, const float *kv, const attn_args *a,
                       float *scratch, int b, int h);

#endif

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
#include <stdint.h>

#include "attn_args.h"

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

/* The blocks' row passes, fp32, shared with attn_amx.c (rows i0..i1-1 of (b, h); S points
 * at row i0, row stride ld). */
/* floats from one stream's kv rows to the next */
size_t fused_kv_stride(const attn_args *a, int klen);
/* the global counter of element (i, 0) of (b, h)'s dropatt plane */
uint64_t fused_drop_base(const attn_args *a, int b, int h, int i);
/* dist_bias and score_bias onto the scores */
void fused_add_biases(float *S, int ld, const attn_args *a, int b, int h, int i0, int i1);
/* the masked softmax (same_len: attention.h), zero from each row's last visible key + 1 up
 * to `to` and below its first */
void fused_softmax_rows(float *S, int ld, int m, int same_len, int i0, int i1, int to);
/* the dropped probabilities of P (row stride ldp) into D (row stride ldd), zero up to w */
void fused_drop_rows(float *D, int ldd, const float *P, int ldp, const attn_args *a, int b,
                     int h, int i0, int i1, int w);
/* softmax's backward in place: dS = P (dP - sum_j P dP), zero past the visible keys to ld */
void fused_softmax_back_rows(float *G, int ld, const float *P, int ldp, int m, int i0, int i1);
/* dS's contributions to the biases' gradients (NULL: none) */
void fused_bias_grads(float *d_dist_bias, float *d_score_bias, const float *dS, int ld,
                      const attn_args *a, int b, int h, int i0, int i1);

#endif

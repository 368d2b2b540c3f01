/* attn_amx.h: the fused attention of one (batch, head) in bf16 on AMX tiles: attn_fused.h's
 * blocks of query rows (the same scores, position terms, biases, mask, softmax and dropatt,
 * in fp32), with every product of the block on the CPU's tile unit: operands rounded to bf16
 * (round to nearest even), sums in fp32. attention.c picks it (attn_args.amx) in bf16
 * precision on a CPU with AMX-BF16 (doc/design.md, "Precision").
 *
 * The roundings, each once per (b, h) or per block (and nowhere else):
 *   forward   scale (q + u), scale (q + v), k, v, rk; the probabilities after the softmax
 *             (after dropatt when training)
 *   backward  the same operands (q + u and q + v unscaled); dO; dS (scaled: scale dS)
 * Scores, the softmax, dS = P (dP - sum P dP), the biases and their gradients stay fp32. */
#ifndef TXL_ATTN_AMX_H
#define TXL_ATTN_AMX_H

#include "attn_args.h"

/* 1 when this process can run the kernel: the CPU has AMX-BF16 and the OS granted the tile
 * state (common/cpu.h), and the build has the instructions. */
int amx_attn_available(void);

/* Floats of one thread's scratch (amx_forward_bh and amx_backward_bh). */
double amx_scratch_floats(int Lq, int klen, int dh);

/* fused_forward_bh and fused_backward_bh (attn_fused.h) in bf16: same arguments, shapes and
 * gradient rule. */
void amx_forward_bh(float *prob, float *vec, const float *q, const float *kv,
                    const attn_args *a, float *scratch, int b, int h);
void amx_backward_bh(float *dq, float *dkv, float *drk, float *du, float *dv,
                     float *d_dist_bias, float *d_score_bias, const float *dvec,
                     const float *prob, const float *q, const float *kv, const attn_args *a,
                     float *scratch, int b, int h);

#endif

/* attn_decode.h: one-token decoding's attention (doc/design.md, "Sampling"): attention.h's
 * forward for Lq = 1, in inference, each of the B streams one query (row m) over its own
 * cached keys and values 0..m.
 *
 * Shapes (attention.h's notation, klen = m + 1):
 *   q    [B, H*dh]   the new rows' queries
 *   keys and values of stream b, head h: rows j = 0..m of [klen, dh] blocks, at kv (or
 *        attn_args.kv16) + b kv_bstride + h kv_hstride, row stride kv_row, the values
 *        v_offset after the keys (attn_args.h: the layout fields; 0 = attention.h's)
 *   rk   xl's position rows, shared by the streams: head h at rk (or rk16) + h rk_hstride,
 *        row p = j at p rk_row
 *   vec  [B, H*dh]   sum_j a_j v_j per head
 * Scores as attention.h's: s_j = scale (q + u)·k_j [+ scale (q + v)·rk_j] [+ dist_bias]
 * [+ score_bias], the softmax, vec = P v.
 *
 * Per head, then per stream, one pass over the stream's cached rows, which are read once
 * (the bytes of a many-stream step are the streams' caches): each score a dot product of
 * 16 lanes (fp32 rows: lane l holds the terms c = l mod 16 of the dh, one fused
 * multiply-add each, in order; bf16 rows: qgemm.h's pairs), the lanes added in gemm.c's
 * fixed tree, then the tail in order; each element of vec a chain of one fused
 * multiply-add per row j, in order (qgemv_t's). Over a bf16 cache these are the sums of
 * the qgemm products this replaced: the same bits. xl's bf16 position rows go through one
 * qgemm for all the streams of a head (each row converted once for up to 4 of them). The
 * AVX-512 and AVX2 kernels and the plain C twin (fmaf) compute the same bits; the kernel
 * is qgemm.h's choice (qgemm_kernel, qgemm_use). A stream's result does not depend on the
 * streams beside it. */
#ifndef TXL_ATTN_DECODE_H
#define TXL_ATTN_DECODE_H

#include <stddef.h>

#include "attn_args.h"

/* Floats of scratch attn_decode needs for B streams of klen keys of dh, on `threads`
 * threads. */
size_t attn_decode_scratch_floats(int B, int klen, int dh, int threads);
void attn_decode(float *vec, const float *q, const float *kv, const attn_args *a,
                 float *scratch);

#endif

/* gemm_bf16w.h: a linear layer's products y [M, N] = x [M, K] W^T + bias on the CPU's bf16
 * matrix units (AMX, else AVX512_BF16), through oneDNN, with the weights converted ONCE:
 * rounded to bf16 and reordered into the layout oneDNN's kernel reads (gemm_bf16.h rounds
 * both operands at every call, which for decoding's few rows costs more than the product).
 * For decoding many streams under --precision bf16 (doc/design.md, "Sampling"): each step's
 * M rows (one token of each stream) go through one product per weight, read once for all
 * of them. The activations are rounded to bf16 at each call, the sums are fp32: the
 * contract of bf16 precision (doc/design.md, "Precision"). A separate file from gemm_bf16.c,
 * which serves training's products. */
#ifndef TXL_GEMM_BF16W_H
#define TXL_GEMM_BF16W_H

#include <stdint.h>

typedef struct bf16w bf16w;

/* The product of M rows with W [N, K] (fp32, rounded to bf16 here; the caller may free it
 * after) and bias [N] (or NULL; copied). NULL when oneDNN cannot make it (no bf16 kernel,
 * out of memory): the caller then computes in fp32. */
bf16w *bf16w_new(const float *W, const float *bias, int N, int K, int M);
/* y [M, N] (row stride N) = x [M, K] (row stride K) W^T + bias: 0, or -1 when oneDNN failed
 * (y untouched: the caller computes it otherwise). xh: [M, K] bf16 scratch for x's rounding,
 * or NULL (the product's own): decoding shares one among its products, so that the rounded
 * rows stay in the cache from one product to the next (each own buffer was evicted by the
 * step's reads of the streams' caches, and its stores missed). */
int bf16w_run(bf16w *w, float *y, const float *x, uint16_t *xh);
void bf16w_free(bf16w *w);
/* The oneDNN implementation of the last bf16w_new ("brg:avx512_core_amx" ...), or "". */
const char *bf16w_impl(void);

#endif

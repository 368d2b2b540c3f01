/* attn_tile.h: the register-tiled products of the fused attention (attn_fused.c), txl's own
 * matrix kernels for the shapes OpenBLAS serves worst: depth d_head (64) and a few dozen
 * rows, where sgemm packs both operands on every call (doc/performance.md, "The GEMM
 * share").
 *
 * Every operand is row-major fp32. AT_W floats are one vector of the CPU (16 with AVX-512,
 * 8 with AVX2, 4 with SSE: GCC vector extensions, so one source serves all). Each output element is one
 * sum in a fixed order (the depth index ascending, FMA-contracted), so the result depends on
 * the data and the sizes of the call only, never on the thread.
 *
 * "Padded" widths: dhp = dh rounded up to AT_W (at_pad), the columns past dh zero in every
 * operand read along it; key counts n rounded up to AT_KEYS, the keys' columns past the real
 * ones zero (or finite: their results are computed and ignored). */
#ifndef TXL_ATTN_TILE_H
#define TXL_ATTN_TILE_H

#include <stddef.h>

#if defined(__AVX512F__)
#define AT_W 16
#elif defined(__AVX__)
#define AT_W 8
#else
#define AT_W 4 /* SSE (a portable build): 32-byte vectors would change the ABI */
#endif
#define AT_KEYS (2 * AT_W) /* keys per score tile */

static inline int at_pad(int n, int to) { return (n + to - 1) / to * to; }

/* Scores of `rows` queries and n keys (n a multiple of AT_KEYS), depth K:
 *   S[r][j] = alpha * sum_c A[r][c] KT[c][j]
 * A [rows, K] (row stride lda); KT [K, >= n] (stride ldk): the keys transposed. S [rows,
 * >= n] (stride lds) is overwritten. */
void at_scores(float *S, int lds, const float *A, int lda, const float *KT, int ldk, int rows,
               int n, int K, float alpha);

/* Weighted rows: O[r][c] = alpha * sum_{j<n} A[r*lda + j] B[j][c] (+ O[r][c] if accumulate)
 * for r < rows, c < dhp (a multiple of AT_W). B [n, dhp] (stride ldb), O (stride ldo). */
void at_rows(float *O, int ldo, const float *A, int lda, const float *B, int ldb, int rows,
             int n, int dhp, float alpha, int accumulate);

/* Weighted columns: O[j][c] += alpha * sum_{r<rows} A[r*lda + j] X[r][c] for j < n,
 * c < dhp (a multiple of AT_W). X [rows, dhp] (stride ldx), O [n, dhp] (stride ldo). */
void at_cols(float *O, int ldo, const float *A, int lda, const float *X, int ldx, int rows,
             int n, int dhp, float alpha);

#endif

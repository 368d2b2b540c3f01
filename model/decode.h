/* decode.h: one-token-at-a-time decoding with cached keys and values (DESIGN.md §7).
 *
 * Feeding one token as a segment of length 1 through model_forward recomputes the key and
 * value projections of all M memory rows and (xl) the projected positions: O(M d^2) per
 * layer and token. The memory rows never change once written, so their k and v are
 * computed once and kept next to mem[l]; xl's rk for klen = m + 1 is a suffix of the table
 * for klen = M + 1 (positions M..0), computed once. A step then costs O(M*H*dh + d^2) per
 * layer, independent of how much text was generated, and computes exactly what
 * model_forward computes for a 1-token segment (up to float rounding; tested).
 *
 * Rope rotates each cached key by the absolute position of its token and the query by its
 * own: only the difference (m + i) - j enters the score, as in model_forward. */
#ifndef TXL_DECODE_H
#define TXL_DECODE_H

#include <stdint.h>

#include "../common/err.h"
#include "model.h"

typedef struct {
    int n_layer, M, d, H, dh;
    float *kc, *vc;   /* [N][M][H*dh] keys and values of the memory rows (rope: rotated) */
    float *rk_full;   /* xl: [N][M+1][H*dh] projected positions M..0 */
    float *bias_full; /* mlp/alibi: [N][H][M+1] bias by distance 0..M */
    float *x, *xn, *qkv, *vec, *h1, *ffin, *a, *tmp, *scores, *logits;
    float *mlp_scratch;
    long pos;         /* absolute position of the next token (rope) */
    float *buf;
} decode_state;

int decode_init(decode_state *s, const model *mdl, int M, txl_err *e);
void decode_free(decode_state *s);
/* Builds the position tables from the weights and the k/v caches from the memory as it
 * stands (e.g. after the prompt ran through model_forward with batch 1); `pos` = tokens
 * consumed so far. Call again whenever the weights or the memory change from outside. */
void decode_prime(decode_state *s, const model *mdl, const model_mem *mem, long pos);
/* Feeds one token; advances mem (batch 1) and the caches; logits [V] of the next token. */
void decode_step(decode_state *s, const model *mdl, model_mem *mem, uint8_t tok);
static inline const float *decode_logits(const decode_state *s) { return s->logits; }

#endif

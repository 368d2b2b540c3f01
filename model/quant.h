/* quant.h: quantized weight matrices (doc/design.md, "Quantized checkpoints"): how a matrix
 * W [out, in] is stored in 16 or 8 bits (the types are qmat.h's, which the kernels include
 * without the model), the quantizer, the exact dequantization, and which of the table's
 * tensors a quantized checkpoint stores that way.
 *
 * - bf16: each weight rounded to bfloat16 (round to nearest even), [out, in].
 * - q8: blocks of QK = 32 consecutive weights of a row (along `in`), each an int8 q in
 *   [-127, 127] times one bf16 scale s of its block: w = q s. The scale is the block's
 *   largest magnitude over 127, rounded to bf16; q = round(w / s) to nearest even.
 *   A bf16 scale (8 significant bits, fp32's range) keeps that largest weight at q = +-127
 *   whatever its size (the scale's rounding, at most 2^-8 relative, moves w/s by at most
 *   127 x 2^-8 / (1 - 2^-8) = 0.498 < 0.5), so quantizing a dequantized matrix gives back
 *   the same q and s, bit for bit; and q s (at most 7 + 8 significant bits) is exact in
 *   fp32: the dequantized weight is a float with no rounding of its own. A block whose largest magnitude is below FLT_MIN x 127 (no
 *   normal bf16 scale) is stored as zeros.
 *
 * The layout in memory is the file's, q [out, in] int8 row-major and scales [out, in / QK],
 * and beside it the same values in panels of QP rows (qmat.h), which the kernels read. */
#ifndef TXL_QUANT_H
#define TXL_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "qmat.h"

/* "fp32", "bf16", "q8". */
const char *qtype_name(qtype t);

/* The bytes a rows x cols matrix takes stored as t (q8: its int8 values and scales). */
size_t qtype_bytes(qtype t, size_t rows, size_t cols);

/* One row of q8: q[cols] and scale[cols / QK] from w[cols] (cols a multiple of QK; w
 * finite). */
void quant_q8_row(int8_t *q, uint16_t *scale, const float *w, int cols);
/* n floats rounded to bf16. */
void quant_bf16(uint16_t *dst, const float *w, size_t n);
/* The exact dequantization of m into w [rows, cols]. */
void quant_dequant(float *w, const qmat *m);

/* How a checkpoint quantized to `target` (QT_BF16 or QT_Q8) stores parameter p:
 * - the linear layers' weights (each layer's qkv, o, ff.0 and ff.3): the target (q8 only
 *   when `in` is a multiple of QK, else bf16);
 * - the embedding and output layer (word_emb.weight; the adaptive softmax's embeddings,
 *   projections and cluster weights): bf16 (at 8 bits they cost more quality for little
 *   of the bytes);
 * - xl's projection of the positions (layers.N.attn.r.weight, the shape of a linear layer;
 *   read when a prompt or an evaluation runs, not per decoded token): bf16;
 * - every other tensor (biases, layer norms, the other schemes' small tensors): fp32. */
qtype quant_type_for(const param_entry *p, qtype target);

/* mdl's matrices stored as `target` (QT_BF16 or QT_Q8; QT_F32 drops any stored copies):
 * the stored copies are made from mdl->w (mdl->qm, mdl->qbuf), and mdl->w becomes their
 * exact dequantization, as if the model had been read from the quantized checkpoint. 0,
 * or -1 with e (out of memory). */
int quant_model(model *mdl, qtype target, txl_err *e);

/* Places a rows x cols matrix stored as t in buf (64-byte aligned, NULL: only counts):
 * m's type, shape and pointers, whose contents the caller fills (bf16, or q and scale,
 * then quant_finish). Returns the bytes it takes, a multiple of 64. */
size_t quant_place(qmat *m, qtype t, int rows, int cols, unsigned char *buf);
/* Derives what m keeps beside the file's data once that is filled in (q8: the panels). */
void quant_finish(qmat *m);

/* The storage of parameter i (mdl->qm[i]), or NULL when it is fp32. */
static inline const qmat *quant_of(const model *mdl, int i)
{
    return mdl->qm && mdl->qm[i].type != QT_F32 ? &mdl->qm[i] : NULL;
}

/* The type of the model's storage: QT_F32 when no tensor is stored otherwise; else the
 * narrowest type any tensor has (q8 over bf16). */
qtype quant_model_type(const model *mdl);

/* The stored matrices of one layer's products (NULL where fp32), and of the output layer
 * (word_emb: the full softmax's), from the table. */
typedef struct {
    const qmat *m[LIN_N]; /* by LIN_QKV, LIN_O, LIN_FF0, LIN_FF3 (model.h) */
} layer_qmats;
/* lq [n_layer] and *out_emb for mdl (all NULL for an fp32 model). */
void quant_views(const model *mdl, layer_qmats *lq, const qmat **out_emb);

#endif

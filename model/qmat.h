/* qmat.h: the types of a weight matrix stored in 16 or 8 bits (quant.h says how, and
 * quantizes a model): what the products over such a matrix (qgemm.h) and attention read,
 * with no knowledge of the model, so that they stand below it. */
#ifndef TXL_QMAT_H
#define TXL_QMAT_H

#include <stdint.h>

#define QK 32 /* weights per q8 block */
#define QP 16 /* rows per q8 panel (what the kernels read: below) */

typedef enum { QT_F32, QT_BF16, QT_Q8 } qtype;

typedef struct qmat qmat; /* model.h holds it too (C11 allows the repeat) */
struct qmat {
    qtype type;
    int rows, cols;        /* [out, in] */
    const uint16_t *bf16;  /* QT_BF16: [rows, cols] */
    const int8_t *q;       /* QT_Q8: [rows, cols] */
    const uint16_t *scale; /* QT_Q8: [rows, cols / QK], bf16 (the file's) */
    /* QT_Q8, what the kernels read (quant_finish derives them from q and scale): the rows
     * in panels of QP, each panel column-major, so that one load holds a column's QP
     * weights and the sums of QP rows sit in the lanes of one register; rows past the
     * last (the last panel's padding) are zeros. */
    const int8_t *qp;   /* [ceil(rows / QP)][cols][QP] */
    const uint16_t *sp; /* the scales, bf16: [ceil(rows / QP)][cols / QK][QP] */
};

#endif

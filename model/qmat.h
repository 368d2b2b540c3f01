/* qmat.h: the types of a weight matrix stored in 16 or 8 bits (quant.h says how, and
 * quantizes a model): what the products over such a matrix (qgemm.h) and attention read,
 * with no knowledge of the model, so that they stand below it. */
#ifndef TXL_QMAT_H
#define TXL_QMAT_H

#include <stdint.h>

#define QK 32 /* weights per q8 block */

typedef enum { QT_F32, QT_BF16, QT_Q8 } qtype;

typedef struct qmat qmat; /* model.h holds it too (C11 allows the repeat) */
struct qmat {
    qtype type;
    int rows, cols;        /* [out, in] */
    const uint16_t *bf16;  /* QT_BF16: [rows, cols] */
    const int8_t *q;       /* QT_Q8: [rows, cols] */
    const uint16_t *scale; /* QT_Q8: [rows, cols / QK], bf16 (the file's) */
    const float *sf;       /* QT_Q8: the same scales as floats (exact; what the kernels read:
                              a broadcast from memory, no conversion per block) */
};

#endif

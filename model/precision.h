/* precision.h: the precision of the matrix products (doc/design.md, "Precision"):
 * train.precision and the --precision of eval, probe and sample.
 *   fp32  txl 0.2's exact path, bit for bit (OpenBLAS), the default
 *   bf16  gemm()'s products take bf16 operands with fp32 sums (oneDNN: AMX where the CPU
 *         has it, else AVX512_BF16); weights, Adam, layernorm, softmax, the loss and every
 *         reduction stay fp32. Exits 2 on a CPU without either, naming what is missing.
 *   auto  bf16 where the CPU has it, fp32 elsewhere; says which it took. */
#ifndef TXL_PRECISION_H
#define TXL_PRECISION_H

#include "../common/err.h"

typedef enum { PREC_FP32, PREC_BF16, PREC_AUTO } precision_kind;

/* "fp32", "bf16", "auto"; NULL for another value */
const char *precision_name(int p);

/* Resolves `want` on this machine and sets gemm()'s precision (process-wide) to it: *took
 * is PREC_FP32 or PREC_BF16, *kernel the bf16 kernel ("amx", "avx512_bf16") or "". 0, or
 * -1 with ERR_INPUT (bf16 on a CPU without it: "precision bf16 needs AMX-BF16 or
 * AVX512_BF16: the CPU has neither ...") or ERR_RUNTIME (oneDNN would not start). `origin`
 * prefixes the message ("train.precision", "--precision"). */
int precision_apply(precision_kind want, const char *origin, precision_kind *took,
                    const char **kernel, txl_err *e);

#endif

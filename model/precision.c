/* precision.c: see precision.h. */
#include "precision.h"

#include "../common/cpu.h"
#include "gemm.h"

const char *precision_name(int p)
{
    static const char *const names[] = {[PREC_FP32] = "fp32", [PREC_BF16] = "bf16",
                                        [PREC_AUTO] = "auto"};
    return p >= 0 && p <= PREC_AUTO ? names[p] : NULL;
}

int precision_apply(precision_kind want, const char *origin, precision_kind *took,
                    const char **kernel, txl_err *e)
{
    char missing[200];
    const char *k = want == PREC_FP32 ? NULL : cpu_bf16_kernel(missing, sizeof missing);
    if (want == PREC_BF16 && !k)
        return err_set(e, ERR_INPUT, "%s: bf16 needs AMX-BF16 or AVX512_BF16: %s "
                       "(use fp32, or auto to take bf16 only where the CPU has it)", origin,
                       missing);
    precision_kind p = k ? PREC_BF16 : PREC_FP32;
    if (gemm_set_precision(p == PREC_BF16 ? GEMM_BF16 : GEMM_FP32))
        return err_set(e, ERR_RUNTIME, "%s: oneDNN would not start (no CPU engine)", origin);
    *took = p;
    *kernel = k ? k : "";
    return 0;
}

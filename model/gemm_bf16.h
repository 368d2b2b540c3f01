/* gemm_bf16.h: gemm()'s bf16 products (doc/design.md, "Precision"), through oneDNN's matmul:
 * both operands rounded to bf16 (round to nearest even), the products summed in fp32, C in
 * fp32. gemm.c routes to it when gemm_set_precision(GEMM_BF16) is in force; this header is
 * gemm.c's and the tests'. */
#ifndef TXL_GEMM_BF16_H
#define TXL_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

/* Creates the oneDNN engine (once; from the main thread). 0, or -1 (oneDNN failed). */
int gemm_bf16_init(void);

/* gemm()'s contract (gemm.h) in bf16. Returns 0, or -1 when this call cannot run in bf16 (no
 * engine, a thread past the slots, oneDNN refused): the caller then runs it in fp32. */
int gemm_bf16(float *C, const float *A, const float *B, int M, int N, int K, int trans_a,
              int trans_b, float alpha, float beta, int lda, int ldb, int ldc);

/* fp32 -> bf16, round to nearest even (NaN stays NaN), and back (exact). */
static inline uint16_t bf16_from_f32(float f)
{
    uint32_t u;
    __builtin_memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
}

/* The oneDNN implementation the last bf16 product of this thread ran ("brg:avx512_core_amx"
 * ...), or "" before any. */
const char *gemm_bf16_impl(void);

#endif

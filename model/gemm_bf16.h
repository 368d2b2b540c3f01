/* gemm_bf16.h: gemm()'s bf16 products (doc/design.md, "Precision"), through oneDNN's matmul:
 * both operands rounded to bf16 (round to nearest even), the products summed in fp32, C in
 * fp32. gemm.c routes to it when gemm_set_precision(GEMM_BF16) is in force; this header is
 * gemm.c's, the model's (weight copies) and the tests'.
 *
 * Rounding an operand is a pass over it as long as the product's own reads, and a training
 * step rounds each weight and each activation several times (forward, dx, dW). Two things
 * keep that to once: shadows, bf16 copies of fp32 arrays that a product reads instead of
 * rounding (the model's weights: model_bf16_sync rounds them once per optimiser step), and
 * operands the caller rounded once for several products (linear_backward's dy, read by dx's
 * product and dW's). */
#ifndef TXL_GEMM_BF16_H
#define TXL_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

/* Creates the oneDNN engine (once; from the main thread). 0, or -1 (oneDNN failed). */
int gemm_bf16_init(void);

/* gemm()'s contract (gemm.h) in bf16, each operand given in fp32 (A, B) or already in bf16
 * (Ah, Bh: stored as gemm() stores A and B, with the same leading dimensions; the fp32
 * pointer is then unused and may be NULL). An fp32 operand that lies wholly inside a shadowed
 * array is read from its copy, else rounded. bias [N] (fp32, or NULL) is added to every row
 * of the product before alpha and beta: C = alpha (op(A) op(B) + bias) + beta C. Returns 0, or -1 when this call cannot run in
 * bf16 (no engine, a thread past the slots, oneDNN refused: nothing is computed; the caller
 * runs it in fp32). */
int gemm_bf16_x(float *C, const float *A, const uint16_t *Ah, const float *B,
                const uint16_t *Bh, const float *bias, int M, int N, int K, int trans_a,
                int trans_b, float alpha, float beta, int lda, int ldb, int ldc);

/* Ch (bf16, row stride ldc) = bf16(relu(op(A) op(B) + bias)): gemm_bf16_x's product with
 * the ReLU applied to its fp32 result, then rounded (an inference layer's input made by the
 * product before it). 0 or -1 as gemm_bf16_x. */
int gemm_bf16_relu_h(uint16_t *Ch, const float *A, const uint16_t *Ah, const float *B,
                     const uint16_t *Bh, const float *bias, int M, int N, int K, int trans_a,
                     int trans_b, int lda, int ldb, int ldc);

/* dst[r * cols + c] = bf16(src[r * ld + c]): rows x cols rounded into contiguous rows (split
 * over the threads when large, outside parallel regions). */
void gemm_bf16_round(uint16_t *dst, const float *src, int rows, int cols, int ld);

/* Shadows: copy[i] must be bf16(base[i]) for i < n whenever a product reads base's array
 * (the owner rounds it again after each change of base). Set and cleared outside parallel
 * regions; at most GEMM_BF16_SHADOWS at once (-1 past that: products then round as without).
 * gemm_bf16_unshadow(base) is a no-op for an array that has none. */
#define GEMM_BF16_SHADOWS 16
int gemm_bf16_shadow(const float *base, size_t n, const uint16_t *copy);
void gemm_bf16_unshadow(const float *base);
/* Tests: 0 makes products ignore every shadow (and round), 1 (the default) reads them. */
void gemm_bf16_use_shadows(int on);
/* Tests: 1 makes every product decline (-1, as when oneDNN refuses a shape), 0 (the
 * default) runs them. gemm_bf16_stats: this thread's shapes held (at most 128) and the
 * primitives it created (a shape evicted and met again counts again). */
void gemm_bf16_refuse(int on);
void gemm_bf16_stats(int *held, long *created);

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

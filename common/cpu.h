/* cpu.h: what the CPU and the OS offer the bf16 products (doc/design.md, "Precision").
 *
 * bf16 needs one of: AMX-BF16 (Intel Sapphire Rapids and later: tile matrix products, with
 * the OS's permission for the tile state, arch_prctl ARCH_REQ_XCOMP_PERM on Linux) or
 * AVX512_BF16 (vdpbf16ps: Intel Cooper Lake and later, AMD Zen 4 and later), with the OS
 * saving the AVX-512 state (XCR0). (Also what txl's own quantized products may use.) oneDNN picks the kernel itself; txl only decides whether
 * bf16 is available, and names what is missing when it is not. DNNL_MAX_CPU_ISA, oneDNN's
 * cap on its instructions, caps these too (AVX2: no bf16; AVX512_CORE_BF16: no AMX). */
#ifndef TXL_CPU_H
#define TXL_CPU_H

#include <stddef.h>

typedef struct {
    int avx2, avx512f, avx512bw, avx512_bf16, amx_bf16, amx_tile;
    int os_avx512;   /* XCR0 has the opmask and ZMM state */
    int os_amx;      /* XCR0 has the tile state, and the OS granted it to this process */
    int avx512_capped; /* DNNL_MAX_CPU_ISA caps the instructions below AVX-512 (AVX2, ...):
                          txl's own AVX-512 kernels (model/qgemm.c) keep to AVX2 too */
} cpu_features;

/* Reads CPUID and XCR0 once (and asks Linux for the AMX tile state when the CPU has it);
 * later calls return the same. */
const cpu_features *cpu_detect(void);

/* The bf16 kernel this machine offers: "amx" (AMX-BF16), "avx512_bf16", or NULL, with
 * `missing` (when not NULL) filled with what is missing ("the CPU has neither AMX-BF16 nor
 * AVX512_BF16", or the OS part). */
const char *cpu_bf16_kernel(char *missing, size_t cap);

#endif

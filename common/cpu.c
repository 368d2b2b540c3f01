/* cpu.c: see cpu.h. */
#include "cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#define TXL_ARCH_REQ_XCOMP_PERM 0x1023 /* asm/prctl.h */
#define TXL_XFEATURE_XTILEDATA 18
#endif

#if defined(__x86_64__) || defined(__i386__)
static unsigned long long xgetbv0(void)
{
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

static void detect(cpu_features *f)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    int osxsave = (c >> 27) & 1;
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return;
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = (b >> 5) & 1;
    f->avx512f = (b >> 16) & 1;
    f->avx512bw = (b >> 30) & 1;
    f->amx_bf16 = (d >> 22) & 1;
    f->amx_tile = (d >> 24) & 1;
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f->avx512_bf16 = (a1 >> 5) & 1;
    f->os_avx512 = (xcr0 & 0xe6) == 0xe6; /* SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM */
    int xtile = (xcr0 & (3ull << 17)) == (3ull << 17);
#if defined(__linux__) && defined(__x86_64__)
    /* Linux grants the tile data state on request (kernel 5.16+); oneDNN asks too */
    if (f->amx_tile && xtile)
        xtile = syscall(SYS_arch_prctl, TXL_ARCH_REQ_XCOMP_PERM, TXL_XFEATURE_XTILEDATA) == 0;
#endif
    f->os_amx = xtile;
#else
    (void)f;
#endif
}

/* oneDNN's own cap on the instructions it uses (DNNL_MAX_CPU_ISA: AVX2, AVX512_CORE,
 * AVX512_CORE_BF16, AVX512_CORE_AMX, ALL, ...): bf16 is not available below what it allows.
 * make bench-avx2 sets AVX2, so an emulated AVX2 machine has no bf16 either. */
static void cap_isa(cpu_features *f)
{
    const char *isa = getenv("DNNL_MAX_CPU_ISA");
    char up[64] = "";
    for (size_t i = 0; isa && isa[i] && i + 1 < sizeof up; i++)
        up[i] = (char)(isa[i] >= 'a' && isa[i] <= 'z' ? isa[i] - 32 : isa[i]);
    if (!*up || strcmp(up, "ALL") == 0 || strstr(up, "AMX"))
        return;
    f->avx512_capped = strncmp(up, "AVX512", 6) != 0;
    f->amx_bf16 = f->amx_tile = f->os_amx = 0;
    if (strcmp(up, "AVX512_CORE_BF16") && strcmp(up, "AVX512_CORE_FP16"))
        f->avx512_bf16 = 0;
}

const cpu_features *cpu_detect(void)
{
    static cpu_features f;
    static int done;
    if (!done) { /* first called from the main thread, before any parallel region */
        detect(&f);
        cap_isa(&f);
        done = 1;
    }
    return &f;
}

const char *cpu_bf16_kernel(char *missing, size_t cap)
{
    const cpu_features *f = cpu_detect();
    if (f->amx_bf16 && f->amx_tile && f->os_amx)
        return "amx";
    if (f->avx512_bf16 && f->avx512f && f->os_avx512)
        return "avx512_bf16";
    if (missing && cap) {
        if (f->amx_bf16 && !f->os_amx)
            snprintf(missing, cap, "the OS did not grant the AMX tile state (arch_prctl "
                     "ARCH_REQ_XCOMP_PERM), and the CPU has no AVX512_BF16");
        else if (f->avx512_bf16 && !f->os_avx512)
            snprintf(missing, cap, "the OS does not save the AVX-512 state (XCR0)");
        else if (getenv("DNNL_MAX_CPU_ISA") && *getenv("DNNL_MAX_CPU_ISA"))
            snprintf(missing, cap, "the CPU has neither AMX-BF16 nor AVX512_BF16 within "
                     "DNNL_MAX_CPU_ISA=%.32s", getenv("DNNL_MAX_CPU_ISA"));
        else
            snprintf(missing, cap, "the CPU has neither AMX-BF16 nor AVX512_BF16");
    }
    return NULL;
}

/* sys.h: what txl asks of the machine: clocks, a duration for people, whether a plan of so
 * many bytes fits this process (physical memory and its address-space limit), and the
 * OpenBLAS it runs on. */
#ifndef TXL_SYS_H
#define TXL_SYS_H

#include <stddef.h>

#include "err.h"

/* Seconds on the monotonic clock, and this process's CPU seconds (all threads). */
double sys_now(void);
double sys_cpu_now(void);
/* "1h02m", "3m05s", "12s"; "?" for a negative, NaN or absurd value. */
void sys_fmt_duration(char *buf, size_t cap, double s);
/* Memory a command is about to allocate (`bytes`, estimated from the plans it will make:
 * model.h's acts_plan_floats, mem_plan_bytes, kv_cache_plan_floats, decode_plan_floats)
 * against what this machine allows: with what the process holds already, at most its
 * physical memory and its address-space limit (RLIMIT_AS, `ulimit -v`). Otherwise
 * ERR_INPUT (exit 2, before anything is allocated): "WHAT needs about N MiB of memory, more
 * than this machine allows: ..." with both. Better than being killed by the OOM killer
 * after minutes, or failing at a malloc half-way. `as_reserve`: address space that will be
 * mapped later without being touched much (gemm_as_reserve: OpenBLAS's buffers), held
 * against the address-space limit only. */
int sys_check_memory(const char *what, double bytes, double as_reserve, txl_err *e);

/* A buffer of `bytes` for the large arrays (weights, gradients, Adam's moments, the
 * activations' arena, caches), which free() frees; NULL when out of memory. From 2 MiB it is
 * aligned to 2 MiB, its size rounded up to it, and advised to the kernel as wanting
 * transparent huge pages (madvise(MADV_HUGEPAGE): Debian's kernels give them only where
 * asked): the weights a decoded token streams through and the arrays a step sweeps then
 * take one TLB entry per 2 MiB instead of 512. TXL_THP=0 in the environment leaves the
 * pages at 4 KiB (to compare). Smaller: 64-byte aligned. sys_zalloc: zeroed. */
void *sys_alloc(size_t bytes);
void *sys_zalloc(size_t bytes);
/* The kernel's transparent huge page mode ("always", "madvise", "never"; "unavailable" when
 * the kernel has none), and whether sys_alloc asks for them (TXL_THP is not "0"). */
const char *sys_thp_mode(void);
int sys_thp_asked(void);

/* The OpenBLAS core in use ("Haswell", "SkylakeX", ...), with the one OpenBLAS detected when
 * txl chose another (TXL_BLAS_DETECTED, set by main's re-exec). A static buffer. */
const char *sys_blas_core(void);
/* OpenBLAS's own words: the core it runs ("SkylakeX"; the one it detected unless
 * OPENBLAS_CORETYPE named another when it loaded), and its build ("OpenBLAS 0.3.21
 * DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64"); NULL when it names none. */
const char *sys_blas_corename(void);
const char *sys_blas_config(void);

#endif

/* par.h: txl's threading. txl owns all parallelism (OpenMP): OpenBLAS always runs on one
 * thread, and txl splits large GEMMs into per-thread blocks and runs attention per
 * (batch, head), layernorm, softmax, elementwise ops and Adam in parallel loops. One pool,
 * so no oversubscription; static partitions and fixed-order reductions, so results depend
 * on the thread count only, never on scheduling. */
#ifndef TXL_PAR_H
#define TXL_PAR_H

#include <stddef.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* Sets the number of threads (n <= 0: all online cores), pins OpenBLAS to 1 thread, and
 * flushes subnormal floats to zero on every thread (FTZ and DAZ). Returns the count used. */
int par_set_threads(int n);

static inline int par_threads(void)
{
#ifdef _OPENMP
    return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    return 1;
#endif
}

static inline int par_max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static inline int par_thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Block [begin, end) of n items for thread t of nt (static, contiguous). */
static inline void par_range(size_t n, int t, int nt, size_t *begin, size_t *end)
{
    size_t q = n / (size_t)nt, r = n % (size_t)nt;
    *begin = (size_t)t * q + ((size_t)t < r ? (size_t)t : r);
    *end = *begin + q + ((size_t)t < r ? 1 : 0);
}

#endif

/* par.c: see par.h. */
#include "par.h"

#include <unistd.h>
#if defined(__SSE2__)
#include <pmmintrin.h>
#endif

void openblas_set_num_threads(int);

/* Subnormal floats (below 1.2e-38) become 0, as inputs and as results, on this thread: a
 * sharp softmax gives such probabilities, and every GEMM that reads them takes the CPU's
 * slow path (S without dropout fell from 7,960 to 3,243 tokens/s over 1,200 steps). */
static void flush_subnormals(void)
{
#if defined(__SSE2__)
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
#endif
}

int par_set_threads(int n)
{
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    openblas_set_num_threads(1);
    flush_subnormals();
#ifdef _OPENMP
    omp_set_num_threads(n);
#pragma omp parallel num_threads(n)
    flush_subnormals(); /* the pool's threads, which every later region reuses */
#else
    n = 1;
#endif
    return n;
}

/* par.c: see par.h. */
#include "par.h"

#include <unistd.h>

void openblas_set_num_threads(int);

int par_set_threads(int n)
{
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    openblas_set_num_threads(1);
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    n = 1;
#endif
    return n;
}

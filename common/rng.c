/* rng.c: the non-inline part of rng.h. */
#include "rng.h"

#include <math.h>

double rng_normal(rng_t *r)
{
    double u1 = ((double)(rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0); /* (0, 1] */
    double u2 = rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

/* testlib.c: see testlib.h. */
#include "testlib.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

int tl_failures = 0;
int tl_checks = 0;

void tl_check(int cond, const char *fmt, ...)
{
    va_list ap;
    tl_checks++;
    if (!cond)
        tl_failures++;
    printf("%s ", cond ? "  ok  " : "  FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

int tl_done(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, tl_checks, tl_failures);
    return tl_failures ? 1 : 0;
}

static uint64_t next(tl_rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

float tl_uniform(tl_rng *r, float scale)
{
    return (float)(((next(r) >> 11) * (1.0 / 9007199254740992.0)) * 2.0 - 1.0) * scale;
}

float tl_normal(tl_rng *r, float scale)
{
    double u1 = ((next(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2) * scale);
}

void tl_fill(tl_rng *r, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = tl_normal(r, scale);
}

double tl_max_rel_err(const float *a, const double *b, size_t n, double floor)
{
    double maxdiff = 0, maxref = floor;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= maxdiff))
            maxdiff = d; /* also catches NaN */
        if (fabs(b[i]) > maxref)
            maxref = fabs(b[i]);
    }
    return maxdiff / maxref;
}

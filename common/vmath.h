/* vmath.h: the softmax's inner loops, written so the compiler vectorises them.
 *
 * libm's expf is a scalar call, and a running maximum or sum is a serial dependency chain
 * that the compiler must not reorder (no -ffast-math here). So:
 * - vm_expf is exp computed in straight-line float arithmetic (Cody-Waite reduction
 *   x = n ln2 + r with |r| <= ln2/2, a degree-7 Taylor polynomial of e^r, then 2^n through
 *   the exponent bits). test_ops checks it against double exp: within 2 ulp where the result
 *   is a normal float; 0 below ln 2^-126, +inf above ln 2^128, NaN for NaN.
 * - reductions keep VM_LANES independent partial results, combined in a fixed order at the
 *   end: the result depends on n and the data only, never on the vector width, so every
 *   build and every machine computes the same bits. */
#ifndef TXL_VMATH_H
#define TXL_VMATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define VM_LANES 16

#define VM_EXP_LO -87.33654f /* e^lo = 2^-126 */
#define VM_EXP_HI 88.72283f  /* e^hi = 2^128 */

/* The shared part of vm_expf and vm_expf_neg, for a clamped xc: n, the nearest integer to
 * xc / ln 2 (as a float), and e^r for r = xc - n ln 2 (returned). */
static inline float vm_exp_reduce(float xc, float *n_out)
{
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f;             /* 9 significant bits: n*ln2_hi is exact */
    const float ln2_lo = -2.12194440054690583e-4f; /* ln 2 - ln2_hi */
    const float round = 12582912.0f;               /* 1.5 * 2^23: adding it rounds to an integer */
    float t = xc * log2e + round;
    float n = t - round;
    float r = xc - n * ln2_hi;
    r = r - n * ln2_lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    *n_out = n;
    return p;
}

static inline float vm_expf(float x)
{
    const float lo = VM_EXP_LO, hi = VM_EXP_HI;
    float xc = x > lo ? x : lo;                    /* NaN lands here too (returned below) */
    xc = xc < hi ? xc : hi;
    float n, p = vm_exp_reduce(xc, &n);
    /* 2^n as two factors, so that n = 128 stays representable */
    int32_t e = (int32_t)n, e1 = e / 2, e2 = e - e1;
    uint32_t b1 = (uint32_t)(e1 + 127) << 23, b2 = (uint32_t)(e2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    float y = p * s1 * s2;
    y = x < lo ? 0.0f : y;
    y = x > hi ? HUGE_VALF : y;
    return x != x ? x : y;
}

/* vm_expf for x <= 0 (or NaN), bit for bit, at about 0.6x the cost: what a softmax takes
 * (scores minus their maximum). Without results above 1 the upper clamp goes, and since
 * n = round(x / ln 2) >= -126, 2^n is one normal float: p * 2^n is rounded once, as p 2^e1
 * 2^e2 is (the first product is exact), also where it is subnormal (or flushed to 0 under
 * FTZ). test_ops compares the two on every 7th float <= 0. */
static inline float vm_expf_neg(float x)
{
    const float lo = VM_EXP_LO;
    float xc = x > lo ? x : lo;
    float n, p = vm_exp_reduce(xc, &n);
    uint32_t b = (uint32_t)((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &b, sizeof s);
    float y = p * s;
    y = x < lo ? 0.0f : y;
    return x != x ? x : y;
}

/* An int32 that orders like the float (sign-magnitude to two's complement); its own inverse
 * on the bits. Integer max vectorises where a float max (NaN and -0 rules) does not; NaNs
 * with the sign bit clear order above +inf, so a NaN score makes the softmax NaN. */
static inline int32_t vm_ord(float f)
{
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i ^ ((i >> 31) & 0x7fffffff);
}

/* max of x[0..n-1], n >= 1 */
static inline float vm_max(const float *x, int n)
{
    int32_t acc[VM_LANES];
    for (int k = 0; k < VM_LANES; k++)
        acc[k] = vm_ord(x[0]);
    int j = 0;
    for (; j + VM_LANES <= n; j += VM_LANES)
        for (int k = 0; k < VM_LANES; k++) {
            int32_t o = vm_ord(x[j + k]);
            acc[k] = o > acc[k] ? o : acc[k];
        }
    int32_t m = acc[0];
    for (int k = 1; k < VM_LANES; k++)
        m = acc[k] > m ? acc[k] : m;
    for (; j < n; j++) {
        int32_t o = vm_ord(x[j]);
        m = o > m ? o : m;
    }
    m ^= (m >> 31) & 0x7fffffff;
    float f;
    memcpy(&f, &m, sizeof f);
    return f;
}

/* sum of x[j] for j < n, in double */
static inline double vm_sum(const float *x, size_t n)
{
    double acc[VM_LANES] = {0};
    size_t j = 0;
    for (; j + VM_LANES <= n; j += VM_LANES)
        for (int k = 0; k < VM_LANES; k++)
            acc[k] += (double)x[j + k];
    double s = 0;
    for (int k = 0; k < VM_LANES; k++)
        s += acc[k];
    for (; j < n; j++)
        s += (double)x[j];
    return s;
}

/* x[j] = exp(x[j] - sub) for j < n, sub >= every x[j] (their maximum); returns the sum of
 * the new x in double */
static inline double vm_exp_sum(float *x, int n, float sub)
{
    for (int j = 0; j < n; j++)
        x[j] = vm_expf_neg(x[j] - sub);
    return vm_sum(x, (size_t)n);
}

/* vm_exp_sum's sum (the same bits), x unchanged: sum of exp(x[j] - sub) for j < n, sub >=
 * every x[j] */
static inline double vm_exp_sum_keep(const float *x, int n, float sub)
{
    double acc[VM_LANES] = {0};
    int j = 0;
    for (; j + VM_LANES <= n; j += VM_LANES)
        for (int k = 0; k < VM_LANES; k++)
            acc[k] += (double)vm_expf_neg(x[j + k] - sub);
    double s = 0;
    for (int k = 0; k < VM_LANES; k++)
        s += acc[k];
    for (; j < n; j++)
        s += (double)vm_expf_neg(x[j] - sub);
    return s;
}

/* sum of x[j] * y[j] for j < n, in double */
static inline double vm_dot(const float *x, const float *y, int n)
{
    double acc[VM_LANES] = {0};
    int j = 0;
    for (; j + VM_LANES <= n; j += VM_LANES)
        for (int k = 0; k < VM_LANES; k++)
            acc[k] += (double)x[j + k] * (double)y[j + k];
    double s = 0;
    for (int k = 0; k < VM_LANES; k++)
        s += acc[k];
    for (; j < n; j++)
        s += (double)x[j] * (double)y[j];
    return s;
}

/* sum of (x[j] - c)^2 for j < n, in double (c = 0: the squared norm) */
static inline double vm_sumsq(const float *x, size_t n, double c)
{
    double acc[VM_LANES] = {0};
    size_t j = 0;
    for (; j + VM_LANES <= n; j += VM_LANES)
        for (int k = 0; k < VM_LANES; k++) {
            double t = (double)x[j + k] - c;
            acc[k] += t * t;
        }
    double s = 0;
    for (int k = 0; k < VM_LANES; k++)
        s += acc[k];
    for (; j < n; j++) {
        double t = (double)x[j] - c;
        s += t * t;
    }
    return s;
}

#endif

/* posenc.c: see posenc.h. */
#include "posenc.h"

#include <math.h>
#include <stddef.h>

#include "gemm.h"

void pos_sinusoid(float *out, int n, int d, int pos_first, int pos_step, int clamp_len)
{
    int half = d / 2;
    for (int r = 0; r < n; r++) {
        double pos = (double)pos_first + (double)r * pos_step;
        if (clamp_len > 0 && pos > clamp_len)
            pos = clamp_len;
        float *row = out + (size_t)r * d;
        for (int t = 0; t < half; t++) {
            double ang = pos * pow(10000.0, -2.0 * t / d);
            row[t] = (float)sin(ang);
            row[half + t] = (float)cos(ang);
        }
    }
}

void rope_tables(float *cosv, float *sinv, int n, int dh)
{
    int half = dh / 2;
    for (int p = 0; p < n; p++)
        for (int t = 0; t < half; t++) {
            double ang = (double)p * pow(10000.0, -2.0 * t / dh);
            cosv[(size_t)p * half + t] = (float)cos(ang);
            sinv[(size_t)p * half + t] = (float)sin(ang);
        }
}

void rope_apply(float *x, int rows, int ld, int H, int dh, int pos_first, const float *cosv,
                const float *sinv, int inverse)
{
    int half = dh / 2;
    float sgn = inverse ? -1.0f : 1.0f;
    for (int r = 0; r < rows; r++) {
        const float *c = cosv + (size_t)(pos_first + r) * half;
        const float *s = sinv + (size_t)(pos_first + r) * half;
        for (int h = 0; h < H; h++) {
            float *x1 = x + (size_t)r * ld + (size_t)h * dh, *x2 = x1 + half;
            for (int t = 0; t < half; t++) {
                float a = x1[t], b = x2[t], st = sgn * s[t];
                x1[t] = a * c[t] - b * st;
                x2[t] = b * c[t] + a * st;
            }
        }
    }
}

static void slopes_pow2(double *out, int n)
{
    for (int h = 0; h < n; h++)
        out[h] = pow(2.0, -8.0 * (h + 1) / n);
}

void alibi_slopes(double *slopes, int H)
{
    int n = 1;
    while (n * 2 <= H)
        n *= 2;
    slopes_pow2(slopes, n);
    /* the remaining heads take every other slope of a 2n-head model */
    for (int h = n, k = 0; h < H; h++, k += 2)
        slopes[h] = pow(2.0, -8.0 * (k + 1) / (2.0 * n));
}

void alibi_bias(float *bias, int H, int klen)
{
    double slopes[H > 0 ? H : 1];
    alibi_slopes(slopes, H);
    for (int h = 0; h < H; h++)
        for (int t = 0; t < klen; t++)
            bias[(size_t)h * klen + t] = (float)(-slopes[h] * t);
}

void mlp_bias_features(float *phi, int K, float max_dist, int klen)
{
    double lmax = log((double)max_dist);
    for (int t = 0; t < klen; t++)
        for (int k = 0; k < K; k++) {
            double tau = K > 1 ? exp(lmax * k / (K - 1)) : 1.0;
            double ang = (double)t / tau;
            phi[(size_t)t * 2 * K + k] = (float)sin(ang);
            phi[(size_t)t * 2 * K + K + k] = (float)cos(ang);
        }
}

static const double SQRT1_2 = 0.70710678118654752440;
static const double INV_SQRT_2PI = 0.39894228040143267794;

void mlp_bias_forward(float *bias, float *pre, float *act, float *phi, const float *W1,
                      const float *b1, const float *W2, const float *b2, int H, int hidden,
                      int K, float max_dist, int klen)
{
    mlp_bias_features(phi, K, max_dist, klen);
    linear_forward(pre, phi, W1, b1, klen, hidden, 2 * K, 0);
    for (size_t i = 0; i < (size_t)klen * hidden; i++) {
        double x = pre[i];
        act[i] = (float)(0.5 * x * (1.0 + erf(x * SQRT1_2)));
    }
    /* out[klen, H] = act @ W2^T + b2, stored transposed as bias[H, klen] */
    for (int t = 0; t < klen; t++)
        for (int h = 0; h < H; h++) {
            double s = b2[h];
            const float *w = W2 + (size_t)h * hidden, *a = act + (size_t)t * hidden;
            for (int j = 0; j < hidden; j++)
                s += (double)w[j] * a[j];
            bias[(size_t)h * klen + t] = (float)s;
        }
}

void mlp_bias_backward(float *dW1, float *db1, float *dW2, float *db2, const float *d_bias,
                       const float *pre, const float *act, const float *W2, float *d_act,
                       float *d_t, float *phi, int H, int hidden, int K, float max_dist,
                       int klen)
{
    for (int t = 0; t < klen; t++)
        for (int h = 0; h < H; h++)
            d_t[(size_t)t * H + h] = d_bias[(size_t)h * klen + t];
    linear_backward(d_act, dW2, db2, d_t, act, W2, klen, H, hidden, 0);
    for (size_t i = 0; i < (size_t)klen * hidden; i++) {
        double x = pre[i];
        double g = 0.5 * (1.0 + erf(x * SQRT1_2)) + x * exp(-0.5 * x * x) * INV_SQRT_2PI;
        d_act[i] = (float)(d_act[i] * g);
    }
    mlp_bias_features(phi, K, max_dist, klen);
    linear_backward(NULL, dW1, db1, d_act, phi, NULL, klen, hidden, 2 * K, 0);
}

/* posenc.c: the sinusoid table of xl and absolute (see posenc.h). */
#include "posenc.h"

#include <math.h>
#include <stddef.h>

void pos_sinusoid(float *out, int n, int d, int pos_first, int pos_step, int clamp_len)
{
    int half = d / 2;
    for (int t = 0; t < half; t++) { /* column pairs: one pow per frequency */
        double freq = pow(10000.0, -2.0 * t / d);
        for (int r = 0; r < n; r++) {
            double pos = (double)pos_first + (double)r * pos_step;
            if (clamp_len > 0 && pos > clamp_len)
                pos = clamp_len;
            double ang = pos * freq;
            out[(size_t)r * d + t] = (float)sin(ang);
            out[(size_t)r * d + half + t] = (float)cos(ang);
        }
    }
}


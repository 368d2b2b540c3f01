/* attn_kernel.c: attention alone, the OpenBLAS path against the fused kernel (attn_fused.h)
 * side by side: rounds alternate the two, each round times every case once, and the
 * medians of the rounds are printed with their ranges. The shapes are S's and M's
 * (doc/performance.md): xl, B x H pairs, training (forward with prob, then backward) and
 * evaluation (forward without prob), at mem_len = tgt_len and at 8x.
 * usage: attn_kernel THREADS [ROUNDS [CASE [ROW_BLOCK]]]  -> one line per case (CASE: those
 * whose name contains it, "" all) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/par.h"
#include "../model/attention.h"

/* CPU time of the process: on one thread, what a busy machine's time slices leave out */
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static float *fill(size_t n, unsigned seed)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f);
    }
    return x;
}

typedef struct {
    const char *name;
    int B, H, dh, Lq, m, train;
} shape;

/* seconds of one call (training: forward + backward) with the kernel `fused` */
static int row_block; /* argv[4]: the fused kernel's rows per block (0: its default) */

static double run(const shape *s, int fused, int threads, float *buf[8], int reps)
{
    int klen = s->m + s->Lq, hd = s->H * s->dh;
    attn_args a = {.B = s->B, .H = s->H, .dh = s->dh, .Lq = s->Lq, .m = s->m,
                   .scale = 1.0f / sqrtf((float)s->dh), .u = buf[4], .v = buf[4] + hd,
                   .rk = buf[5], .threads = threads, .fused = (unsigned char)fused,
                   .row_block = fused ? row_block : 0};
    double t0 = now();
    for (int r = 0; r < reps; r++) {
        attn_forward(s->train ? buf[2] : NULL, buf[3], buf[0], buf[1], &a, buf[6]);
        if (s->train)
            attn_backward(buf[7], buf[7] + (size_t)s->B * s->Lq * hd,
                          buf[7] + (size_t)s->B * (s->Lq + 2 * klen) * hd, NULL, NULL, NULL,
                          buf[0], buf[2], buf[0], buf[1], &a, buf[6]);
    }
    return (now() - t0) / reps;
}

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
    int th = par_set_threads(argc > 1 ? atoi(argv[1]) : 0);
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    row_block = argc > 4 ? atoi(argv[4]) : 0;
    static const shape shapes[] = {
        {"S train", 16, 4, 64, 128, 128, 1}, {"S eval", 16, 4, 64, 128, 128, 0},
        {"S eval 8x", 16, 4, 64, 128, 1024, 0}, {"M train", 8, 8, 64, 256, 256, 1},
        {"M eval", 8, 8, 64, 256, 256, 0},
    };
    enum { NS = sizeof shapes / sizeof shapes[0], MAXR = 64 };
    double t[NS][2][MAXR];
    if (rounds > MAXR)
        rounds = MAXR;
    printf("attention alone, %d threads, %d alternating rounds (median, range; CPU ms per call)\n",
           th, rounds);
    for (int c = 0; c < NS; c++) {
        const shape *s = &shapes[c];
        if (argc > 3 && !strstr(s->name, argv[3]))
            continue;
        int klen = s->m + s->Lq, hd = s->H * s->dh;
        size_t nq = (size_t)s->B * s->Lq * hd, nkv = (size_t)s->B * klen * 2 * hd;
        float *buf[8] = {fill(nq, 1), fill(nkv, 2), fill((size_t)s->B * s->H * s->Lq * klen, 3),
                         fill(nq, 4), fill(2 * (size_t)hd, 5), fill((size_t)klen * hd, 6),
                         fill((size_t)attn_scratch_floats(s->Lq, klen, s->dh, s->H, th), 7),
                         fill(nq + nkv + (size_t)klen * hd, 8)};
        double flop = 4.0 * s->B * s->H * s->Lq * (s->m + (s->Lq + 1) / 2.0) * s->dh * 1.5;
        int reps = (int)(2e9 / flop / (s->train ? 3 : 1)) + 1;
        run(s, 0, th, buf, 1), run(s, 1, th, buf, 1);
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < 2; k++)
                t[c][r % 2 ? 1 - k : k][r] = run(s, r % 2 ? 1 - k : k, th, buf, reps);
        double med[2], lo[2], hi[2];
        for (int k = 0; k < 2; k++) {
            double v[MAXR];
            memcpy(v, t[c][k], sizeof(double) * rounds);
            qsort(v, (size_t)rounds, sizeof *v, cmp);
            med[k] = v[rounds / 2], lo[k] = v[0], hi[k] = v[rounds - 1];
        }
        printf("%-10s blas %8.2f (%.2f-%.2f)  fused %8.2f (%.2f-%.2f)  fused/blas speed %.2fx\n",
               s->name, med[0] * 1e3, lo[0] * 1e3, hi[0] * 1e3, med[1] * 1e3, lo[1] * 1e3,
               hi[1] * 1e3, med[0] / med[1]);
        for (int k = 0; k < 8; k++)
            free(buf[k]);
    }
    return 0;
}

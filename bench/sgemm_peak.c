/* sgemm_peak.c: the GEMM throughput txl can get on this machine, through txl's own gemm()
 * (OpenBLAS, split over txl's threads), for the shapes the S and M models use plus a large
 * square one. The best of them is the "peak" that `make bench` divides model FLOPs by (MFU).
 * usage: sgemm_peak THREADS  -> one JSON line */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../common/par.h"
#include "../model/gemm.h"

char *openblas_get_corename(void);

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int th = par_set_threads(argc > 1 ? atoi(argv[1]) : 0);
    /* M x N x K (C = A @ B^T, y = x W^T): S/M projections, FF, and a large square */
    static const int shapes[][3] = {
        {2048, 768, 256},  {4096, 512, 256},  {2048, 1024, 256}, {2048, 256, 1024},
        {2048, 1536, 512}, {2048, 2048, 512}, {2048, 512, 2048}, {4096, 4096, 1024},
    };
    int n = sizeof shapes / sizeof shapes[0];
    double best = 0;
    printf("{\"threads\":%d,\"core\":\"%s\",\"shapes\":[", th, openblas_get_corename());
    for (int s = 0; s < n; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K),
              *C = malloc(sizeof(float) * M * N);
        for (long i = 0; i < (long)M * K; i++)
            A[i] = (float)((i % 13) - 6) * 1e-2f;
        for (long i = 0; i < (long)N * K; i++)
            B[i] = (float)((i % 7) - 3) * 1e-2f;
        gemm(C, A, B, M, N, K, 0, 1, 1.0f, 0.0f, K, K, N); /* warm up */
        int reps = 0;
        double t0 = now(), t;
        do {
            gemm(C, A, B, M, N, K, 0, 1, 1.0f, 0.0f, K, K, N);
            reps++;
            t = now() - t0;
        } while (t < 0.4);
        double gf = 2.0 * M * N * K * reps / t / 1e9;
        best = gf > best ? gf : best;
        printf("%s{\"m\":%d,\"n\":%d,\"k\":%d,\"gflops\":%.1f}", s ? "," : "", M, N, K, gf);
        free(A);
        free(B);
        free(C);
    }
    printf("],\"peak_gflops\":%.1f}\n", best);
    return 0;
}

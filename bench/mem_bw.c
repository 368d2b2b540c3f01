/* mem_bw.c: the read bandwidth one thread gets from a buffer of a given size, now, on this
 * machine: the roof for one-token decoding, which reads every weight once per token (a
 * one-row product does 2 FLOPs per float it loads). `make bench` measures it for the size
 * of a model's weights (the same working set: cache-resident when it fits) and for a
 * buffer far larger than the caches (DRAM).
 * usage: mem_bw MB [MB ...]  -> one JSON line:
 *   {"reads": [{"mb", "gb_per_s", "gb_per_cpu_s"}, ...]}
 * Each size: the best of 5 rounds of whole-buffer passes for at least 0.2 s each, per wall
 * second and per CPU second (on a shared machine the process waits for a core at random;
 * txl sample --stats reports both too). The integer sum vectorises (no FP reassociation
 * needed) and is printed, so it stays. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double clock_s(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* One pass over n words, 16 independent lanes so the loads are not serialised. */
static uint32_t pass(const uint32_t *restrict a, size_t n)
{
    uint32_t acc[16] = {0};
    for (size_t i = 0; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++)
            acc[k] += a[i + k];
    uint32_t s = 0;
    for (int k = 0; k < 16; k++)
        s ^= acc[k];
    return s;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mem_bw MB [MB ...]\n");
        return 2;
    }
    uint32_t sink = 0;
    printf("{\"reads\":[");
    for (int s = 1; s < argc; s++) {
        double mb = atof(argv[s]);
        size_t n = (size_t)(mb * 1024 * 1024 / 4) / 16 * 16;
        if (n < 16) {
            fprintf(stderr, "mem_bw: size '%s' is not a number of MB > 0\n", argv[s]);
            return 2;
        }
        uint32_t *a = aligned_alloc(64, n * 4);
        if (!a) {
            fprintf(stderr, "mem_bw: out of memory for %s MB\n", argv[s]);
            return 1;
        }
        for (size_t i = 0; i < n; i++) /* touch every page: no first-touch faults timed */
            a[i] = (uint32_t)i;
        double best = 0, best_cpu = 0;
        for (int r = 0; r < 5; r++) {
            int reps = 0;
            double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), t;
            do {
                sink ^= pass(a, n);
                reps++;
                t = clock_s(CLOCK_MONOTONIC) - t0;
            } while (t < 0.2);
            double c = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
            double gbs = (double)n * 4 * reps / t / 1e9, gbc = (double)n * 4 * reps / c / 1e9;
            best = gbs > best ? gbs : best;
            best_cpu = gbc > best_cpu ? gbc : best_cpu;
        }
        printf("%s{\"mb\":%.1f,\"gb_per_s\":%.2f,\"gb_per_cpu_s\":%.2f}", s > 1 ? "," : "",
               (double)n * 4 / 1048576, best, best_cpu);
        free(a);
    }
    printf("],\"check\":%u}\n", sink);
    return 0;
}

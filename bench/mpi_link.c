/* mpi_link: what the link between 2 MPI ranks costs, measured with the calls txl makes.
 * Latency: half the round trip of a 4-byte ping-pong (median of 200). One way: rank 0 sends
 * MAX_MIB to rank 1. The sums: MPI_Allreduce (MPI_SUM in place, the gradient's blocking
 * call) and MPI_Iallreduce + MPI_Wait (the overlapped one's, with the algorithm txl asks
 * for) over n floats, 64 KiB .. MAX_MIB, median of REPS each, and the fit of
 * t(n) = a + bytes / bw over the sizes. Rank 0 prints one JSON line each:
 *   {"probe":"latency","us":..}
 *   {"probe":"p2p","bytes":..,"Bps":..}
 *   {"probe":"allreduce","bytes":..,"s":..}     then {"probe":"allreduce_fit","a_s":..,"bw_Bps":..}
 *   {"probe":"iallreduce","bytes":..,"s":..}    then {"probe":"iallreduce_fit",..}
 * Usage: mpirun -np 2 mpi_link [MAX_MIB [REPS]] (make MPI=1 build-mpi/bench/mpi_link). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The sum's time over sizes 64 KiB .. max_n floats (x4 each), median of reps after one to
 * warm up, as the slowest rank saw it; blocking (MPI_Allreduce) or not (MPI_Iallreduce and
 * MPI_Wait); then the fit t = a + bytes / bw. */
static void sweep(const char *name, int nb, float *buf, size_t max_n, double *rt, int reps,
                  int rank)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int k = 0;
    for (size_t n = (size_t)1 << 14; n <= max_n; n *= 4) {
        for (int r = -1; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (nb) {
                MPI_Request q;
                MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
                MPI_Wait(&q, MPI_STATUS_IGNORE);
            } else {
                MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            }
            double dt = MPI_Wtime() - t0;
            MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (r >= 0)
                rt[r] = dt;
        }
        double s = median(rt, reps), x = (double)(n * sizeof *buf);
        if (!rank)
            printf("{\"probe\":\"%s\",\"bytes\":%.0f,\"s\":%.6f}\n", name, x, s);
        sx += x, sy += s, sxx += x * x, sxy += x * s, k++;
    }
    double slope = (k * sxy - sx * sy) / (k * sxx - sx * sx), a = (sy - slope * sx) / k;
    if (!rank)
        printf("{\"probe\":\"%s_fit\",\"a_s\":%.6f,\"bw_Bps\":%.4g}\n", name, a, 1 / slope);
}

int main(int argc, char **argv)
{
    /* the non-blocking sums' algorithm txl asks Open MPI for (common/dist.c) */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int max_mib = argc > 1 ? atoi(argv[1]) : 64, reps = argc > 2 ? atoi(argv[2]) : 5;
    if (size < 2 || max_mib < 1 || reps < 1) {
        if (!rank)
            fprintf(stderr, "mpi_link: needs 2 ranks or more, MAX_MIB >= 1, REPS >= 1\n");
        MPI_Finalize();
        return 2;
    }
    enum { PINGS = 200 };
    double t[PINGS];
    int word = 0;
    for (int i = -20; i < PINGS; i++) { /* 20 to warm up */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(&word, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&word, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(&word, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&word, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        }
        if (i >= 0)
            t[i] = 0.5 * (MPI_Wtime() - t0);
    }
    if (!rank)
        printf("{\"probe\":\"latency\",\"us\":%.2f}\n", median(t, PINGS) * 1e6);

    size_t max_n = (size_t)max_mib << 18; /* floats */
    float *buf = malloc(max_n * sizeof *buf);
    double *rt = malloc((size_t)reps * sizeof *rt);
    if (!buf || !rt) {
        fprintf(stderr, "mpi_link: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < max_n; i++)
        buf[i] = 0;
    for (int r = -1; r < reps; r++) { /* one way, rank 1 acknowledges with a word */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, (int)max_n, MPI_FLOAT, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(&word, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, (int)max_n, MPI_FLOAT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&word, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
        }
        if (r >= 0)
            rt[r] = MPI_Wtime() - t0;
    }
    if (!rank)
        printf("{\"probe\":\"p2p\",\"bytes\":%zu,\"Bps\":%.4g}\n", max_n * sizeof *buf,
               (double)(max_n * sizeof *buf) / median(rt, reps));
    sweep("allreduce", 0, buf, max_n, rt, reps, rank);
    sweep("iallreduce", 1, buf, max_n, rt, reps, rank);
    free(buf);
    free(rt);
    MPI_Finalize();
    return 0;
}

/* dist.c: see dist.h. */
#include "dist.h"

#include <stdlib.h>
#include <time.h>

#ifdef TXL_MPI
#include <mpi.h>
#endif

static dist_t self = {0, 1, 0, 1};
static double comm_s = 0, exposed_s = 0;


const dist_t *dist_self(void) { return &self; }
double dist_comm_seconds(void) { return comm_s; }
double dist_exposed_seconds(void) { return exposed_s; }

#ifdef TXL_MPI
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* MPI counts are ints: send large buffers in chunks. */
#define CHUNK ((size_t)1 << 30)

void dist_init(int *argc, char ***argv, dist_t *d)
{
    int inited = 0;
    MPI_Initialized(&inited);
    /* Open MPI's non-blocking sums (libnbc) of a buffer in place take a binomial reduce
     * and broadcast: the whole buffer up the tree and down again, twice the link time of
     * the blocking sum on 2 ranks and 2 log2(N) buffers on N. Rabenseifner's
     * reduce-scatter and allgather (its algorithm 3) moves 2 (N-1)/N buffers: 32 MiB over
     * a veth between two namespaces, 0.5-1.4 s binomial, 0.23-0.28 s Rabenseifner
     * (doc/mpi.md). A user's own choice stands; other MPIs ignore the variable. */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
    if (!inited)
        MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &self.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &self.size);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, self.rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &self.local_rank);
    MPI_Comm_size(local, &self.local_size);
    MPI_Comm_free(&local);
    if (d)
        *d = self;
}

void dist_finalize(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin)
        MPI_Finalize();
}

void dist_sum_f32(float *buf, size_t n)
{
    if (self.size == 1)
        return;
    double t0 = now();
    for (size_t o = 0; o < n; o += CHUNK) {
        size_t c = n - o < CHUNK ? n - o : CHUNK;
        MPI_Allreduce(MPI_IN_PLACE, buf + o, (int)c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double dt = now() - t0;
    comm_s += dt;
    exposed_s += dt;
}

/* sums started and not yet waited for */
#define MAX_PENDING 256
static MPI_Request pending[MAX_PENDING];
static int n_pending;

void dist_wait(void)
{
    if (!n_pending)
        return;
    double t0 = now();
    MPI_Waitall(n_pending, pending, MPI_STATUSES_IGNORE);
    n_pending = 0;
    double dt = now() - t0;
    comm_s += dt;
    exposed_s += dt;
}

void dist_isum_f32(float *buf, size_t n)
{
    if (self.size == 1)
        return;
    for (size_t o = 0; o < n; o += CHUNK) {
        if (n_pending == MAX_PENDING)
            dist_wait();
        double t0 = now();
        size_t c = n - o < CHUNK ? n - o : CHUNK;
        MPI_Iallreduce(MPI_IN_PLACE, buf + o, (int)c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                       &pending[n_pending++]);
        comm_s += now() - t0;
    }
}

void dist_poll(void)
{
    if (!n_pending)
        return;
    double t0 = now();
    int done = 0;
    MPI_Testall(n_pending, pending, &done, MPI_STATUSES_IGNORE);
    if (done)
        n_pending = 0;
    comm_s += now() - t0;
}

void dist_sum_f64(double *buf, size_t n)
{
    if (self.size == 1)
        return;
    double t0 = now();
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double dt = now() - t0;
    comm_s += dt;
    exposed_s += dt;
}

int dist_max_int(int v)
{
    if (self.size == 1)
        return v;
    int out = v;
    MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

void dist_gather_f32(const float *in, size_t n, float *out)
{
    if (self.size == 1) {
        for (size_t i = 0; out && i < n; i++)
            out[i] = in[i];
        return;
    }
    MPI_Gather(in, (int)n, MPI_FLOAT, out, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
}

void dist_gather_i32(const int32_t *in, size_t n, int32_t *out)
{
    if (self.size == 1) {
        for (size_t i = 0; out && i < n; i++)
            out[i] = in[i];
        return;
    }
    MPI_Gather(in, (int)n, MPI_INT32_T, out, (int)n, MPI_INT32_T, 0, MPI_COMM_WORLD);
}

#else /* single process */

void dist_init(int *argc, char ***argv, dist_t *d)
{
    (void)argc;
    (void)argv;
    if (d)
        *d = self;
}
void dist_finalize(void) {}
void dist_sum_f32(float *buf, size_t n) { (void)buf; (void)n; }
void dist_isum_f32(float *buf, size_t n) { (void)buf; (void)n; }
void dist_poll(void) {}
void dist_wait(void) {}
void dist_sum_f64(double *buf, size_t n) { (void)buf; (void)n; }
int dist_max_int(int v) { return v; }
void dist_gather_f32(const float *in, size_t n, float *out)
{
    for (size_t i = 0; out && i < n; i++)
        out[i] = in[i];
}
void dist_gather_i32(const int32_t *in, size_t n, int32_t *out)
{
    for (size_t i = 0; out && i < n; i++)
        out[i] = in[i];
}

#endif

/* dist.h: data parallelism over MPI (built with `make MPI=1`, -DTXL_MPI). Without MPI every
 * call is the single-process identity (rank 0 of 1), so the rest of txl has one code path.
 *
 * The model of distribution: N ranks hold identical weights and optimiser state; each owns
 * B/N whole streams of the batch; after the backward one sum-allreduce of the flat gradient
 * makes every rank's gradient the global one, so clipping and Adam stay identical. Rank 0
 * alone logs and writes files. */
#ifndef TXL_DIST_H
#define TXL_DIST_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int rank, size;
    int local_rank, local_size; /* ranks on this machine (for the thread split) */
} dist_t;

/* Initialises MPI when built with it (and launched under mpirun or as a singleton). */
void dist_init(int *argc, char ***argv, dist_t *d);
void dist_finalize(void);
const dist_t *dist_self(void);
static inline int dist_is_root(void) { return dist_self()->rank == 0; }

/* In-place sum over all ranks. */
void dist_sum_f32(float *buf, size_t n);
/* The same, started now and finished by dist_wait (buf untouched until then); dist_poll
 * lets the started sums progress (MPI moves them on only inside its calls). */
void dist_isum_f32(float *buf, size_t n);
void dist_poll(void);
/* Waits for every started sum; its time counts as exposed communication. */
void dist_wait(void);
void dist_sum_f64(double *buf, size_t n);
/* Max of an int over all ranks (e.g. "some rank wants to stop"). */
int dist_max_int(int v);
/* Gathers `n` floats from every rank into root's out[size * n] (rank order); non-roots may
 * pass out = NULL. */
void dist_gather_f32(const float *in, size_t n, float *out);
/* The same for int32 values (the memory's text coordinates). */
void dist_gather_i32(const int32_t *in, size_t n, int32_t *out);
/* Seconds spent inside dist_sum_*, dist_isum_f32, dist_poll and dist_wait so far
 * (communication time, for the logs). */
double dist_comm_seconds(void);
/* Of those, the seconds the caller only waited: in the blocking sums and in dist_wait (the
 * end of sums started earlier, overlapped with work until then). */
double dist_exposed_seconds(void);

#endif

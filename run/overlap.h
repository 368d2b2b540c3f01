/* overlap.h: train.comm_overlap auto, decided by measuring (doc/mpi.md, "Overlapping the
 * backward"). Overlap pays when the blocking sum is a real share of the step and the
 * overlapped steps are faster: over a network (the sums travel while the layers below
 * compute), not within one machine's memory, where there is nothing to overlap with and
 * the polling costs. Both depend on the link, the model and the machine, so auto times the
 * run's own steps: after OVL_WARM steps, 2 OVL_TRIAL alternate, blocking then overlapped
 * (alternating, both kinds see the same load when other work shares the machine); overlap
 * stays on when the blocking sum took at least OVL_MIN_SHARE of a step and the fastest
 * overlapped step beat the fastest blocking one by OVL_MARGIN, else blocking. The sums are
 * the same either way, bit for bit, so the choice changes the speed only. */
#ifndef TXL_OVERLAP_H
#define TXL_OVERLAP_H

enum { OVL_WARM = 1, OVL_TRIAL = 3 };
#define OVL_MIN_SHARE 0.03
#define OVL_MARGIN 0.01

typedef enum { OVL_WARMING, OVL_TRYING, OVL_DECIDED } overlap_phase;

typedef struct {
    overlap_phase phase;
    int n;               /* steps done in this phase */
    int on;              /* overlap in the next step */
    int want;            /* at the end of the trial: this rank's verdict (1: overlap), for
                          * the ranks to agree on */
    double blocking_s;   /* the fastest blocking step of the trial (seconds) */
    double comm_s;       /* the least blocking-sum time of those steps */
    double overlapped_s; /* the fastest overlapped step */
} overlap_auto;

/* auto on: the trial after the warm-up (blocking until then); auto off (one rank, or
 * several replicas per rank, with nothing to overlap): decided, blocking. */
void overlap_auto_init(overlap_auto *a, int possible);
/* Whether overlapped steps of overlapped_s beat blocking ones of blocking_s whose sum took
 * comm_s: the sum must be OVL_MIN_SHARE of the step (overlap cannot gain more than it) and
 * the overlapped step faster by OVL_MARGIN. NaN never pays. */
int overlap_pays(double blocking_s, double comm_s, double overlapped_s);
/* One step done (its seconds, and its communication's). Returns 1 when the trial ends with
 * it: a->want is then this rank's verdict, which every rank must agree on
 * (overlap_auto_settle) before the next step. */
int overlap_auto_step(overlap_auto *a, double step_s, double comm_s);
/* The agreed verdict: decided. */
void overlap_auto_settle(overlap_auto *a, int agreed);

#endif

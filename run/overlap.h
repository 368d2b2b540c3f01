/* overlap.h: train.comm_overlap auto, decided by measuring (doc/mpi.md, "Overlapping the
 * backward"). Overlap pays when the blocking sum is a real share of the step and the
 * overlapped steps are faster: over a network (the sums travel while the layers below
 * compute), not within one machine's memory, where there is nothing to overlap with and
 * the polling costs. Both depend on the link, the model and the machine, so auto times
 * the run's own steps: after OVL_WARM steps, OVL_TRIAL blocking ones; if their sum took at
 * least OVL_MIN_SHARE of a step, OVL_TRIAL overlapped ones; overlap stays on when its
 * fastest step beat the fastest blocking one by OVL_MARGIN, else blocking. The sums are the
 * same either way, bit for bit, so the choice changes the speed only. */
#ifndef TXL_OVERLAP_H
#define TXL_OVERLAP_H

enum { OVL_WARM = 1, OVL_TRIAL = 3 };
#define OVL_MIN_SHARE 0.03
#define OVL_MARGIN 0.01

typedef enum { OVL_WARMING, OVL_BLOCKING, OVL_OVERLAPPED, OVL_DECIDED } overlap_phase;

typedef struct {
    overlap_phase phase;
    int n;               /* steps done in this phase */
    int on;              /* overlap in the next step */
    int want;            /* at the end of a phase: this rank's proposal (1: try or keep
                          * overlap), for the ranks to agree on */
    double blocking_s;   /* the fastest blocking step of the trial (seconds) */
    double comm_s;       /* the least blocking-sum time of those steps */
    double overlapped_s; /* the fastest overlapped step, or NAN before it was tried */
} overlap_auto;

/* auto on: the trial from the start (blocking); auto off (one rank, or several replicas per
 * rank, with nothing to overlap): decided, blocking. */
void overlap_auto_init(overlap_auto *a, int possible);
/* Whether a blocking sum taking comm_s of a blocking_s step is worth an overlapped trial. */
int overlap_worth_trying(double blocking_s, double comm_s);
/* Whether overlapped steps of overlapped_s beat blocking ones of blocking_s. */
int overlap_pays(double blocking_s, double overlapped_s);
/* One step done (its seconds, and its communication's). Returns 1 when a phase of the
 * trial ends with it: a->want is then this rank's proposal, which every rank must agree on
 * (overlap_auto_settle) before the next step. */
int overlap_auto_step(overlap_auto *a, double step_s, double comm_s);
/* The agreed proposal: the overlapped trial or the decision. */
void overlap_auto_settle(overlap_auto *a, int agreed);

#endif

/* test_overlap.c: train.comm_overlap auto's trial (run/overlap.c) on step times like those
 * measured (doc/mpi.md): within one machine (a sum of a few ms in a step of hundreds: no
 * trial, blocking), over a slow link where overlapping pays (overlap), and where it does not
 * (blocking); the phases and the steps each takes; rank 0's proposal wins. */
#include <math.h>
#include <stdio.h>

#include "../run/overlap.h"
#include "testlib.h"

/* Runs the trial on steps of blocking_s (the sum comm_s of it) and overlapped_s, each
 * perturbed by noise[i % 4]; returns the decision (on) and the steps it took, or -1 if it
 * never decided in 20 steps or went wrong (overlap in a blocking trial step, say). */
static int trial(double blocking_s, double comm_s, double overlapped_s, int *steps,
                 int *tried)
{
    static const double noise[4] = {1.00, 1.07, 0.98, 1.15};
    overlap_auto a;
    overlap_auto_init(&a, 1);
    *tried = 0;
    for (int i = 0; i < 20; i++) {
        int overlapped = a.on;
        if (a.phase != OVL_OVERLAPPED && overlapped)
            return -1;
        *tried |= overlapped;
        double s = (overlapped ? overlapped_s : blocking_s) * noise[i % 4];
        if (overlap_auto_step(&a, s, overlapped ? 0 : comm_s * noise[i % 4]))
            overlap_auto_settle(&a, a.want);
        if (a.phase == OVL_DECIDED) {
            *steps = i + 1;
            return a.on;
        }
    }
    return -1;
}

int main(void)
{
    int steps, tried, on;
    /* one machine, S: 0.27 s steps, 4.7 ms of sums; overlapped would be slower */
    on = trial(0.272, 0.0047, 0.283, &steps, &tried);
    CHECK(on == 0 && !tried && steps == OVL_WARM + OVL_TRIAL,
          "sums 1.7%% of a step: blocking without a trial, decided after %d steps (on %d, "
          "tried %d)", steps, on, tried);
    /* a link where the sums take a third of the step and overlap hides most of it */
    on = trial(1.50, 0.50, 1.12, &steps, &tried);
    CHECK(on == 1 && tried && steps == OVL_WARM + 2 * OVL_TRIAL,
          "sums 33%% of a step, overlapped 25%% faster: overlap, after %d steps", steps);
    /* a link where overlapping hides nothing and polls cost (slower overlapped) */
    on = trial(1.50, 0.50, 1.55, &steps, &tried);
    CHECK(on == 0 && tried, "overlapped 3%% slower: blocking (tried %d, on %d)", tried, on);
    /* equal within the margin: blocking (overlap must pay by OVL_MARGIN) */
    on = trial(1.50, 0.50, 1.50 * (1 - OVL_MARGIN / 2), &steps, &tried);
    CHECK(on == 0 && tried, "overlapped %.1f%% faster, under the margin: blocking",
          100 * OVL_MARGIN / 2);
    /* the thresholds themselves */
    CHECK(overlap_worth_trying(1.0, OVL_MIN_SHARE) && !overlap_worth_trying(1.0, 0.029),
          "worth trying from %.0f%% of the step", 100 * OVL_MIN_SHARE);
    CHECK(overlap_pays(1.0, 0.98) && !overlap_pays(1.0, 0.995) && !overlap_pays(1.0, NAN),
          "pays from %.0f%% faster (NaN never pays)", 100 * OVL_MARGIN);

    /* nothing to overlap (one rank, replicas): decided and blocking from the start */
    overlap_auto a;
    overlap_auto_init(&a, 0);
    CHECK(a.phase == OVL_DECIDED && !a.on && !overlap_auto_step(&a, 1, 1),
          "impossible: decided, blocking, no trial");
    /* the ranks settle on the agreed proposal, not their own */
    overlap_auto_init(&a, 1);
    for (int i = 0; i < OVL_WARM + OVL_TRIAL - 1; i++)
        overlap_auto_step(&a, 1.0, 0.5);
    CHECK(overlap_auto_step(&a, 1.0, 0.5) && a.want == 1, "this rank wants the trial");
    overlap_auto_settle(&a, 0);
    CHECK(a.phase == OVL_DECIDED && !a.on, "rank 0 did not: decided, blocking");
    return tl_done("test_overlap");
}

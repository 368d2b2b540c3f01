/* test_overlap.c: train.comm_overlap auto's trial (run/overlap.c) on step times like those
 * measured (doc/mpi.md): within one machine (a sum of a few ms in a step of hundreds:
 * blocking), over a slow link where overlapping pays (overlap), where it does not
 * (blocking), within the margin (blocking); steps that slow down as the trial goes on (load
 * rising on a shared machine) still compare alike, since the kinds alternate; the steps each
 * kind takes; the ranks' agreed verdict wins. */
#include <math.h>
#include <stdio.h>

#include "../run/overlap.h"
#include "testlib.h"

/* Runs the trial on steps of blocking_s (the sum comm_s of it) and overlapped_s, step i
 * (from 0) scaled by noise[i % 3] * (1 + drift * i) (a period of 3: both kinds of step see
 * every noise); returns the decision (on) and the steps
 * it took, or -1 if it never decided in 20 steps or the steps were not warm-up (blocking),
 * then blocking and overlapped by turns. */
static int trial(double blocking_s, double comm_s, double overlapped_s, double drift,
                 int *steps)
{
    static const double noise[3] = {1.00, 1.07, 0.98};
    overlap_auto a;
    overlap_auto_init(&a, 1);
    for (int i = 0; i < 20; i++) {
        int want_on = i >= OVL_WARM && (i - OVL_WARM) % 2 == 1;
        if (a.on != want_on)
            return -1;
        double f = noise[i % 3] * (1 + drift * i);
        if (overlap_auto_step(&a, (a.on ? overlapped_s : blocking_s) * f, a.on ? 0 : comm_s * f))
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
    int steps = 0, on;
    const int all = OVL_WARM + 2 * OVL_TRIAL;
    /* one machine, S: 0.27 s steps, 4.7 ms of sums; overlapped slower */
    on = trial(0.272, 0.0047, 0.283, 0, &steps);
    CHECK(on == 0 && steps == all, "one machine (sums 1.7%% of a step): blocking, after %d "
          "steps (on %d)", steps, on);
    /* the same, had the overlapped steps been faster: the sum is too small to pay */
    on = trial(0.272, 0.0047, 0.250, 0, &steps);
    CHECK(on == 0, "sums under %.0f%% of a step: blocking even if overlapped steps ran faster",
          100 * OVL_MIN_SHARE);
    /* S over 1 Gbit/s: 0.66 s blocking with 0.26 s of sums, 0.34 s overlapped */
    on = trial(0.66, 0.26, 0.34, 0, &steps);
    CHECK(on == 1 && steps == all, "sums 39%% of a step, overlapped 48%% faster: overlap, "
          "after %d steps", steps);
    /* M over the unshaped veth: the sums' work is the cores', overlapped no faster */
    on = trial(2.061, 0.127, 2.076, 0, &steps);
    CHECK(on == 0, "sums 6%% of a step, overlapped 0.7%% slower: blocking");
    /* equal within the margin: blocking (overlap must pay by OVL_MARGIN) */
    on = trial(1.50, 0.50, 1.50 * (1 - OVL_MARGIN / 2), 0, &steps);
    CHECK(on == 0, "overlapped %.1f%% faster, under the margin: blocking", 100 * OVL_MARGIN / 2);
    /* the machine slows by 5% a step during the trial: alternating, overlap 10% faster is
     * still seen (blocking steps first, then overlapped ones, would have picked blocking) */
    on = trial(1.0, 0.3, 0.9, 0.05, &steps);
    CHECK(on == 1, "steps slowing 5%% each, overlapped 10%% faster: overlap");
    CHECK(overlap_pays(1.0, OVL_MIN_SHARE, 0.98) && !overlap_pays(1.0, 0.029, 0.5) &&
              !overlap_pays(1.0, 0.5, 0.995) && !overlap_pays(1.0, 0.5, NAN),
          "pays from %.0f%% of the step in sums and %.0f%% faster (NaN never pays)",
          100 * OVL_MIN_SHARE, 100 * OVL_MARGIN);

    /* nothing to overlap (one rank, replicas): decided and blocking from the start */
    overlap_auto a;
    overlap_auto_init(&a, 0);
    CHECK(a.phase == OVL_DECIDED && !a.on && !overlap_auto_step(&a, 1, 1),
          "impossible: decided, blocking, no trial");
    /* the ranks settle on the agreed verdict, not their own */
    overlap_auto_init(&a, 1);
    for (int i = 0; i < all - 1; i++)
        overlap_auto_step(&a, a.on ? 0.5 : 1.0, a.on ? 0 : 0.5);
    CHECK(overlap_auto_step(&a, 0.5, 0) && a.want == 1, "this rank's verdict: overlap");
    overlap_auto_settle(&a, 0);
    CHECK(a.phase == OVL_DECIDED && !a.on, "rank 0's was blocking: decided, blocking");
    return tl_done("test_overlap");
}

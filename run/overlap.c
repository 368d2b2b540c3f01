/* overlap.c: see overlap.h (the trainer's side, the ranks' agreement and the event, is
 * run_overlap_plan in plan.c and run_overlap_step in step.c) */
#include <math.h>

#include "overlap.h"

void overlap_auto_init(overlap_auto *a, int possible)
{
    *a = (overlap_auto){.phase = possible ? OVL_WARMING : OVL_DECIDED, .blocking_s = INFINITY,
                        .comm_s = INFINITY, .overlapped_s = INFINITY};
}

int overlap_pays(double blocking_s, double comm_s, double overlapped_s)
{
    return comm_s >= OVL_MIN_SHARE * blocking_s && overlapped_s < (1 - OVL_MARGIN) * blocking_s;
}

int overlap_auto_step(overlap_auto *a, double step_s, double comm_s)
{
    switch (a->phase) {
    case OVL_WARMING:
        if (++a->n == OVL_WARM)
            a->phase = OVL_TRYING, a->n = 0;
        return 0;
    case OVL_TRYING:
        if (a->on) {
            a->overlapped_s = fmin(a->overlapped_s, step_s);
        } else {
            a->blocking_s = fmin(a->blocking_s, step_s);
            a->comm_s = fmin(a->comm_s, comm_s);
        }
        a->on = ++a->n % 2; /* blocking, overlapped, blocking, ... */
        if (a->n < 2 * OVL_TRIAL)
            return 0;
        a->want = overlap_pays(a->blocking_s, a->comm_s, a->overlapped_s);
        return 1;
    case OVL_DECIDED:
        return 0;
    }
    return 0;
}

void overlap_auto_settle(overlap_auto *a, int agreed)
{
    a->phase = OVL_DECIDED;
    a->on = agreed;
}

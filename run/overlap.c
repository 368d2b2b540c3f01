/* overlap.c: see overlap.h; the trainer's side (the ranks' agreement, the event) at the end. */
#include "run.h"

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

/* ---------------------------------------------------------------------------------------
 * The trainer's side. */

/* train.comm_overlap as configured; auto starts its trial (one replica per rank and more
 * than one rank: otherwise there is nothing to overlap). */
void run_overlap_plan(trainer *t)
{
    run_streams *s = &t->streams;
    comm_overlap_kind ov = t->cfg.train.comm_overlap;
    int possible = dist_self()->size > 1 && s->R == 1;
    overlap_auto_init(&s->ovl, possible && ov == OVERLAP_AUTO);
    s->ovl.on = possible && ov == OVERLAP_ON;
    s->overlap = s->ovl.on;
}

/* After a step (its seconds, its blocking sums' seconds): the trial goes on; at its end the
 * ranks take rank 0's verdict (their clocks differ a little) and the decision is told: an
 * overlap event in log.jsonl, a note for people. */
void run_overlap_step(trainer *t, double step_s, double comm_s)
{
    overlap_auto *a = &t->streams.ovl;
    if (a->phase == OVL_DECIDED)
        return;
    if (overlap_auto_step(a, step_s, comm_s)) {
        overlap_auto_settle(a, dist_max_int(dist_is_root() ? a->want : 0));
        char json[256], text[256];
        snprintf(json, sizeof json, "{\"event\":\"overlap\",\"step\":%ld,\"on\":%s,"
                 "\"blocking_step_s\":%.6f,\"blocking_comm_s\":%.6f,\"overlapped_step_s\":%.6f}",
                 t->st.step, a->on ? "true" : "false", a->blocking_s, a->comm_s,
                 a->overlapped_s);
        snprintf(text, sizeof text, "comm_overlap auto: steps take %.3f s blocking (the sum "
                 "%.3f s, %.1f%%), %.3f s overlapped: %s", a->blocking_s, a->comm_s,
                 100 * a->comm_s / a->blocking_s, a->overlapped_s,
                 a->on ? "overlapped" : "blocking");
        run_event(t, &(txl_event){.kind = TXL_EV_NOTE, .step = t->st.step,
                                  .max_steps = t->cfg.train.max_steps, .json = json,
                                  .text = text});
    }
    t->streams.overlap = a->on;
}

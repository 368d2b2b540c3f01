/* schedule.c: a run's learning-rate schedule: the config's (optim/'s lr_schedule), shaped
 * by the training state (a resume that changed the schedule goes on as
 * train.resume_schedule says, recorded in the state for later resumes), and the lr of a
 * step, by the steps or by the time budget (train.schedule_by). */
#include "run.h"

/* The lr schedule of a train section, shaped as the training state says (a resume that
 * changed the schedule: run_resume_schedule below). */
lr_schedule run_schedule(const train_config *tc, const train_state *st)
{
    return (lr_schedule){.kind = tc->schedule, .lr = tc->lr, .lr_min = tc->lr_min,
                         .warmup = tc->warmup_steps, .max_steps = tc->max_steps,
                         .shape = (lr_shape)st->lr_shape, .from_step = st->lr_from_step,
                         .from_lr = st->lr_from};
}

/* The learning rate of `step`: of the step (train.schedule_by steps), or of the budget's
 * progress (time): the fraction of max_minutes used by the run so far (earlier invocations
 * included), or of max_steps if that is further, so a run anneals fully whichever ends it.
 * The ranks' clocks differ by a little: they take the mean, so every replica steps alike. */
double run_step_lr(const trainer *t, const lr_schedule *sched, long step)
{
    const train_config *tc = &t->cfg.train;
    if (tc->schedule_by != SCHED_BY_TIME)
        return lr_at(sched, step);
    double p = (t->st.elapsed + sys_now() - t->t_start) / (tc->max_minutes * 60.0);
    double ps = tc->max_steps > 0 ? (double)step / (double)tc->max_steps : 0;
    p = p > ps ? p : ps;
    dist_sum_f64(&p, 1);
    return lr_at_progress(sched, p / dist_self()->size);
}

/* The keys of the schedule that differ between the checkpoint's train section and the
 * config's ("max_steps 400 -> 800"), into buf; 0 when the lr of every step after the
 * resume is the same (max_steps counts for the cosine only). */
static int schedule_diff(const train_config *a, const train_config *b, char *buf, size_t cap)
{
    static const char *const kind[] = {"constant", "cosine", "inv_sqrt"};
    size_t o = 0;
    buf[0] = 0;
#define DIFF(c, ...) if (c && o < cap) o += (size_t)snprintf(buf + o, cap - o, __VA_ARGS__)
    DIFF(a->schedule != b->schedule, "%sschedule %s -> %s", o ? ", " : "", kind[a->schedule],
         kind[b->schedule]);
    DIFF(a->lr != b->lr, "%slr %g -> %g", o ? ", " : "", a->lr, b->lr);
    DIFF(a->lr_min != b->lr_min, "%slr_min %g -> %g", o ? ", " : "", a->lr_min, b->lr_min);
    DIFF(a->warmup_steps != b->warmup_steps, "%swarmup_steps %ld -> %ld", o ? ", " : "",
         a->warmup_steps, b->warmup_steps);
    DIFF(a->max_steps != b->max_steps && (a->schedule == LR_COSINE || b->schedule == LR_COSINE),
         "%smax_steps %ld -> %ld", o ? ", " : "", a->max_steps, b->max_steps);
#undef DIFF
    return o > 0;
}

/* A resume whose config changes the lr schedule (train.max_steps raised to extend a
 * finished run, say): from the resumed step S the schedule is train.resume_schedule's
 * (as_planned, continue or restart; the state records it, so later resumes keep it), and
 * sched_note says what it does and what the other choices would. Otherwise the
 * checkpoint's shape goes on. */
int run_resume_schedule(trainer *t, txl_err *e)
{
    const train_config *tc = &t->cfg.train;
    char diff[300];
    t->resume.sched_note[0] = 0;
    /* a schedule by time follows the budget's progress (lr_at_progress), not the steps */
    if (tc->schedule_by == SCHED_BY_TIME ||
        !schedule_diff(&t->resume.ck_train, tc, diff, sizeof diff))
        return 0;
    long S = t->st.step;
    lr_schedule old = run_schedule(&t->resume.ck_train, &t->st);
    double from = S > 0 ? lr_at(&old, S) : 0;
    static const char *const name[] = {"as_planned", "continue", "restart"};
    lr_shape sh = tc->resume_schedule;
    if (sh == LR_RESTART && tc->schedule == LR_COSINE && tc->warmup_steps >= tc->max_steps - S)
        return err_set(e, ERR_INPUT, "train.resume_schedule restart: a warmup of %ld steps from "
                       "step %ld leaves no cosine before train.max_steps %ld", tc->warmup_steps,
                       S, tc->max_steps);
    t->st.lr_shape = sh;
    t->st.lr_from_step = sh == LR_AS_PLANNED ? 0 : S;
    t->st.lr_from = sh == LR_CONTINUE ? from : 0;
    lr_schedule now = run_schedule(tc, &t->st);
    char then[200], warm[96] = "";
    if (sh == LR_RESTART && tc->warmup_steps > 0)
        snprintf(warm, sizeof warm, "warms up to %g at step %ld, then ", tc->lr,
                 S + tc->warmup_steps);
    if (tc->schedule == LR_COSINE)
        snprintf(then, sizeof then, "%sdecays by the cosine to lr_min %g at step %ld", warm,
                 tc->lr_min, tc->max_steps);
    else
        snprintf(then, sizeof then, "%s%s", warm, tc->schedule == LR_INV_SQRT
                 ? "decays as 1/sqrt(step)" : "stays constant");
    double next = lr_at(&now, S + 1);
    const char *ended = sh == LR_CONTINUE && from <= tc->lr_min
                            ? " (the checkpoint's schedule had ended: nothing to decay)" : "";
    snprintf(t->resume.sched_note, sizeof t->resume.sched_note,
             "lr: the schedule differs from the checkpoint's (%s)\n"
             "  lr: %s (train.resume_schedule): step %ld takes %.3g%s (step %ld had %.3g), "
             "then it %s%s\n"
             "  lr: the choices: as_planned (the config's schedule as if planned from step 0), "
             "continue (decay from %.3g at step %ld), restart (a warmup of %ld steps from step "
             "%ld, then the schedule)",
             diff, name[sh], S + 1, next, fabs(next - from) > 0.1 * fmax(next, from)
             ? ", a jump" : "", S, from, then, ended, from, S, tc->warmup_steps, S);
    return 0;
}

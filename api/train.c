/* train.c: include/txl.h's training: a trainer of run/ (run/trainer.h) set up from a config
 * and the options, in the order a run checks and takes things (doc/design.md, "Command
 * line"): the config (where a resumed run writes), the data, the run directory, the model,
 * the checkpoint to continue, the start. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../run/run.h"
#include "api.h"

struct txl_trainer {
    trainer t;
    txl_train_opts opts;
    char resume[CKPT_PATH_MAX]; /* opts.resume resolved: a run directory's last */
    char origin[CKPT_PATH_MAX]; /* the config's name in messages */
    int has_resume;
};

txl_config *txl_config_of_checkpoint(const char *ckpt, int last, txl_err *e)
{
    api_err_clear(e);
    char path[CKPT_PATH_MAX];
    int from_dir;
    st_file f;
    if (ckpt_resolve(ckpt, last, path, sizeof path, &from_dir, e) || st_open(&f, path, e))
        return NULL;
    txl_config *c = txl_config_new();
    int rc = !c ? err_set(e, ERR_RUNTIME, "out of memory") : ckpt_load_config(&f, &c->c, e);
    st_free(&f);
    if (rc) {
        txl_config_free(c);
        return NULL;
    }
    snprintf(c->origin, sizeof c->origin, "%s", path);
    c->from_ckpt = 1;
    return c;
}

int txl_checkpoint_path(const char *ckpt, int last, char *buf, size_t cap, int *from_dir,
                        txl_err *e)
{
    api_err_clear(e);
    return ckpt_resolve(ckpt, last, buf, cap, from_dir, e);
}

/* A trainer with the config c and the options o, the config resolved (where a resumed run
 * writes, validated). */
static txl_trainer *trainer_begin(const txl_config *c, const txl_train_opts *o, txl_err *e)
{
    txl_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) {
        err_set(e, ERR_RUNTIME, "out of memory");
        return NULL;
    }
    trainer *t = &tr->t;
    tr->opts = *o;
    t->opts = &tr->opts;
    t->sinks[RUN_SINK_CALLER] = (run_sink){o->on_event, o->ctx};
    t->dir.lock_fd = -1;
    t->run_steps = o->steps;
    t->st.best_valid = t->st.best_valid_bpc = INFINITY;
    t->cfg = c->c;
    snprintf(tr->origin, sizeof tr->origin, "%s", c->origin);
    if (o->resume) {
        int from_dir;
        if (ckpt_resolve(o->resume, 1, tr->resume, sizeof tr->resume, &from_dir, e)) {
            free(tr);
            return NULL;
        }
        if (from_dir)
            run_note(t, TXL_EV_NOTE, "%s is a run directory: using %s", o->resume, tr->resume);
        tr->has_resume = 1;
        if (!tr->origin[0])
            snprintf(tr->origin, sizeof tr->origin, "%s", tr->resume);
    }
    if (run_resolve_config(t, tr->has_resume ? tr->resume : NULL, o->explicit_out_dir,
                           tr->origin[0] ? tr->origin : NULL, e)) {
        run_trainer_free(t);
        free(tr);
        return NULL;
    }
    return tr;
}

int txl_train_config(txl_config *c, const txl_train_opts *o, txl_err *e)
{
    api_err_clear(e);
    txl_train_opts quiet = *o;
    quiet.on_event = NULL; /* the run's notes come with the run */
    txl_trainer *tr = trainer_begin(c, &quiet, e);
    if (!tr)
        return -1;
    c->c = tr->t.cfg;
    run_trainer_free(&tr->t);
    free(tr);
    return 0;
}

char *txl_train_plan(const txl_config *c, const txl_train_opts *o, txl_err *e)
{
    api_err_clear(e);
    txl_trainer *tr = trainer_begin(c, o, e);
    if (!tr)
        return NULL;
    char *plan = run_dry_run(&tr->t, c->from_ckpt ? NULL : tr->origin,
                             tr->has_resume ? tr->resume : NULL, o->init_from, o->force, e);
    run_trainer_free(&tr->t);
    free(tr);
    return plan;
}

txl_trainer *txl_trainer_new(const txl_config *c, const txl_train_opts *o, txl_err *e)
{
    api_err_clear(e);
    txl_trainer *tr = trainer_begin(c, o, e);
    if (!tr)
        return NULL;
    trainer *t = &tr->t;
    const char *resume = tr->has_resume ? tr->resume : NULL;
    const char *origin = tr->origin[0] ? tr->origin : NULL;
    if (run_set_precision(t, e) || run_plan_data(t, origin, resume, o->init_from, e) ||
        run_prepare_out_dir(t, resume, o->force, e) ||
        run_plan_model(t, e) || run_plan_terms(t, e) ||
        run_restore_run(t, resume, o->init_from, origin, 0, e) ||
        run_check_resume_target(t, resume, o->force, e) || run_start_run(t, resume != NULL, e)) {
        txl_trainer_free(tr);
        return NULL;
    }
    return tr;
}

int txl_trainer_run(txl_trainer *tr, txl_err *e)
{
    api_err_clear(e);
    tr->t.t_start = sys_now();
    return run_train_loop(&tr->t, e);
}

void txl_trainer_stop(int sig) { run_request_stop(sig); }

void txl_trainer_free(txl_trainer *tr)
{
    if (!tr)
        return;
    run_trainer_free(&tr->t);
    free(tr);
}

int txl_config_assignment_key(const char *assignment, char *key, size_t cap)
{
    return cfg_assignment_key(assignment, key, cap);
}

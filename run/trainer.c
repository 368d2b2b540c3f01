/* trainer.c: the training loop (doc/design.md: "Command line", "The model",
 * "Checkpoints") and its events: validation, checkpoints when due, progress, the terms,
 * the end of a run (max_steps, the time budget, a step count, a signal). */
#include "run.h"
#include "../model/precision.h"

/* The one process-wide state of run/: a signal handler names no trainer, so
 * txl_trainer_stop sets this flag and the running loop reads it (stop_requested). */
static volatile sig_atomic_t stop_signal = 0;

void run_request_stop(int sig) { stop_signal = sig; }


/* Validation over the valid split (distributed like training); *loss is NaN without one. */
static int run_valid(trainer *t, double *loss, txl_err *e)
{
    run_data *d = &t->data;
    *loss = NAN;
    if (d->valid_ts.n == 0)
        return 0;
    const model_config *m = &t->cfg.model;
    eval_opts o = {.batch = run_valid_batch(t), .tgt_len = m->tgt_len,
                   .mem_len = m->mem_len, .max_tokens = (size_t)t->cfg.train.eval_tokens,
                   .progress = t->opts && t->opts->progress && dist_is_root(), .label = "valid",
                   .distributed = 1, .anchor_base = (txl_tok)t->cfg.data.vocab_tokens};
    eval_result r;
    if (eval_stream(&t->mdl, m, &d->valid_ts, &o, &r, e))
        return -1;
    char json[1024], text[200];
    snprintf(json, sizeof json, "{\"event\":\"eval\",\"split\":\"valid\",\"step\":%ld,"
             "\"loss\":%.6f,\"bpc\":%.6f,\"ppl\":%.4f,\"tokens\":%zu,\"bytes\":%zu,"
             "\"anchor_tokens\":%zu,\"anchor_bits\":%.2f,\"elapsed_s\":%.1f}",
             t->st.step, r.loss, r.bpc, exp(r.loss), r.tokens, r.bytes,
             r.anchor_tokens, r.anchor_bits, t->st.elapsed + sys_now() - t->t_start);
    if (d->vocab) /* tokens are not bytes: the perplexity per token too */
        snprintf(text, sizeof text, "step %ld: valid loss %.4f, ppl %.2f, bpc %.4f (%zu tokens, "
                 "%zu bytes, %.1fs)", t->st.step, r.loss, exp(r.loss), r.bpc, r.tokens, r.bytes,
                 r.seconds);
    else
        snprintf(text, sizeof text, "step %ld: valid loss %.4f, bpc %.4f (%zu bytes, %.1fs)",
                 t->st.step, r.loss, r.bpc, r.bytes, r.seconds);
    run_event(t, &(txl_event){.kind = TXL_EV_EVAL, .step = t->st.step,
                              .max_steps = t->cfg.train.max_steps, .loss = r.loss,
                              .bpc = r.bpc, .json = json, .text = text});
    *loss = r.loss;
    t->valid_bpc = r.bpc;
    return 0;
}

/* Whether a stop signal has come, as all ranks agree (it may reach one rank first): the
 * agreed signal goes into ls->stop, which is what every later decision of the step reads. */
static int stop_requested(loop_state *ls)
{
    int agreed = dist_max_int(stop_signal);
    if (agreed && !ls->stop)
        ls->stop = agreed;
    return ls->stop != 0;
}

#ifdef TXL_MPI
/* TXL_TEST_SIGNAL=RANK:STEP (tests/mpi/signal_race.sh): that rank raises SIGTERM right
 * after the step's stop agreement, the moment at which a real signal reaching one rank
 * used to split the ranks' decisions. */
static void test_signal_hook(long step)
{
    const char *v = getenv("TXL_TEST_SIGNAL");
    int rank;
    long at;
    if (v && sscanf(v, "%d:%ld", &rank, &at) == 2 && rank == dist_self()->rank && at == step)
        raise(SIGTERM);
}
#else
static void test_signal_hook(long step) { (void)step; }
#endif

/* Whether this step ends the invocation: max_steps, the time budget, --steps, a signal, or
 * an event that could not be written to log.jsonl (rank 0's). All ranks must agree (a
 * signal or the clock may reach one rank first): the signal counts as agreed by
 * stop_requested, the rest by one more reduction. */
static int run_ends(const trainer *t, loop_state *ls, double run_s)
{
    const train_config *tc = &t->cfg.train;
    long step = t->st.step;
    stop_requested(ls);
    test_signal_hook(step);
    return dist_max_int(step == tc->max_steps ||
                        (tc->max_minutes > 0 && run_s >= tc->max_minutes * 60) ||
                        (t->run_steps > 0 && step - ls->first_step >= t->run_steps) ||
                        t->log.err != 0) ||
           ls->stop;
}

/* A log line (log.jsonl, and the progress line on stderr) for the steps since the last. */
static void log_progress(trainer *t, loop_state *ls, double now, double run_s)
{
    run_data *d = &t->data;
    const train_config *tc = &t->cfg.train;
    long step = t->st.step;
    double mean = t->st.log_sum / t->st.log_n;
    double span = now - ls->t_log > 1e-9 ? now - ls->t_log : 1e-9;
    double tps = ls->tok_log / span;
    double gemm_share = (gemm_thread_seconds() - ls->gemm_log) / (span * par_max_threads());
    double eta = (double)(tc->max_steps - step) * ls->ntok / (tps > 0 ? tps : 1);
    if (tc->max_minutes > 0 && tc->max_minutes * 60 - run_s < eta)
        eta = tc->max_minutes * 60 - run_s;
    /* bits per byte: of bytes, a byte model's loss / ln 2; words and BPE pieces are not
     * bytes (their validations count the bytes), so the perplexity per token instead */
    char rate[48];
    if (d->vocab)
        snprintf(rate, sizeof rate, "\"bpc\":null,\"ppl\":%.6g", exp(mean));
    else
        snprintf(rate, sizeof rate, "\"bpc\":%.6f", mean / M_LN2);
    char json[1024];
    snprintf(json, sizeof json, "{\"event\":\"train\",\"step\":%ld,\"tokens\":%lld,"
             "\"loss\":%.6f,%s,\"lr\":%.6g,\"grad_norm\":%.6g,\"tok_per_s\":%.1f,"
             "\"elapsed_s\":%.1f,\"step_loss\":%.9g,\"comm_s\":%.7f,"
             "\"comm_exposed_s\":%.7f,\"gemm_share\":%.4f,\"cpu_s\":%.3f}",
             step, t->st.tokens, mean, rate, ls->lr, ls->norm, tps,
             t->st.elapsed + run_s, ls->loss, dist_comm_seconds() - ls->comm_log,
             dist_exposed_seconds() - ls->exposed_log, gemm_share, sys_cpu_now());
    ls->comm_log = dist_comm_seconds();
    ls->exposed_log = dist_exposed_seconds();
    ls->gemm_log = gemm_thread_seconds();
    char etas[32], els[32], text[200];
    sys_fmt_duration(etas, sizeof etas, eta);
    sys_fmt_duration(els, sizeof els, t->st.elapsed + run_s);
    snprintf(text, sizeof text, "step %ld/%ld | loss %.4f | %s %.4g | lr %.3g | %.0f tok/s | "
             "ETA %s | %s", step, tc->max_steps, mean, d->vocab ? "ppl" : "bpc",
             d->vocab ? exp(mean) : mean / M_LN2, ls->lr, tps, etas, els);
    run_event(t, &(txl_event){.kind = TXL_EV_STEP, .step = step, .max_steps = tc->max_steps,
                              .loss = mean, .bpc = d->vocab ? NAN : mean / M_LN2, .lr = ls->lr,
                              .grad_norm = ls->norm, .tok_per_s = tps,
                              .elapsed_s = t->st.elapsed + run_s, .eta_s = eta, .json = json,
                              .text = text});
    t->st.log_sum = 0;
    t->st.log_n = 0;
    ls->t_log = now;
    ls->tok_log = 0;
}

/* A terms event every train.term_stats_interval steps (doc/design.md, "The model":
 * Diagnostics): rank 0 runs the planned term pass, the first TERM_STATS_SEGMENTS segments
 * of the valid split from an empty memory with this step's weights (eval --term-stats on a
 * checkpoint of this step prints the same layers), and reports them as a TXL_EV_TERMS
 * event, one object per layer in its json. The pass has its own activations and memory:
 * training's state is not touched. */
static int log_terms(trainer *t, txl_err *e)
{
    const run_config *c = &t->cfg;
    long step = t->st.step;
    if (c->train.term_stats_interval <= 0 || step % c->train.term_stats_interval != 0)
        return 0;
    double t0 = sys_now();
    int rc = dist_is_root() ? terms_run(&t->terms, e) : 0;
    if (dist_max_int(rc ? 1 : 0)) /* the valid split could not be read */
        return run_stop_keeping_last(t, e);
    char *json = NULL;
    size_t len = 0;
    FILE *f = dist_is_root() ? open_memstream(&json, &len) : NULL;
    if (!f)
        return 0;
    const eval_opts *o = &t->terms.plan.o;
    fprintf(f, "{\"event\":\"terms\",\"step\":%ld,\"split\":\"valid\",\"batch\":%d,"
            "\"tgt_len\":%d,\"mem_len\":%d,\"segments\":%zu,\"seconds\":%.3f,\"layers\":[",
            step, o->batch, o->tgt_len, o->mem_len, t->terms.segments, sys_now() - t0);
    for (int l = 0; l < c->model.n_layer; l++) {
        if (l)
            fputc(',', f);
        terms_print_layer(f, &c->model, &t->terms.st[l], l, 1);
    }
    fputs("]}", f);
    if (fclose(f) == 0)
        run_event(t, &(txl_event){.kind = TXL_EV_TERMS, .step = step,
                                  .max_steps = c->train.max_steps, .json = json});
    free(json);
    return 0;
}

/* Validation when due (a new best loss writes best), then `last` when due. A signal that
 * came after run_ends (during validation, say) ends the run here too: *at_end becomes 1 and
 * last holds this step. */
static int eval_and_save(trainer *t, loop_state *ls, int *at_end, txl_err *e)
{
    const train_config *tc = &t->cfg.train;
    long step = t->st.step;
    double vloss = NAN;
    if ((tc->eval_interval > 0 && step % tc->eval_interval == 0) || (*at_end && !ls->stop)) {
        if (run_valid(t, &vloss, e))
            return run_stop_keeping_last(t, e);
        if (vloss < t->st.best_valid) {
            t->st.best_valid = vloss;
            t->st.best_valid_bpc = t->valid_bpc;
            if (run_save_checkpoint(t, t->dir.best_path, 0, vloss, e))
                return -1;
        }
    }
    if (((tc->ckpt_interval > 0 && step % tc->ckpt_interval == 0) || *at_end) &&
        run_save_checkpoint(t, t->dir.last_path, 1, vloss, e))
        return -1;
    if (tc->keep_checkpoints > 0 && tc->ckpt_interval > 0 && step % tc->ckpt_interval == 0 &&
        run_keep_numbered(t, e))
        return -1;
    if (!*at_end && stop_requested(ls)) { /* one more agreement: all ranks stop alike */
        *at_end = 1;
        if (t->dir.last_step != step && run_save_checkpoint(t, t->dir.last_path, 1, vloss, e))
            return -1;
    }
    return 0;
}


/* Why the run ended: "max_steps", "--steps", "max_minutes" (the time budget), the signal
 * ("SIGINT", "SIGTERM", "SIGHUP"), or "log_error" (log.jsonl could not be written). */
static const char *end_reason(const trainer *t, const loop_state *ls, int exit_sig)
{
    if (exit_sig)
        return exit_sig == SIGINT ? "SIGINT" : exit_sig == SIGHUP ? "SIGHUP" : "SIGTERM";
    if (t->log.err)
        return "log_error";
    if (t->st.step >= t->cfg.train.max_steps)
        return "max_steps";
    if (t->run_steps > 0 && t->st.step - ls->first_step >= t->run_steps)
        return "--steps";
    return "max_minutes"; /* the only other way run_ends ends a run (on some rank) */
}

/* The result of the run: stdout's line, summary.json and the end event. */
static void add_summary(cJSON *o, const trainer *t, const loop_state *ls, const char *reason)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    cJSON_AddNumberToObject(o, "step", (double)t->st.step);
    cJSON_AddNumberToObject(o, "tokens", (double)t->st.tokens);
    run_add_num(o, "train_loss", "%.6f", ls->loss);
    run_add_num(o, "grad_norm", "%.6g", ls->norm);
    cJSON_AddNumberToObject(o, "skipped_steps", (double)t->st.skipped);
    run_add_num(o, "best_valid_loss", "%.6f", t->st.best_valid);
    run_add_num(o, "best_valid_bpc", "%.6f", t->st.best_valid_bpc);
    cJSON_AddStringToObject(o, "checkpoint", t->dir.last_path);
    run_add_num(o, "peak_rss_mb", "%.1f", ru.ru_maxrss / 1024.0);
    run_add_num(o, "elapsed_s", "%.1f", t->st.elapsed + sys_now() - t->t_start);
    cJSON_AddStringToObject(o, "reason", reason);
}

static int put_text(FILE *f, const void *text) { return fputs(text, f) < 0; }

/* The result line on stdout, out_dir/summary.json (the same object) and the end event of
 * log.jsonl; after a signal, where the run stopped. The exit code: 128 + the signal, else
 * 0, or 1 when summary.json or an event of log.jsonl could not be written (main makes a 0
 * into 1 when the line did not reach stdout: summary.json still holds it). */
static int finish_run(trainer *t, const loop_state *ls, int exit_sig)
{
    if (!dist_is_root())
        return exit_sig ? 128 + exit_sig : 0;
    const char *reason = end_reason(t, ls, exit_sig);
    cJSON *sum = cJSON_CreateObject();
    if (sum)
        add_summary(sum, t, ls, reason);
    char *line = sum ? cJSON_PrintUnformatted(sum) : NULL;
    char *text = line ? malloc(strlen(line) + 2) : NULL; /* the line and its newline */
    int rc = exit_sig ? 128 + exit_sig : 0;
    txl_err e = {0};
    if (text)
        sprintf(text, "%s\n", line);
    else
        err_set(&e, ERR_RUNTIME, "out of memory writing the summary");
    /* the run's own record first: a reader of stdout that went away ends txl by SIGPIPE at
     * the fputs, which must not take summary.json and the end event with it */
    if (!text || run_write_out_file(t->cfg.train.out_dir, "summary.json", put_text, text, &e)) {
        run_note(t, TXL_EV_WARN, "%s", e.msg);
        if (!exit_sig)
            rc = 1;
    }
    /* the end event: log.jsonl's end line (its sink comes first), then the result line of
     * the caller's (stdout for txl train) */
    if (line)
        run_event(t, &(txl_event){.kind = TXL_EV_END, .step = t->st.step,
                                  .max_steps = t->cfg.train.max_steps, .loss = ls->loss,
                                  .bpc = ls->loss / M_LN2, .grad_norm = ls->norm,
                                  .elapsed_s = t->st.elapsed + sys_now() - t->t_start,
                                  .path = t->dir.last_path, .json = line});
    if (t->log.err) { /* events are missing from the log: not a success */
        char held[1300];
        run_last_desc(t, held, sizeof held);
        run_note(t, TXL_EV_WARN, "%s: cannot append the events from step %ld on: %s; the run "
                 "stopped so that its log loses no more (%s)", t->dir.log_path,
                 t->log.fail_step, strerror(t->log.err), held);
        if (!exit_sig)
            rc = 1;
    }
    free(text);
    free(line);
    cJSON_Delete(sum);
    if (exit_sig)
        run_note(t, TXL_EV_WARN, "%s: checkpoint written at step %ld (%s); resume with "
                 "--resume %s", exit_sig == SIGINT   ? "interrupted"
                                : exit_sig == SIGHUP ? "hung up"
                                                     : "terminated",
                 t->dir.last_step, t->dir.last_path, t->dir.last_path);
    return rc;
}

int run_train_loop(trainer *t, txl_err *e)
{
    loop_state ls;
    int exit_sig = 0;
    run_loop_init(t, &ls);
    while (t->st.step < t->cfg.train.max_steps) {
        if (run_train_step(t, &ls, e))
            return -1;
        double now = sys_now(), run_s = now - t->t_start;
        int at_end = run_ends(t, &ls, run_s);
        if (t->st.step % t->cfg.train.log_interval == 0 || at_end)
            log_progress(t, &ls, now, run_s);
        if (log_terms(t, e) || eval_and_save(t, &ls, &at_end, e))
            return -1;
        if (at_end) {
            exit_sig = ls.stop; /* 0 at max_steps, the time budget or --steps */
            break;
        }
    }
    return finish_run(t, &ls, exit_sig);
}

/* ---------------------------------------------------------------------------------------
 * Setup, in the order cmd_train runs it: config, data, out_dir, model, resume, start. */

/* The start event: the run's size and setting, the txl version and the command line. */
static char *start_json(const trainer *t, int resume)
{
    const run_streams *s = &t->streams;
    const dist_t *dd = dist_self();
    const char *const *argv = t->opts ? t->opts->argv : NULL;
    int argc = argv ? t->opts->argc : 0;
    cJSON *o = dist_is_root() ? cJSON_CreateObject() : NULL;
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "event", "start");
    cJSON_AddNumberToObject(o, "step", (double)t->st.step);
    cJSON_AddBoolToObject(o, "resume", resume);
    cJSON_AddNumberToObject(o, "params", (double)t->sizes.n_weights);
    cJSON_AddStringToObject(o, "blas_core", sys_blas_core());
    cJSON_AddNumberToObject(o, "train_tokens", (double)t->data.train_s.n);
    cJSON_AddNumberToObject(o, "valid_tokens", (double)t->data.valid_s.n);
    cJSON_AddNumberToObject(o, "ranks", dd->size);
    cJSON_AddNumberToObject(o, "threads", s->threads);
    cJSON_AddStringToObject(o, "precision", precision_name(t->precision));
    cJSON_AddStringToObject(o, "precision_kernel", t->prec_kernel ? t->prec_kernel : "");
    cJSON_AddNumberToObject(o, "replicas", s->R);
    cJSON_AddNumberToObject(o, "grad_accum", s->k);
    cJSON_AddNumberToObject(o, "estimate_mib", round(run_plan_mib(t)));
    cJSON_AddStringToObject(o, "version", TXL_VERSION);
    cJSON *args = cJSON_AddArrayToObject(o, "argv");
    for (int i = 0; args && i < argc; i++)
        cJSON_AddItemToArray(args, cJSON_CreateString(argv[i]));
    char *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return json;
}

/* The plan for people (run_print_plan, and with `ranks` and several ranks how they share
 * the work), malloc'd, without its last newline; NULL on ranks but 0 or out of memory. */
static char *plan_banner(const trainer *t, int ranks)
{
    const dist_t *dd = dist_self();
    char *banner = NULL;
    size_t len = 0;
    FILE *f = dist_is_root() ? open_memstream(&banner, &len) : NULL;
    if (!f)
        return NULL;
    run_print_plan(t, f);
    if (ranks && dd->size > 1)
        fprintf(f, "  data parallel: %d ranks x %d streams, %d threads per rank (%d ranks "
                "on this machine)\n", dd->size, t->streams.Bl, t->streams.threads,
                dd->local_size);
    if (fclose(f) != 0) {
        free(banner);
        return NULL;
    }
    banner[len && banner[len - 1] == '\n' ? len - 1 : len] = '\0';
    return banner;
}

/* Rank 0 opens log.jsonl, registers it as the run's first sink and writes config.yaml; then
 * the start event: the plan for people and the log's start line. */
int run_start_run(trainer *t, int resume, txl_err *e)
{
    int rc = 0;
    if (dist_is_root()) {
        t->log.f = run_open_log(t->dir.log_path, resume, e); /* first: it may be a refused link */
        rc = t->log.f ? run_write_config_yaml(&t->cfg, e) || run_remove_summary(t, e) : -1;
        t->sinks[RUN_SINK_LOG] = (run_sink){run_log_sink, &t->log};
    }
    if (dist_max_int(rc ? 1 : 0)) {
        if (!rc)
            err_set(e, ERR_RUNTIME, "rank 0 could not write into %s", t->cfg.train.out_dir);
        return -1;
    }
    char *banner = plan_banner(t, 1), *json = start_json(t, resume);
    run_event(t, &(txl_event){.kind = TXL_EV_START, .step = t->st.step,
                              .max_steps = t->cfg.train.max_steps, .json = json,
                              .text = banner});
    free(banner);
    free(json);
    return 0;
}

void run_trainer_free(trainer *t)
{
    run_data_free(&t->data);
    free(t->adam.m);
    free(t->adam.v);
    run_streams_free(&t->streams); /* the replicas, before the model whose weights they share */
    terms_free(&t->terms);
    model_free(&t->mdl);
    if (t->log.f)
        fclose(t->log.f);
    if (t->dir.lock_fd >= 0)
        close(t->dir.lock_fd); /* releases the lock */
}

/* The config a run of these options uses: a resumed run continues where its checkpoint is
 * (run_resume_in_place), and the whole config valid. `resume` is the checkpoint file (a run
 * directory resolved to its last); `origin` names the config in messages. */
int run_resolve_config(trainer *t, const char *resume, int explicit_out_dir, const char *origin,
                       txl_err *e)
{
    if (run_resume_in_place(t, resume, explicit_out_dir, e))
        return -1;
    return cfg_validate(&t->cfg, origin, e);
}

/* --dry-run: everything a run checks before it writes (the config, the data, out_dir not
 * holding another run, the model's plan, a --resume or --init-from checkpoint), the banner
 * as a START event and the plan as JSON (returned, malloc'd; NULL on ranks but 0); out_dir
 * is neither created nor touched, and neither the model nor the activations are allocated.
 * cfg_path: the config file (NULL when the config came from the checkpoint). */
char *run_dry_run(trainer *t, const char *cfg_path, const char *resume, const char *init_from,
                  int force, txl_err *e)
{
    const char *origin = cfg_path ? cfg_path : resume;
    run_set_paths(t);
    if (run_plan_data(t, origin, resume, init_from, e) ||
        (!resume && !force && run_holds_run(t, e)) ||
        run_dry_plan(t, e) || run_restore_run(t, resume, init_from, origin, 1, e) ||
        (resume && !force && run_resume_overwrites(t, resume, e)))
        return NULL;
    char *banner = plan_banner(t, 0); /* a dry run opens no log: the banner alone */
    run_event(t, &(txl_event){.kind = TXL_EV_START, .step = t->st.step,
                              .max_steps = t->cfg.train.max_steps, .text = banner});
    free(banner);
    char *plan = run_print_dry_run(t, cfg_path, resume, init_from);
    if (!plan && dist_is_root())
        err_set(e, ERR_RUNTIME, "out of memory");
    return plan;
}

/* plan.c: what a run needs before step 1: its data, its model, replicas and activations,
 * the term statistics' pass, and their sizes (the memory estimate, the plan of --dry-run). */
#include "run.h"
#include "../model/precision.h"

/* The train/valid/test spans from data.* (data/corpus.h: data_open_splits), the run's
 * vocabulary (run/vocab.c) and the tokens of the train and valid splits. */
static int open_data(trainer *t, const char *origin, const char *resume,
                     const char *init_from, txl_err *e)
{
    const data_config *d = &t->cfg.data;
    data_paths p = {d->train, d->valid, d->test, d->split};
    corpus *files[3] = {&t->train_c, &t->valid_c, &t->test_c};
    token_span sp[3];
    if (data_open_splits(&p, files, sp, e))
        return -1;
    t->train_s = sp[SPLIT_TRAIN];
    t->valid_s = sp[SPLIT_VALID];
    t->test_s = sp[SPLIT_TEST];
    if (run_plan_vocab(t, resume, init_from, e) || cfg_validate(&t->cfg, origin, e))
        return -1;
    if (cfg_tokens(&t->cfg, t->vocab, t->train_s, &t->train_ts, e))
        return err_wrap(e, "data.train");
    if (t->valid_s.n && cfg_tokens(&t->cfg, t->vocab, t->valid_s, &t->valid_ts, e))
        return err_wrap(e, "the valid split");
    return 0;
}

/* Bytes of the memory this process holds: its k x Bl streams (and, on rank 0 of several,
 * the gathered copy of all k B streams). */
static double mem_bytes(const trainer *t)
{
    const model_config *m = &t->cfg.model;
    return mem_plan_bytes(m, t->k * t->Bl, m->mem_len) +
           (t->gmem.buf ? mem_plan_bytes(m, t->k * t->B, m->mem_len) : 0);
}

int run_valid_batch(const trainer *t);

/* Bytes of a validation pass on this rank (planned at each validation, beside everything
 * else): activations, memory and the memory's keys of its streams. */
static double valid_bytes(const trainer *t)
{
    const model_config *m = &t->cfg.model;
    int B = run_valid_batch(t), nr = dist_self()->size;
    if (t->valid_ts.n < 2)
        return 0;
    if (B % nr == 0)
        B /= nr;
    double act = 0;
    txl_err e;
    if (acts_plan_floats(m, B, m->tgt_len, m->mem_len, 0, &act, &e))
        act = 0;
    return (act + (double)kv_cache_plan_floats(m, B, m->mem_len, m->tgt_len)) * 4 +
           mem_plan_bytes(m, B, m->mem_len);
}

/* Estimated resident memory of this process in MiB: weights, gradients (one per replica),
 * 2 Adam moments,
 * the planned activations (for one micro-batch), the memory, the term pass's (activations
 * and memory, train.term_stats_interval), a validation pass's, and ~20 MiB of code and
 * libraries. */
double run_plan_mib(const trainer *t)
{
    const model_config *m = &t->cfg.model;
    double act = (double)t->act_floats * 4 + valid_bytes(t);
    double par = (double)t->par_floats * 4 * (3 + t->R);
    const eval_pass *tp[2] = {&t->terms.plan.p, &t->terms.plan.tail};
    for (int i = 0; i < 2; i++)
        act += ((double)tp[i]->A.arena_floats + (double)kv_cache_floats(&tp[i]->kv)) * 4 +
               (tp[i]->mem.buf ? mem_plan_bytes(m, tp[i]->mem.B, tp[i]->mem.M) : 0);
    return (par + act + mem_bytes(t)) / 1048576.0 + 20;
}

void run_print_plan(const trainer *t, FILE *f)
{
    const run_config *c = &t->cfg;
    const model_config *m = &c->model;
    size_t act = t->act_floats * 4, par = t->par_floats * 4 * (size_t)(3 + t->R);
    char accum[48] = "", train[80];
    if (t->train_s.c && t->train_s.c->kind == CORPUS_TOKENS)
        snprintf(train, sizeof train, "%zu %s tokens of a token file", t->train_ts.n,
                 c->data.tokenizer);
    else if (t->vocab) /* words or pieces: the tokens and the text they come from */
        snprintf(train, sizeof train, "%zu %s tokens of %zu bytes", t->train_ts.n,
                 c->data.tokenizer, t->train_s.n);
    else
        snprintf(train, sizeof train, "%zu bytes", t->train_s.n);
    if (t->k > 1)
        snprintf(accum, sizeof accum, " x %d accum", t->k);
    fprintf(f,
            "txl train: %s, %d layers, d_model %d, %d heads x %d, d_inner %d, %.2fM params\n"
            "  tokens/step %lld (batch %d%s x tgt_len %d), mem_len %d, pre_lnorm %s, "
            "dropout %g\n"
            "  memory: params+grads+adam %.1f MiB, activations %.1f MiB, mem %.1f MiB "
            "(estimate %.0f MiB)\n"
            "  data: train %s (%s), valid %zu, test %zu; OpenBLAS core %s\n"
            "  precision %s%s%s%s\n"
            "  out_dir %s\n",
            pos_scheme_name(m->pos), m->n_layer, m->d_model, m->n_head, m->d_head,
            m->d_inner, t->n_weights / 1e6, (long long)t->k * t->B * m->tgt_len,
            t->B, accum, m->tgt_len, m->mem_len, m->pre_lnorm ? "yes" : "no",
            m->dropout, par / 1048576.0, act / 1048576.0, mem_bytes(t) / 1048576.0,
            run_plan_mib(t), train, t->train_s.path,
            t->valid_s.n, t->test_s.n, sys_blas_core(), precision_name(t->precision),
            *t->prec_kernel ? " (" : "", t->prec_kernel, *t->prec_kernel ? ")" : "",
            c->train.out_dir);
    if (t->R > 1)
        fprintf(f, "  threads: %d, each running %d of the batch's streams\n", t->R,
                t->Bl / t->R);
    else /* the line either way: the plan says how the work is shared */
        fprintf(f, "  threads: %d%s\n", t->threads,
                t->threads > 1 ? ", splitting each operation" : "");
    if (t->resumed_from)
        fprintf(f, "  resuming at step %ld of %ld from %s\n", t->st.step,
                c->train.max_steps, t->resumed_from);
    if (t->resumed_from && t->sched_note[0])
        fprintf(f, "  %s\n", t->sched_note);
}

/* The streams of a pass over the valid split: train.batch_size, fewer when the split is
 * tiny (each stream needs an input and its target). */
int run_valid_batch(const trainer *t)
{
    int B = t->cfg.train.batch_size;
    while (B > 1 && t->valid_ts.n / (size_t)B < 2)
        B /= 2;
    return B;
}

/* A corpus file of data.* that does not exist: the message says how to give one (and, in a
 * source tree, that configs/tiny.yaml's corpora/kjv.txt comes from `make demo`, the enwik8
 * configs' corpora/enwik8* from `make data`). Returns -1. */
static int missing_corpus_hint(const trainer *t, txl_err *e)
{
    const data_config *d = &t->cfg.data;
    const char *key[3] = {"train", "valid", "test"}, *path[3] = {d->train, d->valid, d->test};
    struct stat sb;
    size_t n = strlen(e->msg);
    for (int i = 0; i < 3; i++) {
        if (!path[i][0] || strcmp(path[i], "-") == 0 || stat(path[i], &sb) == 0 ||
            errno != ENOENT)
            continue;
        size_t len = strlen(path[i]);
        int tree = access("scripts/demo.sh", R_OK) == 0; /* a source tree: make demo, data */
        int kjv = tree && len >= 7 && strcmp(path[i] + len - 7, "kjv.txt") == 0;
        const char *base = strrchr(path[i], '/');
        int wik = tree && strncmp(base ? base + 1 : path[i], "enwik8", 6) == 0;
        const char *shipped = "tests/data/tinyshakespeare.txt.gz"; /* in a source tree */
        if (i > 0)
            snprintf(e->msg + n, sizeof e->msg - n, "; --set data.%s=FILE names another file, "
                     "or --set data.%s= cuts the split from data.train (data.split)", key[i],
                     key[i]);
        else
            snprintf(e->msg + n, sizeof e->msg - n, "; %s--set data.train=FILE trains on "
                     "another file%s%s%s",
                     kjv ? "`make demo` creates corpora/kjv.txt (the King James Bible), or "
                     : wik ? "`make data` downloads enwik8 into corpora/ (enwik8 and "
                             "enwik8_first3MB.txt.gz), or " : "",
                     access(shipped, R_OK) == 0 ? " (such as " : "",
                     access(shipped, R_OK) == 0 ? shipped : "",
                     access(shipped, R_OK) == 0 ? ")" : "");
        break;
    }
    return -1;
}

/* The data: the train/valid/test spans, the train batcher over all batch_size x grad_accum
 * streams of a step, and this rank's streams of each micro-batch. */
int run_plan_data(trainer *t, const char *origin, const char *resume, const char *init_from,
                  txl_err *e)
{
    int B = t->cfg.train.batch_size, Lq = t->cfg.model.tgt_len, k = t->cfg.train.grad_accum;
    t->B = B;
    t->k = k;
    if (open_data(t, origin, resume, init_from, e))
        return missing_corpus_hint(t, e);
    if (batcher_init(&t->bt, &t->train_ts, k * B, Lq, 0, (size_t)Lq + 1, "train", e))
        return k > 1 ? err_wrap(e, "train.batch_size %d x train.grad_accum %d streams", B, k)
                     : -1;
    const dist_t *dd = dist_self();
    if (B % dd->size != 0)
        return err_set(e, ERR_INPUT, "%s: train.batch_size %d cannot be split over %d ranks "
                       "(each rank owns batch_size / ranks whole streams)", origin, B, dd->size);
    t->Bl = B / dd->size;
    t->b0 = dd->rank * t->Bl;
    return 0;
}

/* Threads: all cores of this machine, shared by its ranks, unless train.threads says. */
static void set_threads(trainer *t)
{
    const dist_t *dd = dist_self();
    int threads = t->cfg.train.threads;
    if (threads <= 0 && dd->local_size > 1) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores / dd->local_size > 0 ? (int)(cores / dd->local_size) : 1;
    }
    t->threads = par_set_threads(threads);
}

int run_set_precision(trainer *t, txl_err *e)
{
    precision_kind took;
    if (precision_apply((precision_kind)t->cfg.train.precision, "train.precision", &took,
                        &t->prec_kernel, e))
        return -1;
    t->precision = took;
    return 0;
}

/* Replicas: one per thread when they divide this rank's streams, else 1 (the threads
 * split each op of the whole batch). */
static int replicas(const trainer *t)
{
    return t->threads > 1 && t->Bl % t->threads == 0 ? t->threads : 1;
}

/* The replicas (accumulate): the activations of one micro-batch's Bl / R streams each, and
 * for r > 0 a gradient of its own. */
static int plan_replicas(trainer *t, txl_err *e)
{
    const model_config *m = &t->cfg.model;
    t->R = replicas(t);
    t->A = calloc((size_t)t->R, sizeof *t->A);
    t->rep = calloc((size_t)t->R, sizeof *t->rep);
    t->rep_loss = calloc((size_t)t->R, sizeof *t->rep_loss);
    t->rep_m = calloc((size_t)t->R, sizeof *t->rep_m);
    if (!t->A || !t->rep || !t->rep_loss || !t->rep_m)
        return err_set(e, ERR_RUNTIME, "out of memory");
    const model *mdl = &t->mdl;
    t->layer_at = calloc((size_t)m->n_layer + 1, sizeof *t->layer_at);
    if (!t->layer_at)
        return err_set(e, ERR_RUNTIME, "out of memory");
    for (int l = 0; l <= m->n_layer; l++)
        t->layer_at[l] = mdl->n_floats;
    for (int i = mdl->n_params - 1; i >= 0; i--) /* layer l's first tensor */
        if (mdl->table[i].layer >= 0)
            t->layer_at[mdl->table[i].layer] = mdl->table[i].offset;
    run_overlap_plan(t);
    t->act_floats = 0;
    for (int r = 0; r < t->R; r++) {
        if (acts_init(&t->A[r], m, t->Bl / t->R, m->tgt_len, m->mem_len, 1, e) ||
            (r > 0 && model_replica(&t->rep[r], &t->mdl, e)))
            return -1;
        t->act_floats += t->A[r].arena_floats;
    }
    t->A[0].layer_grads_ctx = t;
    return 0;
}

/* Threads, then everything a step touches, planned before step 1: the model and its
 * gradients, the replicas' activations and gradients, memory, Adam moments, batch
 * buffers; the initial weights. */
int run_plan_model(trainer *t, txl_err *e)
{
    const run_config *c = &t->cfg;
    const dist_t *dd = dist_self();
    int M = c->model.mem_len, Lq = c->model.tgt_len, B = t->B, k = t->k;
    set_threads(t);
    if (model_init(&t->mdl, &c->model, e) || model_alloc_grads(&t->mdl, e) ||
        plan_replicas(t, e) || mem_init(&t->mem, &c->model, k * t->Bl, M, e) ||
        (dd->size > 1 && dist_is_root() && mem_init(&t->gmem, &c->model, k * B, M, e)))
        return -1;
    t->adam_m = calloc(t->mdl.n_floats, sizeof(float));
    t->adam_v = calloc(t->mdl.n_floats, sizeof(float));
    int coords = pos_get(c->model.pos)->needs_coords;
    size_t rows = (size_t)k * B * Lq;
    t->x = malloc(rows * sizeof *t->x);
    t->y = malloc(rows * sizeof *t->y);
    t->co = coords ? malloc(rows * TXL_N_COORDS * sizeof *t->co) : NULL;
    if (!t->adam_m || !t->adam_v || !t->x || !t->y || (coords && !t->co))
        return err_set(e, ERR_RUNTIME, "out of memory");
    model_init_weights(&t->mdl, c->train.seed);
    t->par_floats = t->mdl.n_floats;
    t->n_weights = t->mdl.n_weights;
    t->st.train_tokens = t->train_ts.n;
    t->st.seed = c->train.seed;
    t->st.params = t->mdl.n_weights;
    return 0;
}

/* --dry-run: plan_model's sizes without allocating the model or the activations. */
int run_dry_plan(trainer *t, txl_err *e)
{
    const model_config *m = &t->cfg.model;
    set_threads(t); /* the attention scratch is per thread */
    if (run_set_precision(t, e))
        return -1;
    t->R = replicas(t);
    model_count mc;
    double act;
    if (model_counts(m, &mc, e) ||
        acts_plan_floats(m, t->Bl / t->R, m->tgt_len, m->mem_len, 1, &act, e))
        return -1;
    t->par_floats = (size_t)mc.floats; /* cfg_validate bounds both */
    t->n_weights = (size_t)mc.weights;
    t->act_floats = (size_t)act * (size_t)t->R;
    t->st.train_tokens = t->train_ts.n;
    t->st.params = t->n_weights;
    return 0;
}

/* Rank 0 plans the pass of the terms events (train.term_stats_interval) before step 1. */
int run_plan_terms(trainer *t, txl_err *e)
{
    const run_config *c = &t->cfg;
    int rc = 0;
    if (c->train.term_stats_interval > 0 && dist_is_root())
        rc = t->valid_ts.n < 2
                 ? err_set(e, ERR_INPUT, "train.term_stats_interval: the valid split (%s) has "
                           "%zu tokens; the term statistics need a valid split to run on",
                           t->valid_s.path, t->valid_ts.n)
                 : terms_init(&t->terms, &t->mdl, &c->model, &t->valid_ts, run_valid_batch(t),
                              c->model.tgt_len, c->model.mem_len, TERM_STATS_SEGMENTS, e);
    if (dist_max_int(rc ? 1 : 0)) {
        if (!rc)
            err_set(e, ERR_RUNTIME, "rank 0 could not plan the term statistics");
        return -1;
    }
    return 0;
}

/* --dry-run's result: the plan as one JSON object, malloc'd (NULL on ranks but 0, or out of
 * memory). */
char *run_print_dry_run(const trainer *t, const char *cfg_path, const char *resume,
                        const char *init_from)
{
    const model_config *m = &t->cfg.model;
    const train_config *tc = &t->cfg.train;
    size_t per_epoch = batcher_segments(&t->bt);
    long steps = tc->max_steps - t->st.step;
    if (t->run_steps > 0 && t->run_steps < steps)
        steps = t->run_steps;
    cJSON *o = cJSON_CreateObject();
    if (!o || !dist_is_root()) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddItemToObject(o, "config", cfg_path ? cJSON_CreateString(cfg_path) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "resume", resume ? cJSON_CreateString(resume) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "init_from",
                          init_from ? cJSON_CreateString(init_from) : cJSON_CreateNull());
    cJSON_AddStringToObject(o, "out_dir", tc->out_dir);
    cJSON_AddStringToObject(o, "pos_scheme", pos_scheme_name(m->pos));
    cJSON_AddNumberToObject(o, "params", (double)t->n_weights);
    cJSON_AddNumberToObject(o, "estimate_mib", round(run_plan_mib(t)));
    run_add_num(o, "params_grads_adam_mib", "%.1f", (3.0 + t->R) * t->par_floats * 4 / 1048576.0);
    run_add_num(o, "activations_mib", "%.1f", t->act_floats * 4 / 1048576.0);
    cJSON_AddNumberToObject(o, "tokens_per_step", (double)t->k * t->B * m->tgt_len);
    cJSON_AddNumberToObject(o, "grad_accum", t->k);
    cJSON_AddNumberToObject(o, "train_tokens", (double)t->train_ts.n);
    cJSON_AddNumberToObject(o, "valid_tokens", (double)t->valid_ts.n);
    cJSON_AddNumberToObject(o, "train_bytes", (double)t->train_s.n);
    cJSON_AddNumberToObject(o, "valid_bytes", (double)t->valid_s.n);
    cJSON_AddNumberToObject(o, "test_bytes", (double)t->test_s.n);
    cJSON_AddNumberToObject(o, "steps_per_epoch", (double)per_epoch);
    cJSON_AddNumberToObject(o, "start_step", (double)t->st.step);
    cJSON_AddNumberToObject(o, "max_steps", (double)tc->max_steps);
    cJSON_AddNumberToObject(o, "steps", (double)steps);
    run_add_num(o, "epochs", "%.4f", per_epoch ? (double)tc->max_steps / per_epoch : 0);
    cJSON_AddNumberToObject(o, "threads", t->threads);
    cJSON_AddNumberToObject(o, "replicas", t->R);
    cJSON_AddNumberToObject(o, "ranks", dist_self()->size);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

/* plan.c: what a run needs before step 1: its data, its model, replicas and activations,
 * the term statistics' pass, and their sizes (the memory estimate, the plan of --dry-run). */
#include "run.h"
#include "../common/sys.h"
#include "../model/precision.h"

/* The train/valid/test spans from data.* (data/corpus.h: data_open_splits), the run's
 * vocabulary (run/vocab.c) and the tokens of the train and valid splits. */
static int open_data(trainer *t, const char *origin, const char *resume,
                     const char *init_from, txl_err *e)
{
    const data_config *dc = &t->cfg.data;
    run_data *d = &t->data;
    data_paths p = {dc->train, dc->valid, dc->test, dc->split};
    corpus *files[3] = {&d->train_c, &d->valid_c, &d->test_c};
    token_span sp[3];
    if (data_open_splits(&p, files, sp, e))
        return -1;
    d->train_s = sp[SPLIT_TRAIN];
    d->valid_s = sp[SPLIT_VALID];
    d->test_s = sp[SPLIT_TEST];
    if (run_plan_vocab(t, resume, init_from, e) || cfg_validate(&t->cfg, origin, e))
        return -1;
    if (cfg_tokens(&t->cfg, d->vocab, d->train_s, &d->train_ts, e))
        return err_wrap(e, "data.train");
    if (d->valid_s.n && cfg_tokens(&t->cfg, d->vocab, d->valid_s, &d->valid_ts, e))
        return err_wrap(e, "the valid split");
    return 0;
}

void run_data_free(run_data *d)
{
    free(d->x);
    free(d->y);
    free(d->co);
    tok_stream_free(&d->train_ts);
    tok_stream_free(&d->valid_ts);
    vocab_free(d->vocab);
    d->vocab = NULL;
    corpus_close(&d->train_c);
    corpus_close(&d->valid_c);
    corpus_close(&d->test_c);
}

void run_streams_free(run_streams *s)
{
    mem_free(&s->mem);
    mem_free(&s->gmem);
    for (int r = 0; s->A && r < s->R; r++) {
        acts_free(&s->A[r]);
        if (r > 0)
            model_replica_free(&s->rep[r]);
    }
    free(s->A);
    free(s->rep);
    free(s->rep_loss);
    free(s->rep_m);
    free(s->layer_at);
}

/* Bytes of the memory this process holds: its k x Bl streams (and, on rank 0 of several,
 * the gathered copy of all k B streams). */
static double mem_bytes(const trainer *t)
{
    const run_streams *s = &t->streams;
    const model_config *m = &t->cfg.model;
    return mem_plan_bytes(m, s->k * s->Bl, m->mem_len) +
           (s->gmem.buf ? mem_plan_bytes(m, s->k * s->B, m->mem_len) : 0);
}

int run_valid_batch(const trainer *t);

/* Bytes of a validation pass on this rank (planned at each validation, beside everything
 * else): activations, memory and the memory's keys of its streams. */
static double valid_bytes(const trainer *t)
{
    const model_config *m = &t->cfg.model;
    int B = run_valid_batch(t), nr = dist_self()->size;
    if (t->data.valid_ts.n < 2)
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
    double act = (double)t->sizes.act_floats * 4 + valid_bytes(t);
    double par = (double)t->sizes.par_floats * 4 * (3 + t->streams.R);
    const eval_pass *tp[2] = {&t->terms.plan.p, &t->terms.plan.tail};
    for (int i = 0; i < 2; i++)
        act += ((double)tp[i]->A.arena_floats + (double)kv_cache_floats(&tp[i]->kv)) * 4 +
               (tp[i]->mem.buf ? mem_plan_bytes(m, tp[i]->mem.B, tp[i]->mem.M) : 0);
    return (par + act + mem_bytes(t)) / 1048576.0 + 20;
}

void run_print_plan(const trainer *t, FILE *f)
{
    const run_data *d = &t->data;
    const run_streams *s = &t->streams;
    const run_config *c = &t->cfg;
    const model_config *m = &c->model;
    size_t act = t->sizes.act_floats * 4, par = t->sizes.par_floats * 4 * (size_t)(3 + s->R);
    char accum[48] = "", train[80];
    if (d->train_s.c && d->train_s.c->kind == CORPUS_TOKENS)
        snprintf(train, sizeof train, "%zu %s tokens of a token file", d->train_ts.n,
                 c->data.tokenizer);
    else if (d->vocab) /* words or pieces: the tokens and the text they come from */
        snprintf(train, sizeof train, "%zu %s tokens of %zu bytes", d->train_ts.n,
                 c->data.tokenizer, d->train_s.n);
    else
        snprintf(train, sizeof train, "%zu bytes", d->train_s.n);
    if (s->k > 1)
        snprintf(accum, sizeof accum, " x %d accum", s->k);
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
            m->d_inner, t->sizes.n_weights / 1e6, (long long)s->k * s->B * m->tgt_len,
            s->B, accum, m->tgt_len, m->mem_len, m->pre_lnorm ? "yes" : "no",
            m->dropout, par / 1048576.0, act / 1048576.0, mem_bytes(t) / 1048576.0,
            run_plan_mib(t), train, d->train_s.path,
            d->valid_s.n, d->test_s.n, sys_blas_core(), precision_name(t->precision),
            *t->prec_kernel ? " (" : "", t->prec_kernel, *t->prec_kernel ? ")" : "",
            c->train.out_dir);
    if (s->R > 1)
        fprintf(f, "  threads: %d, each running %d of the batch's streams\n", s->R,
                s->Bl / s->R);
    else /* the line either way: the plan says how the work is shared */
        fprintf(f, "  threads: %d%s\n", s->threads,
                s->threads > 1 ? ", splitting each operation" : "");
    if (t->resume.from)
        fprintf(f, "  resuming at step %ld of %ld from %s\n", t->st.step,
                c->train.max_steps, t->resume.from);
    if (t->resume.from && t->resume.sched_note[0])
        fprintf(f, "  %s\n", t->resume.sched_note);
}

/* The streams of a pass over the valid split: train.batch_size, fewer when the split is
 * tiny (each stream needs an input and its target). */
int run_valid_batch(const trainer *t)
{
    int B = t->cfg.train.batch_size;
    while (B > 1 && t->data.valid_ts.n / (size_t)B < 2)
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
    run_streams *s = &t->streams;
    int B = t->cfg.train.batch_size, Lq = t->cfg.model.tgt_len, k = t->cfg.train.grad_accum;
    s->B = B;
    s->k = k;
    if (open_data(t, origin, resume, init_from, e))
        return missing_corpus_hint(t, e);
    if (batcher_init(&t->data.bt, &t->data.train_ts, k * B, Lq, 0, (size_t)Lq + 1, "train", e))
        return k > 1 ? err_wrap(e, "train.batch_size %d x train.grad_accum %d streams", B, k)
                     : -1;
    const dist_t *dd = dist_self();
    if (B % dd->size != 0)
        return err_set(e, ERR_INPUT, "%s: train.batch_size %d cannot be split over %d ranks "
                       "(each rank owns batch_size / ranks whole streams)", origin, B, dd->size);
    s->Bl = B / dd->size;
    s->b0 = dd->rank * s->Bl;
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
    t->streams.threads = par_set_threads(threads);
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
    const run_streams *s = &t->streams;
    return s->threads > 1 && s->Bl % s->threads == 0 ? s->threads : 1;
}

/* train.comm_overlap as configured; auto starts its trial (one replica per rank and more
 * than one rank: otherwise there is nothing to overlap). */
static void run_overlap_plan(trainer *t)
{
    run_streams *s = &t->streams;
    comm_overlap_kind ov = t->cfg.train.comm_overlap;
    int possible = dist_self()->size > 1 && s->R == 1;
    overlap_auto_init(&s->ovl, possible && ov == OVERLAP_AUTO);
    s->ovl.on = possible && ov == OVERLAP_ON;
    s->overlap = s->ovl.on;
}

/* The replicas (accumulate): the activations of one micro-batch's Bl / R streams each, and
 * for r > 0 a gradient of its own. */
static int plan_replicas(trainer *t, txl_err *e)
{
    run_streams *s = &t->streams;
    const model_config *m = &t->cfg.model;
    s->R = replicas(t);
    s->A = calloc((size_t)s->R, sizeof *s->A);
    s->rep = calloc((size_t)s->R, sizeof *s->rep);
    s->rep_loss = calloc((size_t)s->R, sizeof *s->rep_loss);
    s->rep_m = calloc((size_t)s->R, sizeof *s->rep_m);
    if (!s->A || !s->rep || !s->rep_loss || !s->rep_m)
        return err_set(e, ERR_RUNTIME, "out of memory");
    const model *mdl = &t->mdl;
    s->layer_at = calloc((size_t)m->n_layer + 1, sizeof *s->layer_at);
    if (!s->layer_at)
        return err_set(e, ERR_RUNTIME, "out of memory");
    for (int l = 0; l <= m->n_layer; l++)
        s->layer_at[l] = mdl->n_floats;
    for (int i = mdl->n_params - 1; i >= 0; i--) /* layer l's first tensor */
        if (mdl->table[i].layer >= 0)
            s->layer_at[mdl->table[i].layer] = mdl->table[i].offset;
    run_overlap_plan(t);
    t->sizes.act_floats = 0;
    for (int r = 0; r < s->R; r++) {
        if (acts_init(&s->A[r], m, s->Bl / s->R, m->tgt_len, m->mem_len, 1, e) ||
            (r > 0 && model_replica(&s->rep[r], &t->mdl, e)))
            return -1;
        t->sizes.act_floats += s->A[r].arena_floats;
    }
    s->A[0].layer_grads_ctx = t;
    return 0;
}

/* Threads, then everything a step touches, planned before step 1: the model and its
 * gradients, the replicas' activations and gradients, memory, Adam moments, batch
 * buffers; the initial weights. */
int run_plan_model(trainer *t, txl_err *e)
{
    run_data *d = &t->data;
    run_streams *s = &t->streams;
    const run_config *c = &t->cfg;
    const dist_t *dd = dist_self();
    int M = c->model.mem_len, Lq = c->model.tgt_len, B = s->B, k = s->k;
    set_threads(t);
    if (model_init(&t->mdl, &c->model, e) || model_alloc_grads(&t->mdl, e) ||
        plan_replicas(t, e) || mem_init(&s->mem, &c->model, k * s->Bl, M, e) ||
        (dd->size > 1 && dist_is_root() && mem_init(&s->gmem, &c->model, k * B, M, e)))
        return -1;
    t->adam.m = sys_zalloc(t->mdl.n_floats * sizeof(float));
    t->adam.v = sys_zalloc(t->mdl.n_floats * sizeof(float));
    int coords = pos_get(c->model.pos)->needs_coords;
    size_t rows = (size_t)k * B * Lq;
    d->x = malloc(rows * sizeof *d->x);
    d->y = malloc(rows * sizeof *d->y);
    d->co = coords ? malloc(rows * TXL_N_COORDS * sizeof *d->co) : NULL;
    if (!t->adam.m || !t->adam.v || !d->x || !d->y || (coords && !d->co))
        return err_set(e, ERR_RUNTIME, "out of memory");
    model_init_weights(&t->mdl, c->train.seed);
    t->sizes.par_floats = t->mdl.n_floats;
    t->sizes.n_weights = t->mdl.n_weights;
    t->st.train_tokens = d->train_ts.n;
    t->st.seed = c->train.seed;
    t->st.params = t->mdl.n_weights;
    return 0;
}

/* --dry-run: plan_model's sizes without allocating the model or the activations. */
int run_dry_plan(trainer *t, txl_err *e)
{
    run_streams *s = &t->streams;
    const model_config *m = &t->cfg.model;
    set_threads(t); /* the attention scratch is per thread */
    if (run_set_precision(t, e))
        return -1;
    s->R = replicas(t);
    model_count mc;
    double act;
    if (model_counts(m, &mc, e) ||
        acts_plan_floats(m, s->Bl / s->R, m->tgt_len, m->mem_len, 1, &act, e))
        return -1;
    t->sizes.par_floats = (size_t)mc.floats; /* cfg_validate bounds both */
    t->sizes.n_weights = (size_t)mc.weights;
    t->sizes.act_floats = (size_t)act * (size_t)s->R;
    t->st.train_tokens = t->data.train_ts.n;
    t->st.params = t->sizes.n_weights;
    return 0;
}

/* Rank 0 plans the pass of the terms events (train.term_stats_interval) before step 1. */
int run_plan_terms(trainer *t, txl_err *e)
{
    run_data *d = &t->data;
    const run_config *c = &t->cfg;
    int rc = 0;
    if (c->train.term_stats_interval > 0 && dist_is_root())
        rc = d->valid_ts.n < 2
                 ? err_set(e, ERR_INPUT, "train.term_stats_interval: the valid split (%s) has "
                           "%zu tokens; the term statistics need a valid split to run on",
                           d->valid_s.path, d->valid_ts.n)
                 : terms_init(&t->terms, &t->mdl, &c->model, &d->valid_ts, run_valid_batch(t),
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
    const run_data *d = &t->data;
    const run_streams *s = &t->streams;
    const model_config *m = &t->cfg.model;
    const train_config *tc = &t->cfg.train;
    size_t per_epoch = batcher_segments(&d->bt);
    long steps = tc->max_steps - t->st.step;
    if (t->run_steps > 0 && t->run_steps < steps)
        steps = t->run_steps;
    cJSON *o = cJSON_CreateObject();
    if (!o || !dist_is_root()) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddItemToObject(o, "config",
                          cfg_path ? cJSON_CreateString(cfg_path) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "resume", resume ? cJSON_CreateString(resume) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "init_from",
                          init_from ? cJSON_CreateString(init_from) : cJSON_CreateNull());
    cJSON_AddStringToObject(o, "out_dir", tc->out_dir);
    cJSON_AddStringToObject(o, "pos_scheme", pos_scheme_name(m->pos));
    cJSON_AddNumberToObject(o, "params", (double)t->sizes.n_weights);
    cJSON_AddNumberToObject(o, "estimate_mib", round(run_plan_mib(t)));
    run_add_num(o, "params_grads_adam_mib", "%.1f",
                (3.0 + s->R) * t->sizes.par_floats * 4 / 1048576.0);
    run_add_num(o, "activations_mib", "%.1f", t->sizes.act_floats * 4 / 1048576.0);
    cJSON_AddNumberToObject(o, "tokens_per_step", (double)s->k * s->B * m->tgt_len);
    cJSON_AddNumberToObject(o, "grad_accum", s->k);
    cJSON_AddNumberToObject(o, "train_tokens", (double)d->train_ts.n);
    cJSON_AddNumberToObject(o, "valid_tokens", (double)d->valid_ts.n);
    cJSON_AddNumberToObject(o, "train_bytes", (double)d->train_s.n);
    cJSON_AddNumberToObject(o, "valid_bytes", (double)d->valid_s.n);
    cJSON_AddNumberToObject(o, "test_bytes", (double)d->test_s.n);
    cJSON_AddNumberToObject(o, "steps_per_epoch", (double)per_epoch);
    cJSON_AddNumberToObject(o, "start_step", (double)t->st.step);
    cJSON_AddNumberToObject(o, "max_steps", (double)tc->max_steps);
    cJSON_AddNumberToObject(o, "steps", (double)steps);
    run_add_num(o, "epochs", "%.4f", per_epoch ? (double)tc->max_steps / per_epoch : 0);
    cJSON_AddNumberToObject(o, "threads", s->threads);
    cJSON_AddNumberToObject(o, "replicas", s->R);
    cJSON_AddNumberToObject(o, "ranks", dist_self()->size);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

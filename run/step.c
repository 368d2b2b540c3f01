/* step.c: one training step: every micro-batch of every replica (forward, backward, the
 * gradient added), the sums over replicas and ranks, the clip and Adam, or a skipped
 * outlier. Nothing here allocates. */
#include "run.h"

void run_loop_init(trainer *t, loop_state *ls)
{
    const train_config *tc = &t->cfg.train;
    memset(ls, 0, sizeof *ls);
    ls->sched = run_schedule(tc, &t->st);
    ls->ah = (adam_hparams){.beta1 = tc->beta1, .beta2 = tc->beta2, .eps = tc->eps,
                            .weight_decay = tc->weight_decay,
                            .decoupled = tc->optimizer == OPT_ADAMW};
    ls->first_step = t->st.step;
    ls->t_log = sys_now();
    ls->comm_log = dist_comm_seconds();
    ls->exposed_log = dist_exposed_seconds();
    ls->gemm_log = gemm_thread_seconds();
    ls->loss = ls->norm = NAN;
    t->data.bt.pos = t->st.data_pos;
}

/* The next segment of every stream (its length); at the end of a pass over the train
 * split the next epoch starts over with fresh memory. -1 (every rank alike) when the corpus
 * cannot be read (truncated under txl, say): the state is then the last step's (epoch and
 * memory untouched, so the checkpoint stop_keeping_last writes resumes at this same end and
 * holds the memory, which a checkpoint to resume always does: ckpt_check_header). */
static int next_batch(trainer *t, txl_err *e)
{
    run_data *d = &t->data;
    int len = batcher_next(&d->bt, d->x, d->y, d->co, NULL, e), wrapped = len == 0;
    if (wrapped) {
        d->bt.pos = 0;
        len = batcher_next(&d->bt, d->x, d->y, d->co, NULL, e);
    }
    if (dist_max_int(len < 0))
        return -1;
    if (wrapped) {
        t->st.epoch++;
        mem_reset(&t->streams.mem);
    }
    return len;
}

/* A far outlier of the gradient norm (train.skip_outlier) gets no update: the data and the
 * memory move on. Every rank holds the same global norm, so all decide alike. */
static int is_outlier(const trainer *t, double norm)
{
    const train_config *tc = &t->cfg.train;
    return tc->skip_outlier > 0 && t->st.norm_count >= NORM_WINDOW &&
           norm > tc->skip_outlier * t->st.norm_mean;
}

static void skip_update(trainer *t, long step, double norm)
{
    t->st.skipped++;
    char json[256], text[256];
    snprintf(json, sizeof json, "{\"event\":\"skip\",\"step\":%ld,\"grad_norm\":%.6g,"
             "\"mean_norm\":%.6g,\"skipped\":%ld}", step, norm, t->st.norm_mean, t->st.skipped);
    snprintf(text, sizeof text, "step %ld: skipped, gradient norm %.4g > %g x its mean %.4g "
             "(%ld skipped so far)", step, norm, t->cfg.train.skip_outlier, t->st.norm_mean,
             t->st.skipped);
    run_event(t, &(txl_event){.kind = TXL_EV_NOTE, .step = t->st.step,
                              .max_steps = t->cfg.train.max_steps, .json = json, .text = text});
}

/* Global-norm clipping (as a scale inside Adam) and the Adam step; then the running mean
 * of the applied steps' gradient norms. */
static void apply_update(trainer *t, const loop_state *ls, long step, double norm, double lr)
{
    adam_step_scaled(t->mdl.w, t->mdl.g, clip_coef(norm, t->cfg.train.clip), t->adam.m,
                     t->adam.v, t->mdl.n_floats, step, lr, &ls->ah);
    model_bf16_sync(&t->mdl, 1); /* bf16: the products' copy of the new weights */
    t->st.norm_count++;
    double w = t->st.norm_count < NORM_WINDOW ? 1.0 / (double)t->st.norm_count
                                              : 1.0 / NORM_WINDOW;
    t->st.norm_mean += w * (norm - t->st.norm_mean);
}

/* mdl's gradient += those of replicas 1 .. R - 1, in that order, each element summed by
 * one thread */
static void sum_replica_grads(trainer *t)
{
    size_t n = t->mdl.n_floats;
    float *g = t->mdl.g;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float s = g[i];
        for (int r = 1; r < t->streams.R; r++)
            s += t->streams.rep[r].g[i];
        g[i] = s;
    }
}

/* model_backward's hook in the last micro-batch of a step (streams.overlap): layer l's
 * gradient is final, so its sum over the ranks starts while the layers below run; the sums
 * started before it get a chance to progress. */
static void layer_grads_done(void *ctx, int l)
{
    trainer *t = ctx;
    const size_t *at = t->streams.layer_at;
    dist_isum_f32(t->mdl.g + at[l], at[l + 1] - at[l]);
    dist_poll();
}

/* ...and between the ops of a layer: MPI moves the started sums on only inside its calls
 * (a sum's rounds, and over TCP the socket's next bytes), so once per layer leaves the link
 * idle for most of a layer's backward */
static void backward_poll(void *ctx)
{
    (void)ctx;
    dist_poll();
}

/* The step's gradient summed over the ranks: with overlap, the layers' sums are under way
 * (accumulate), so the model-wide tensors' sum, then the wait; otherwise one sum. */
static void sum_over_ranks(trainer *t)
{
    if (t->streams.overlap) {
        dist_sum_f32(t->mdl.g, t->streams.layer_at[0]);
        dist_wait();
    } else {
        dist_sum_f32(t->mdl.g, t->mdl.n_floats);
    }
}

/* Replica r's part of micro-batch j: streams r Br .. r Br + Br of this rank's Bl, forward,
 * backward (into its gradient), its memory advanced. Returns its loss sum (nats). */
static double replica_pass(trainer *t, const fwd_opts *o0, int j, int r, int len, size_t ntok,
                           int *m)
{
    run_data *d = &t->data;
    run_streams *s = &t->streams;
    int Br = s->Bl / s->R;
    size_t first = (size_t)j * s->B + (size_t)s->b0 + (size_t)r * Br, off = first * (size_t)len;
    model_mem mj = mem_slice(&s->mem, j * s->Bl + r * Br, Br);
    mj.m = *m;
    fwd_opts o = *o0;
    o.coords = d->co ? d->co + off * TXL_N_COORDS : NULL;
    o.loss_scale = 1.0f / (float)ntok; /* the backward's, below */
    model *mdl = r ? &s->rep[r] : &t->mdl;
    model_acts *A = &s->A[r];
    A->b_offset = first;
    double loss = model_forward(mdl, A, &mj, d->x + off, d->y + off, len, &o);
    model_backward(mdl, A, &mj, o.loss_scale);
    model_mem_update(A, &mj);
    *m = mj.m;
    return loss;
}

/* The forward and backward of every micro-batch of the step (segments of length len),
 * each adding to the gradient scaled by 1 / ntok, the tokens of all k B streams; each
 * micro-batch's memory advances as soon as its backward is done (the update does not change
 * it). Micro-batch j is global streams j B .. j B + B; this rank runs its Bl of them with
 * dropout masks drawn by global stream (A.b_offset), R replicas side by side, Bl / R
 * streams each, each with the whole of its thread: the threads meet once per micro-batch,
 * so a thread the OS deschedules on a busy machine delays the step by its own share only
 * (one fork and join per op, with a core taken, waits for the slower thread at every op).
 * The replicas' gradients are then added to mdl's in replica order (the order of MPI's
 * ranks: R replicas compute what R ranks do). Returns this rank's loss sum (nats). */
static double accumulate(trainer *t, const fwd_opts *o, int len, size_t ntok)
{
    run_streams *s = &t->streams;
    double loss = 0;
    int m0 = s->mem.m, m = m0; /* every micro-batch starts from the rows the step started with */
    for (int j = 0; j < s->k; j++) {
        if (s->R == 1) {
            m = m0;
            int last = s->overlap && j == s->k - 1;
            s->A[0].layer_grads_done = last ? layer_grads_done : NULL;
            s->A[0].backward_poll = last ? backward_poll : NULL;
            loss += replica_pass(t, o, j, 0, len, ntok, &m);
            continue;
        }
#pragma omp parallel for schedule(static, 1) num_threads(s->R)
        for (int r = 0; r < s->R; r++) {
            s->rep_m[r] = m0;
            s->rep_loss[r] = replica_pass(t, o, j, r, len, ntok, &s->rep_m[r]);
        }
        for (int r = 0; r < s->R; r++)
            loss += s->rep_loss[r];
        m = s->rep_m[0];
    }
    s->mem.m = m;
    if (s->R > 1)
        sum_replica_grads(t);
    return loss;
}

/* After a step (its seconds, its blocking sums' seconds): the trial goes on; at its end the
 * ranks take rank 0's verdict (their clocks differ a little) and the decision is told: an
 * overlap event in log.jsonl, a note for people. */
static void run_overlap_step(trainer *t, double step_s, double comm_s)
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

/* One step: zero the gradients, forward and backward of the micro-batches (advancing their
 * memory), sum the gradient over the ranks, the NaN guard, clip + Adam (or skip an
 * outlier), advance the state. */
int run_train_step(trainer *t, loop_state *ls, txl_err *e)
{
    const train_config *tc = &t->cfg.train;
    double t0 = sys_now(), c0 = dist_comm_seconds();
    int len = next_batch(t, e);
    if (len < 0)
        return run_stop_keeping_last(t, e);
    long step = t->st.step + 1;
    fwd_opts o = {.training = 1, .drop_key = rng_key(tc->seed, (uint64_t)step)};
    const run_streams *s = &t->streams;
    for (int r = 0; r < s->R; r++) /* once per update: the backward adds to the gradient */
        model_zero_grads(r ? &s->rep[r] : &t->mdl);
    model_bf16_sync(&t->mdl, 0); /* bf16: the first step's (after init or a restore) */
    size_t ntok = (size_t)s->k * s->B * len; /* all streams of the step: each rank and each
                                              * micro-batch scales by the global count */
    double loss = accumulate(t, &o, len, ntok);
    sum_over_ranks(t); /* every rank: the global gradient */
    dist_sum_f64(&loss, 1);
    loss /= (double)ntok;
    double norm = grad_norm(t->mdl.g, t->mdl.n_floats); /* clipping happens in adam */
    if (!isfinite(loss) || !isfinite(norm)) {
        char held[1300];
        run_last_desc(t, held, sizeof held);
        return err_set(e, ERR_RUNTIME, "step %ld: the %s is %s (loss %g, gradient norm %g); "
                       "stopping without writing a checkpoint, so %s. Lower train.lr or set "
                       "train.clip.", step, isfinite(loss) ? "gradient" : "loss",
                       isnan(isfinite(loss) ? norm : loss) ? "NaN" : "infinite", loss, norm,
                       held);
    }
    double lr = run_step_lr(t, &ls->sched, step);
    if (is_outlier(t, norm))
        skip_update(t, step, norm);
    else
        apply_update(t, ls, step, norm, lr);
    t->st.step = step;
    t->st.tokens += (long long)ntok;
    t->st.data_pos = t->data.bt.pos;
    t->st.log_sum += loss;
    t->st.log_n++;
    ls->tok_log += (long long)ntok;
    ls->loss = loss;
    ls->norm = norm;
    ls->lr = lr;
    ls->ntok = ntok;
    run_overlap_step(t, sys_now() - t0, dist_comm_seconds() - c0);
    return 0;
}

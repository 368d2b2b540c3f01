/* restore.c: checkpoints written (last, best; never a non-finite weight) and read back for
 * --resume (the whole state, exactly) and --init-from (weights only). */
#include "run.h"
#include "../model/precision.h"

static int write_checkpoint(trainer *t, const char *path, const model_mem *mem,
                            double valid_loss, txl_err *e);

/* After PATH (out_dir/last or best in this run's format) was written, the same checkpoint
 * in the other format is an older one (train.ckpt_gzip was switched): removed, so that
 * neither `--resume DIR` nor `eval DIR` can take it. */
static void remove_other_format(const trainer *t, const char *path)
{
    char other[1200];
    size_t n = strlen(path);
    if (n > 3 && strcmp(path + n - 3, ".gz") == 0)
        snprintf(other, sizeof other, "%.*s", (int)(n - 3), path);
    else
        snprintf(other, sizeof other, "%s.gz", path);
    if (unlink(other) == 0) {
        run_note(t, TXL_EV_NOTE, "removed %s, the older checkpoint in the other format "
                 "(train.ckpt_gzip changed)", other);
    } else if (errno != ENOENT) {
        run_note(t, TXL_EV_WARN, "warning: cannot remove %s, an older checkpoint in the other "
                 "format: %s (readers of the run directory take the later step)", other,
                 strerror(errno));
    }
}

/* What `last` holds, for messages about a stop: "PATH still holds step N", or that this run
 * wrote none. */
void run_last_desc(const trainer *t, char *buf, size_t cap)
{
    char before[CKPT_PATH_MAX];
    txl_err e = {0};
    if (t->dir.last_step >= 0)
        snprintf(buf, cap, "%s still holds step %ld", t->dir.held_path, t->dir.last_step);
    else if (ckpt_in_run(t->cfg.train.out_dir, "last", before, sizeof before, &e) > 0)
        snprintf(buf, cap, "no checkpoint was written (%s is the one from before this run)",
                 before);
    else
        snprintf(buf, cap, "no checkpoint was written (there is no %s)", t->dir.last_path);
}

/* A checkpoint must never hold a non-finite weight or Adam moment (a blow-up shows in the
 * weights one step before the loss turns NaN). One pass over w, m and v, on the bits (an
 * all-ones exponent is inf or NaN; integer ops vectorise). 0 if all are finite; else -1
 * with the message. */
static int check_finite(const trainer *t, txl_err *e)
{
    const float *arr[3] = {t->mdl.w, t->adam.m, t->adam.v};
    static const char *const what[3] = {"a weight", "an Adam moment (m)", "an Adam moment (v)"};
    size_t n = t->mdl.n_floats;
    uint32_t bad = 0;
    for (int a = 0; a < 3; a++)
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &arr[a][i], sizeof u);
            bad |= (u & 0x7f800000u) == 0x7f800000u;
        }
    if (!bad)
        return 0;
    int a = 0;
    size_t i = 0;
    for (; a < 3; a++) {
        for (i = 0; i < n && isfinite(arr[a][i]); i++)
            ;
        if (i < n)
            break;
    }
    const char *name = "?";
    for (int k = 0; k < t->mdl.n_params; k++)
        if (i >= t->mdl.table[k].offset && i < t->mdl.table[k].offset + t->mdl.table[k].numel)
            name = t->mdl.table[k].name;
    char held[1300];
    run_last_desc(t, held, sizeof held);
    return err_set(e, ERR_RUNTIME, "step %ld: %s of tensor '%s' is %g after the update; "
                   "stopping without writing a checkpoint, so %s. Lower train.lr or set "
                   "train.clip.", t->st.step, what[a], name, (double)arr[a][i], held);
}

/* The memory of all k B streams in global order on rank 0 (collective): micro-batch j's
 * streams j B .. j B + B come from the ranks in rank order, Bl each, states and coordinates. */
static void gather_mem(trainer *t)
{
    run_streams *s = &t->streams;
    const model_mem *mm = &s->mem;
    int root = dist_is_root();
    size_t rows = (size_t)mm->M * mm->d, nco = (size_t)mm->M * TXL_N_COORDS;
    for (int j = 0; j < s->k; j++) {
        model_mem src = mem_slice(mm, j * s->Bl, s->Bl);
        model_mem dst = root ? mem_slice(&s->gmem, j * s->B, s->B) : src;
        for (int l = 0; l < mm->n_layer; l++)
            dist_gather_f32(mem_layer(&src, l), s->Bl * rows, root ? mem_layer(&dst, l) : NULL);
        if (mm->coords)
            dist_gather_i32(src.coords, s->Bl * nco, root ? dst.coords : NULL);
    }
    s->gmem.m = mm->m;
}

/* Every rank calls this (the memory gather is collective); rank 0 writes; all return the
 * same status. */
int run_save_checkpoint(trainer *t, const char *path, int with_state, double valid_loss,
                           txl_err *e)
{
    if (check_finite(t, e)) /* every rank holds the same weights: all stop alike */
        return -1;
    const model_mem *mem = &t->streams.mem; /* one process: already all streams, in order */
    if (with_state && dist_self()->size > 1) {
        gather_mem(t);
        mem = &t->streams.gmem;
    }
    int rc = dist_is_root() ? write_checkpoint(t, path, with_state ? mem : NULL, valid_loss, e)
                            : 0;
    if (dist_max_int(rc ? 1 : 0)) {
        if (!rc)
            err_set(e, ERR_RUNTIME, "%s: rank 0 failed to write the checkpoint", path);
        return -1;
    }
    if (dist_is_root())
        remove_other_format(t, path);
    if (with_state) {
        t->dir.last_step = t->st.step;
        snprintf(t->dir.held_path, sizeof t->dir.held_path, "%s", path);
    }
    run_event(t, &(txl_event){.kind = TXL_EV_CHECKPOINT, .step = t->st.step,
                              .max_steps = t->cfg.train.max_steps, .path = path});
    return 0;
}

static int write_checkpoint(trainer *t, const char *path, const model_mem *mem,
                            double valid_loss, txl_err *e)
{
    run_data *d = &t->data;
    char *cfg_yaml = cfg_to_yaml(&t->cfg);
    if (!cfg_yaml)
        return err_set(e, ERR_RUNTIME, "out of memory serialising the config");
    train_state s = t->st;
    s.elapsed += sys_now() - t->t_start;
    s.valid_loss = valid_loss;
    s.valid_bpc = isnan(valid_loss) ? NAN : t->valid_bpc;
    train_state_meta sm;
    train_state_format(&s, &sm);
    /* the precision the run trained with (train.precision as resolved on this machine);
     * a word or BPE model's vocabulary size after the state */
    const char *meta[10 + 2 * TRAIN_STATE_KEYS + 1] = {
        "format", "txl/1",
        "config", cfg_yaml,
        "rng", "counter-based: dropout masks = hash(seed, step, site, index)",
        "precision", precision_name(t->precision),
    };
    memcpy(meta + 8, sm.kv, sizeof sm.kv);
    char vs[32];
    ckpt_vocab cv = {0};
    uint8_t *vb = NULL;
    int rc = 0;
    if (d->vocab) { /* a word or BPE model's vocabulary travels with it */
        snprintf(vs, sizeof vs, "%zu", vocab_size(d->vocab));
        meta[8 + 2 * TRAIN_STATE_KEYS] = CKPT_VOCAB_SIZE;
        meta[9 + 2 * TRAIN_STATE_KEYS] = vs;
        rc = vocab_serialize(d->vocab, &vb, &cv.len, e);
        cv.bytes = vb;
    }
    if (!rc)
        rc = ckpt_save(path, &t->mdl, mem ? t->adam.m : NULL, mem ? t->adam.v : NULL, mem,
                       d->vocab ? &cv : NULL, meta, t->cfg.train.ckpt_gzip ? 1 : 0, e);
    free(vb);
    free(cfg_yaml);
    return rc;
}

/* The tokens' meaning: anchors and the document separator decide what the ids and the
 * coordinates are, so a checkpoint continues only with the same ones. 1 and the message
 * when they differ. */
static int data_tokens_differ(const run_config *ck, const run_config *now, char *why,
                              size_t cap)
{
    char a[32], b[32];
    units_anchor_list((unsigned)ck->data.anchors, a, sizeof a);
    units_anchor_list((unsigned)now->data.anchors, b, sizeof b);
    if (strcmp(ck->data.tokenizer, now->data.tokenizer) != 0)
        snprintf(why, cap, "data.tokenizer differs from the checkpoint's (token ids would "
                 "change meaning): checkpoint %s, now %s", ck->data.tokenizer,
                 now->data.tokenizer);
    else if (ck->data.vocab_tokens != now->data.vocab_tokens)
        snprintf(why, cap, "the vocabulary differs from the checkpoint's (token ids would "
                 "change meaning): checkpoint %ld tokens, now %ld", ck->data.vocab_tokens,
                 now->data.vocab_tokens);
    else if (ck->data.anchors != now->data.anchors)
        snprintf(why, cap, "data.anchors differ from the checkpoint's (token ids would change "
                 "meaning): checkpoint %s, now %s", a, b);
    else if (strcmp(ck->data.doc_separator, now->data.doc_separator) != 0)
        snprintf(why, cap, "data.doc_separator differs from the checkpoint's (documents "
                 "would start elsewhere)");
    else
        return 0;
    return 1;
}

/* A run continues only with the streams of its checkpoint: the memory and the data cursor
 * are per stream, and the streams of a step are train.batch_size x train.grad_accum (how
 * they split into micro-batches may change: a stream's memory, data and dropout masks
 * depend on its global index alone). 1 and the message when they differ. */
static int streams_differ(const train_config *ck, const train_config *now, char *why,
                          size_t cap)
{
    long long a = (long long)ck->batch_size * ck->grad_accum;
    long long b = (long long)now->batch_size * now->grad_accum;
    if (a == b)
        return 0;
    if (ck->grad_accum == now->grad_accum && ck->grad_accum == 1)
        snprintf(why, cap, "train.batch_size %d differs from the checkpoint's %d (the memory "
                 "and data cursor are per stream)", now->batch_size, ck->batch_size);
    else
        snprintf(why, cap, "train.batch_size x train.grad_accum = %d x %d = %lld streams "
                 "differ from the checkpoint's %d x %d = %lld (the memory and data cursor are "
                 "per stream: keep the product)", now->batch_size, now->grad_accum, b,
                 ck->batch_size, ck->grad_accum, a);
    return 1;
}

/* The checkpoint's memory of all k B streams: this rank's streams of each micro-batch (one
 * process: all of them at once). */
static int load_mem(trainer *t, const st_file *f, txl_err *e)
{
    run_streams *s = &t->streams;
    int total = s->k * s->B;
    if (dist_self()->size == 1)
        return ckpt_load_mem(f, &s->mem, 0, total, e);
    for (int j = 0; j < s->k; j++) {
        model_mem mj = mem_slice(&s->mem, j * s->Bl, s->Bl);
        if (ckpt_load_mem(f, &mj, (size_t)j * s->B + (size_t)s->b0, total, e))
            return -1;
        s->mem.m = mj.m;
    }
    return 0;
}

/* Restores everything --resume needs from `last`; the model config must be identical. dry
 * (--dry-run, no model allocated): the checks and the state, no tensors. */
static int load_resume(trainer *t, const char *path, int dry, txl_err *e)
{
    run_data *d = &t->data;
    st_file f;
    if (st_open(&f, path, e))
        return -1;
    run_config ck;
    cfg_defaults(&ck);
    train_state st = t->st;
    int rc = 0;
    if (ckpt_load_config(&f, &ck, e) || train_state_read(&st, &f, e))
        rc = -1;
    if (rc == 0) {
        char diff[1024];
        if (data_tokens_differ(&ck, &t->cfg, diff, sizeof diff))
            rc = err_set(e, ERR_INPUT, "--resume %s: %s", path, diff);
        else if (cfg_diff_model(&ck.model, &t->cfg.model, diff, sizeof diff) > 0)
            rc = err_set(e, ERR_INPUT, "--resume %s: the model config differs from the "
                         "checkpoint's (checkpoint vs now): %s", path, diff);
        else if (streams_differ(&ck.train, &t->cfg.train, diff, sizeof diff))
            rc = err_set(e, ERR_INPUT, "--resume %s: %s", path, diff);
        else if (st.train_tokens != d->train_ts.n)
            rc = err_set(e, ERR_INPUT, "--resume %s: the train split has %zu tokens, the "
                         "checkpoint was trained on %zu (different corpus or split?)", path,
                         d->train_ts.n, st.train_tokens);
        else if (ckpt_check_meta(&f, &t->cfg, t->sizes.n_weights, e))
            rc = -1;
    }
    /* the header against the model and its whole state before the data is read (dry: the
     * table alone) */
    model tab = {0};
    const model_config *m = &t->cfg.model;
    ckpt_state cs = {.streams = t->streams.k * t->streams.B, .mem_len = m->mem_len,
                     .coords = pos_get(m->pos)->needs_coords, .exact = 1};
    if (rc == 0 && ((dry && model_init_table(&tab, m, e)) ||
                    ckpt_check_header(dry ? &tab : &t->mdl, &f, &cs, e) ||
                    st_read_data(&f, e)))
        rc = -1;
    model_free(&tab);
    if (rc == 0 && !dry && (ckpt_load_weights(&t->mdl, &f, 0, e) ||
                            ckpt_load_optim(&t->mdl, &f, t->adam.m, t->adam.v, e) ||
                            load_mem(t, &f, e)))
        rc = -1;
    if (rc == 0 && st.data_pos >= d->bt.n)
        rc = err_set(e, ERR_INPUT, "%s: metadata 'data_pos' %zu is past the end of the streams "
                     "(%zu)", path, st.data_pos, d->bt.n);
    if (rc == 0) {
        st.seed = t->cfg.train.seed; /* the config's, which --set may change */
        t->st = st;
        t->resume.ck_train = ck.train;
    }
    st_free(&f);
    return rc;
}

/* --init-from: the checkpoint's weights, whose shapes the config must have; dry
 * (--dry-run): the checks only (the checkpoint is read whole and validated). */
static int load_init_from(trainer *t, const char *path, int dry, txl_err *e)
{
    st_file f;
    run_config ck;
    model src;
    int from_dir;
    if (ckpt_open(path, &from_dir, &f, &ck, &src, NULL, e))
        return -1;
    if (from_dir)
        run_note(t, TXL_EV_NOTE, "%s is a run directory: using %s", path, f.path);
    char diff[1024];
    int rc = 0;
    /* weights must fit: shape keys must agree; lengths, dropout, clamp may change */
    model_config a = ck.model, b = t->cfg.model;
    a.tgt_len = b.tgt_len;
    a.mem_len = b.mem_len;
    a.dropout = b.dropout;
    a.dropatt = b.dropatt;
    a.clamp_len = b.clamp_len;
    a.pre_lnorm = b.pre_lnorm;
    if (data_tokens_differ(&ck, &t->cfg, diff, sizeof diff))
        rc = err_set(e, ERR_INPUT, "--init-from %s: %s", path, diff);
    else if (cfg_diff_model(&a, &b, diff, sizeof diff) > 0)
        rc = err_set(e, ERR_INPUT, "--init-from %s: parameter shapes differ from the config "
                     "(checkpoint vs config): %s", path, diff);
    else if (!dry)
        rc = ckpt_load_weights(&t->mdl, &f, 0, e); /* a quantized one dequantized */
    model_free(&src);
    st_free(&f);
    return rc;
}

/* Reading the data failed mid-run (the batcher or the validation pass). The weights are
 * those of the last completed step: `last` is brought up to it when it holds an older
 * one, and the message says which step it holds. */
int run_stop_keeping_last(trainer *t, txl_err *e)
{
    if (!e->msg[0])
        err_set(e, ERR_INPUT, "another rank could not read the corpus");
    size_t n = strlen(e->msg);
    txl_err we = {0};
    if (t->dir.last_step != t->st.step && run_save_checkpoint(t, t->dir.last_path, 1, NAN, &we)) {
        snprintf(e->msg + n, sizeof e->msg - n, "; writing %s failed too: %s", t->dir.last_path,
                 we.msg);
        return -1;
    }
    char held[1300];
    run_last_desc(t, held, sizeof held);
    snprintf(e->msg + n, sizeof e->msg - n, "; %s", held);
    return -1;
}

/* --resume or --init-from; the run must still have steps to go. */
int run_restore_run(trainer *t, const char *resume, const char *init_from,
                       const char *origin, int dry, txl_err *e)
{
    char cur[CKPT_PATH_MAX];
    txl_err ignored; /* a damaged other format is resume_overwrites' to name */
    t->dir.last_step = -1;
    if (resume && (load_resume(t, resume, dry, e) || run_resume_schedule(t, e)))
        return -1;
    t->resume.from = resume;
    if (resume && ckpt_in_run(t->cfg.train.out_dir, "last", cur, sizeof cur, &ignored) > 0 &&
        run_same_file(cur, resume)) { /* resumed from this out_dir's last, in either format */
        t->dir.last_step = t->st.step;
        snprintf(t->dir.held_path, sizeof t->dir.held_path, "%s", resume);
    }
    if (init_from && load_init_from(t, init_from, dry, e))
        return -1;
    if (t->st.step >= t->cfg.train.max_steps)
        return err_set(e, ERR_INPUT, "%s: the run is already at step %ld >= train.max_steps "
                       "%ld (raise it with --set train.max_steps=N)", resume ? resume : origin,
                       t->st.step, t->cfg.train.max_steps);
    return 0;
}

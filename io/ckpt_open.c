/* ckpt_open.c: reading a txl checkpoint as every command does (see ckpt_open.h): the path of
 * a run directory's checkpoint, the header held to the model of the config in the metadata,
 * the metadata's counts and state checked, before any tensor data is read. */
#include "ckpt_open.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../model/model.h"
#include "../model/pos.h"
#include "checkpoint.h"
#include "train_state.h"

/* Before the model is built: the config in the metadata must agree with the tensors in
 * size, so a damaged config cannot make txl allocate a model far larger than the file
 * (doc/design.md, "Checkpoints": validate everything before touching the model). word_emb.weight
 * gives d_model, the last layer's qkv gives n_layer, and the weights every scheme has (qkv, o,
 * ff.0, ff.3 of each layer) must fit in the file's parameter bytes. These cheap checks bound
 * the parameter table before it is built; ckpt_check_header then holds every name, dtype and
 * shape to the table exactly, still before any data is read. */
int ckpt_check_config(const st_file *f, const model_config *m, const char *path,
                             txl_err *e)
{
    char emb[64];
    int es[2];
    if (adapt_validate(m, emb, sizeof emb) == 0) /* else model_counts below names the key */
        model_embed_tensor(m, emb, sizeof emb, es);
    else
        snprintf(emb, sizeof emb, "word_emb.weight"), es[0] = m->vocab, es[1] = m->d_model;
    const st_tensor *t = st_find(f, emb);
    if (!t)
        return err_set(e, ERR_INPUT, "%s: missing tensor '%s'", path, emb);
    if (t->ndim != 2 || t->shape[0] != es[0] || t->shape[1] != es[1])
        return err_set(e, ERR_INPUT, "%s: tensor '%s' has %d dimensions [%lld, "
                       "%lld%s], but the config in the checkpoint (model.d_model %d) implies "
                       "[%d, %d]", path, emb, t->ndim, (long long)(t->ndim > 0 ? t->shape[0] : 0),
                       (long long)(t->ndim > 1 ? t->shape[1] : 0), t->ndim > 2 ? ", ..." : "",
                       m->d_model, es[0], es[1]);
    char nm[64];
    snprintf(nm, sizeof nm, "layers.%d.attn.qkv.weight", m->n_layer - 1);
    if (!st_find(f, nm))
        return err_set(e, ERR_INPUT, "%s: missing tensor '%s', which the config in the "
                       "checkpoint (model.n_layer %d) requires", path, nm, m->n_layer);
    /* the table's counts (model_counts): its tensors each hold 4 bytes a parameter, each
     * has at most one optim.m and one optim.v, and there is one state.mem per layer (and
     * state.coords for a scheme that reads coordinates).
     * ckpt_check_header names any other tensor, so more than P of those fail there, naming
     * one; a header far larger than the config's model is refused here first, by its
     * counts, and so is a config that needs more than twice the bytes the file's weights
     * hold (it cannot describe this file; the table is not even built for it), while a
     * tensor or two missing is left to ckpt_check_header, which names them. */
    model_count mc;
    if (model_counts(m, &mc, e))
        return err_wrap(e, "%s: the config in the checkpoint", path);
    size_t have = 0; /* bytes as fp32: a quantized tensor's elements count 4 bytes each */
    for (int i = 0; i < f->n; i++)
        if (strncmp(f->t[i].name, "optim.", 6) != 0 && strncmp(f->t[i].name, "state.", 6) != 0)
            have += f->t[i].dtype == ST_BF16 || f->t[i].dtype == ST_I8 ? 4 * f->t[i].numel
                                                                       : f->t[i].end - f->t[i].begin;
    double need = 4.0 * mc.weights;
    if (need > 2.0 * (double)have)
        return err_set(e, ERR_INPUT, "%s: the config in the checkpoint (model.n_layer %d, "
                       "d_model %d, n_head %d, d_head %d, d_inner %d) needs %.0f bytes of "
                       "weights, but the file's tensors hold %zu", path, m->n_layer,
                       m->d_model, m->n_head, m->d_head, m->d_inner, need, have);
    double P = mc.tensors;
    long long n_m = 0, n_v = 0, n_s = 0, n_p = 0;
    for (int i = 0; i < f->n; i++) {
        const char *s = f->t[i].name;
        if (strncmp(s, "optim.", 6) == 0 && strncmp(s, "optim.m.", 8) != 0 &&
            strncmp(s, "optim.v.", 8) != 0)
            return err_set(e, ERR_INPUT, "%s: unexpected tensor '%s' (Adam moments are "
                           "optim.m.<name> and optim.v.<name>)", path, s);
        n_m += strncmp(s, "optim.m.", 8) == 0;
        n_v += strncmp(s, "optim.v.", 8) == 0;
        n_s += strncmp(s, "state.", 6) == 0;
        n_p += strncmp(s, "optim.", 6) != 0 && strncmp(s, "state.", 6) != 0 &&
               !(strlen(s) > 6 && strcmp(s + strlen(s) - 6, "_scale") == 0); /* q8 scales */
    }
    int n_state = m->n_layer + (pos_get(m->pos)->needs_coords ? 1 : 0); /* + state.coords */
    if (n_p <= P && (n_m > P || n_v > P || n_s > n_state))
        return err_set(e, ERR_INPUT, "%s: the header lists %lld optim.m.*, %lld optim.v.* and "
                       "%lld state.* tensors, but a pos_scheme %s model with the config in the "
                       "checkpoint (model.n_layer %d) has %.0f parameters (one Adam moment "
                       "each) and %d state tensors", path, n_m, n_v, n_s,
                       pos_scheme_name(m->pos), m->n_layer, P, n_state);
    return 0;
}

int ckpt_meta_count(const st_file *f, const char *key, long long def, long long *out,
                   txl_err *e)
{
    const char *s = st_meta(f, key);
    *out = def;
    if (!s)
        return 0;
    const char *p = s;
    long long v = 0;
    for (; *p >= '0' && *p <= '9' && v <= (1LL << 53); p++)
        v = v * 10 + (*p - '0');
    if (p == s || *p || v > (1LL << 53))
        return err_set(e, ERR_INPUT, "%s: metadata '%s' must be an integer in [0, 2^53], found "
                       "'%.40s'", f->path, key, s);
    *out = v;
    return 0;
}

/* The step a checkpoint's header records (-1: none), reading the header only: 0, or -1
 * with e when the header cannot be read. */
static int header_step(const char *path, long long *step, txl_err *e)
{
    st_file f;
    *step = -1;
    if (st_open(&f, path, e))
        return -1;
    int rc = ckpt_meta_count(&f, "step", -1, step, e);
    st_free(&f);
    return rc;
}

long long ckpt_file_step(const char *path)
{
    long long step;
    txl_err e = {0};
    return header_step(path, &step, &e) ? -1 : step;
}

/* A path too long for txl's buffers: the reason first (the message holds 1 KiB, and a path
 * near it would push the reason out), then the path's ends. -1. */
static int path_too_long(const char *what, const char *path, size_t len, size_t cap, txl_err *e)
{
    return err_set(e, ERR_INPUT, "%s of %zu bytes, more than txl takes (%zu): '%.100s ... %s'",
                   what, len, cap - 1, path, path + (len > 60 ? len - 60 : 0));
}

int ckpt_in_run(const char *dir, const char *name, char *buf, size_t cap, txl_err *e)
{
    char gz[CKPT_PATH_MAX + 64], plain[CKPT_PATH_MAX + 64];
    struct stat sb;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    snprintf(gz, sizeof gz, "%.*s/%s.safetensors.gz", (int)n, dir, name);
    snprintf(plain, sizeof plain, "%.*s/%s.safetensors", (int)n, dir, name);
    int has_gz = stat(gz, &sb) == 0 && S_ISREG(sb.st_mode);
    int has_plain = stat(plain, &sb) == 0 && S_ISREG(sb.st_mode);
    if (!has_gz && !has_plain)
        return 0;
    /* both: a run that switched train.ckpt_gzip, stopped before its first write of the new
     * format removed the old one (or a run of an older txl): the later step wins, a tie
     * the gzip'd file (either holds that step). The steps come from the headers: a file
     * whose data is damaged still wins by its step and its reader names the damage; one
     * whose header cannot be read is named here, since taking the other silently could
     * rewind a run (and the run would then delete the newer file as the older format). */
    const char *pick = has_gz ? gz : plain;
    if (has_gz && has_plain) {
        long long sg, sp;
        txl_err why = {0};
        const char *bad = header_step(gz, &sg, &why)      ? gz
                          : header_step(plain, &sp, &why) ? plain
                                                          : NULL;
        if (bad)
            return err_set(e, ERR_INPUT, "%s (%.*s/%s.safetensors[.gz]: both formats, so txl "
                           "cannot tell which holds the later step; move the damaged one "
                           "away)", why.msg, (int)n, dir, name);
        pick = sg >= sp ? gz : plain;
    }
    if (strlen(pick) >= cap)
        return path_too_long("the run directory's checkpoint path", pick, strlen(pick), cap, e);
    snprintf(buf, cap, "%s", pick);
    return 1;
}

int ckpt_resolve(const char *arg, int last, char *buf, size_t cap, int *from_dir, txl_err *e)
{
    struct stat sb;
    size_t len = strlen(arg);
    *from_dir = 0;
    if (len >= cap) /* cut, it would name another file (or a missing one) */
        return path_too_long("a checkpoint path", arg, len, cap, e);
    if (stat(arg, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(buf, cap, "%s", arg); /* a file (or an error st_read will name) */
        return 0;
    }
    int found = last ? 0 : ckpt_in_run(arg, "best", buf, cap, e);
    if (found == 0)
        found = ckpt_in_run(arg, "last", buf, cap, e);
    if (found < 0)
        return -1;
    if (found) {
        *from_dir = 1;
        return 0;
    }
    char best[CKPT_PATH_MAX];
    if (last && ckpt_in_run(arg, "best", best, sizeof best, e) > 0)
        return err_set(e, ERR_INPUT, "%s: a run directory without a last checkpoint, only %s "
                       "(it holds no optimiser state to resume from): --init-from %s starts a "
                       "new run from its weights", arg, best, best);
    return err_set(e, ERR_INPUT, "%s: a directory without a checkpoint (expected %s%s in it)",
                   arg, last ? "" : "best.safetensors.gz or ", "last.safetensors.gz");
}

int ckpt_check_meta(const st_file *f, const run_config *cfg, size_t params, txl_err *e)
{
    const char *fmt = st_meta(f, "format");
    if (fmt && strcmp(fmt, "txl/1") != 0)
        return err_set(e, ERR_INPUT, "%s: metadata 'format' is '%.40s', expected 'txl/1' (a "
                       "checkpoint of another program, or of a later txl)", f->path, fmt);
    train_run r = {.params = params,
                   .streams = cfg->train.batch_size * cfg->train.grad_accum,
                   .tgt_len = cfg->model.tgt_len};
    return train_state_check(f, &r, e);
}

int ckpt_load_config(const st_file *f, run_config *cfg, txl_err *e)
{
    const char *text = st_meta(f, "config");
    if (!text)
        return err_set(e, ERR_INPUT, "%s: no 'config' in the metadata (not a txl checkpoint; "
                       "use 'txl import' for plain weights)", f->path);
    if (cfg_load_meta(cfg, text, f->path, e))
        return -1;
    const char *vs = st_meta(f, CKPT_VOCAB_SIZE);
    if (cfg_tokenizer(cfg) == VOCAB_BYTE)
        return vs ? err_set(e, ERR_INPUT, "%s: metadata '%s' in a checkpoint of the byte "
                            "tokenizer (its config's data.tokenizer)", f->path,
                            CKPT_VOCAB_SIZE) : 0;
    long long n;
    if (!vs)
        return err_set(e, ERR_INPUT, "%s: no metadata '%s': a %s model's checkpoint records "
                       "its vocabulary's size", f->path, CKPT_VOCAB_SIZE, cfg->data.tokenizer);
    if (ckpt_meta_count(f, CKPT_VOCAB_SIZE, 0, &n, e))
        return -1;
    if (n < 1 || n > VOCAB_MAX_TOKENS)
        return err_set(e, ERR_INPUT, "%s: metadata '%s' is %lld: expected 1 to %ld tokens",
                       f->path, CKPT_VOCAB_SIZE, n, VOCAB_MAX_TOKENS);
    cfg_attach_vocab(cfg, (size_t)n);
    return 0;
}

int ckpt_read_vocab(const st_file *f, const run_config *cfg, vocab **out, txl_err *e)
{
    *out = NULL;
    const st_tensor *t = st_find(f, CKPT_VOCAB_TENSOR);
    vocab_kind k = cfg_tokenizer(cfg);
    if (k == VOCAB_BYTE)
        return t ? err_set(e, ERR_INPUT, "%s: tensor '%s' in a checkpoint of the byte "
                           "tokenizer (its config's data.tokenizer)", f->path,
                           CKPT_VOCAB_TENSOR) : 0;
    if (!t)
        return err_set(e, ERR_INPUT, "%s: missing tensor '%s': a %s model's checkpoint holds "
                       "its vocabulary", f->path, CKPT_VOCAB_TENSOR, cfg->data.tokenizer);
    char origin[sizeof f->path + 32];
    snprintf(origin, sizeof origin, "%s: tensor %s", f->path, CKPT_VOCAB_TENSOR);
    vocab *v = vocab_parse(st_data(f, t), t->numel, origin, e);
    if (!v)
        return -1;
    if (vocab_get_kind(v) != k || (long)vocab_size(v) != cfg->data.vocab_tokens) {
        err_set(e, ERR_INPUT, "%s: a %s vocabulary of %zu tokens, but the config says "
                "data.tokenizer %s and the metadata '%s' %ld", origin,
                vocab_kind_name(vocab_get_kind(v)), vocab_size(v), cfg->data.tokenizer,
                CKPT_VOCAB_SIZE, cfg->data.vocab_tokens);
        vocab_free(v);
        return -1;
    }
    *out = v;
    return 0;
}

int ckpt_names_checkpoint(const char *path)
{
    struct stat sb;
    size_t n = strlen(path);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return 1;
    return (n >= 12 && strcmp(path + n - 12, ".safetensors") == 0) ||
           (n >= 15 && strcmp(path + n - 15, ".safetensors.gz") == 0);
}

int ckpt_vocab_of(const char *path, vocab **out, run_config *ck, txl_err *e)
{
    *out = NULL;
    if (!ckpt_names_checkpoint(path))
        return (*out = vocab_load(path, e)) ? 0 : -1;
    char file[CKPT_PATH_MAX];
    int dir;
    st_file f;
    run_config own, *cfg = ck ? ck : &own;
    cfg_defaults(cfg);
    if (ckpt_resolve(path, 0, file, sizeof file, &dir, e) || st_open(&f, file, e))
        return -1;
    int rc = ckpt_load_config(&f, cfg, e); /* a byte model's data need not be read */
    if (rc == 0 && cfg_tokenizer(cfg) != VOCAB_BYTE)
        rc = st_read_data(&f, e) || ckpt_read_vocab(&f, cfg, out, e) ? -1 : 0;
    st_free(&f);
    if (rc == 0 && !*out && !(*out = vocab_new_bytes(e)))
        rc = -1;
    return rc;
}

int ckpt_open(const char *arg, int *from_dir, st_file *f, run_config *cfg, model *mdl,
              vocab **v, txl_err *e)
{
    char path[CKPT_PATH_MAX];
    _Static_assert(sizeof f->path >= CKPT_PATH_MAX, "st_file holds a checkpoint path");
    int dir = 0;
    memset(mdl, 0, sizeof *mdl);
    if (from_dir)
        *from_dir = 0;
    if (ckpt_resolve(arg, 0, path, sizeof path, &dir, e) || st_open(f, path, e))
        return -1;
    if (from_dir)
        *from_dir = dir;
    /* the header against the model of its config before any data is read: the data can
     * then hold no more than the model and its state */
    cfg_defaults(cfg);
    const model_config *m = &cfg->model;
    ckpt_state st = {0};
    vocab *voc = NULL;
    int rc = ckpt_load_config(f, cfg, e) || cfg_validate(cfg, path, e) ||
             ckpt_check_config(f, m, path, e) || model_init_table(mdl, m, e);
    if (!rc) {
        st = (ckpt_state){.streams = cfg->train.batch_size * cfg->train.grad_accum,
                          .mem_len = m->mem_len, .coords = pos_get(m->pos)->needs_coords};
        rc = ckpt_check_header(mdl, f, &st, e) || ckpt_check_meta(f, cfg, mdl->n_weights, e) ||
             st_read_data(f, e) || ckpt_read_vocab(f, cfg, &voc, e) ||
             model_alloc_weights(mdl, e) || ckpt_load_weights(mdl, f, 1, e);
    }
    if (rc) {
        vocab_free(voc);
        model_free(mdl);
        st_free(f);
        return -1;
    }
    if (v)
        *v = voc;
    else
        vocab_free(voc);
    return 0;
}

/* model.c: include/txl.h's models: loading a checkpoint (io/ckpt_open.h), a new model from a
 * config, plain weights imported with a config, saving with the metadata. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/checkpoint.h"
#include "../io/ckpt_open.h"
#include "../model/pos.h"
#include "../model/quant.h"
#include "api.h"

static void meta_free(txl_model *m)
{
    for (int i = 0; i < m->n_meta; i++) {
        free(m->meta_keys[i]);
        free(m->meta_vals[i]);
    }
    free(m->meta_keys);
    free(m->meta_vals);
    m->meta_keys = m->meta_vals = NULL;
    m->n_meta = 0;
}

int api_model_set_meta(txl_model *m, const char *key, const char *value)
{
    for (int i = 0; i < m->n_meta; i++)
        if (strcmp(m->meta_keys[i], key) == 0) {
            char *v = strdup(value);
            if (!v)
                return -1;
            free(m->meta_vals[i]);
            m->meta_vals[i] = v;
            return 0;
        }
    char **k = realloc(m->meta_keys, ((size_t)m->n_meta + 1) * sizeof *k);
    if (k)
        m->meta_keys = k;
    char **v = realloc(m->meta_vals, ((size_t)m->n_meta + 1) * sizeof *v);
    if (v)
        m->meta_vals = v;
    if (!k || !v)
        return -1;
    m->meta_keys[m->n_meta] = strdup(key);
    m->meta_vals[m->n_meta] = strdup(value);
    if (!m->meta_keys[m->n_meta] || !m->meta_vals[m->n_meta]) {
        free(m->meta_keys[m->n_meta]);
        free(m->meta_vals[m->n_meta]);
        return -1;
    }
    m->n_meta++;
    return 0;
}

/* The metadata of a model that has no checkpoint yet: the format, the config, step 0, the
 * parameter count, and any extra pairs (key, value, ..., NULL). */
static int fresh_meta(txl_model *m, const char *const *extra, txl_err *e)
{
    char *yaml = cfg_to_yaml(&m->cfg.c);
    char params[32];
    snprintf(params, sizeof params, "%zu", m->mdl.n_weights);
    int rc = !yaml || api_model_set_meta(m, "format", "txl/1") ||
             api_model_set_meta(m, "config", yaml) || api_model_set_meta(m, "step", "0") ||
             api_model_set_meta(m, "tokens", "0") ||
             api_model_set_meta(m, "best_valid_loss", "inf") ||
             api_model_set_meta(m, "params", params);
    for (int i = 0; !rc && extra && extra[i]; i += 2)
        rc = api_model_set_meta(m, extra[i], extra[i + 1]);
    if (!rc && m->vocab) {
        char vs[32];
        snprintf(vs, sizeof vs, "%zu", vocab_size(m->vocab));
        rc = api_model_set_meta(m, CKPT_VOCAB_SIZE, vs);
    }
    free(yaml);
    return rc ? err_set(e, ERR_RUNTIME, "out of memory") : 0;
}

/* A handle of its own for a model of config c (NULL: the checkpoint's, read later); NULL
 * with e when out of memory. */
static txl_model *model_alloc(const txl_config *c, txl_err *e)
{
    txl_model *m = calloc(1, sizeof *m);
    if (!m)
        err_set(e, ERR_RUNTIME, "out of memory");
    else if (c)
        m->cfg = *c;
    return m;
}

txl_model *txl_model_load(const char *ckpt, txl_err *e)
{
    api_err_clear(e);
    txl_model *m = model_alloc(NULL, e);
    if (!m)
        return NULL;
    long long step = 0;
    if (ckpt_open(ckpt, &m->from_dir, &m->f, &m->cfg.c, &m->mdl, &m->vocab, e)) {
        free(m);
        return NULL;
    }
    m->has_file = 1;
    snprintf(m->cfg.origin, sizeof m->cfg.origin, "%s", m->f.path);
    int rc = ckpt_meta_count(&m->f, "step", 0, &step, e);
    for (int i = 0; !rc && i < m->f.n_meta; i++)
        if (api_model_set_meta(m, m->f.meta_keys[i], m->f.meta_vals[i]))
            rc = err_set(e, ERR_RUNTIME, "out of memory");
    if (rc) {
        txl_model_free(m);
        return NULL;
    }
    m->step = (long)step;
    st_drop_data(&m->f); /* the weights are in the model; the header stays for info */
    return m;
}

/* A new or imported word or BPE model's vocabulary: the one the weights carry (`f`, an
 * export's), else the one data.vocab names (a file or a checkpoint); attached to its
 * config. With both they must be the same. */
static int take_vocab(txl_model *m, const st_file *f, txl_err *e)
{
    run_config *c = &m->cfg.c;
    const st_tensor *t = f ? st_find(f, CKPT_VOCAB_TENSOR) : NULL;
    if (cfg_tokenizer(c) == VOCAB_BYTE)
        return t ? err_set(e, ERR_INPUT, "%s: tensor '%s' (a vocabulary), but data.tokenizer "
                           "is byte", f->path, CKPT_VOCAB_TENSOR) : 0;
    if (t) {
        char origin[sizeof f->path + 32];
        snprintf(origin, sizeof origin, "%s: tensor %s", f->path, CKPT_VOCAB_TENSOR);
        if (t->dtype != ST_U8 || t->ndim != 1)
            return err_set(e, ERR_INPUT, "%s: not a vocabulary (U8 [n])", origin);
        if (!(m->vocab = vocab_parse(st_data(f, t), t->numel, origin, e)))
            return -1;
        vocab *named = NULL;
        int rc = c->data.vocab[0] && ckpt_vocab_of(c->data.vocab, &named, NULL, e) ? -1 : 0;
        if (!rc && named && vocab_fingerprint(named) != vocab_fingerprint(m->vocab))
            rc = err_set(e, ERR_INPUT, "data.vocab %s is not the vocabulary %s carries",
                         c->data.vocab, f->path);
        vocab_free(named);
        if (rc)
            return -1;
    } else if (!c->data.vocab[0]) {
        err_set(e, ERR_INPUT, "data.tokenizer %s: a new model needs its vocabulary: set "
                "data.vocab (a file of txl vocab build, or a checkpoint)", c->data.tokenizer);
        return m->cfg.origin[0] ? err_wrap(e, "%s", m->cfg.origin) : -1;
    } else if (ckpt_vocab_of(c->data.vocab, &m->vocab, NULL, e)) {
        return err_wrap(e, "data.vocab");
    }
    if (vocab_get_kind(m->vocab) != cfg_tokenizer(c))
        return err_set(e, ERR_INPUT, "%s is a %s vocabulary, data.tokenizer is %s",
                       t ? f->path : c->data.vocab, vocab_kind_name(vocab_get_kind(m->vocab)),
                       c->data.tokenizer);
    cfg_attach_vocab(c, vocab_size(m->vocab));
    return 0;
}

txl_model *txl_model_new(const txl_config *c, txl_err *e)
{
    api_err_clear(e);
    txl_model *m = model_alloc(c, e);
    if (!m)
        return NULL;
    if (take_vocab(m, NULL, e) || cfg_validate(&m->cfg.c, c->origin[0] ? c->origin : NULL, e) ||
        model_init(&m->mdl, &m->cfg.c.model, e) || fresh_meta(m, NULL, e)) {
        txl_model_free(m);
        return NULL;
    }
    model_init_weights(&m->mdl, m->cfg.c.train.seed);
    return m;
}

/* Appends ", name" to a bounded list; counts what does not fit. */
typedef struct {
    char buf[600];
    size_t len;
    int n, left_out;
} name_list;

static void name_list_add(name_list *l, const char *name, const char *detail)
{
    char item[300];
    snprintf(item, sizeof item, "%s%s", name, detail);
    size_t n = strlen(item);
    l->n++;
    if (l->len + n + 2 >= sizeof l->buf - 16) {
        l->left_out++;
        return;
    }
    l->len += (size_t)snprintf(l->buf + l->len, sizeof l->buf - l->len, "%s%s",
                               l->len ? ", " : "", item);
}

static void fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && o < cap - 24; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    snprintf(buf + o, cap - o, "]");
}

/* Every parameter of mdl present in f with its shape, F32 (or a quantized checkpoint's BF16,
 * or I8 with its scales), and no other tensors. All problems go into one message, which
 * names the weights and the config (`cfg_name`). */
static int check_import(const model *mdl, const st_file *f, const char *cfg_name, txl_err *e)
{
    name_list missing = {0}, wrong = {0}, extra = {0};
    for (int i = 0; i < mdl->n_params; i++) {
        const param_entry *p = &mdl->table[i];
        const st_tensor *t = st_find(f, p->name);
        if (!t) {
            name_list_add(&missing, p->name, "");
            continue;
        }
        int64_t want[2] = {p->shape[0], p->shape[1]};
        int ok = t->ndim == p->ndim && t->shape[0] == want[0] &&
                 (p->ndim == 1 || t->shape[1] == want[1]);
        char got[96], exp[64], detail[200];
        fmt_shape(got, sizeof got, t->ndim, t->shape);
        fmt_shape(exp, sizeof exp, p->ndim, want);
        int quant = t->dtype == ST_BF16 || (t->dtype == ST_I8 && p->ndim == 2);
        if (t->dtype != ST_F32 && !quant) {
            snprintf(detail, sizeof detail, " (dtype %s, expected F32)", st_dtype_name(t->dtype));
            name_list_add(&wrong, p->name, detail);
        } else if (!ok) {
            snprintf(detail, sizeof detail, " (shape %s, expected %s)", got, exp);
            name_list_add(&wrong, p->name, detail);
        }
    }
    int state = 0;
    for (int i = 0; i < f->n; i++)
        if (!model_find_param(mdl, f->t[i].name) && strcmp(f->t[i].name, CKPT_VOCAB_TENSOR) &&
            !ckpt_is_i8_scale(f, f->t[i].name)) {
            name_list_add(&extra, f->t[i].name, "");
            state |= strncmp(f->t[i].name, "optim.", 6) == 0 ||
                     strncmp(f->t[i].name, "state.", 6) == 0;
        }
    if (!missing.n && !wrong.n && !extra.n)
        return 0;
    char msg[1000];
    size_t o = (size_t)snprintf(msg, sizeof msg, "%s does not fit the %s model of %s:", f->path,
                                pos_scheme_name(mdl->cfg.pos), cfg_name);
    const name_list *ls[3] = {&missing, &wrong, &extra};
    const char *what[3] = {"missing tensor", "wrong tensor", "unexpected tensor"};
    for (int k = 0; k < 3 && o < sizeof msg; k++) {
        if (!ls[k]->n)
            continue;
        char more[40] = "";
        if (ls[k]->left_out)
            snprintf(more, sizeof more, " and %d more", ls[k]->left_out);
        o += (size_t)snprintf(msg + o, sizeof msg - o, " %s%s: %s%s;", what[k],
                              ls[k]->n > 1 ? "s" : "", ls[k]->buf, more);
    }
    if (o < sizeof msg)
        snprintf(msg + o, sizeof msg - o, " (%s)", state
                 ? "optim.* and state.* are the training state of a txl checkpoint: "
                   "'txl export' writes its weights alone"
                 : "doc/design.md (Checkpoints) lists the names and shapes; an unexpected tensor "
                   "often means another model config, e.g. pos_scheme or untie_r");
    return err_set(e, ERR_INPUT, "%s", msg);
}

/* Every weight is finite; else ERR_INPUT naming the tensor holding the first that is not. */
static int check_finite(const model *mdl, const char *in, txl_err *e)
{
    for (size_t i = 0; i < mdl->n_floats; i++)
        if (!isfinite(mdl->w[i])) {
            const char *nm = "?";
            for (int k = 0; k < mdl->n_params; k++)
                if (i >= mdl->table[k].offset && i < mdl->table[k].offset + mdl->table[k].numel)
                    nm = mdl->table[k].name;
            return err_set(e, ERR_INPUT, "%s: tensor '%s' holds a non-finite value (%g)", in, nm,
                           mdl->w[i]);
        }
    return 0;
}

txl_model *txl_model_import(const char *weights, const txl_config *c, txl_err *e)
{
    api_err_clear(e);
    txl_model *m = model_alloc(c, e);
    st_file f;
    if (!m)
        return NULL;
    const char *cfg_name = c->origin[0] ? c->origin : "the config";
    if (st_read(&f, weights, e)) {
        txl_model_free(m);
        return NULL;
    }
    if (take_vocab(m, &f, e) || cfg_validate(&m->cfg.c, c->origin[0] ? c->origin : NULL, e)) {
        st_free(&f);
        txl_model_free(m);
        return NULL;
    }
    const char *extra[] = {"imported_from", weights, NULL};
    /* quantized weights stay so (keep): the checkpoint written is quantized as they were */
    int rc = model_init(&m->mdl, &m->cfg.c.model, e) || check_import(&m->mdl, &f, cfg_name, e) ||
             ckpt_load_weights(&m->mdl, &f, 1, e) || check_finite(&m->mdl, weights, e) ||
             fresh_meta(m, extra, e) ||
             (quant_model_type(&m->mdl) != QT_F32 &&
              api_model_set_meta(m, "quantized", qtype_name(quant_model_type(&m->mdl))) &&
              err_set(e, ERR_RUNTIME, "out of memory"));
    st_free(&f);
    if (rc) {
        txl_model_free(m);
        return NULL;
    }
    return m;
}

int txl_model_save(const txl_model *m, const char *path, txl_err *e)
{
    api_err_clear(e);
    const char **meta = calloc((size_t)m->n_meta * 2 + 1, sizeof *meta);
    if (!meta)
        return err_set(e, ERR_RUNTIME, "out of memory");
    for (int i = 0; i < m->n_meta; i++) {
        meta[2 * i] = m->meta_keys[i];
        meta[2 * i + 1] = m->meta_vals[i];
    }
    size_t n = strlen(path);
    int gz = n > 3 && strcmp(path + n - 3, ".gz") == 0;
    ckpt_vocab cv = {0};
    uint8_t *vb = NULL;
    int rc = m->vocab ? vocab_serialize(m->vocab, &vb, &cv.len, e) : 0;
    cv.bytes = vb;
    if (!rc)
        rc = ckpt_save(path, &m->mdl, NULL, NULL, NULL, m->vocab ? &cv : NULL, meta,
                       gz ? 6 : 0, e);
    free(vb);
    free(meta);
    return rc;
}

int txl_model_quantize(txl_model *m, const char *type, txl_err *e)
{
    api_err_clear(e);
    qtype t = strcmp(type, "q8") == 0 ? QT_Q8 : strcmp(type, "bf16") == 0 ? QT_BF16 : QT_F32;
    if (t == QT_F32)
        return err_set(e, ERR_INPUT, "quantize type '%s': expected bf16 or q8", type);
    if (quant_model(&m->mdl, t, e))
        return -1;
    return api_model_set_meta(m, "quantized", type) ? err_set(e, ERR_RUNTIME, "out of memory")
                                                   : 0;
}

const char *txl_model_quant(const txl_model *m) { return qtype_name(quant_model_type(&m->mdl)); }

size_t txl_model_weight_bytes(const txl_model *m)
{
    size_t n = 0;
    for (int i = 0; i < m->mdl.n_params; i++) {
        const param_entry *p = &m->mdl.table[i];
        const qmat *q = quant_of(&m->mdl, i);
        n += q ? qtype_bytes(q->type, (size_t)q->rows, (size_t)q->cols) : p->numel * 4;
    }
    return n;
}

const txl_config *txl_model_config(const txl_model *m) { return &m->cfg; }
const char *txl_model_path(const txl_model *m) { return m->has_file ? m->f.path : NULL; }
int txl_model_from_dir(const txl_model *m) { return m->from_dir; }
size_t txl_model_params(const txl_model *m) { return m->mdl.n_weights; }
int txl_model_vocab(const txl_model *m) { return m->mdl.cfg.vocab; }

size_t txl_model_token_text_max(const txl_model *m)
{
    if (!m->vocab)
        return 1; /* a byte (an anchor adds none) */
    size_t most = 1; /* a word-level <eos>: "\n" */
    for (size_t t = 0; t < vocab_size(m->vocab); t++) {
        size_t n;
        vocab_piece(m->vocab, (txl_tok)t, &n);
        most = n > most ? n : most;
    }
    return most + (vocab_get_kind(m->vocab) == VOCAB_WORD); /* a word's separating space */
}
long txl_model_step(const txl_model *m) { return m->step; }

const char *txl_model_meta(const txl_model *m, const char *key)
{
    for (int i = 0; i < m->n_meta; i++)
        if (strcmp(m->meta_keys[i], key) == 0)
            return m->meta_vals[i];
    return NULL;
}

int txl_model_tensor(const txl_model *m, int i, txl_tensor *t)
{
    memset(t, 0, sizeof *t);
    if (m->has_file) {
        if (i < 0 || i >= m->f.n)
            return -1;
        const st_tensor *s = &m->f.t[i];
        t->name = s->name;
        t->dtype = st_dtype_name(s->dtype);
        t->ndim = s->ndim < 4 ? s->ndim : 4;
        for (int k = 0; k < t->ndim; k++)
            t->shape[k] = s->shape[k];
        return 0;
    }
    if (i < 0 || i >= m->mdl.n_params)
        return -1;
    const param_entry *p = &m->mdl.table[i];
    t->name = p->name;
    t->dtype = "F32";
    t->ndim = p->ndim;
    t->shape[0] = p->shape[0];
    t->shape[1] = p->shape[1];
    return 0;
}

void txl_model_free(txl_model *m)
{
    if (!m)
        return;
    model_free(&m->mdl);
    vocab_free(m->vocab);
    st_free(&m->f);
    meta_free(m);
    free(m);
}

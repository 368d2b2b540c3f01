/* check.c: validation of a whole config (the rules between keys, and sizes counted from the
 * model's parameter table and activation plan) and the model diff of a resume. */
#include "config_impl.h"
#include "../data/units.h"
#include "../model/model.h"
#include "../model/pos.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

/* ---------------------------------------------------------------------------------------
 * Validation */

static int validate_fail(txl_err *e, const char *origin, const char *why)
{
    if (origin)
        return err_set(e, ERR_INPUT, "%s: %s", origin, why);
    return err_set(e, ERR_INPUT, "%s", why);
}

/* The vocabulary keys (doc/design.md, "Vocabularies"): bytes need none of them; word and
 * bpe take a prepared vocabulary or build one from the train split, not both. */
static int check_vocab(const data_config *d, char *why, size_t cap)
{
    vocab_kind k = VOCAB_BYTE;
    vocab_kind_parse(d->tokenizer, &k);
    if (k == VOCAB_BYTE) {
        const char *key = d->vocab[0] ? "vocab" : d->vocab_size ? "vocab_size"
                          : d->min_freq ? "min_freq" : NULL;
        if (key)
            snprintf(why, cap, "data.%s applies to the word and bpe tokenizers, found "
                     "data.tokenizer byte (256 tokens, one per byte)", key);
        return key ? -1 : 0;
    }
    if (d->vocab[0] && (d->vocab_size || d->min_freq)) {
        snprintf(why, cap, "data.%s builds a vocabulary, and data.vocab names a prepared one: "
                 "give one of them", d->vocab_size ? "vocab_size" : "min_freq");
        return -1;
    }
    if (k == VOCAB_BPE && d->min_freq) {
        snprintf(why, cap, "data.min_freq applies to the word tokenizer, found bpe");
        return -1;
    }
    if (k == VOCAB_BPE && d->vocab_size && d->vocab_size < TXL_BYTES + 1) {
        snprintf(why, cap, "data.vocab_size: a bpe vocabulary has the 256 bytes and at least "
                 "one merge, found %ld", d->vocab_size);
        return -1;
    }
    return 0;
}

/* The model as validation sees it. A word or bpe vocabulary that is not attached yet
 * (data.vocab_tokens 0: it is built from the train split after the first check, and the
 * config is validated again once it is, cfg_attach_vocab) has no V yet: until then V is the
 * least the cutoffs allow. */
static model_config checked_model(const run_config *c)
{
    model_config m = c->model;
    const int *last = m.cutoffs.n > 0 ? &m.cutoffs.v[m.cutoffs.n - 1] : NULL;
    if (cfg_tokenizer(c) != VOCAB_BYTE && c->data.vocab_tokens == 0 && last && m.vocab <= *last)
        m.vocab = *last < INT_MAX ? *last + 1 : INT_MAX;
    return m;
}

/* Rules between keys (each key alone is fine): 0, or -1 with the message in why. */
static int check_cross(const run_config *c, char *why, size_t cap)
{
    char a[64], b[64];
    const model_config mm = checked_model(c), *m = &mm;
    const train_config *t = &c->train;
    if (t->lr_min > t->lr) {
        cfg_fmt_double(a, sizeof a, t->lr);
        cfg_fmt_double(b, sizeof b, t->lr_min);
        snprintf(why, cap, "train.lr_min must be <= train.lr (%s), found %s", a, b);
        return -1;
    }
    if (t->skip_outlier > 0 && t->skip_outlier <= 1) {
        cfg_fmt_double(a, sizeof a, t->skip_outlier);
        snprintf(why, cap, "train.skip_outlier must be 0 (off) or > 1 (a multiple of the "
                 "mean gradient norm), found %s", a);
        return -1;
    }
    if (t->schedule == LR_COSINE && t->warmup_steps >= t->max_steps) {
        snprintf(why, cap, "train.warmup_steps must be < train.max_steps (%ld) with schedule "
                 "cosine, found %ld", t->max_steps, t->warmup_steps);
        return -1;
    }
    if (t->schedule_by == SCHED_BY_TIME && !(t->max_minutes > 0)) {
        snprintf(why, cap, "train.schedule_by time needs train.max_minutes > 0 (the budget "
                 "the schedule spans), found 0");
        return -1;
    }
    if (c->data.valid[0] == '\0' && !(c->data.split[1] > 0)) {
        cfg_fmt_double(a, sizeof a, c->data.split[1]);
        snprintf(why, cap, "data.split: the valid fraction must be > 0 when data.valid is "
                 "empty (the valid split comes from data.train), found %s", a);
        return -1;
    }
    if (m->pos != POS_XL && t->term_stats_interval > 0) {
        snprintf(why, cap, "train.term_stats_interval applies to pos_scheme xl only (the "
                 "statistics of its four score terms), found pos_scheme %s with "
                 "term_stats_interval %ld; set it to 0", pos_get(m->pos)->name,
                 t->term_stats_interval);
        return -1;
    }
    if (m->pos != POS_XL && m->xl_off) {
        snprintf(why, cap, "model.xl_terms applies to pos_scheme xl only, found pos_scheme %s "
                 "with xl_terms other than abcd", pos_get(m->pos)->name);
        return -1;
    }
    if (check_vocab(&c->data, why, cap))
        return -1;
    const pos_ops *ops = pos_get(m->pos);
    if (ops->validate && ops->validate(m, why, cap))
        return -1;
    return adapt_validate(m, why, cap); /* the cutoffs below V, the clusters' widths */
}

/* Sizes: each key may be in range while their product is absurd (and would overflow the
 * size arithmetic of the model's plan); such configs are errors, not crashes. */
static int check_sizes(const run_config *c, char *why, size_t cap)
{
    const model_config mm = checked_model(c), *m = &mm;
    const train_config *t = &c->train;
    /* Shapes are ints in the model: keep [3*H*dh, d] and klen = M + Lq representable. */
    if (3LL * m->n_head * m->d_head > INT_MAX) {
        snprintf(why, cap, "model.n_head * model.d_head must be <= %d, found %d * %d",
                 INT_MAX / 3, m->n_head, m->d_head);
        return -1;
    }
    if ((long long)m->tgt_len + m->mem_len > INT_MAX) {
        snprintf(why, cap, "model.tgt_len + model.mem_len must be <= %d, found %d + %d",
                 INT_MAX, m->tgt_len, m->mem_len);
        return -1;
    }
    /* the parameter table and the activation plan, counted (model/params.c, plan.c) */
    model_count mc;
    txl_err me = {0};
    if (model_counts(m, &mc, &me) != 0) {
        snprintf(why, cap, "%.700s", me.msg);
        return -1;
    }
    if (mc.weights > CFG_MAX_PARAMS) {
        snprintf(why, cap,
                 "the model is too large: %.3g parameters (model.n_layer %d, d_model %d, "
                 "n_head %d, d_head %d, d_inner %d, and the scheme's), more than txl's limit "
                 "of %.3g", mc.weights, m->n_layer, m->d_model, m->n_head, m->d_head,
                 m->d_inner, CFG_MAX_PARAMS);
        return -1;
    }
    /* gradient accumulation: batch_size x grad_accum streams, each with its memory */
    double streams = (double)t->batch_size * t->grad_accum;
    if (streams > INT_MAX) {
        snprintf(why, cap, "train.batch_size x train.grad_accum (the streams of one update) "
                 "must be <= %d, found %d x %d", INT_MAX, t->batch_size, t->grad_accum);
        return -1;
    }
    double acts;
    if (acts_plan_floats(m, t->batch_size, m->tgt_len, m->mem_len, 1, &acts, &me) != 0) {
        snprintf(why, cap, "%.700s", me.msg);
        return -1;
    }
    if (acts > CFG_MAX_PLAN) {
        snprintf(why, cap,
                 "a training step is too large: %.3g floats of activations (train."
                 "batch_size %d x model.tgt_len %d, model.mem_len %d, n_layer %d, d_model %d), "
                 "more than txl's limit of %.3g", acts, t->batch_size, m->tgt_len, m->mem_len,
                 m->n_layer, m->d_model, CFG_MAX_PLAN);
        return -1;
    }
    /* every stream of an update keeps its memory (with grad_accum 1 the activations
     * above bound it, so only accumulation gets here) */
    double memf = mem_plan_bytes(m, (int)streams, m->mem_len) / sizeof(float);
    if (memf > CFG_MAX_PLAN) {
        snprintf(why, cap,
                 "the memory is too large: about %.3g floats (train.batch_size %d x "
                 "grad_accum %d streams x model.n_layer %d x mem_len %d x d_model %d), more "
                 "than txl's limit of %.3g", memf, t->batch_size, t->grad_accum, m->n_layer,
                 m->mem_len, m->d_model, CFG_MAX_PLAN);
        return -1;
    }
    return 0;
}

int cfg_validate(const run_config *c, const char *origin, txl_err *e)
{
    char why[768], a[64];
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        const cfg_key *k = &cfg_keys[i];
        cfg_value v;
        cfg_key_get(k, c, &v);
        if (cfg_key_check(k, &v, why, sizeof why) != 0)
            return validate_fail(e, origin, why);
        /* Required paths are checked here, not per value: a file may leave data.train out
         * (or write "" as a dump of an unfinished config does) and get it from --set. */
        if (k->type == CT_PATH && (k->flags & F_REQUIRED) && v.s[0] == '\0') {
            cfg_key_fullname(k, a, sizeof a);
            snprintf(why, sizeof why, "%s is required: expected a non-empty path, found \"\"",
                     a);
            return validate_fail(e, origin, why);
        }
    }
    if (check_cross(c, why, sizeof why) != 0 || check_sizes(c, why, sizeof why) != 0)
        return validate_fail(e, origin, why);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Diffs */

/* Appends to buf (always NUL-terminated, truncating when full). */
static void append(char *buf, size_t cap, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t cap, size_t *used, const char *fmt, ...)
{
    if (!cap || *used >= cap - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, cap - *used, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used = *used + (size_t)n < cap - 1 ? *used + (size_t)n : cap - 1;
}

int cfg_diff_model(const model_config *a, const model_config *b, char *buf, size_t cap)
{
    run_config ca, cb;
    char va[128], vb[128];
    size_t used = 0;
    int n = 0;
    memset(&ca, 0, sizeof ca);
    memset(&cb, 0, sizeof cb);
    ca.model = *a;
    cb.model = *b;
    if (cap)
        buf[0] = '\0';
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        const cfg_key *k = &cfg_keys[i];
        if (strcmp(k->section, "model") != 0)
            continue;
        cfg_value x, y;
        cfg_key_get(k, &ca, &x);
        cfg_key_get(k, &cb, &y);
        /* Shortest round-trip text differs exactly when the stored values differ. */
        cfg_fmt_value(k, &x, va, sizeof va);
        cfg_fmt_value(k, &y, vb, sizeof vb);
        if (strcmp(va, vb) != 0)
            append(buf, cap, &used, "%smodel.%s: %s vs %s", n++ ? ", " : "", k->name, va, vb);
    }
    if (a->vocab != b->vocab)
        append(buf, cap, &used, "%smodel.vocab: %d vs %d", n++ ? ", " : "", a->vocab, b->vocab);
    return n;
}

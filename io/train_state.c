/* train_state.c: see train_state.h. Counts are integers in [0, 2^53] (exact in a double,
 * so any JSON reader of the header sees them exactly), the seed any integer below 2^64,
 * numbers finite and >= 0 ("inf" only where a key allows it). Numbers are written with
 * "%.17g", which reads back to the same double. */
#include "train_state.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    SK_LONG,  /* long count */
    SK_LLONG, /* long long count */
    SK_SIZE,  /* size_t count */
    SK_U64,   /* unsigned long long, the whole range */
    SK_REAL,  /* double >= 0, finite unless a flag says */
} state_type;

enum {
    SK_INF = 1,        /* "inf" is a value (no validation yet) */
    SK_NAN = 2,        /* "nan" is a value (no validation at this step) */
    SK_WRITE_ONLY = 4, /* for readers of the file; --resume does not need it */
    SK_OPTIONAL = 8,   /* absent in checkpoints of txl before it: train_state_read derives it */
};

typedef struct {
    const char *key;
    state_type type;
    size_t off;
    unsigned flags;
} state_key;

#define SK(k, ty, f, fl) { k, ty, offsetof(train_state, f), fl }
static const state_key skeys[] = {
    SK("step", SK_LONG, step, 0),
    SK("tokens", SK_LLONG, tokens, 0),
    SK("best_valid_loss", SK_REAL, best_valid, SK_INF),
    SK("valid_loss", SK_REAL, valid_loss, SK_INF | SK_NAN | SK_WRITE_ONLY),
    SK("best_valid_bpc", SK_REAL, best_valid_bpc, SK_INF | SK_OPTIONAL),
    SK("valid_bpc", SK_REAL, valid_bpc, SK_INF | SK_NAN | SK_WRITE_ONLY),
    SK("epoch", SK_LONG, epoch, 0),
    SK("data_pos", SK_SIZE, data_pos, 0),
    SK("train_split_tokens", SK_SIZE, train_tokens, 0),
    SK("seed", SK_U64, seed, 0),
    SK("log_loss_sum", SK_REAL, log_sum, 0),
    SK("log_steps", SK_LONG, log_n, 0),
    SK("elapsed_s", SK_REAL, elapsed, 0),
    SK("grad_norm_mean", SK_REAL, norm_mean, 0),
    SK("grad_norm_count", SK_LONG, norm_count, 0),
    SK("skipped_steps", SK_LONG, skipped, 0),
    SK("params", SK_SIZE, params, 0),
};
_Static_assert(sizeof skeys / sizeof skeys[0] == TRAIN_STATE_KEYS, "TRAIN_STATE_KEYS");

#define MAX_COUNT (1ULL << 53)

/* The index of a key in skeys (one of the table's keys). */
static int key_index(const char *key)
{
    int i = 0;
    while (i < TRAIN_STATE_KEYS - 1 && strcmp(skeys[i].key, key) != 0)
        i++;
    return i;
}

static unsigned long long get_int(const state_key *k, const train_state *s)
{
    const char *p = (const char *)s + k->off;
    switch (k->type) {
    case SK_LONG: return (unsigned long long)*(const long *)p;
    case SK_LLONG: return (unsigned long long)*(const long long *)p;
    case SK_SIZE: return *(const size_t *)p;
    default: return *(const unsigned long long *)p;
    }
}

static void put_int(const state_key *k, train_state *s, unsigned long long v)
{
    char *p = (char *)s + k->off;
    switch (k->type) {
    case SK_LONG: *(long *)p = (long)v; break;
    case SK_LLONG: *(long long *)p = (long long)v; break;
    case SK_SIZE: *(size_t *)p = (size_t)v; break;
    default: *(unsigned long long *)p = v; break;
    }
}

void train_state_format(const train_state *s, train_state_meta *m)
{
    for (int i = 0; i < TRAIN_STATE_KEYS; i++) {
        const state_key *k = &skeys[i];
        if (k->type == SK_REAL)
            snprintf(m->buf[i], sizeof m->buf[i], "%.17g",
                     *(const double *)((const char *)s + k->off));
        else if (k->type == SK_U64)
            snprintf(m->buf[i], sizeof m->buf[i], "%llu", get_int(k, s));
        else /* counts are never negative */
            snprintf(m->buf[i], sizeof m->buf[i], "%lld", (long long)get_int(k, s));
        m->kv[2 * i] = k->key;
        m->kv[2 * i + 1] = m->buf[i];
    }
    m->kv[2 * TRAIN_STATE_KEYS] = NULL;
}

/* Decimal digits only (no sign, blank or exponent), at most max. */
static int parse_int(const char *s, unsigned long long max, unsigned long long *v)
{
    if (!*s || strspn(s, "0123456789") != strlen(s))
        return -1;
    errno = 0;
    *v = strtoull(s, NULL, 10);
    return errno == ERANGE || *v > max ? -1 : 0;
}

/* A decimal number >= 0 (no hex, inf or nan unless flags allow those spellings). */
static int parse_real(const char *s, unsigned flags, double *x)
{
    if ((flags & SK_INF) && strcmp(s, "inf") == 0)
        return *x = INFINITY, 0;
    if ((flags & SK_NAN) && (strcmp(s, "nan") == 0 || strcmp(s, "-nan") == 0))
        return *x = NAN, 0;
    if (!*s || strspn(s, "0123456789.eE+-") != strlen(s))
        return -1;
    char *end;
    errno = 0;
    *x = strtod(s, &end);
    if (*end || (errno == ERANGE && fabs(*x) > 1) || !isfinite(*x) || *x < 0)
        return -1;
    return 0;
}

/* Key k of f's metadata into *w: 0, 1 when absent, -1 with e when it is not valid. */
static int read_key(const state_key *k, const st_file *f, train_state *w, txl_err *e)
{
    const char *v = st_meta(f, k->key);
    if (!v)
        return 1;
    const char *want;
    int rc;
    if (k->type == SK_REAL) {
        want = k->flags & SK_NAN ? "a number >= 0, inf or nan"
               : k->flags & SK_INF ? "a number >= 0 or inf" : "a finite number >= 0";
        rc = parse_real(v, k->flags, (double *)((char *)w + k->off));
    } else {
        unsigned long long x;
        want = k->type == SK_U64 ? "an integer in [0, 2^64)" : "an integer in [0, 2^53]";
        rc = parse_int(v, k->type == SK_U64 ? ~0ULL : MAX_COUNT, &x);
        if (rc == 0)
            put_int(k, w, x);
    }
    if (rc != 0)
        return err_set(e, ERR_INPUT, "%s: metadata '%s' must be %s, found '%.40s'", f->path,
                       k->key, want, v);
    return 0;
}

int train_state_read(train_state *s, const st_file *f, txl_err *e)
{
    train_state w = *s;
    for (int i = 0; i < TRAIN_STATE_KEYS; i++) {
        const state_key *k = &skeys[i];
        if (k->flags & SK_WRITE_ONLY)
            continue;
        int rc = read_key(k, f, &w, e);
        if (rc < 0)
            return -1;
        if (rc > 0 && (k->flags & SK_OPTIONAL)) /* best_valid_bpc: a byte model's, then */
            w.best_valid_bpc = w.best_valid / M_LN2;
        else if (rc > 0)
            return err_set(e, ERR_INPUT, "%s: metadata '%s' is missing (not a checkpoint txl "
                           "wrote for --resume?)", f->path, k->key);
    }
    *s = w;
    return 0;
}

int train_state_check(const st_file *f, const train_run *r, txl_err *e)
{
    train_state w = {0};
    unsigned have = 0; /* bit i: skeys[i] is present */
    for (int i = 0; i < TRAIN_STATE_KEYS; i++) {
        int rc = read_key(&skeys[i], f, &w, e);
        if (rc < 0)
            return -1;
        have |= (rc == 0 ? 1u : 0u) << i;
    }
#define HAS(k) (have >> key_index(k) & 1)
    if (HAS("params") && w.params != r->params)
        return err_set(e, ERR_INPUT, "%s: metadata 'params' is %zu, but the model of its config "
                       "has %zu parameters", f->path, w.params, r->params);
    if (!HAS("step"))
        return 0;
    /* every step is either applied (counted in the gradient norm's running mean) or
     * skipped as an outlier */
    if (HAS("grad_norm_count") && HAS("skipped_steps") && w.norm_count + w.skipped != w.step)
        return err_set(e, ERR_INPUT, "%s: metadata 'grad_norm_count' %ld + 'skipped_steps' %ld "
                       "is not 'step' %ld (every step is applied or skipped)", f->path,
                       w.norm_count, w.skipped, w.step);
    if (HAS("epoch") && w.epoch > w.step)
        return err_set(e, ERR_INPUT, "%s: metadata 'epoch' %ld is more than 'step' %ld (an "
                       "epoch takes a step at least)", f->path, w.epoch, w.step);
    if (HAS("log_steps") && w.log_n > w.step)
        return err_set(e, ERR_INPUT, "%s: metadata 'log_steps' %ld is more than 'step' %ld",
                       f->path, w.log_n, w.step);
    /* each step feeds every stream one segment of 1 to tgt_len tokens */
    double lo = (double)w.step * r->streams, hi = lo * r->tgt_len;
    if (HAS("tokens") && ((double)w.tokens < lo || (double)w.tokens > hi))
        return err_set(e, ERR_INPUT, "%s: metadata 'tokens' %lld does not fit 'step' %ld: each "
                       "step feeds train.batch_size x grad_accum = %d streams 1 to model.tgt_len "
                       "= %d tokens each (so %.0f to %.0f tokens)", f->path, w.tokens, w.step,
                       r->streams, r->tgt_len, lo, hi);
#undef HAS
    return 0;
}

/* cli.c: see cli.h. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/dist.h"
#include "../common/par.h"
#include "../model/checkpoint.h"

/* OpenBLAS extensions (declared here: cblas.h of some versions lacks them). */
char *openblas_get_corename(void);

int cli_fail(const char *cmd, const txl_err *e)
{
    if (dist_is_root()) /* under MPI every rank fails alike: say it once */
        fprintf(stderr, "txl %s: %s\n", cmd, e->msg);
    return e->kind == ERR_INPUT ? 2 : 1;
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "txl %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'txl help %s')\n", cmd);
    return 2;
}

int cli_switch(const char *arg, const char *name) { return strcmp(arg, name) == 0; }

int cli_flag(int argc, char **argv, int *i, const char *short_, const char *long_,
             const char **val)
{
    const char *a = argv[*i];
    *val = NULL;
    if ((short_ && strcmp(a, short_) == 0) || (long_ && strcmp(a, long_) == 0)) {
        if (*i + 1 >= argc)
            return -1;
        *val = argv[++*i];
        return 1;
    }
    if (long_) {
        size_t n = strlen(long_);
        if (strncmp(a, long_, n) == 0 && a[n] == '=') {
            *val = a + n + 1;
            return 1;
        }
    }
    return 0;
}

int cli_long(const char *flag, const char *s, long min, long max, long *out, txl_err *e)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || isspace((unsigned char)*s)) /* strtol would skip blanks */
        return err_set(e, ERR_INPUT, "%s: expected an integer, found '%s'", flag, s);
    if (v < min || v > max)
        return err_set(e, ERR_INPUT, "%s: %ld is out of range [%ld, %ld]", flag, v, min, max);
    *out = v;
    return 0;
}

int cli_double(const char *flag, const char *s, double min, double max, double *out,
               txl_err *e)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || isspace((unsigned char)*s))
        return err_set(e, ERR_INPUT, "%s: expected a number, found '%s'", flag, s);
    if (v < min || v > max)
        return err_set(e, ERR_INPUT, "%s: %g is out of range [%g, %g]", flag, v, min, max);
    *out = v;
    return 0;
}

int cli_int_list(const char *flag, const char *s, int *out, int cap, int *n, txl_err *e)
{
    *n = 0;
    const char *p = s;
    if (!*p)
        return err_set(e, ERR_INPUT, "%s: expected a comma-separated list like 1,2,4,8, found ''",
                       flag);
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > 1024 || (*end && *end != ','))
            return err_set(e, ERR_INPUT, "%s: expected a comma-separated list of integers in "
                           "[1, 1024] like 1,2,4,8, found '%s'", flag, s);
        if (*n == cap)
            return err_set(e, ERR_INPUT, "%s: at most %d values", flag, cap);
        out[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p)
            return err_set(e, ERR_INPUT, "%s: trailing comma in '%s'", flag, s);
    }
    return 0;
}

/* Before the model is built: the config in the metadata must agree with the tensors in
 * size, so a damaged config cannot make txl allocate a model far larger than the file
 * (DESIGN.md §5: validate everything before touching the model). word_emb.weight gives
 * d_model, the last layer's qkv gives n_layer, and the weights every scheme has (qkv, o,
 * ff.0, ff.3 of each layer) must fit in the file's parameter bytes. ckpt_load_weights then
 * checks every name, dtype and shape exactly. */
int cli_check_config_tensors(const st_file *f, const model_config *m, const char *path,
                             txl_err *e)
{
    const st_tensor *t = st_find(f, "word_emb.weight");
    if (!t)
        return err_set(e, ERR_INPUT, "%s: missing tensor 'word_emb.weight'", path);
    if (t->ndim != 2 || t->shape[0] != m->vocab || t->shape[1] != m->d_model)
        return err_set(e, ERR_INPUT, "%s: tensor 'word_emb.weight' has %d dimensions [%lld, "
                       "%lld%s], but the config in the checkpoint (model.d_model %d) implies "
                       "[%d, %d]", path, t->ndim, (long long)(t->ndim > 0 ? t->shape[0] : 0),
                       (long long)(t->ndim > 1 ? t->shape[1] : 0), t->ndim > 2 ? ", ..." : "",
                       m->d_model, m->vocab, m->d_model);
    char nm[64];
    snprintf(nm, sizeof nm, "layers.%d.attn.qkv.weight", m->n_layer - 1);
    if (!st_find(f, nm))
        return err_set(e, ERR_INPUT, "%s: missing tensor '%s', which the config in the "
                       "checkpoint (model.n_layer %d) requires", path, nm, m->n_layer);
    size_t have = 0;
    for (int i = 0; i < f->n; i++)
        if (strncmp(f->t[i].name, "optim.", 6) != 0 && strncmp(f->t[i].name, "state.", 6) != 0)
            have += f->t[i].end - f->t[i].begin;
    double d = m->d_model, hd = (double)m->n_head * m->d_head, di = m->d_inner;
    double need = 4.0 * m->n_layer * (4 * hd * d + 2 * di * d);
    if (need > (double)have)
        return err_set(e, ERR_INPUT, "%s: the config in the checkpoint (model.n_layer %d, "
                       "d_model %d, n_head %d, d_head %d, d_inner %d) needs at least %.0f bytes "
                       "of weights, but the file's tensors hold %zu", path, m->n_layer,
                       m->d_model, m->n_head, m->d_head, m->d_inner, need, have);
    return 0;
}

int cli_meta_count(const st_file *f, const char *key, long long def, long long *out,
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

int cli_load_checkpoint(const char *path, st_file *f, txl_config *cfg, model *mdl, txl_err *e)
{
    memset(mdl, 0, sizeof *mdl);
    if (st_read(f, path, e))
        return -1;
    const char *text = st_meta(f, "config");
    if (!text) {
        st_free(f);
        return err_set(e, ERR_INPUT, "%s: no 'config' in the metadata (not a txl checkpoint; "
                       "use 'txl import' for plain weights)", path);
    }
    cfg_defaults(cfg);
    if (cfg_load_meta(cfg, text, path, e) || cfg_validate(cfg, path, e) ||
        cli_check_config_tensors(f, &cfg->model, path, e) ||
        model_init(mdl, &cfg->model, e) || ckpt_load_weights(mdl, f, e)) {
        model_free(mdl);
        st_free(f);
        return -1;
    }
    return 0;
}

int cli_threads(int n) { return par_set_threads(n); }

const char *cli_blas_core(void)
{
    static char buf[160];
    const char *c = openblas_get_corename();
    const char *was = getenv("TXL_BLAS_DETECTED");
    if (was && *was)
        snprintf(buf, sizeof buf, "%s (chosen by txl; OpenBLAS detected %s)", c ? c : "?", was);
    else
        snprintf(buf, sizeof buf, "%s", c ? c : "unknown");
    return buf;
}

int cli_isatty_stderr(void) { return isatty(2); }

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void cli_fmt_duration(char *buf, size_t cap, double s)
{
    if (!(s >= 0) || s > 1e8)
        snprintf(buf, cap, "?");
    else if (s >= 3600)
        snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60)
        snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(buf, cap, "%.0fs", s);
}

/* cli.c: see cli.h. */
#include "cli.h"

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
    if (!*s || *end || errno)
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
    if (!*s || *end || errno || !isfinite(v))
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

int cli_load_checkpoint(const char *path, st_file *f, txl_config *cfg, model *mdl, txl_err *e)
{
    memset(mdl, 0, sizeof *mdl);
    if (st_read(f, path, e))
        return -1;
    const char *js = st_meta(f, "config");
    if (!js) {
        st_free(f);
        return err_set(e, ERR_INPUT, "%s: no 'config' in the metadata (not a txl checkpoint; "
                       "use 'txl import' for plain weights)", path);
    }
    cfg_defaults(cfg);
    if (cfg_from_json(cfg, js, path, e) || cfg_validate(cfg, path, e) ||
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

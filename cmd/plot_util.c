/* plot_util.c: what the parts of `txl plot` share (plot.h): series of points, the JSON-lines
 * reader of logs and result files (damaged lines skipped and counted), a run's log path and
 * legend name, and gnuplot's quoting and header. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/line.h"
#include "cli.h"
#include "plot.h"

const char *const plot_palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

int pt_push(series *s, double x, double y, long step)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        point *np = realloc(s->p, cap * sizeof *np);
        if (!np)
            return -1;
        s->p = np;
        s->cap = cap;
    }
    s->p[s->n++] = (point){x, y, step, NAN};
    return 0;
}

series *list_add(series_list *l)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        series *ns = realloc(l->s, cap * sizeof *ns);
        if (!ns)
            return NULL;
        l->s = ns;
        l->cap = cap;
    }
    series *s = &l->s[l->n++];
    memset(s, 0, sizeof *s);
    return s;
}

void list_free(series_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->s[i].label);
        free(l->s[i].mode);
        free(l->s[i].p);
    }
    free(l->s);
    memset(l, 0, sizeof *l);
}

char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int num_field(const cJSON *o, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return 0;
    *out = v->valuedouble;
    return 1;
}

const char *str_field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int int_field(const cJSON *o, const char *key, double lo, double hi, const char *path, long ln,
              long *out, txl_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        return 0;
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (d >= lo && d <= hi && d == floor(d)) { /* false for NaN: not a number */
        *out = (long)d;
        return 1;
    }
    char found[48];
    if (cJSON_IsNumber(v))
        snprintf(found, sizeof found, "%.15g", d);
    else
        snprintf(found, sizeof found, "%s", cJSON_IsString(v) ? "a string"
                                            : cJSON_IsNull(v) ? "null"
                                            : cJSON_IsBool(v) ? "a boolean"
                                                              : "an array or object");
    return err_set(e, ERR_INPUT, "%s:%ld: '%s' must be a whole number in [%.0f, %.0f], found %s",
                   path, ln, key, lo, hi, found);
}

/* A line that is not a JSON object may be the one a run was writing when it was killed:
 * the last line of the file, or (once the run resumed, which starts on a new line) the line
 * before a start event. A line may also hold such a cut line with the
 * resumed run's start event glued to it: the object that begins at the last `{"event":` of
 * the line is read, the cut part skipped (logs of a txl that appended without that newline). */
static cJSON *recover_glued(const char *line)
{
    const char *p = NULL;
    for (const char *q = strstr(line + 1, "{\"event\":"); q; q = strstr(q + 1, "{\"event\":"))
        p = q;
    cJSON *o = p ? cJSON_Parse(p) : NULL;
    if (o && !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        o = NULL;
    }
    return o;
}

static int is_start(const cJSON *o)
{
    const char *ev = str_field(o, "event");
    return ev && strcmp(ev, "start") == 0;
}

/* The most a line of a log may hold: txl's longest events (a start event's argv, a terms
 * event of many layers) are far below it. The bound keeps a file without newlines
 * (/dev/zero, a binary) from taking all memory. */
#define PLOT_LINE_MAX (64L << 20)

/* Calls fn(obj, line number, ctx) for every JSON line of path. Damaged lines (see
 * recover_glued) are skipped and counted on stderr; any other unparsable line is an error,
 * and so is a line longer than PLOT_LINE_MAX. */
int each_json_line(const char *path, int (*fn)(const cJSON *, long, void *), void *ctx,
                   long *nlines, txl_err *e)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return err_set(e, ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    long len;
    long ln = 0, pending = 0, damaged = 0, first_damaged = 0; /* pending: a bad line's number */
    int rc = 0;
    *nlines = 0;
    while (rc == 0 && (len = line_read(f, PLOT_LINE_MAX, &line, &cap)) > 0) {
        ln++;
        const char *p = line;
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
            p++;
        if (!*p)
            continue;
        cJSON *o = cJSON_Parse(line);
        if (o && !cJSON_IsObject(o)) {
            cJSON_Delete(o);
            o = NULL;
        }
        int glued = 0;
        if (!o) {
            cJSON *r = recover_glued(line);
            if (r && is_start(r)) {
                o = r;
                glued = 1;
            } else {
                cJSON_Delete(r);
            }
        }
        if (pending && !(o && is_start(o))) { /* a bad line in the middle of a run */
            rc = err_set(e, ERR_INPUT, "%s:%ld: not a JSON object", path, pending);
            cJSON_Delete(o);
            break;
        }
        if (pending || glued) {
            first_damaged = first_damaged ? first_damaged : pending ? pending : ln;
            damaged++;
            pending = 0;
        }
        if (!o) {
            pending = ln;
            continue;
        }
        (*nlines)++;
        rc = fn(o, ln, ctx);
        cJSON_Delete(o);
    }
    if (rc == 0 && pending) { /* the last line: a run still writing it, or killed */
        first_damaged = first_damaged ? first_damaged : pending;
        damaged++;
    }
    if (rc == 0 && len == -1)
        rc = err_set(e, ERR_INPUT, "%s:%ld: a line longer than %ld MiB (not a log or a result "
                     "file that txl writes)", path, ln + 1, PLOT_LINE_MAX >> 20);
    else if (rc == 0 && len == -2)
        rc = err_set(e, ERR_RUNTIME, "%s:%ld: cannot read: %s", path, ln + 1,
                     strerror(errno ? errno : EIO));
    if (rc == 0 && damaged)
        fprintf(stderr, "txl plot: %s: skipped %ld damaged line%s (from line %ld: cut by a "
                "run that was killed while writing it, or still being written)\n", path,
                damaged, damaged == 1 ? "" : "s", first_damaged);
    free(line);
    fclose(f);
    return rc;
}

/* ---- learning curves ---------------------------------------------------------------- */

int run_log_path(const char *arg, char *path, size_t cap, txl_err *e)
{
    struct stat sb;
    if (stat(arg, &sb) != 0)
        return err_set(e, ERR_INPUT, "%s: no such run directory or log file", arg);
    if (S_ISDIR(sb.st_mode)) {
        snprintf(path, cap, "%s%slog.jsonl", arg, arg[strlen(arg) - 1] == '/' ? "" : "/");
        if (access(path, F_OK) != 0)
            return err_set(e, ERR_INPUT, "%s: no log.jsonl in this directory (is it a txl run's "
                           "train.out_dir?)", arg);
    } else {
        snprintf(path, cap, "%s", arg);
    }
    return 0;
}

/* Legend name of a run: the directory's base name, or the whole argument when two runs
 * share a base name. */
void run_label(char *buf, size_t cap, const char *arg)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", arg);
    size_t n = strlen(tmp);
    while (n > 1 && tmp[n - 1] == '/')
        tmp[--n] = 0;
    if (n > 10 && strcmp(tmp + n - 10, "/log.jsonl") == 0)
        tmp[n -= 10] = 0;
    else if (strcmp(tmp, "log.jsonl") == 0)
        snprintf(tmp, sizeof tmp, ".");
    const char *b = strrchr(tmp, '/');
    snprintf(buf, cap, "%s", b && b[1] ? b + 1 : tmp);
}

/* The name of checkpoint path at a level: 0 its file's stem, 1 with its directory, 2 the
 * whole path; then ", step N". */
static void ckpt_label(char *buf, size_t cap, const char *path, long step, int level)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    size_t n = strlen(tmp);
    static const char *const ext[] = {".safetensors.gz", ".safetensors"};
    for (int k = 0; k < 2 && level < 2; k++) {
        size_t x = strlen(ext[k]);
        if (n > x && strcmp(tmp + n - x, ext[k]) == 0) {
            tmp[n -= x] = 0;
            break;
        }
    }
    const char *name = tmp;
    if (level < 2) {
        const char *b = strrchr(tmp, '/');
        if (b && level == 1) { /* back to the directory's name */
            const char *d = b;
            while (d > tmp && d[-1] != '/')
                d--;
            name = d;
        } else if (b) {
            name = b + 1;
        }
    }
    snprintf(buf, cap, "%s, step %ld", name, step);
}

void ckpt_labels(const char *const *paths, const long *steps, int n, char (*out)[PLOT_LABEL])
{
    for (int level = 0; level < 3; level++) {
        for (int i = 0; i < n; i++)
            ckpt_label(out[i], PLOT_LABEL, paths[i], steps[i], level);
        int same = 0;
        for (int i = 0; i < n && !same; i++)
            for (int j = 0; j < i && !same; j++)
                same = strcmp(out[i], out[j]) == 0;
        if (!same)
            return;
    }
}

/* ---- sweeps ------------------------------------------------------------------------- */

/* A gnuplot single-quoted string: '' stands for one quote. */
void gp_str(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        if (*s != '\n')
            fputc(*s, f);
    }
    fputc('\'', f);
}

void gp_header(FILE *f, const plot_opts *o, const char *title, const char *xlabel,
               const char *ylabel)
{
    if (o->svg)
        fprintf(f, "set terminal svg size %d,%d dynamic noenhanced font 'Sans,13' "
                "background rgb 'white'\n", o->width, o->height);
    else
        fprintf(f, "set terminal pngcairo size %d,%d noenhanced font 'Sans,11' "
                "background rgb 'white'\n", o->width, o->height);
    fputs("set output ", f);
    gp_str(f, o->out);
    fputs("\nset title ", f);
    gp_str(f, o->title ? o->title : title);
    fputs(" font ',14'\nset xlabel ", f);
    gp_str(f, xlabel);
    fputs("\nset ylabel ", f);
    gp_str(f, ylabel);
    fputs("\nset border 3 lw 1 lc rgb '#444444'\n"
          "set tics nomirror out\n"
          "set mxtics\nset mytics 2\n"
          "set grid xtics ytics mxtics mytics lt 1 lw 1 lc rgb '#e0e0e0', "
          "lt 1 lw 1 lc rgb '#f2f2f2'\n"
          "set offsets graph 0.01, graph 0.01, graph 0.03, graph 0.03\n"
          "set key top right opaque box lc rgb '#cccccc' spacing 1.2 samplen 3\n", f);
    if (isfinite(o->ymax))
        fprintf(f, "set yrange [:%g]\n", o->ymax);
}

/* ---- datablocks --------------------------------------------------------------------- */

int drawable(const point *p, int logx)
{
    return isfinite(p->x) && isfinite(p->y) && (!logx || p->x > 0);
}

size_t n_drawable(const series *s, int logx)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += drawable(&s->p[i], logx);
    return n;
}

void gp_block(FILE *f, const char *name, const series *s, double xscale, int logx,
              dropped_pts *d)
{
    fprintf(f, "$%s << EOD\n", name);
    for (size_t i = 0; i < s->n; i++) {
        const point *p = &s->p[i];
        if (drawable(p, logx))
            fprintf(f, "%.9g %.6f\n", p->x / xscale, p->y);
        else if (isfinite(p->x) && isfinite(p->y))
            d->zero_logx++;
        else
            d->not_finite++;
    }
    fputs("EOD\n", f);
}

void x_range(const series_list *l, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (size_t i = 0; i < l->n; i++)
        for (size_t k = 0; k < l->s[i].n; k++) {
            double x = l->s[i].p[k].x;
            if (!isfinite(x))
                continue;
            if (x > 0 && x < *lo)
                *lo = x;
            if (x > *hi)
                *hi = x;
        }
}

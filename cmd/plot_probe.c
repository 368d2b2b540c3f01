/* plot_probe.c: `txl plot --probe FILE.jsonl...` — the probes' results (txl probe ... --json)
 * as pictures: needle cells as heat maps (context length x depth, color = exact-match
 * accuracy, or with --gain the retrieval gain in bits), one panel per file (or scheme) and
 * mode; recall as the gain in bits per byte against the distance (log scale) with its 95%
 * interval, one color per file or scheme, dashed for the window mode. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"

#define MAX_PANELS 16
#define MAX_AXIS 32

typedef struct {
    char label[128], mode[16];
    int nx, ny;
    int xs[MAX_AXIS], ys[MAX_AXIS];  /* factors, depths */
    double v[MAX_AXIS][MAX_AXIS];    /* NAN: no cell */
} heat;

typedef struct {
    heat panels[MAX_PANELS];
    int n_heat;
    series_list recall;              /* y = gain, step = index into lo/hi */
    double *lo, *hi;
    size_t nci, capci;
    const char *file_label, *path;
    int gain;
    txl_err *e;
    size_t points;
} probe_data;

static int axis_index(int *axis, int *n, int v)
{
    for (int i = 0; i < *n; i++)
        if (axis[i] == v)
            return i;
    if (*n == MAX_AXIS)
        return -1;
    int i = (*n)++;
    while (i > 0 && axis[i - 1] > v) { /* keep the axis sorted */
        axis[i] = axis[i - 1];
        i--;
    }
    axis[i] = v;
    return i;
}

static heat *panel(probe_data *d, const char *label, const char *mode)
{
    for (int i = 0; i < d->n_heat; i++)
        if (!strcmp(d->panels[i].label, label) && !strcmp(d->panels[i].mode, mode))
            return &d->panels[i];
    if (d->n_heat == MAX_PANELS)
        return NULL;
    heat *h = &d->panels[d->n_heat++];
    memset(h, 0, sizeof *h);
    snprintf(h->label, sizeof h->label, "%s", label);
    snprintf(h->mode, sizeof h->mode, "%s", mode);
    return h;
}

/* Inserting into a sorted axis moves the cells: they are stored by value, so re-read. */
static int needle_row(probe_data *d, const cJSON *o, const char *label, long ln)
{
    double v;
    long f, dep;
    const char *mode = str_field(o, "mode");
    int hf = int_field(o, "factor", 1, INT_MAX, d->path, ln, &f, d->e);
    int hd = hf < 0 ? 0 : int_field(o, "depth", 0, 100, d->path, ln, &dep, d->e);
    if (hf < 0 || hd < 0) /* a fraction or a number past int: the file is not txl's */
        return -1;
    if (!hf || !hd || !num_field(o, d->gain ? "gain_bits" : "accuracy", &v))
        return err_set(d->e, ERR_INPUT, "%s:%ld: a needle row without factor, depth and %s",
                       d->path, ln, d->gain ? "gain_bits" : "accuracy");
    heat *h = panel(d, label, mode ? mode : "");
    if (!h)
        return err_set(d->e, ERR_INPUT, "%s:%ld: more than %d panels", d->path, ln, MAX_PANELS);
    int xs[MAX_AXIS], ys[MAX_AXIS], nx = h->nx, ny = h->ny;
    memcpy(xs, h->xs, sizeof xs);
    memcpy(ys, h->ys, sizeof ys);
    double old[MAX_AXIS][MAX_AXIS];
    memcpy(old, h->v, sizeof old);
    int ix = axis_index(h->xs, &h->nx, (int)f), iy = axis_index(h->ys, &h->ny, (int)dep);
    if (ix < 0 || iy < 0)
        return err_set(d->e, ERR_INPUT, "%s:%ld: more than %d lengths or depths", d->path, ln,
                       MAX_AXIS);
    for (int a = 0; a < h->nx; a++)
        for (int b = 0; b < h->ny; b++)
            h->v[a][b] = NAN;
    for (int a = 0; a < nx; a++)
        for (int b = 0; b < ny; b++)
            h->v[axis_index(h->xs, &h->nx, xs[a])][axis_index(h->ys, &h->ny, ys[b])] = old[a][b];
    h->v[ix][iy] = v;
    d->points++;
    return 0;
}

static int recall_row(probe_data *d, const cJSON *o, const char *label, long ln)
{
    double D, g;
    const cJSON *ci = cJSON_GetObjectItemCaseSensitive(o, "gain_bpc_ci");
    if (!num_field(o, "distance", &D))
        return 0; /* the effective-context summary line */
    if (!num_field(o, "gain_bpc", &g))
        return err_set(d->e, ERR_INPUT, "%s:%ld: a recall row without gain_bpc", d->path, ln);
    const char *mode = str_field(o, "mode");
    series *s = NULL;
    for (size_t i = 0; i < d->recall.n && !s; i++)
        if (!strcmp(d->recall.s[i].label, label) && !strcmp(d->recall.s[i].mode, mode ? mode : ""))
            s = &d->recall.s[i];
    if (!s) {
        if (!(s = list_add(&d->recall)) || !(s->label = dupstr(label)) ||
            !(s->mode = dupstr(mode ? mode : "")))
            return err_set(d->e, ERR_RUNTIME, "out of memory");
        s->group = (int)d->recall.n - 1;
    }
    if (d->nci == d->capci) {
        size_t cap = d->capci ? 2 * d->capci : 64;
        double *lo = realloc(d->lo, cap * sizeof *lo), *hi = lo ? realloc(d->hi, cap * sizeof *hi) : NULL;
        if (lo)
            d->lo = lo;
        if (!lo || !hi)
            return err_set(d->e, ERR_RUNTIME, "out of memory");
        d->hi = hi;
        d->capci = cap;
    }
    const cJSON *a = cJSON_IsArray(ci) ? cJSON_GetArrayItem(ci, 0) : NULL;
    const cJSON *b = cJSON_IsArray(ci) ? cJSON_GetArrayItem(ci, 1) : NULL;
    d->lo[d->nci] = cJSON_IsNumber(a) ? a->valuedouble : g;
    d->hi[d->nci] = cJSON_IsNumber(b) ? b->valuedouble : g;
    if (pt_push(s, D, g, (long)d->nci++))
        return err_set(d->e, ERR_RUNTIME, "out of memory");
    d->points++;
    return 0;
}

static int probe_line(const cJSON *o, long ln, void *ctx)
{
    probe_data *d = ctx;
    const char *kind = str_field(o, "probe"), *scheme = str_field(o, "pos_scheme");
    const char *label = scheme && d->file_label[0] == '\0' ? scheme : d->file_label;
    if (!kind)
        return err_set(d->e, ERR_INPUT, "%s:%ld: not a probe row (expected the output of "
                       "'txl probe ... --json')", d->path, ln);
    if (!strcmp(kind, "needle"))
        return needle_row(d, o, label, ln);
    if (!strcmp(kind, "recall"))
        return recall_row(d, o, label, ln);
    return 0; /* shift rows are a table, not a picture */
}

static void gp_heat(FILE *f, const probe_data *d, const plot_opts *o)
{
    int cols = d->n_heat < 2 ? 1 : 2, rows = (d->n_heat + cols - 1) / cols;
    gp_header(f, o, d->gain ? "needle in a haystack: retrieval gain (bits)"
                            : "needle in a haystack: exact-match accuracy",
              "context length (x trained context)");
    fprintf(f, "set ylabel 'needle depth (%%)'\nset palette defined (0 '#f7fbff', 0.5 '#6baed6', "
            "1 '#08306b')\n%s\nunset grid\nunset key\n",
            d->gain ? "set autoscale cbfix" : "set cbrange [0:1]");
    fprintf(f, "set multiplot layout %d,%d\n", rows, cols);
    for (int p = 0; p < d->n_heat; p++) {
        const heat *h = &d->panels[p];
        fprintf(f, "$heat%d << EOD\n", p);
        for (int a = 0; a < h->nx; a++)
            for (int b = 0; b < h->ny; b++)
                if (isfinite(h->v[a][b]))
                    fprintf(f, "%d %d %.6g\n", a, b, h->v[a][b]);
        fputs("EOD\nset title ", f);
        char t[200];
        snprintf(t, sizeof t, "%s%s%s", h->label, h->mode[0] ? ", " : "", h->mode);
        gp_str(f, t);
        fputs("\nset xtics (", f);
        for (int a = 0; a < h->nx; a++)
            fprintf(f, "%s'%dx' %d", a ? ", " : "", h->xs[a], a);
        fputs(")\nset ytics (", f);
        for (int b = 0; b < h->ny; b++)
            fprintf(f, "%s'%d' %d", b ? ", " : "", h->ys[b], b);
        fprintf(f, ")\nset xrange [-0.5:%g]\nset yrange [-0.5:%g]\n", h->nx - 0.5, h->ny - 0.5);
        fprintf(f, "plot $heat%d using 1:2:3 with image, $heat%d using 1:2:(sprintf('%%.%df', $3)) "
                "with labels tc rgb '#333333'\n", p, p, d->gain ? 1 : 2);
    }
    fputs("unset multiplot\nunset output\n", f);
}

static void gp_recall(FILE *f, const probe_data *d, const plot_opts *o)
{
    gp_header(f, o, "recall by distance: bits per byte saved on the second occurrence",
              "distance between the occurrences (bytes)");
    fputs("set ylabel 'gain (bits per byte)'\nset logscale x 2\nset key outside right top\n", f);
    for (size_t i = 0; i < d->recall.n; i++) {
        const series *s = &d->recall.s[i];
        fprintf(f, "$recall%zu << EOD\n", i);
        for (size_t k = 0; k < s->n; k++)
            fprintf(f, "%.9g %.6g %.6g %.6g\n", s->p[k].x, s->p[k].y, d->lo[s->p[k].step],
                    d->hi[s->p[k].step]);
        fputs("EOD\n", f);
    }
    fputs("plot ", f);
    for (size_t i = 0; i < d->recall.n; i++) {
        const series *s = &d->recall.s[i];
        int win = !strcmp(s->mode, "window");
        char t[200];
        snprintf(t, sizeof t, "%s%s%s", s->label, s->mode[0] ? ", " : "", s->mode);
        fprintf(f, "%s$recall%zu using 1:2:3:4 with yerrorlines lw 2 dt %d pt 7 lc rgb '%s' "
                "title ", i ? ", \\\n     " : "", i, win ? 2 : 1,
                plot_palette[s->group % PLOT_NPAL]);
        gp_str(f, t);
    }
    fputs("\nunset output\n", f);
}

static int cmp_x(const void *a, const void *b)
{
    double x = ((const point *)a)->x, y = ((const point *)b)->x;
    return (x > y) - (x < y);
}

int plot_probe_program(FILE *f, char **inputs, int nin, const plot_opts *po, int gain,
                       size_t *npoints, txl_err *e)
{
    probe_data *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(e, ERR_RUNTIME, "out of memory");
    d->gain = gain;
    d->e = e;
    int rc = 0;
    for (int k = 0; k < nin && !rc; k++) {
        char lab[1024];
        long nlines = 0;
        run_label(lab, sizeof lab, inputs[k]);
        size_t n = strlen(lab);
        if (n > 6 && !strcmp(lab + n - 6, ".jsonl"))
            lab[n - 6] = 0;
        d->file_label = nin > 1 ? lab : ""; /* one file: name panels by scheme */
        d->path = inputs[k];
        rc = each_json_line(inputs[k], probe_line, d, &nlines, e);
        d->file_label = "";
    }
    if (!rc && d->n_heat == 0 && d->recall.n == 0)
        rc = err_set(e, ERR_INPUT, "%s: no needle or recall rows to plot (expected the output "
                     "of 'txl probe needle|recall ... --json')", inputs[0]);
    if (!rc && d->n_heat)
        gp_heat(f, d, po);
    else if (!rc) {
        for (size_t i = 0; i < d->recall.n; i++)
            qsort(d->recall.s[i].p, d->recall.s[i].n, sizeof(point), cmp_x);
        gp_recall(f, d, po);
    }
    *npoints = d->points;
    list_free(&d->recall);
    free(d->lo);
    free(d->hi);
    free(d);
    return rc;
}

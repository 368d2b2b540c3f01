/* plot_probe.c: `txl plot --probe FILE.jsonl...` — the probes' results (txl probe ... --json)
 * as pictures: needle cells as heat maps (context length x depth, color = exact-match
 * accuracy, or with --gain the retrieval gain in bits), one panel per checkpoint (or file,
 * or scheme) and mode, all on one color scale; recall as the gain in bits per unit (per
 * byte, or per token for word and BPE models: the rows' `unit`) against the distance in
 * that unit (log scale) with its 95% interval, one color per checkpoint (or file, or
 * scheme), dashed for the window mode, in a panel of its own. Files of both probes get a
 * panel each: the needle's maps, then the recall curves. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"

#define MAX_PANELS 16
#define MAX_AXIS 32
#define MAX_GROUPS 64

/* What a panel or a curve belongs to: the checkpoint its rows measured ("checkpoint" and
 * "step"), else the scheme of a single file's rows, else the file. */
typedef struct {
    char key[PLOT_LABEL + 32];
    char ckpt[1024];                 /* "" when the group is not a checkpoint */
    long step;
    char label[PLOT_LABEL + 32];     /* the legend's or the panel's name */
} probe_group;

typedef struct {
    int group;
    char mode[16];
    int nx, ny;
    int xs[MAX_AXIS], ys[MAX_AXIS];  /* factors, depths */
    double v[MAX_AXIS][MAX_AXIS];    /* NAN: no cell */
} heat;

typedef struct {
    heat panels[MAX_PANELS];
    int n_heat;
    series_list recall;              /* y = gain, step = index into lo/hi, group as above */
    double *lo, *hi;
    size_t nci, capci;
    probe_group groups[MAX_GROUPS];
    int n_groups;
    const char *file_label, *path;
    int by_scheme, gain;
    int units;                       /* recall rows' units seen: 1 bytes, 2 tokens */
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

/* The group of a row: its index, or -1 with e. */
static int group_of(probe_data *d, const cJSON *o, long ln)
{
    probe_group g = {.step = 0};
    const char *ck = str_field(o, "checkpoint"), *scheme = str_field(o, "pos_scheme");
    if (ck) {
        if (int_field(o, "step", 0, PLOT_INT_MAX, d->path, ln, &g.step, d->e) < 0)
            return -1;
        snprintf(g.ckpt, sizeof g.ckpt, "%s", ck);
        snprintf(g.key, sizeof g.key, "%s\n%ld", ck, g.step);
    } else {
        snprintf(g.key, sizeof g.key, "%s", scheme && d->by_scheme ? scheme : d->file_label);
        snprintf(g.label, sizeof g.label, "%s", g.key);
    }
    for (int i = 0; i < d->n_groups; i++)
        if (!strcmp(d->groups[i].key, g.key))
            return i;
    if (d->n_groups == MAX_GROUPS)
        return err_set(d->e, ERR_INPUT, "%s:%ld: more than %d checkpoints or files", d->path,
                       ln, MAX_GROUPS);
    d->groups[d->n_groups] = g;
    return d->n_groups++;
}

static heat *panel(probe_data *d, int group, const char *mode)
{
    for (int i = 0; i < d->n_heat; i++)
        if (d->panels[i].group == group && !strcmp(d->panels[i].mode, mode))
            return &d->panels[i];
    if (d->n_heat == MAX_PANELS)
        return NULL;
    heat *h = &d->panels[d->n_heat++];
    memset(h, 0, sizeof *h);
    h->group = group;
    snprintf(h->mode, sizeof h->mode, "%s", mode);
    return h;
}

/* Inserting into a sorted axis moves the cells: they are stored by value, so re-read. */
static int needle_row(probe_data *d, const cJSON *o, int group, long ln)
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
    heat *h = panel(d, group, mode ? mode : "");
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

static int recall_row(probe_data *d, const cJSON *o, int group, long ln)
{
    double D, g;
    if (!num_field(o, "distance", &D))
        return 0; /* the effective-context summary line */
    /* the gain in bits per unit: per byte (gain_bpc), or per token (gain_bpt) */
    const char *unit = str_field(o, "unit");
    int tok = unit && !strcmp(unit, "token");
    if (unit && !tok && strcmp(unit, "byte"))
        return err_set(d->e, ERR_INPUT, "%s:%ld: a recall row of unit '%s' (expected byte or "
                       "token)", d->path, ln, unit);
    const char *gname = tok ? "gain_bpt" : "gain_bpc";
    char ciname[16];
    snprintf(ciname, sizeof ciname, "%s_ci", gname);
    const cJSON *ci = cJSON_GetObjectItemCaseSensitive(o, ciname);
    if (!num_field(o, gname, &g))
        return err_set(d->e, ERR_INPUT, "%s:%ld: a recall row of unit %s without %s", d->path,
                       ln, tok ? "token" : "byte", gname);
    d->units |= tok ? 2 : 1;
    const char *mode = str_field(o, "mode");
    series *s = NULL;
    for (size_t i = 0; i < d->recall.n && !s; i++)
        if (d->recall.s[i].group == group && !strcmp(d->recall.s[i].mode, mode ? mode : ""))
            s = &d->recall.s[i];
    if (!s) {
        if (!(s = list_add(&d->recall)) || !(s->mode = dupstr(mode ? mode : "")))
            return err_set(d->e, ERR_RUNTIME, "out of memory");
        s->group = group;
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
    const char *kind = str_field(o, "probe");
    if (!kind)
        return err_set(d->e, ERR_INPUT, "%s:%ld: not a probe row (expected the output of "
                       "'txl probe ... --json')", d->path, ln);
    int needle = !strcmp(kind, "needle");
    if (!needle && strcmp(kind, "recall"))
        return 0; /* shift rows are a table, not a picture */
    int g = group_of(d, o, ln);
    if (g < 0)
        return -1;
    return needle ? needle_row(d, o, g, ln) : recall_row(d, o, g, ln);
}

/* The color scale all heat maps share: accuracy 0..1; gains from min(0, the least) to the
 * most, so panels compare. */
static void heat_range(const probe_data *d, double *lo, double *hi)
{
    *lo = 0;
    *hi = d->gain ? 0 : 1;
    for (int p = 0; p < d->n_heat && d->gain; p++)
        for (int a = 0; a < d->panels[p].nx; a++)
            for (int b = 0; b < d->panels[p].ny; b++) {
                double v = d->panels[p].v[a][b];
                if (isfinite(v) && v < *lo)
                    *lo = v;
                if (isfinite(v) && v > *hi)
                    *hi = v;
            }
    if (!(*hi > *lo))
        *hi = *lo + 1;
}

/* Decimals of a panel's labels: accuracies 2; gains 3 significant digits of the panel's
 * largest magnitude (0.0312, 0.166, 34.2), from 0 to 6 decimals. */
static int label_decimals(const probe_data *d, const heat *h)
{
    if (!d->gain)
        return 2;
    double m = 0;
    for (int a = 0; a < h->nx; a++)
        for (int b = 0; b < h->ny; b++)
            if (isfinite(h->v[a][b]))
                m = fmax(m, fabs(h->v[a][b]));
    int k = m > 0 ? 2 - (int)floor(log10(m)) : 1;
    return k < 0 ? 0 : k > 6 ? 6 : k;
}

/* A cell's label: v at dec decimals, without the sign of a value that rounds to 0. */
static void cell_label(char *buf, size_t cap, double v, int dec)
{
    snprintf(buf, cap, "%.*f", dec, v);
    if (buf[0] == '-' && strspn(buf + 1, "0.") == strlen(buf + 1))
        memmove(buf, buf + 1, strlen(buf));
}

/* Panel p of a layout of `cols` columns: every panel on the one color scale, so the color
 * bar (and its label) is drawn beside the last column only; every panel keeps the room it
 * needs, so all are as wide. */
static void gp_heat_panel(FILE *f, const probe_data *d, int p, int cols, double lo, double hi)
{
    const heat *h = &d->panels[p];
    int dec = label_decimals(d, h);
    int last = p % cols == cols - 1 || p == d->n_heat - 1;
    fputs(last ? "set colorbox\nset rmargin 13\n" : "unset colorbox\nset rmargin 13\n", f);
    fprintf(f, "$heat%d << EOD\n", p);
    for (int a = 0; a < h->nx; a++)
        for (int b = 0; b < h->ny; b++)
            if (isfinite(h->v[a][b])) { /* the label light on the dark half of the palette */
                char t[64];
                cell_label(t, sizeof t, h->v[a][b], dec);
                fprintf(f, "%d %d %.6g %s \"%s\"\n", a, b, h->v[a][b],
                        (h->v[a][b] - lo) / (hi - lo) > 0.55 ? "0xffffff" : "0x222222", t);
            }
    fputs("EOD\nset title ", f);
    char t[PLOT_LABEL + 64];
    snprintf(t, sizeof t, "%s%s%s", d->groups[h->group].label, h->mode[0] ? ", " : "", h->mode);
    gp_str(f, t);
    fputs("\nset xlabel 'context length (x trained context)'\nset ylabel 'needle depth (%)'\n"
          "set xtics (", f);
    for (int a = 0; a < h->nx; a++)
        fprintf(f, "%s'%dx' %d", a ? ", " : "", h->xs[a], a);
    fputs(")\nset ytics (", f);
    for (int b = 0; b < h->ny; b++)
        fprintf(f, "%s'%d' %d", b ? ", " : "", h->ys[b], b);
    fprintf(f, ")\nset xrange [-0.5:%g]\nset yrange [-0.5:%g]\n", h->nx - 0.5, h->ny - 0.5);
    fprintf(f, "plot $heat%d using 1:2:3 with image, $heat%d using 1:2:5:4 with labels "
            "tc rgb variable\n", p, p);
}

/* alone: the figure's title is the panel's, and the key goes beside it */
static void gp_recall_panel(FILE *f, const probe_data *d, int alone)
{
    /* the rows' unit: bytes, tokens (word and BPE models), or both in one panel */
    static const char *const dist[] = {"", "bytes", "tokens", "bytes or tokens: each row's unit"};
    static const char *const per[] = {"", "bits per byte", "bits per token",
                                      "bits per byte or token"};
    fputs(alone ? "unset title\n" : "set title 'recall: gain by distance'\n", f);
    fprintf(f, "set xlabel 'distance between the occurrences (%s)'\n"
            "set ylabel 'gain (%s)'\nset xtics autofreq\nset ytics autofreq\n"
            "set autoscale xy\nset logscale x 2\nset grid\n", dist[d->units & 3],
            per[d->units & 3]);
    fputs(alone ? "set key outside right top\n" : "set key inside top right opaque\n", f);
    fputs("unset rmargin\n", f);
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
        char t[PLOT_LABEL + 64];
        snprintf(t, sizeof t, "%s%s%s", d->groups[s->group].label, s->mode[0] ? ", " : "",
                 s->mode);
        fprintf(f, "%s$recall%zu using 1:2:3:4 with yerrorlines lw 2 dt %d pt 7 lc rgb '%s' "
                "title ", i ? ", \\\n     " : "", i, win ? 2 : 1,
                plot_palette[s->group % PLOT_NPAL]);
        gp_str(f, t);
    }
    fputc('\n', f);
}

/* One figure: the heat maps (one color scale, its bar labelled), then the recall panel. */
static void gp_probes(FILE *f, const probe_data *d, const plot_opts *po, int *npanels)
{
    int np = d->n_heat + (d->recall.n > 0);
    int cols = np < 2 ? 1 : 2, rows = (np + cols - 1) / cols;
    plot_opts q = *po;
    if (!po->fixed_size && rows > 2) /* 300 pixels a row of panels */
        q.height = 300 * rows;
    if (!po->fixed_size && cols > 1) /* two maps side by side, their cells' labels legible */
        q.width = 1200;
    static const char *const recall_what[] = {
        "", "recall by distance: bits per byte saved on the second occurrence",
        "recall by distance: bits per token saved on the second occurrence",
        "recall by distance: bits saved on the second occurrence"};
    const char *what = !d->n_heat ? recall_what[d->units & 3]
                       : d->recall.n ? (d->gain ? "probes: the needle's retrieval gain (bits) "
                                                  "and recall"
                                                : "probes: the needle's accuracy and recall")
                       : d->gain ? "needle in a haystack: retrieval gain (bits)"
                                 : "needle in a haystack: exact-match accuracy";
    gp_header(f, &q, what, "", "");
    double lo, hi;
    heat_range(d, &lo, &hi);
    fprintf(f, "set palette defined (0 '#f7fbff', 0.5 '#6baed6', 1 '#08306b')\n"
            "set cbrange [%.9g:%.9g]\nset cblabel '%s'\nunset grid\nunset key\n", lo, hi,
            d->gain ? "retrieval gain (bits)" : "exact-match accuracy");
    fprintf(f, "set multiplot layout %d,%d title ", rows, cols);
    gp_str(f, po->title ? po->title : what);
    fputs(" font ',14'\n", f);
    for (int p = 0; p < d->n_heat; p++)
        gp_heat_panel(f, d, p, cols, lo, hi);
    if (d->recall.n)
        gp_recall_panel(f, d, d->n_heat == 0);
    fputs("unset multiplot\nunset output\n", f);
    *npanels = np;
}

static int cmp_x(const void *a, const void *b)
{
    double x = ((const point *)a)->x, y = ((const point *)b)->x;
    return (x > y) - (x < y);
}

/* The checkpoint groups' names: the shortest that tell them apart. 0, or -1 with e. */
static int label_groups(probe_data *d)
{
    const char *paths[MAX_GROUPS];
    long steps[MAX_GROUPS];
    int idx[MAX_GROUPS], k = 0;
    for (int i = 0; i < d->n_groups; i++)
        if (d->groups[i].ckpt[0]) {
            paths[k] = d->groups[i].ckpt;
            steps[k] = d->groups[i].step;
            idx[k++] = i;
        }
    char (*lab)[PLOT_LABEL] = k ? malloc((size_t)k * sizeof *lab) : NULL;
    if (k && !lab)
        return err_set(d->e, ERR_RUNTIME, "out of memory");
    ckpt_labels(paths, steps, k, lab);
    for (int j = 0; j < k; j++)
        snprintf(d->groups[idx[j]].label, sizeof d->groups[idx[j]].label, "%s", lab[j]);
    free(lab);
    return 0;
}

int plot_probe_program(FILE *f, char **inputs, int nin, const plot_opts *po, int gain,
                       size_t *npoints, int *npanels, txl_err *e)
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
        d->file_label = lab;
        d->by_scheme = nin == 1; /* one file of older txl: name panels by scheme */
        d->path = inputs[k];
        rc = each_json_line(inputs[k], probe_line, d, &nlines, e);
        d->file_label = "";
    }
    if (!rc && d->n_heat == 0 && d->recall.n == 0)
        rc = err_set(e, ERR_INPUT, "%s: no needle or recall rows to plot (expected the output "
                     "of 'txl probe needle|recall ... --json')", inputs[0]);
    if (!rc && label_groups(d))
        rc = -1;
    if (!rc) {
        for (size_t i = 0; i < d->recall.n; i++)
            qsort(d->recall.s[i].p, d->recall.s[i].n, sizeof(point), cmp_x);
        gp_probes(f, d, po, npanels);
    }
    *npoints = d->points;
    list_free(&d->recall);
    free(d->lo);
    free(d->hi);
    free(d);
    return rc;
}

/* plot_terms.c: `txl plot --terms RUN_DIR` — the score terms of a training run (its terms
 * events, train.term_stats_interval; doc/design.md, "The model": Diagnostics) as one panel
 * per layer: the spread (standard deviation) of each term against the step on a log scale,
 * inside the band the verdict calls healthy (1/1000 to 10x the content term's spread). A term
 * that leaves the band, or that a verdict flags for another reason, is ringed where it
 * was flagged: dying terms sink out of the band, dominating ones rise above it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"

#define MAX_LAYERS 64
#define MAX_TERMS 4

typedef struct {
    long step;
    double sd[MAX_LAYERS][MAX_TERMS];     /* NAN: missing */
    unsigned char flag[MAX_LAYERS][MAX_TERMS];
} terms_row;

typedef struct {
    terms_row *r;
    size_t n, cap;
    char names[MAX_TERMS][32];
    int nterms, nlayers;
    const char *path;
    txl_err *e;
} terms_data;

/* One layer object of an event: its terms' std and flags, in the order of the object. */
static int layer_row(terms_data *d, terms_row *row, const cJSON *lo, long ln)
{
    double l;
    if (!cJSON_IsObject(lo) || !num_field(lo, "layer", &l) || l < 0 || l >= MAX_LAYERS)
        return err_set(d->e, ERR_INPUT, "%s:%ld: a terms event's layer without a 'layer' "
                       "number in 0..%d", d->path, ln, MAX_LAYERS - 1);
    int li = (int)l, t = 0;
    for (const cJSON *it = lo->child; it; it = it->next) {
        double sd;
        if (!cJSON_IsObject(it) || !num_field(it, "std", &sd))
            continue; /* layer, pos_scheme, entries, verdict */
        if (t == MAX_TERMS)
            return err_set(d->e, ERR_INPUT, "%s:%ld: more than %d terms in a layer", d->path,
                           ln, MAX_TERMS);
        if (d->nterms <= t) {
            snprintf(d->names[t], sizeof d->names[t], "%s", it->string);
            d->nterms = t + 1;
        } else if (strcmp(d->names[t], it->string)) {
            return err_set(d->e, ERR_INPUT, "%s:%ld: term '%s' where earlier events have "
                           "'%s'", d->path, ln, it->string, d->names[t]);
        }
        row->sd[li][t] = sd;
        row->flag[li][t] = str_field(it, "flag") != NULL;
        t++;
    }
    if (li + 1 > d->nlayers)
        d->nlayers = li + 1;
    return 0;
}

static int terms_line(const cJSON *o, long ln, void *ctx)
{
    terms_data *d = ctx;
    const char *ev = str_field(o, "event");
    long step;
    if (!ev || (strcmp(ev, "start") && strcmp(ev, "terms")))
        return 0;
    int has = int_field(o, "step", 0, PLOT_INT_MAX, d->path, ln, &step, d->e);
    if (has <= 0)
        return has; /* -1: not a whole number in range; 0: no step, nothing to place */
    if (!strcmp(ev, "start")) { /* a resumed run: its log goes on from the step it resumed */
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(o, "resume");
        while (d->n > 0 && d->r[d->n - 1].step > (cJSON_IsTrue(res) ? step : 0))
            d->n--;
        return 0;
    }
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(o, "layers");
    if (!cJSON_IsArray(layers))
        return err_set(d->e, ERR_INPUT, "%s:%ld: a terms event without its 'layers' array",
                       d->path, ln);
    while (d->n > 0 && d->r[d->n - 1].step >= step)
        d->n--;
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 64;
        terms_row *nr = realloc(d->r, cap * sizeof *nr);
        if (!nr)
            return err_set(d->e, ERR_RUNTIME, "out of memory");
        d->r = nr;
        d->cap = cap;
    }
    terms_row *row = &d->r[d->n];
    row->step = step;
    for (int l = 0; l < MAX_LAYERS; l++)
        for (int t = 0; t < MAX_TERMS; t++)
            row->sd[l][t] = NAN, row->flag[l][t] = 0;
    for (const cJSON *lo = layers->child; lo; lo = lo->next)
        if (layer_row(d, row, lo, ln))
            return -1;
    d->n++;
    return 0;
}

/* A value for gnuplot's log axis: '?' (missing) unless positive and finite. */
static void gp_val(FILE *f, double v)
{
    if (isfinite(v) && v > 0)
        fprintf(f, " %.6g", v);
    else
        fputs(" ?", f);
}

/* The key, in a strip of its own between the title and the panels (inside a panel it hid
 * layer 0's band): a plot of the whole width with nothing but the key's entries. */
static void gp_terms_key(FILE *f, const terms_data *d, double y0, double h)
{
    fprintf(f, "set origin 0,%.4f\nset size 1,%.4f\nunset border\nunset xtics\nunset ytics\n"
            "unset xlabel\nunset ylabel\nunset grid\nunset logscale\nset xrange [0:1]\n"
            "set yrange [0:1]\nset key inside center center horizontal maxcols 3 spacing 1.1 "
            "samplen 2.5 opaque box lc rgb '#cccccc'\n", y0, h);
    fputs("plot NaN with filledcurves x1 fc rgb '#eeeeee' title '1/1000 to 10x content: healthy'",
          f);
    for (int t = 0; t < d->nterms; t++) {
        fprintf(f, ", \\\n     NaN with linespoints lw %s pt 7 ps 0.6 lc rgb '%s' title ",
                t ? "1.6" : "2.4", t ? plot_palette[(t - 1) % PLOT_NPAL] : "#222222");
        gp_str(f, d->names[t]);
    }
    fputs(", \\\n     NaN with points pt 6 ps 1.8 lw 1.5 lc rgb '#222222' "
          "title 'flagged by the verdict'\n", f);
    fputs("set border 3 lw 1 lc rgb '#444444'\nset xtics nomirror out\nset ytics nomirror out\n"
          "set mxtics\nset mytics 2\nset xlabel 'step'\n"
          "set ylabel 'std of the term (scaled by 1/sqrt(d_head))'\nset grid xtics ytics "
          "mxtics mytics lt 1 lw 1 lc rgb '#e0e0e0', lt 1 lw 1 lc rgb '#f2f2f2'\n"
          "set autoscale xy\nset logscale y 10\nunset key\n", f);
}

static void gp_terms_layer(FILE *f, const terms_data *d, int l)
{
    fprintf(f, "$layer%d << EOD\n", l);
    for (size_t i = 0; i < d->n; i++) {
        fprintf(f, "%ld", d->r[i].step);
        for (int t = 0; t < d->nterms; t++)
            gp_val(f, d->r[i].sd[l][t]);
        for (int t = 0; t < d->nterms; t++)
            gp_val(f, d->r[i].flag[l][t] ? d->r[i].sd[l][t] : NAN);
        fputc('\n', f);
    }
    fputs("EOD\n", f);
    fprintf(f, "set title 'layer %d'\n", l);
    fprintf(f, "plot $layer%d using 1:($2/1000):($2*10) with filledcurves fc rgb '#eeeeee' "
            "notitle", l);
    for (int t = 0; t < d->nterms; t++)
        fprintf(f, ", \\\n     $layer%d using 1:%d with linespoints lw %s pt 7 ps 0.6 "
                "lc rgb '%s' notitle", l, 2 + t, t ? "1.6" : "2.4",
                t ? plot_palette[(t - 1) % PLOT_NPAL] : "#222222");
    for (int t = 1; t < d->nterms; t++) { /* rings where flagged (none: no series) */
        int any = 0;
        for (size_t i = 0; i < d->n; i++)
            any |= d->r[i].flag[l][t] && isfinite(d->r[i].sd[l][t]) && d->r[i].sd[l][t] > 0;
        if (any)
            fprintf(f, ", \\\n     $layer%d using 1:%d with points pt 6 ps 1.8 lw 1.5 "
                    "lc rgb '#222222' notitle", l, 2 + d->nterms + t);
    }
    fputc('\n', f);
}

/* The title, the key's strip (95 pixels) and the panels, placed by hand (origin and size:
 * a layout would give the key the width of a panel). */
static void gp_terms(FILE *f, const terms_data *d, const plot_opts *po, const char *run)
{
    int cols = d->nlayers < 2 ? 1 : 2, rows = (d->nlayers + cols - 1) / cols;
    plot_opts q = *po, *o = &q;
    if (!po->fixed_size && rows > 1) /* 300 pixels a row of panels, and the key */
        q.height = 300 * rows + 140 > po->height ? 300 * rows + 140 : po->height;
    char title[1100];
    snprintf(title, sizeof title, "%s: spread of the score terms while training", run);
    gp_header(f, o, title, "step", "");
    fputs("set format y '%g'\nset datafile missing '?'\n", f);
    if (o->logx == 1)
        fputs("set logscale x 10\n", f);
    double H = o->height, title_h = 40.0 / H, key_h = 95.0 / H;
    double top = 1 - title_h - key_h, ph = top / rows, pw = 1.0 / cols;
    fputs("set multiplot title ", f);
    gp_str(f, o->title ? o->title : title);
    fputs(" font ',14'\nunset title\n", f);
    gp_terms_key(f, d, top, key_h);
    if (o->logx == 1)
        fputs("set logscale x 10\n", f);
    for (int l = 0; l < d->nlayers; l++) {
        fprintf(f, "set origin %.4f,%.4f\nset size %.4f,%.4f\n", (l % cols) * pw,
                top - (l / cols + 1) * ph, pw, ph);
        gp_terms_layer(f, d, l);
    }
    fputs("unset multiplot\nunset output\n", f);
}

int plot_terms_program(FILE *f, const char *input, const plot_opts *po, size_t *npoints,
                       int *nlayers, txl_err *e)
{
    char path[2048], run[1024];
    if (run_log_path(input, path, sizeof path, e))
        return -1;
    run_label(run, sizeof run, input);
    terms_data d = {.path = path, .e = e};
    long nlines = 0;
    int rc = each_json_line(path, terms_line, &d, &nlines, e);
    if (!rc && d.n == 0)
        rc = err_set(e, ERR_INPUT, "%s: no 'terms' events to plot (they are logged by a run "
                     "with train.term_stats_interval > 0 and pos_scheme xl)", path);
    if (!rc)
        gp_terms(f, &d, po, run);
    *npoints = d.n * (size_t)d.nlayers * (size_t)d.nterms;
    *nlayers = d.nlayers;
    free(d.r);
    return rc;
}

/* plot_curves.c: `txl plot RUN_DIR...` — the learning curves of runs (their log.jsonl) and
 * the gnuplot program that draws them (plot.c runs it).
 *
 * x = training tokens. A train event gives (tokens, bpc) directly; an eval event carries only
 * its step, so its x is the token count at that step, read off the train events
 * (interpolated between logged steps). A `start` event of a resumed run drops the points
 * past its step: the log of a run resumed from an earlier checkpoint describes one timeline,
 * not two.
 *
 * y = bits per byte when every run's train events carry it (byte models). The train events of
 * word and BPE models have a null bpc (a step does not count the bytes of its tokens): then
 * every curve is the loss in nats per token (train and valid alike), with the perplexity,
 * exp(loss), on the right-hand axis. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"

typedef struct {
    series *train, *valid;
    txl_err *e;
    const char *path;
} log_ctx;

static void drop_after(series *s, long step)
{
    while (s->n > 0 && s->p[s->n - 1].step > step)
        s->n--;
}

/* A curve's point: y is the bits per byte (NAN when the event has none), loss the nats per
 * token (NAN likewise). */
static int push(series *s, double x, double bpc, double loss, long step)
{
    if (pt_push(s, x, bpc, step))
        return -1;
    s->p[s->n - 1].loss = loss;
    return 0;
}

/* The events of a run's log that make its curves. A step that is not a whole number in
 * [0, 2^53] is an error (txl writes none); an event without a step, tokens, or both bpc and
 * loss (a blown-up loss is written as null) is left out. */
static int log_line(const cJSON *o, long ln, void *vctx)
{
    log_ctx *c = vctx;
    const char *ev = str_field(o, "event");
    double tokens = 0, bpc = NAN, loss = NAN;
    long step = 0;
    if (!ev)
        return 0;
    int has_step = 0;
    if (strcmp(ev, "start") == 0 || strcmp(ev, "train") == 0 || strcmp(ev, "eval") == 0)
        has_step = int_field(o, "step", 0, PLOT_INT_MAX, c->path, ln, &step, c->e);
    if (has_step < 0)
        return -1;
    int has_y = num_field(o, "bpc", &bpc) | num_field(o, "loss", &loss);
    if (strcmp(ev, "start") == 0) {
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(o, "resume");
        long s = has_step && cJSON_IsTrue(res) ? step : 0;
        drop_after(c->train, s);
        drop_after(c->valid, s);
    } else if (strcmp(ev, "train") == 0) {
        if (has_step && has_y && num_field(o, "tokens", &tokens) && tokens > 0) {
            drop_after(c->train, step - 1);
            if (push(c->train, tokens, bpc, loss, step))
                return err_set(c->e, ERR_RUNTIME, "out of memory");
        }
    } else if (strcmp(ev, "eval") == 0) {
        const char *split = str_field(o, "split");
        if ((!split || strcmp(split, "valid") == 0) && has_step && has_y) {
            drop_after(c->valid, step - 1);
            if (push(c->valid, NAN, bpc, loss, step))
                return err_set(c->e, ERR_RUNTIME, "out of memory");
        }
    }
    return 0;
}

/* Tokens trained at `step`, from the train points (ascending in step, tokens > 0): before
 * the first, in proportion to it (0 at step 0); between two, interpolated; past the last, at
 * the last one's rate. A train point at step 0 (not txl's: its steps count from 1) has no
 * rate: its own tokens stand. */
static double tokens_at(const series *t, long step)
{
    const point *p = t->p;
    size_t n = t->n;
    if (step <= p[0].step)
        return p[0].step > 0 ? p[0].x * step / (double)p[0].step : p[0].x;
    for (size_t i = 1; i < n; i++)
        if (step <= p[i].step)
            return p[i - 1].x + (p[i].x - p[i - 1].x) * (step - p[i - 1].step) /
                                    (double)(p[i].step - p[i - 1].step);
    if (p[n - 1].step == 0)
        return p[n - 1].x;
    return p[n - 1].x + (step - p[n - 1].step) * p[n - 1].x / (double)p[n - 1].step;
}

/* RUN (a directory or a log.jsonl) -> its train and valid series. */
static int load_run(const char *arg, series *train, series *valid, txl_err *e)
{
    char path[2048];
    if (run_log_path(arg, path, sizeof path, e))
        return -1;
    log_ctx c = {train, valid, e, path};
    long nlines = 0;
    if (each_json_line(path, log_line, &c, &nlines, e))
        return -1;
    if (train->n == 0 && valid->n == 0)
        return err_set(e, ERR_INPUT, "%s: no 'train' or 'eval' events to plot (%s)", path,
                       nlines ? "the run has not logged a step yet" : "empty log");
    if (valid->n > 0 && train->n == 0)
        return err_set(e, ERR_INPUT, "%s: 'eval' events but no 'train' events with tokens "
                       "and a loss: cannot place them on the token axis", path);
    for (size_t i = 0; i < valid->n; i++)
        valid->p[i].x = tokens_at(train, valid->p[i].step);
    return 0;
}

int plot_load_runs(series_list *l, char **inputs, int nin, txl_err *e)
{
    for (int r = 0; r < nin; r++) {
        series *t = list_add(l), *v = t ? list_add(l) : NULL;
        if (!v)
            return err_set(e, ERR_RUNTIME, "out of memory");
        t = &l->s[l->n - 2]; /* list_add may have moved the array */
        char lab[1024];
        run_label(lab, sizeof lab, inputs[r]);
        for (int q = 0; q < r; q++) { /* same base name as another run: the full path */
            char other[1024];
            run_label(other, sizeof other, inputs[q]);
            if (strcmp(other, lab) == 0) {
                snprintf(lab, sizeof lab, "%s", inputs[r]);
                free(l->s[2 * q].label);
                l->s[2 * q].label = dupstr(inputs[q]);
            }
        }
        if (!(t->label = dupstr(lab)))
            return err_set(e, ERR_RUNTIME, "out of memory");
        if (load_run(inputs[r], t, v, e))
            return -1;
    }
    return 0;
}

/* Whether the curves are losses per token: some run's train events have a loss and no bpc
 * (word and BPE models). Then every point's y is its loss. */
static int per_token(const series_list *l)
{
    for (size_t i = 0; i < l->n; i += 2)
        for (size_t k = 0; k < l->s[i].n; k++)
            if (!isfinite(l->s[i].p[k].y) && isfinite(l->s[i].p[k].loss))
                return 1;
    return 0;
}

/* The right-hand axis of a loss plot: the perplexity exp(y) of the losses lo..hi (the data's
 * range), at tics placed by hand (gnuplot 5.4 draws no automatic tics on a linked axis): 1,
 * 2, 5, 10, 20, ... when the range spans a factor of 8 or more, else a round step. Tics past
 * the axis are not drawn, so the list reaches half the range beyond the data on each side
 * (gnuplot widens the axis to its own tics). None when exp overflows. */
static void gp_ppl_tics(FILE *f, double lo, double hi)
{
    double w = hi > lo ? hi - lo : 1, a = exp(lo - w / 2), b = exp(hi + w / 2);
    if (!(lo <= hi) || !isfinite(b) || !(a > 0))
        return;
    fputs("set link y2 via exp(y) inverse log(y)\n"
          "set y2label 'perplexity (exp of the loss)'\nset border 11 lw 1 lc rgb '#444444'\n"
          "set ytics nomirror\nset y2tics nomirror out (", f);
    int n = 0;
    if (b / a >= 8) {
        static const double m[] = {1, 2, 5};
        for (double d = pow(10, floor(log10(a))); d <= b && n < 60; d *= 10)
            for (int k = 0; k < 3; k++)
                if (m[k] * d >= a && m[k] * d <= b)
                    fprintf(f, "%s'%g' %.17g", n++ ? ", " : "", m[k] * d, m[k] * d);
    } else {
        double raw = (b - a) / 6, mag = pow(10, floor(log10(raw))), step = mag;
        step = raw / mag >= 5 ? 5 * mag : raw / mag >= 2 ? 2 * mag : mag;
        for (double v = ceil(a / step) * step; v <= b && n < 60; v += step)
            fprintf(f, "%s'%g' %.17g", n++ ? ", " : "", v, v);
    }
    fputs(")\n", f);
}

/* l holds train, valid, train, valid, ... per run. */
void plot_curves_program(FILE *f, series_list *l, const plot_opts *o, dropped_pts *d)
{
    int tok = per_token(l);
    for (size_t i = 0; i < l->n; i++) { /* the plot's y; a point without one is left out */
        series *s = &l->s[i];
        size_t n = 0;
        for (size_t k = 0; k < s->n; k++) {
            if (tok)
                s->p[k].y = s->p[k].loss;
            if (isfinite(s->p[k].y))
                s->p[n++] = s->p[k];
        }
        s->n = n;
    }
    double lo, hi;
    x_range(l, &lo, &hi);
    int logx = isfinite(lo) && (o->logx >= 0 ? o->logx : hi / lo >= 100);
    /* short tic labels: 1k 10k 100k 1M on a log axis, x in thousands/millions on a linear one */
    double scale = 1;
    const char *unit = "";
    if (logx)
        ;
    else if (hi >= 1e9)
        scale = 1e9, unit = "billions; ";
    else if (hi >= 1e6)
        scale = 1e6, unit = "millions; ";
    else if (hi >= 1e3)
        scale = 1e3, unit = "thousands; ";
    size_t nruns = l->n / 2;
    char xlabel[160], title[256];
    const char *what = tok ? "loss per token" : "bits per byte";
    if (tok)
        snprintf(xlabel, sizeof xlabel, "training tokens (%stokens of %s vocabulary)", unit,
                 nruns == 1 ? "the run's" : "each run's");
    else
        snprintf(xlabel, sizeof xlabel, "training tokens (%s1 token = 1 byte)", unit);
    if (nruns == 1)
        snprintf(title, sizeof title, "%s: %s while training", l->s[0].label, what);
    else
        snprintf(title, sizeof title, "%s while training: %zu runs", what, nruns);
    gp_header(f, o, title, xlabel, tok ? "loss (nats per token)" : "bits per byte (bpc)");
    if (logx)
        fprintf(f, "set logscale x 10\nset format x '%%.0s%%c'\nset xrange [%g:%g]\n",
                lo / 1.08, hi * 1.08); /* the data and a little air, not whole decades */
    if (tok) { /* the perplexity of every loss, on the right */
        double ylo = INFINITY, yhi = -INFINITY;
        for (size_t i = 0; i < l->n; i++)
            for (size_t k = 0; k < l->s[i].n; k++)
                if (drawable(&l->s[i].p[k], logx)) {
                    ylo = fmin(ylo, l->s[i].p[k].y);
                    yhi = fmax(yhi, l->s[i].p[k].y);
                }
        gp_ppl_tics(f, ylo, isfinite(o->ymax) ? fmin(yhi, o->ymax) : yhi);
    }
    for (size_t r = 0; r < nruns; r++) {
        char name[32];
        snprintf(name, sizeof name, "train%zu", r);
        gp_block(f, name, &l->s[2 * r], scale, logx, d);
        snprintf(name, sizeof name, "valid%zu", r);
        gp_block(f, name, &l->s[2 * r + 1], scale, logx, d);
    }
    fputs("plot ", f);
    int first = 1;
    for (size_t r = 0; r < nruns; r++) {
        const char *col = plot_palette[r % PLOT_NPAL];
        int dt = 1 + (int)(r / PLOT_NPAL); /* past 10 runs, dashes tell the cycles apart */
        char t[300];
        size_t nt = n_drawable(&l->s[2 * r], logx);
        if (nt) {
            snprintf(t, sizeof t, "%s train", l->s[2 * r].label);
            fprintf(f, "%s$train%zu using 1:2 with %s lw 1.6 dt %d lc rgb '%s' title ",
                    first ? "" : ", \\\n     ", r, nt > 1 ? "lines" : "points pt 7", dt, col);
            gp_str(f, t);
            first = 0;
        }
        if (n_drawable(&l->s[2 * r + 1], logx)) {
            snprintf(t, sizeof t, "%s valid", l->s[2 * r].label);
            fprintf(f, "%s$valid%zu using 1:2 with linespoints lw 1.2 dt 2 pt 7 ps 1.1 "
                    "lc rgb '%s' title ", first ? "" : ", \\\n     ", r, col);
            gp_str(f, t);
            first = 0;
        }
    }
    fputs("\nunset output\n", f);
}

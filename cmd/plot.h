/* plot.h: what the parts of `txl plot` share (plot.c: learning curves, sweeps, running
 * gnuplot; plot_probe.c: the probes' plots). */
#ifndef TXL_PLOT_H
#define TXL_PLOT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>

#include "../common/err.h"

/* Tableau 10: distinct on white, readable by most color-blind viewers. */
extern const char *const plot_palette[];
#define PLOT_NPAL 10
/* The longest legend name of a checkpoint (ckpt_labels), with its NUL. */
#define PLOT_LABEL 1100

typedef struct {
    double x, y;
    long step;   /* train/eval step (curves), factor (sweep) */
    double loss; /* curves: the event's loss in nats per token (NAN: none); y is its bpc */
} point;

typedef struct {
    char *label;     /* legend entry of a run or a sweep group */
    char *mode;      /* sweep: sweep_mode ("" when absent) */
    int group;       /* color index */
    point *p;
    size_t n, cap;
} series;

typedef struct {
    series *s;
    size_t n, cap;
} series_list;

typedef struct {
    const char *out;       /* output path, as gnuplot writes it */
    int svg;
    int width, height;
    int fixed_size;        /* --size given (else --terms grows the height with the panels) */
    int logx;              /* -1 auto, 0 off, 1 on */
    double ymax;           /* NAN: automatic */
    const char *title;
} plot_opts;

int pt_push(series *s, double x, double y, long step);
series *list_add(series_list *l);
void list_free(series_list *l);
char *dupstr(const char *s);
/* A finite number field, or 0. */
int num_field(const cJSON *o, const char *key, double *out);
const char *str_field(const cJSON *o, const char *key);
/* A whole-number field (a step, a factor, a depth) of the JSON line `ln` of path: 0 when it
 * is absent (the caller skips the event), 1 with *out when it is a whole number in [lo, hi],
 * else -1 with ERR_INPUT naming path:line, the key and the value (a fraction, a negative or
 * huge number, a string: the file is not what txl wrote, and a cast to long would
 * overflow). lo and hi are at most 2^53 in magnitude. */
int int_field(const cJSON *o, const char *key, double lo, double hi, const char *path, long ln,
              long *out, txl_err *e);
/* The largest step or count a JSON number holds exactly. */
#define PLOT_INT_MAX 9007199254740992.0
/* Calls fn(obj, line number, ctx) for every JSON line of path. A damaged line (the last
 * line, or one before a start event: cut by a killed run; or a cut line with a start event
 * glued to it) is skipped and counted on stderr; any other unparsable line is an error. */
int each_json_line(const char *path, int (*fn)(const cJSON *, long, void *), void *ctx,
                   long *nlines, txl_err *e);
/* A gnuplot single-quoted string. */
void gp_str(FILE *f, const char *s);
/* Terminal, output, title, axes and grid. */
void gp_header(FILE *f, const plot_opts *o, const char *title, const char *xlabel,
               const char *ylabel);

/* The points a plot cannot draw are left out of its data (never a nan or an inf for gnuplot)
 * and counted, for the note of `txl plot`: x <= 0 on a log x axis (an evaluation at step 0,
 * at 0 tokens) and a coordinate that is not finite (token counts so large that the
 * interpolation overflows). */
typedef struct {
    size_t zero_logx, not_finite;
} dropped_pts;
int drawable(const point *p, int logx);
size_t n_drawable(const series *s, int logx);
/* A datablock $name of s's drawable points, x divided by xscale. */
void gp_block(FILE *f, const char *name, const series *s, double xscale, int logx,
              dropped_pts *d);
/* The smallest positive and the largest finite x; lo = inf when there is none. */
void x_range(const series_list *l, double *lo, double *hi);
/* Legend names for n checkpoints (path, step: the "checkpoint" and "step" fields of eval and
 * probe rows) that tell every one apart: "best, step 1500" (the file's name without
 * .safetensors[.gz]); with its directory ("run/best, step 1500") when two would read the
 * same, else the whole path. out[i] has cap bytes. */
void ckpt_labels(const char *const *paths, const long *steps, int n, char (*out)[PLOT_LABEL]);
/* A file's legend name: its base name (without /log.jsonl). */
void run_label(char *buf, size_t cap, const char *arg);

/* RUN (a run directory or the path of a log.jsonl) -> the log's path; -1 with e. */
int run_log_path(const char *arg, char *path, size_t cap, txl_err *e);

/* The runs' (run directories or log.jsonl files) learning curves: two series per run, train
 * then valid, labelled by the run directory's name (the whole argument when two runs share
 * one); 0 or -1 with e (ERR_INPUT naming the file and line for a log txl did not write). */
int plot_load_runs(series_list *l, char **inputs, int nin, txl_err *e);
/* The gnuplot program of plot_load_runs' curves: bits per byte, or the loss per token (and
 * its perplexity) when a run's train events have no bpc (word and BPE models; every point's
 * y then becomes its loss). */
void plot_curves_program(FILE *f, series_list *l, const plot_opts *o, dropped_pts *d);

/* --probe: loads the probe files and writes the gnuplot program (a panel per needle map,
 * one for the recall curves); 0 or -1 with e. */
int plot_probe_program(FILE *f, char **inputs, int nin, const plot_opts *po, int gain,
                       size_t *npoints, int *npanels, txl_err *e);
/* --terms: loads a run's terms events and writes the gnuplot program (one panel per layer);
 * 0 or -1 with e. */
int plot_terms_program(FILE *f, const char *input, const plot_opts *po, size_t *npoints,
                       int *nlayers, txl_err *e);

#endif

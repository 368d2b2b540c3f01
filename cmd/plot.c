/* plot.c: `txl plot` — the command: its options, length-extrapolation curves (`txl eval
 * --sweep --json` output) and running gnuplot. The learning curves of runs are in
 * plot_curves.c, the probes' pictures in plot_probe.c, a run's score terms (--terms) in
 * plot_terms.c.
 *
 * txl writes one gnuplot program, data inline as datablocks ($name << EOD ... EOD), and
 * pipes it to gnuplot (Debian: gnuplot-nox; terminals pngcairo and svg). `--script` prints
 * that program instead, so a plot can be restyled by hand. gnuplot renders into a temp file
 * next to the output, renamed into place on success: a failed plot never leaves half a file. */
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

#include "cli.h"
#include "cmds.h"
#include "plot.h"

typedef struct {
    const char *out, *title, *size;
    int sweep, probe, terms, gain, script, quiet, logx;
    double ymax;
    char **inputs;           /* the positional arguments */
    int n_inputs;
} plot_args;

#define O(f) offsetof(plot_args, f)
static const cli_opt plot_options[] = {
    {.short_name = "-o", .name = "--output", .type = CLI_FILE, .off = O(out), .metavar = "FILE",
     .needs = "a file (OUT.png or OUT.svg)", .glob = "*.@(png|svg)",
     .help = "the image; .png (pngcairo) or .svg (required)"},
    {.name = "--sweep", .type = CLI_SWITCH, .off = O(sweep), .excludes = "--probe",
     .help = "the arguments are eval --sweep --json outputs, not run dirs"},
    {.name = "--probe", .type = CLI_SWITCH, .off = O(probe), .excludes = "--terms",
     .help = "the arguments are 'txl probe needle|recall --json' outputs: needle heat maps "
             "(length x depth, a panel per checkpoint and mode, one color scale) and recall "
             "curves (a panel of their own)"},
    {.name = "--terms", .type = CLI_SWITCH, .off = O(terms), .excludes = "--sweep",
     .help = "the argument is one run directory: the spread of each score term against the "
             "step, one panel per layer, from its terms events (train.term_stats_interval)"},
    {.name = "--gain", .type = CLI_SWITCH, .off = O(gain),
     .help = "--probe needle: color by the retrieval gain in bits, not the accuracy"},
    {.name = "--title", .type = CLI_STR, .off = O(title), .metavar = "TEXT", .needs = "text",
     .help = "plot title", .def_doc = "what is plotted"},
    {.name = "--size", .type = CLI_STR, .off = O(size), .metavar = "W,H",
     .needs = "W,H in pixels like 960,600", .suggest = "960,600 1280,800",
     .help = "image size in pixels", .def_doc = "960,600"},
    {.name = "--logx", .type = CLI_SWITCH, .off = O(logx), .def = -1,
     .help = "logarithmic x axis (default: when the x range spans 2+ decades; --sweep: when it "
             "spans 4x or more, base 2)"},
    {.name = "--no-logx", .type = CLI_SWITCH, .off = O(logx), .def = -1, .flags = CLI_NEGATE,
     .help = "linear x axis"},
    {.name = "--ymax", .type = CLI_NUM, .off = O(ymax), .dlo = 1e-6, .dhi = 1e6, .ddef = NAN,
     .metavar = "Y", .help = "clip the y axis at Y (bits per byte; for word and BPE runs' "
     "curves nats per token)", .def_doc = "automatic"},
    {.name = "--script", .type = CLI_SWITCH, .off = O(script),
     .help = "print the gnuplot program (with its data) to stdout, do not run it"},
    CLI_OPT_QUIET(O(quiet), "no message on stderr"),
};
#undef O

const cli_spec plot_spec = {
    CLI_OPTS(plot_options),
    .about = "Draws bits per byte against training tokens for one or more runs "
             "(RUN_DIR/log.jsonl: train events as solid lines, validation as points and line, "
             "one color per run; for word and BPE runs, whose train events have no bits per "
             "byte, the loss per token with its perplexity on the right-hand axis), or, with --sweep, bits per byte against the evaluated context "
             "(tgt_len + mem_len) from the output of 'txl eval --sweep ... --json' (one color "
             "per checkpoint the rows name, or per 'scheme' field when they have one; line "
             "style per sweep_mode), with --probe the probes' results, with --terms a run's "
             "score terms. Needs gnuplot "
             "(apt-get install gnuplot-nox).",
    .notes = "A RUN_DIR may also be the path of a log.jsonl. The environment variable "
             "TXL_GNUPLOT names the gnuplot binary (default: gnuplot on PATH).",
    .example = "examples: txl plot runs/tiny runs/tiny_rope -o curves.png\n"
               "          txl eval runs/tiny/best.safetensors.gz --sweep 1,2,4,8 --json > "
               "sw.jsonl\n"
               "          txl plot --sweep sw.jsonl -o extrap.svg\n"
               "          txl plot --terms runs/tiny -o terms.png",
    .pos_max = -1,
    .pos_glob = NULL, /* run directories */
    .pos_glob_if = "--sweep",
    .pos_glob_alt = "*.@(jsonl|json)",
};

/* A curve's group (one color): the rows' own label (`scheme`, as scripts/extrapolation.sh
 * writes it), else the checkpoint they measured (`checkpoint` and `step`, which txl eval
 * writes), else the pos_scheme of a single file's rows (files of older txl), else the file. */
typedef struct {
    char key[PLOT_LABEL + 32];
    char ckpt[1024];     /* the checkpoint's path when the group is one, else "" */
    long step;
} sweep_group;

#define MAX_GROUPS 64

typedef struct {
    series_list *l;
    const char *file_label;
    int ngroups;
    sweep_group *groups; /* [MAX_GROUPS] */
    txl_err *e;
    const char *path;
    long used;
    int by_scheme;       /* one file: its rows' pos_scheme names the groups */
} sweep_ctx;

/* The group of a row (a new one when its key is new): its index, or -1 with e. */
static int sweep_group_of(sweep_ctx *c, const cJSON *o, long ln)
{
    sweep_group g = {.step = 0};
    const char *scheme = str_field(o, "scheme"), *ck = str_field(o, "checkpoint");
    if (!scheme && ck) {
        if (int_field(o, "step", 0, PLOT_INT_MAX, c->path, ln, &g.step, c->e) < 0)
            return -1;
        snprintf(g.ckpt, sizeof g.ckpt, "%s", ck);
        snprintf(g.key, sizeof g.key, "%s\n%ld", ck, g.step);
    } else {
        if (!scheme && c->by_scheme)
            scheme = str_field(o, "pos_scheme");
        snprintf(g.key, sizeof g.key, "%s", scheme ? scheme : c->file_label);
    }
    for (int i = 0; i < c->ngroups; i++)
        if (strcmp(c->groups[i].key, g.key) == 0)
            return i;
    if (c->ngroups == MAX_GROUPS)
        return err_set(c->e, ERR_INPUT, "%s:%ld: more than %d groups (checkpoints, schemes or "
                       "files)", c->path, ln, MAX_GROUPS);
    c->groups[c->ngroups] = g;
    return c->ngroups++;
}

static int sweep_line(const cJSON *o, long ln, void *vctx)
{
    sweep_ctx *c = vctx;
    double tgt, mem, bpc;
    long factor = 1;
    if (!num_field(o, "bpc", &bpc)) {
        double loss;
        if (!num_field(o, "loss", &loss))
            return 0; /* not an evaluation row (e.g. --term-stats) */
        bpc = loss / M_LN2;
    }
    if (!num_field(o, "tgt_len", &tgt) || !num_field(o, "mem_len", &mem))
        return err_set(c->e, ERR_INPUT, "%s:%ld: an evaluation row without tgt_len and "
                       "mem_len (expected the output of 'txl eval --sweep ... --json')",
                       c->path, ln);
    if (int_field(o, "factor", 1, PLOT_INT_MAX, c->path, ln, &factor, c->e) < 0)
        return -1;
    int g = sweep_group_of(c, o, ln);
    if (g < 0)
        return -1;
    const char *label = c->groups[g].key; /* a checkpoint's is replaced once all are read */
    const char *mode = str_field(o, "sweep_mode");
    if (!mode)
        mode = "";
    series *s = NULL;
    for (size_t i = 0; i < c->l->n && !s; i++)
        if (c->l->s[i].group == g && strcmp(c->l->s[i].mode, mode) == 0)
            s = &c->l->s[i];
    if (!s) {
        if (!(s = list_add(c->l)) || !(s->label = dupstr(label)) || !(s->mode = dupstr(mode)))
            return err_set(c->e, ERR_RUNTIME, "out of memory");
        s->group = g;
    }
    if (pt_push(s, tgt + mem, bpc, factor))
        return err_set(c->e, ERR_RUNTIME, "out of memory");
    c->used++;
    return 0;
}

static int cmp_point_x(const void *a, const void *b)
{
    double x = ((const point *)a)->x, y = ((const point *)b)->x;
    return (x > y) - (x < y);
}

static int mode_rank(const char *m)
{
    return strcmp(m, "memory") == 0 ? 0 : strcmp(m, "both") == 0 ? 1
         : strcmp(m, "window") == 0 ? 2 : 3;
}

static int cmp_series(const void *a, const void *b)
{
    const series *x = a, *y = b;
    if (x->group != y->group)
        return x->group - y->group;
    return mode_rank(x->mode) - mode_rank(y->mode);
}

/* ---- the gnuplot program ------------------------------------------------------------ */

static void gp_sweep(FILE *f, const series_list *l, const plot_opts *o, dropped_pts *d)
{
    double lo, hi;
    x_range(l, &lo, &hi);
    int modes = 0; /* distinct sweep modes: the legend names them only when they differ */
    for (size_t i = 0; i < l->n; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= strcmp(l->s[i].mode, l->s[j].mode) == 0;
        modes += !seen;
    }
    /* the trained context: factor 1 of a memory/both sweep, when all agree */
    double trained = NAN;
    int agree = 1;
    for (size_t i = 0; i < l->n; i++) {
        if (strcmp(l->s[i].mode, "window") == 0)
            continue;
        for (size_t k = 0; k < l->s[i].n; k++)
            if (l->s[i].p[k].step == 1) {
                if (isnan(trained))
                    trained = l->s[i].p[k].x;
                else if (trained != l->s[i].p[k].x)
                    agree = 0;
            }
    }
    gp_header(f, o, "length extrapolation: bits per byte against evaluated context",
              "evaluated context: tgt_len + mem_len (tokens)", "bits per byte (bpc)");
    int logx = isfinite(lo) && (o->logx >= 0 ? o->logx : hi / lo >= 4);
    if (logx)
        fprintf(f, "set logscale x 2\nset mxtics default\nset xrange [%g:%g]\n", lo / 1.06,
                hi * 1.06);
    fputs("set key outside right top width 1\n", f);
    if (agree && isfinite(trained) && (!logx || trained > 0)) {
        fprintf(f, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 3 lw 1.2 "
                "lc rgb '#777777'\n", trained, trained);
        fprintf(f, "set label 'trained context' at %g, graph 0.97 offset 0.5,0 left "
                "tc rgb '#555555'\n", trained);
    }
    for (size_t i = 0; i < l->n; i++) {
        char name[32];
        snprintf(name, sizeof name, "sweep%zu", i);
        gp_block(f, name, &l->s[i], 1, logx, d);
    }
    fputs("plot ", f);
    int first = 1;
    for (size_t i = 0; i < l->n; i++) {
        const series *s = &l->s[i];
        const char *m = s->mode;
        if (!n_drawable(s, logx))
            continue;
        int win = strcmp(m, "window") == 0, both = strcmp(m, "both") == 0;
        char t[300];
        if (modes > 1 && *m)
            snprintf(t, sizeof t, "%s, %s", s->label, m);
        else
            snprintf(t, sizeof t, "%s", s->label);
        fprintf(f, "%s$sweep%zu using 1:2 with linespoints lw %s dt %d pt %d ps 1.2 "
                "lc rgb '%s' title ", first ? "" : ", \\\n     ", i, win ? "1.4" : "2",
                win ? 2 : both ? 4 : 1, win ? 6 : both ? 5 : 7, plot_palette[s->group % PLOT_NPAL]);
        gp_str(f, t);
        first = 0;
    }
    fputs("\nunset output\n", f);
}

/* ---- running gnuplot ---------------------------------------------------------------- */

/* mkstemp makes 0600 files; the image gets the mode a plain fopen would give it. */
static mode_t current_umask(void)
{
    mode_t m = umask(022);
    umask(m);
    return m;
}

/* The gnuplot binary: $TXL_GNUPLOT, else `gnuplot` on PATH; NULL when there is none. */
static const char *find_gnuplot(char *buf, size_t cap)
{
    const char *env = getenv("TXL_GNUPLOT");
    if (env && *env) {
        if (strchr(env, '/'))
            return access(env, X_OK) == 0 ? env : NULL;
        /* a bare name: search PATH below */
    } else {
        env = "gnuplot";
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        snprintf(buf, cap, "%.*s/%s", (int)n, n ? path : ".", env);
        if (access(buf, X_OK) == 0)
            return buf;
        path += n + (end ? 1 : 0);
    }
    return NULL;
}

/* Runs prog (the whole program text) through gnuplot; -1 with a message on failure. */
static int run_gnuplot(const char *gp, const char *prog, size_t len, txl_err *e)
{
    char cmd[4200];
    size_t o = 0;
    cmd[o++] = '\'';
    for (const char *p = gp; *p && o < sizeof cmd - 8; p++) {
        if (*p == '\'') {
            memcpy(cmd + o, "'\\''", 4);
            o += 4;
        } else {
            cmd[o++] = *p;
        }
    }
    cmd[o++] = '\'';
    cmd[o] = 0;
    void (*old)(int) = signal(SIGPIPE, SIG_IGN); /* gnuplot dying must not kill txl */
    fflush(NULL);
    FILE *p = popen(cmd, "w");
    if (!p) {
        signal(SIGPIPE, old);
        return err_set(e, ERR_RUNTIME, "cannot run %s: %s", gp, strerror(errno));
    }
    size_t w = fwrite(prog, 1, len, p);
    int st = pclose(p);
    signal(SIGPIPE, old);
    if (st == -1)
        return err_set(e, ERR_RUNTIME, "%s: %s", gp, strerror(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || w != len)
        return err_set(e, ERR_RUNTIME, "gnuplot (%s) failed (%s %d); its messages are above", gp,
                       WIFEXITED(st) ? "exit status" : "signal",
                       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    return 0;
}

/* --size W,H (or WxH) in pixels. */
static int parse_size(const char *v, plot_opts *po)
{
    char *end;
    long w = strtol(v, &end, 10), h = 0;
    if (w > 0 && (*end == ',' || *end == 'x'))
        h = strtol(end + 1, &end, 10);
    if (w < 200 || w > 10000 || h < 150 || h > 10000 || *end)
        return cli_usage("plot", "--size: expected W,H in pixels like 960,600 (200..10000 x "
                         "150..10000), found '%s'", v);
    po->width = (int)w;
    po->height = (int)h;
    return 0;
}

/* The legend names of the checkpoint groups: the shortest that tell them apart. */
static int label_ckpt_groups(series_list *l, const sweep_group *g, int n, txl_err *e)
{
    const char *paths[MAX_GROUPS];
    long steps[MAX_GROUPS];
    int idx[MAX_GROUPS], k = 0;
    for (int i = 0; i < n; i++)
        if (g[i].ckpt[0]) {
            paths[k] = g[i].ckpt;
            steps[k] = g[i].step;
            idx[k++] = i;
        }
    char (*lab)[PLOT_LABEL] = k ? malloc((size_t)k * sizeof *lab) : NULL;
    if (k && !lab)
        return err_set(e, ERR_RUNTIME, "out of memory");
    ckpt_labels(paths, steps, k, lab);
    for (size_t i = 0; i < l->n; i++)
        for (int j = 0; j < k; j++)
            if (l->s[i].group == idx[j]) {
                char *d = dupstr(lab[j]);
                if (!d) {
                    free(lab);
                    return err_set(e, ERR_RUNTIME, "out of memory");
                }
                free(l->s[i].label);
                l->s[i].label = d;
            }
    free(lab);
    return 0;
}

/* The sweep files' rows, one series per group (checkpoint, scheme or file) and sweep mode,
 * sorted. */
static int load_sweeps(series_list *l, char **inputs, int nin, txl_err *e)
{
    sweep_group *groups = calloc(MAX_GROUPS, sizeof *groups);
    if (!groups)
        return err_set(e, ERR_RUNTIME, "out of memory");
    int ngroups = 0, rc = 0;
    for (int k = 0; k < nin && !rc; k++) {
        char lab[1024];
        run_label(lab, sizeof lab, inputs[k]);
        size_t n = strlen(lab);
        if (n > 6 && strcmp(lab + n - 6, ".jsonl") == 0)
            lab[n - 6] = 0;
        sweep_ctx c = {l, lab, ngroups, groups, e, inputs[k], 0, nin == 1};
        long nlines = 0;
        if (access(inputs[k], F_OK) != 0)
            rc = err_set(e, ERR_INPUT, "%s: no such sweep file", inputs[k]);
        else if (each_json_line(inputs[k], sweep_line, &c, &nlines, e))
            rc = -1;
        else if (c.used == 0)
            rc = err_set(e, ERR_INPUT, "%s: no evaluation rows to plot (%s)", inputs[k],
                         nlines ? "expected the output of 'txl eval --sweep ... --json'"
                                : "empty file");
        ngroups = c.ngroups;
    }
    if (!rc)
        rc = label_ckpt_groups(l, groups, ngroups, e);
    free(groups);
    if (rc)
        return -1;
    for (size_t i = 0; i < l->n; i++)
        qsort(l->s[i].p, l->s[i].n, sizeof *l->s[i].p, cmp_point_x);
    /* legend order: group by group (first appearance), memory before both before window */
    if (l->n)
        qsort(l->s, l->n, sizeof *l->s, cmp_series);
    return 0;
}

/* The gnuplot program for l (or the probe files, or a run's terms), in a malloc'd string;
 * NULL with e. *npoints and *npanels: the probe's or the terms' points and panels; *d: the
 * curves' or sweeps' points left out of the data. */
static char *gp_program(series_list *l, const plot_opts *po, const plot_args *a,
                        size_t *len, size_t *npoints, int *npanels, dropped_pts *d, txl_err *e)
{
    char *prog = NULL;
    FILE *ms = open_memstream(&prog, len);
    if (!ms) {
        err_set(e, ERR_RUNTIME, "out of memory");
        return NULL;
    }
    fprintf(ms, "# txl %s plot: %s\n", TXL_VERSION,
            a->sweep ? "--sweep" : a->probe ? "--probe" : a->terms ? "--terms" : "learning curves");
    int rc = 0;
    if (a->probe)
        rc = plot_probe_program(ms, a->inputs, a->n_inputs, po, a->gain, npoints, npanels, e);
    else if (a->terms)
        rc = plot_terms_program(ms, a->inputs[0], po, npoints, npanels, e);
    else if (a->sweep)
        gp_sweep(ms, l, po, d);
    else
        plot_curves_program(ms, l, po, d);
    if (fclose(ms) != 0 || rc) {
        if (!rc)
            err_set(e, ERR_RUNTIME, "out of memory");
        free(prog);
        return NULL;
    }
    return prog;
}

/* -o OUT can take the image (cli_check_output): not a directory, a device or a FIFO, and
 * none of the inputs (an argument, or the log.jsonl of a run directory). */
static int check_out(const plot_args *a, txl_err *e)
{
    int n = a->n_inputs;
    const char **in = calloc(2 * (size_t)n, sizeof *in);
    char (*logs)[2048] = malloc((size_t)n * sizeof *logs);
    int rc;
    if (!in || !logs) {
        rc = err_set(e, ERR_RUNTIME, "out of memory");
    } else {
        txl_err ignored; /* a missing input is its reader's to report */
        for (int i = 0; i < n; i++) {
            in[2 * i] = a->inputs[i];
            if (run_log_path(a->inputs[i], logs[i], sizeof logs[i], &ignored) == 0)
                in[2 * i + 1] = logs[i];
        }
        rc = cli_check_output("-o", a->out, in, 2 * n, e);
    }
    free(in);
    free(logs);
    return rc;
}

/* Whether gnuplot's image at path (size bytes) is whole, and on disk: gnuplot's terminals
 * do not report a failed write (a full disk leaves a cut PNG and exit 0), so the end is
 * checked (a PNG ends with its IEND chunk, an SVG with </svg>) and the file synced before
 * it is renamed into place. 0, or -1 with e. */
static int image_complete(const char *path, const char *out, int svg, off_t size, txl_err *e)
{
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    char tail[64];
    size_t want = svg ? sizeof tail : sizeof iend;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t got = fd < 0 || size < (off_t)want ? -1 : pread(fd, tail, want, size - (off_t)want);
    int whole = got == (ssize_t)want;
    if (whole && !svg)
        whole = memcmp(tail, iend, sizeof iend) == 0;
    else if (whole) {
        size_t n = want;
        while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == '\r' || tail[n - 1] == ' '))
            n--;
        whole = n >= 6 && memcmp(tail + n - 6, "</svg>", 6) == 0;
    }
    int synced = fd >= 0 && fsync(fd) == 0;
    int err = errno;
    if (fd >= 0)
        close(fd);
    if (!whole)
        return err_set(e, ERR_RUNTIME, "-o %s: gnuplot wrote an incomplete image (%lld bytes, "
                       "without the end of %s file); is the disk full?", out, (long long)size,
                       svg ? "an SVG" : "a PNG");
    if (!synced)
        return err_set(e, ERR_RUNTIME, "-o %s: %s", out, strerror(err));
    return 0;
}

/* Prints the program (--script), or has gnuplot draw it into a temp file next to OUT,
 * renamed into place when it is whole (image_complete). Returns the exit code. */
static int render(series_list *l, plot_opts *po, const plot_args *a)
{
    txl_err e = {0};
    char tmp[4096], gpbuf[4096];
    const char *gp = NULL, *out = po->out;
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", out);
    if (!a->script) {
        gp = find_gnuplot(gpbuf, sizeof gpbuf);
        if (!gp) {
            const char *env = getenv("TXL_GNUPLOT");
            fprintf(stderr, "txl plot: gnuplot not found%s%s%s; install it with "
                    "'apt-get install gnuplot-nox' (or print the program with --script)\n",
                    env ? " (TXL_GNUPLOT=" : " on PATH", env ? env : "", env ? ")" : "");
            return 1;
        }
        int fd = mkstemp(tmp);
        if (fd < 0) {
            err_set(&e, ERR_INPUT, "-o %s: cannot write there: %s", out, strerror(errno));
            return cli_fail("plot", &e);
        }
        close(fd);
        po->out = tmp;
    }
    size_t plen = 0, probe_points = 0;
    int panels = 0;
    dropped_pts dropped = {0};
    char *prog = gp_program(l, po, a, &plen, &probe_points, &panels, &dropped, &e);
    po->out = out;
    int bad = prog ? 0 : -1;
    struct stat sb;
    if (!bad && a->script)
        fwrite(prog, 1, plen, stdout);
    else if (!bad && run_gnuplot(gp, prog, plen, &e))
        bad = -1;
    else if (!bad && (stat(tmp, &sb) != 0 || sb.st_size == 0))
        bad = err_set(&e, ERR_RUNTIME, "gnuplot (%s) wrote no image", gp);
    else if (!bad && image_complete(tmp, out, po->svg, sb.st_size, &e))
        bad = -1;
    else if (!bad && (chmod(tmp, 0666 & ~current_umask()) != 0 || rename(tmp, out) != 0))
        bad = err_set(&e, ERR_INPUT, "-o %s: %s", out, strerror(errno));
    free(prog);
    if (bad) {
        if (!a->script)
            unlink(tmp);
        return cli_fail("plot", &e);
    }
    if (!a->quiet && dropped.zero_logx)
        fprintf(stderr, "txl plot: %zu point%s at x = 0 (an evaluation at step 0: 0 tokens) "
                "left out: a logarithmic x axis has no 0 (--no-logx draws %s)\n",
                dropped.zero_logx, dropped.zero_logx == 1 ? "" : "s",
                dropped.zero_logx == 1 ? "it" : "them");
    if (!a->quiet && dropped.not_finite)
        fprintf(stderr, "txl plot: %zu point%s left out: %s x overflows (the token counts are "
                "too large)\n", dropped.not_finite, dropped.not_finite == 1 ? "" : "s",
                dropped.not_finite == 1 ? "its" : "their");
    if (!a->script && !a->quiet) {
        size_t np = probe_points;
        for (size_t i = 0; i < l->n; i++)
            np += l->s[i].n;
        np -= dropped.zero_logx + dropped.not_finite;
        size_t nc = a->probe || a->terms ? (size_t)panels : a->sweep ? l->n : l->n / 2;
        fprintf(stderr, "txl plot: %s (%zu %s%s, %zu points)\n", out, nc,
                a->probe ? "panel" : a->terms ? "layer" : a->sweep ? "curve" : "run",
                nc == 1 ? "" : "s", np);
    }
    return 0;
}

/* The plot of the (expanded) inputs: the exit code. */
static int plot_files(plot_args a, const cli_pos pos, plot_opts po)
{
    int rc;
    if (!a.out)
        return cli_usage("plot", "missing -o OUT.png or -o OUT.svg");
    size_t olen = strlen(a.out);
    po.svg = olen > 4 && strcasecmp(a.out + olen - 4, ".svg") == 0;
    int png = olen > 4 && strcasecmp(a.out + olen - 4, ".png") == 0;
    if (!po.svg && !png) {
        const char *dot = strrchr(a.out, '.');
        return cli_usage("plot", "-o %s: unknown image type '%s' (expected .png or .svg)", a.out,
                         dot && !strchr(dot, '/') ? dot : "(no extension)");
    }
    series_list l = {0};
    txl_err e = {0};
    a.inputs = pos.v;
    a.n_inputs = pos.n;
    if (!a.script && check_out(&a, &e)) /* --script writes no image */
        return cli_fail("plot", &e);
    if (a.probe || a.terms)
        rc = render(&l, &po, &a);
    else if (a.sweep ? load_sweeps(&l, pos.v, pos.n, &e) : plot_load_runs(&l, pos.v, pos.n, &e))
        rc = cli_fail("plot", &e);
    else
        rc = render(&l, &po, &a);
    list_free(&l);
    return rc;
}

int cmd_plot(int argc, char **argv)
{
    plot_args a;
    cli_pos pos;
    int rc = cli_parse(txl_command("plot"), argc, argv, &a, &pos);
    if (rc >= 0)
        return rc;
    plot_opts po = {.out = a.out, .width = 960, .height = 600, .logx = a.logx,
                    .ymax = a.ymax, .title = a.title};
    if (a.size && parse_size(a.size, &po))
        return 2;
    po.fixed_size = a.size != NULL;
    if (pos.n == 0)
        return cli_usage("plot", a.sweep
                         ? "missing the sweep file(s) (the output of txl eval --sweep ... --json)"
                         : a.probe ? "missing the probe file(s) (the output of txl probe ... "
                                     "--json)"
                         : a.terms ? "missing the run directory whose terms to plot"
                                   : "missing the run directory (or directories) to plot");
    txl_err e = {0};
    cli_globbed g; /* quoted globs (a pattern the shell did not expand) expanded */
    if (cli_glob(&pos, &g, &e))
        return cli_fail("plot", &e);
    pos.v = g.v;
    pos.n = g.n;
    rc = a.terms && pos.n > 1
             ? cli_usage("plot", "--terms draws one run at a time, found %d arguments ('%s', "
                         "'%s'%s)", pos.n, pos.v[0], pos.v[1], pos.n > 2 ? ", ..." : "")
             : plot_files(a, pos, po);
    cli_globbed_free(&g);
    return rc;
}

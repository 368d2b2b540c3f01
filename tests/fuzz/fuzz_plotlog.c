/* fuzz_plotlog.c: the run-log reader of `txl plot RUN_DIR` (cmd/plot_curves.c over
 * cmd/plot_util.c's JSON-lines reader) and the gnuplot program it writes.
 *
 * Input: a log.jsonl. plot_load_runs must refuse it with a message naming the file (a step
 * that is not a whole number in [0, 2^53], a damaged line in the middle, a line over 64 MiB),
 * or give a train and a valid series: train points strictly ascending in step, at finite
 * token counts > 0, every step a whole number in range. The program then written holds only
 * finite numbers in its data (gnuplot reads "nan" and "inf" as points: step 0 once gave
 * -nan, a step of 1e300 overflowed a cast to long), and its points stay within the series'. */
#include <math.h>
#include <string.h>

#include "../../cmd/plot.h"
#include "fuzz.h"

/* Every line of every datablock ($name << EOD ... EOD) is two finite numbers; returns the
 * number of data lines. */
static size_t check_program(const char *prog)
{
    size_t n = 0;
    int in_block = 0;
    for (const char *p = prog; *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char line[512];
        FUZZ_CHECK(!in_block || len < sizeof line, "a data line of %zu bytes", len);
        if (len < sizeof line) {
            memcpy(line, p, len);
            line[len] = 0;
            if (in_block && strcmp(line, "EOD") == 0) {
                in_block = 0;
            } else if (in_block) {
                char *q;
                double x = strtod(line, &q), y = strtod(q, &q);
                FUZZ_CHECK(isfinite(x) && isfinite(y) && *q == 0, "data line '%s'", line);
                n++;
            } else if (strstr(line, " << EOD")) {
                in_block = 1;
            }
        }
        p += len + (end != NULL);
    }
    FUZZ_CHECK(!in_block, "a datablock without its EOD");
    return n;
}

int txl_fuzz_plotlog(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("plotlog", ".jsonl", data, size);
    if (!path)
        return 0;
    char *in[1] = {(char *)path};
    series_list l = {0};
    txl_err e = {0};
    if (plot_load_runs(&l, in, 1, &e)) {
        FUZZ_CHECK(e.kind == ERR_INPUT || e.kind == ERR_RUNTIME, "kind %d", e.kind);
        if (e.kind == ERR_INPUT)
            FUZZ_CHECK(strncmp(e.msg, path, strlen(path)) == 0,
                       "message does not name the file: %s", e.msg);
        list_free(&l);
        return 0;
    }
    FUZZ_CHECK(l.n == 2 && l.s[0].n + l.s[1].n > 0, "%zu series, %zu points", l.n,
               l.n ? l.s[0].n : 0);
    const series *t = &l.s[0];
    for (size_t k = 0; k < t->n; k++) {
        FUZZ_CHECK(isfinite(t->p[k].x) && t->p[k].x > 0, "train point %zu at x %g", k, t->p[k].x);
        FUZZ_CHECK(k == 0 || t->p[k].step > t->p[k - 1].step, "train steps out of order");
    }
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < l.s[i].n; k++) {
            const point *p = &l.s[i].p[k];
            FUZZ_CHECK(p->step >= 0 && p->step <= (long)PLOT_INT_MAX, "step %ld", p->step);
            FUZZ_CHECK(isfinite(p->y) || isfinite(p->loss), "a point with neither bpc nor loss");
        }
    size_t points = l.s[0].n + l.s[1].n;
    for (int logx = 0; logx < 2; logx++) {
        plot_opts po = {.out = "fuzz.svg", .svg = 1, .width = 960, .height = 600,
                        .logx = logx, .ymax = NAN};
        char *prog = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&prog, &len);
        if (!f)
            break;
        dropped_pts d = {0};
        plot_curves_program(f, &l, &po, &d);
        if (fclose(f) == 0 && prog) {
            size_t n = check_program(prog);
            FUZZ_CHECK(n + d.zero_logx + d.not_finite == l.s[0].n + l.s[1].n,
                       "%zu data lines + %zu + %zu left out, %zu points", n, d.zero_logx,
                       d.not_finite, l.s[0].n + l.s[1].n);
        }
        FUZZ_CHECK(l.s[0].n + l.s[1].n <= points, "the program added points");
        free(prog);
    }
    list_free(&l);
    return 0;
}

FUZZ_ENTRY(txl_fuzz_plotlog)

/* terms.c: see terms.h. */
#include "terms.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int terms_init(terms_pass *tp, model *mdl, const model_config *cfg, const tok_stream *ts,
               int B, int T, int M, size_t segments, txl_err *e)
{
    memset(tp, 0, sizeof *tp);
    tp->n_layer = cfg->n_layer;
    tp->st = calloc((size_t)cfg->n_layer, sizeof *tp->st);
    if (!tp->st)
        return err_set(e, ERR_RUNTIME, "out of memory");
    eval_opts o = {.batch = B, .tgt_len = T, .mem_len = M, .max_segments = segments,
                   .stats = tp->st, .label = "term-stats"};
    return eval_plan_init(&tp->plan, mdl, cfg, ts, &o, e);
}

int terms_run(terms_pass *tp, txl_err *e)
{
    memset(tp->st, 0, (size_t)tp->n_layer * sizeof *tp->st);
    eval_result r;
    if (eval_plan_run(&tp->plan, &r, e))
        return -1;
    tp->segments = r.segments;
    return 0;
}

void terms_free(terms_pass *tp)
{
    eval_plan_free(&tp->plan);
    free(tp->st);
    memset(tp, 0, sizeof *tp);
}

/* A term is weak when its spread is under 1/TERM_WEAK of the content term's. The threshold
 * is what tests/e2e/terms.sh shows to separate a term trained away (model.xl_terms without
 * it: std 0) from the same term of intact models: xl's u and v terms measure 1/620 of the
 * content term's after 40 steps of micro, 1/70 to 1/3 in the trained fixtures, and 1/10
 * (the earlier threshold) called u and v weak in every layer of a plain xl model. */
#define TERM_WEAK 1000.0

/* A term's verdict against the content term (doc/design.md, "The model": Diagnostics): a
 * spread over 10x or under 1/TERM_WEAK of the content term's, or xl's global position term
 * (d) with a zero mean. Writes the reason into why ("" when healthy); returns 1 if flagged. */
static int term_verdict(const char *name, double mean, double sd, double content_sd,
                        int is_content, char *why, size_t cap)
{
    why[0] = '\0';
    if (is_content)
        return 0;
    if (content_sd > 0 && sd > 10 * content_sd)
        snprintf(why, cap, "dominates: std %.3g is %.0fx the content term's", sd, sd / content_sd);
    else if (content_sd > 0 && sd < content_sd / TERM_WEAK)
        snprintf(why, cap, "weak: std %.3g is under 1/%.0f of the content term's (as if the "
                 "term were not there)", sd, TERM_WEAK);
    else if (!strcmp(name, "global_position_bias") && fabs(mean) < 1e-6 * (content_sd + 1e-30))
        snprintf(why, cap, "dead: its mean is zero");
    return why[0] != '\0';
}

void terms_table_head(FILE *f)
{
    fprintf(f, "%-6s %-22s %12s %12s  %s\n", "layer", "term", "mean", "std", "verdict");
}

void terms_print_layer(FILE *f, const model_config *mc, const term_stats *st, int l, int json)
{
    const char *const *names = pos_get(mc->pos)->term_names; /* the scheme's terms */
    int nterms = 0, flags = 0;
    while (nterms < 4 && names[nterms])
        nterms++;
    double n = st->count > 0 ? st->count : 1, mean[4], sd[4];
    for (int t = 0; t < nterms; t++) {
        mean[t] = st->acc[t][0] / n;
        double var = st->acc[t][1] / n - mean[t] * mean[t];
        sd[t] = sqrt(var > 0 ? var : 0);
    }
    if (json)
        fprintf(f, "{\"layer\":%d,\"pos_scheme\":\"%s\",\"entries\":%.0f", l,
                pos_scheme_name(mc->pos), st->count);
    for (int t = 0; t < nterms; t++) {
        char why[128];
        int bad = term_verdict(names[t], mean[t], sd[t], sd[0], t == 0, why, sizeof why);
        flags += bad;
        if (json) {
            fprintf(f, ",\"%s\":{\"mean\":%.6g,\"std\":%.6g", names[t], mean[t], sd[t]);
            if (bad)
                fprintf(f, ",\"flag\":\"%s\"", why);
            fprintf(f, "}");
        } else {
            fprintf(f, "%-6d %-22s %12.5f %12.5f  %s\n", l, names[t], mean[t], sd[t],
                    bad ? why : "ok");
        }
    }
    if (json)
        fprintf(f, ",\"verdict\":\"%s\"}", flags ? "flagged" : "ok");
}

/* probe_shift.c: translation invariance (doc/design.md, "Probes"). The same text (the first
 * max_tokens bytes of the span) is evaluated with every absolute coordinate a scheme uses
 * shifted by K (fwd_opts.pos_offset): rope rotates by m+i+K and j+K, absolute reads P[i+K];
 * xl, mlp, alibi and hier see differences only, so their loss must not change at all. Each
 * row gives the loss at K and its change from K = 0. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../common/sys.h"
#include "evaluate.h"
#include "../model/gemm.h"
#include "probe.h"

/* The row of offset off: the loss there and its change from the first offset's, base. */
static int offset_row(probe_ctx *p, int off, int off0, const eval_result *r, double base,
                      txl_err *e)
{
    double d = r->loss - base, rel = base != 0 ? d / base : NAN;
    probe_row row;
    if (probe_row_begin(&row, e))
        return -1;
    fprintf(row.json, "{\"probe\":\"shift\",\"offset\":%d,\"loss\":", off);
    print_num(row.json, r->loss);
    fprintf(row.json, ",\"delta\":");
    print_num(row.json, d);
    fprintf(row.json, ",\"relative\":");
    print_num(row.json, rel);
    fprintf(row.json, ",\"base_offset\":%d,\"tokens\":%zu,\"tgt_len\":%d,\"mem_len\":%d,"
            "\"pos_scheme\":\"%s\",\"step\":%ld}", off0, r->tokens, p->T, p->M,
            pos_scheme_name(p->cfg->model.pos), p->step);
    fprintf(row.text, "%10d %12.8f %12.3e %12.3e", off, r->loss, d, rel);
    return probe_row_end(p, &row, NULL, 0, e);
}

int probe_shift(probe_ctx *p, txl_err *e)
{
    static const int def[] = {0, 1, 1000, 100000};
    int off[PROBE_MAX_LIST], n = p->a->offsets.n ? p->a->offsets.n : 4;
    memcpy(off, p->a->offsets.n ? p->a->offsets.v : def, (size_t)n * sizeof *off);
    token_span sp = p->span;
    if (sp.n > (size_t)p->a->max_tokens)
        sp.n = (size_t)p->a->max_tokens;
    tok_stream ts;
    if (cfg_tokens(p->cfg, p->v, sp, &ts, e))
        return -1;
    eval_opts o0 = {.batch = 1, .tgt_len = p->T, .mem_len = p->M, .label = "shift",
                    .anchor_base = p->units.base};
    double bytes;
    char who[128];
    snprintf(who, sizeof who, "probe shift: the evaluation at tgt_len %d with mem_len %d",
             p->T, p->M);
    if (eval_plan_bytes(&p->cfg->model, &ts, &o0, &bytes, e) ||
        sys_check_memory(who, bytes, gemm_as_reserve(), e)) {
        tok_stream_free(&ts);
        return -1;
    }
    snprintf(p->head, sizeof p->head, "%10s %12s %12s %12s", "offset", "loss", "delta",
             "relative");
    double base = NAN;
    int rc = 0;
    for (int k = 0; rc == 0 && k < n; k++) {
        eval_opts o = {.batch = 1, .tgt_len = p->T, .mem_len = p->M, .label = "shift",
                       .pos_offset = off[k], .progress = p->progress};
        eval_result r;
        if (eval_stream(p->mdl, &p->cfg->model, &ts, &o, &r, e)) {
            rc = -1;
            break;
        }
        if (k == 0)
            base = r.loss;
        rc = offset_row(p, off[k], off[0], &r, base, e);
    }
    tok_stream_free(&ts);
    return rc;
}

/* probe_shift.c: translation invariance (doc/design.md, "Probes"). The same text (the first
 * --max-tokens bytes of the span) is evaluated with every absolute coordinate a scheme uses
 * shifted by K (fwd_opts.pos_offset): rope rotates by m+i+K and j+K, absolute reads P[i+K];
 * xl, mlp, alibi and hier see differences only, so their loss must not change at all. Each
 * row gives the loss at K and its change from K = 0. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "evaluate.h"
#include "probe.h"

int probe_shift(probe_ctx *p, txl_err *e)
{
    static const int def[] = {0, 1, 1000, 100000};
    int off[CLI_MAX_LIST], n = p->a->offsets.n ? p->a->offsets.n : 4;
    memcpy(off, p->a->offsets.n ? p->a->offsets.v : def, (size_t)n * sizeof *off);
    token_span sp = p->span;
    if (sp.n > (size_t)p->a->max_tokens)
        sp.n = (size_t)p->a->max_tokens;
    tok_stream ts;
    if (cfg_tokens(&p->cfg, sp, &ts, e))
        return -1;
    eval_opts o0 = {.batch = 1, .tgt_len = p->T, .mem_len = p->M, .label = "shift"};
    double bytes;
    char who[128];
    snprintf(who, sizeof who, "probe shift: the evaluation at tgt_len %d with mem_len %d",
             p->T, p->M);
    if (eval_plan_bytes(&p->cfg.model, &ts, &o0, &bytes, e) || sys_check_memory(who, bytes, e)) {
        tok_stream_free(&ts);
        return -1;
    }
    if (!p->a->json)
        printf("%10s %12s %12s %12s\n", "offset", "loss", "delta", "relative");
    double base = NAN;
    for (int k = 0; k < n; k++) {
        eval_opts o = {.batch = 1, .tgt_len = p->T, .mem_len = p->M, .label = "shift",
                       .pos_offset = off[k], .progress = p->progress};
        eval_result r;
        if (eval_stream(&p->mdl, &p->cfg.model, &ts, &o, &r, e)) {
            tok_stream_free(&ts);
            return -1;
        }
        if (k == 0)
            base = r.loss;
        double d = r.loss - base, rel = base != 0 ? d / base : NAN;
        if (p->a->json) {
            printf("{\"probe\":\"shift\",\"offset\":%d,\"loss\":", off[k]);
            print_num(r.loss);
            printf(",\"delta\":");
            print_num(d);
            printf(",\"relative\":");
            print_num(rel);
            printf(",\"base_offset\":%d,\"tokens\":%zu,\"tgt_len\":%d,\"mem_len\":%d,"
                   "\"pos_scheme\":\"%s\",\"step\":%ld}\n", off[0], r.tokens, p->T, p->M,
                   pos_scheme_name(p->cfg.model.pos), p->step);
        } else {
            printf("%10d %12.8f %12.3e %12.3e\n", off[k], r.loss, d, rel);
        }
        if (cli_stdout_flush())
            break; /* the rest would be lost too; main reports stdout's failure */
    }
    tok_stream_free(&ts);
    return 0;
}

/* evaluate.c: see evaluate.h. */
#include "evaluate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../common/dist.h"
#include "cli.h"

int eval_span(model *mdl, const model_config *cfg, token_span s, const eval_opts *o,
              eval_result *r, txl_err *e)
{
    *r = (eval_result){0};
    if (o->max_tokens && s.n > o->max_tokens)
        s.n = o->max_tokens;
    batcher bt;
    if (batcher_init(&bt, s, o->batch, o->tgt_len, 2, o->label ? o->label : "evaluation", e))
        return -1;
    /* distributed: each rank runs its share of the streams (all of them when the batch does
     * not split evenly), and the sums are combined at the end */
    int nr = o->distributed ? dist_self()->size : 1, rk = o->distributed ? dist_self()->rank : 0;
    if (o->batch % nr) {
        nr = 1;
        rk = 0;
    }
    int nb = o->batch / nr;
    size_t b0 = (size_t)rk * nb;
    model_acts A;
    model_mem mem;
    if (acts_init(&A, cfg, nb, o->tgt_len, o->mem_len, 0, e))
        return -1;
    if (mem_init(&mem, cfg, nb, o->mem_len, e)) {
        acts_free(&A);
        return -1;
    }
    size_t BL = (size_t)o->batch * o->tgt_len;
    uint8_t *x = malloc(BL), *y = malloc(BL);
    if (!x || !y) {
        free(x);
        free(y);
        mem_free(&mem);
        acts_free(&A);
        return err_set(e, ERR_RUNTIME, "out of memory");
    }
    size_t nseg = batcher_segments(&bt);
    if (o->max_segments && nseg > o->max_segments)
        nseg = o->max_segments;
    double t0 = cli_now(), last_draw = 0, sum = 0;
    size_t scored = 0;
    fwd_opts fo = {.training = 0, .stats = o->stats, .pos_offset = o->pos_offset};
    int len;
    while ((len = batcher_next(&bt, x, y, e)) > 0) {
        int full = mem.m >= o->mem_len;
        double l = model_forward(mdl, &A, &mem, x + b0 * len, y + b0 * len, len, &fo);
        if (!o->warmup || full) {
            sum += l;
            scored += (size_t)nb * len;
        }
        r->segments++;
        if (o->max_segments && r->segments >= o->max_segments)
            break;
        double now = cli_now();
        if (o->progress && now - last_draw > 0.25) {
            last_draw = now;
            double el = now - t0, eta = el / r->segments * (nseg - r->segments);
            char etas[32];
            cli_fmt_duration(etas, sizeof etas, eta);
            fprintf(stderr, "\r\033[K%s: segment %zu/%zu  bpc %.4f  %.0f tok/s  ETA %s",
                    o->label ? o->label : "eval", r->segments, nseg,
                    scored ? sum / scored / M_LN2 : 0.0,
                    (double)r->segments * BL / (el > 0 ? el : 1e-9), etas);
        }
    }
    if (o->progress && last_draw > 0)
        fprintf(stderr, "\r\033[K");
    if (len < 0) { /* the corpus could not be read (e.g. truncated meanwhile): e names it */
        free(x);
        free(y);
        mem_free(&mem);
        acts_free(&A);
        return -1;
    }
    if (nr > 1) {
        double v[2] = {sum, (double)scored};
        dist_sum_f64(v, 2);
        sum = v[0];
        scored = (size_t)v[1];
    }
    r->seconds = cli_now() - t0;
    r->tokens = scored;
    r->loss = scored ? sum / (double)scored : NAN;
    free(x);
    free(y);
    mem_free(&mem);
    acts_free(&A);
    if (!scored)
        return err_set(e, ERR_INPUT, "%s: no tokens scored (with --warmup, the memory of %d "
                       "tokens must fill before scoring starts; the streams are too short)",
                       s.path, o->mem_len);
    return 0;
}

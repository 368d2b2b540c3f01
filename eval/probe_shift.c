/* probe_shift.c: translation invariance (doc/design.md, "Probes"). The same text is
 * evaluated with every absolute coordinate a scheme uses shifted by K (fwd_opts.pos_offset):
 * rope rotates by m+i+K and j+K, absolute reads P[i+K]; xl, mlp, alibi, hier and t5 see
 * differences only, fire them and the query's row in its window, so their loss must not
 * change at all. Each row gives the loss at K and its change from K = 0, with the metrics
 * of an evaluation (bpc, ppl, tokens, bytes). The text is the span's first max_tokens bytes
 * (the byte vocabulary: as txl always read it, anchors inserted after), or its first
 * max_tokens tokens under a word or BPE vocabulary (anchors included), as the model's
 * tokens. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/sys.h"
#include "../data/textenc.h"
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
    fprintf(row.json, ",\"bpc\":");
    print_num(row.json, r->bpc);
    fprintf(row.json, ",\"ppl\":");
    print_num(row.json, exp(r->loss));
    fprintf(row.json, ",\"base_offset\":%d,\"tokens\":%zu,\"bytes\":%zu,\"tgt_len\":%d,"
            "\"mem_len\":%d,\"pos_scheme\":\"%s\",\"step\":%ld", off0, r->tokens, r->bytes,
            p->T, p->M, pos_scheme_name(p->cfg->model.pos), p->step);
    probe_json_end(p, row.json);
    fprintf(row.text, "%10d %12.8f %12.3e %12.3e %8.4f", off, r->loss, d, rel, r->bpc);
    return probe_row_end(p, &row, NULL, 0, e);
}

/* Where first_tokens puts the tokens. */
typedef struct {
    tok_stream *ts;
    size_t max, cap;
    int coords;
} first_sink;

static int first_token(void *ctx, const textenc_tok *t)
{
    first_sink *k = ctx;
    if (k->ts->n == k->max)
        return 1; /* enough */
    return tok_stream_push(k->ts, &k->cap, k->coords, t) ? 2 : 0; /* 2: out of memory */
}

/* Word, bpe: the span's first max tokens as the model's (anchors, coordinates), those an
 * encoding of the whole span starts with (the encoder emits only tokens that are final, so
 * the span is read only as far as they go). */
static int first_tokens(const probe_ctx *p, size_t max, tok_stream *ts, txl_err *e)
{
    memset(ts, 0, sizeof *ts);
    ts->span = p->span;
    textenc te;
    if (textenc_init(&te, p->v, &p->units, e))
        return -1;
    first_sink k = {.ts = ts, .max = max, .coords = p->coords};
    uint8_t buf[1 << 16];
    int rc = 0;
    for (size_t off = 0; rc == 0 && off < p->span.n;) {
        size_t len = p->span.n - off < sizeof buf ? p->span.n - off : sizeof buf;
        rc = corpus_read(p->span.c, p->span.begin + off, buf, len, e) ? -2
             : textenc_feed(&te, buf, len, first_token, &k, e);
        off += len;
    }
    if (rc == 0)
        rc = textenc_finish(&te, first_token, &k, e);
    textenc_free(&te);
    if (rc == 1 || rc == 0)
        return 0;
    tok_stream_free(ts);
    if (rc == 2)
        return err_set(e, ERR_RUNTIME, "%s: out of memory for its tokens", p->span.path);
    return rc == -1 ? err_wrap(e, "%s", p->span.path) : -1;
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
    if (p->tokens ? first_tokens(p, (size_t)p->a->max_tokens, &ts, e)
                  : cfg_tokens(p->cfg, p->v, sp, &ts, e))
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
    snprintf(p->head, sizeof p->head, "%10s %12s %12s %12s %8s", "offset", "loss", "delta",
             "relative", "bpc");
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

/* eval.c: include/txl.h's evaluation: every setting (the base lengths, each sweep factor)
 * checked against txl's limits and the machine before the first runs, then one pass of
 * eval/evaluate.c per setting, reported as a row (doc/design.md, "Evaluation"). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/json.h"
#include "../common/sys.h"
#include "../model/gemm.h"
#include "../eval/evaluate.h"
#include "../eval/terms.h"
#include "../model/pos.h"
#include "api.h"

static const char *const mode_names[] = {"memory", "window", "both"};

/* What every setting of a call shares. */
typedef struct {
    txl_model *m;
    const txl_eval_opts *o;
    model_config mc;          /* the model's, clamp_len as asked */
    corpus c;
    token_span span;
    tok_stream ts;            /* the span's tokens (anchors, coordinates) */
    const char *label;        /* "file" or the split's name */
    int B, base_tgt, base_mem, is_sweep, n;
    const int *factors;
} eval_call;

/* The lengths of one setting (long long: factor x length may not fit an int). */
static void setting_lengths(const eval_call *c, int fct, long long *T, long long *Mm)
{
    *T = c->base_tgt;
    *Mm = c->base_mem;
    switch (c->o->mode) {
    case TXL_SWEEP_MEMORY: /* a model trained without memory: context = factor x tgt_len */
        *Mm = c->base_mem > 0 ? (long long)c->base_mem * fct : (long long)c->base_tgt * (fct - 1);
        break;
    case TXL_SWEEP_WINDOW:
        *T = (long long)c->base_tgt * fct;
        *Mm = 0;
        break;
    case TXL_SWEEP_BOTH:
        *T = (long long)c->base_tgt * fct;
        *Mm = (long long)c->base_mem * fct;
        break;
    }
}

/* A setting whose lengths or activation plan are beyond what txl can represent (the
 * options and sweep factors multiply the trained lengths), or whose pass (the plan
 * eval_stream makes) does not fit this machine, is refused before any work. */
static int check_setting(const eval_call *c, long long T, long long Mm, long segments,
                         const char *what, txl_err *e)
{
    if (T + Mm > INT_MAX / 2)
        return err_set(e, ERR_INPUT, "%s: tgt_len %lld + mem_len %lld is too long (at most %d)",
                       what, T, Mm, INT_MAX / 2);
    if (c->o->same_length && Mm == 0)
        return err_set(e, ERR_INPUT, "%s: same length needs a memory: with mem_len 0 the "
                       "queries of a segment see 1 to tgt_len %lld keys (evaluate with "
                       "--mem-len N, or a memory or both sweep)", what, T);
    double p;
    if (acts_plan_floats(&c->mc, c->B, (int)T, (int)Mm, ACTS_CACHED, &p, e))
        return -1;
    if (p > CFG_MAX_PLAN)
        return err_set(e, ERR_INPUT, "%s: batch %d x tgt_len %lld with mem_len %lld needs about "
                       "%.3g floats of activations, more than txl's limit of %.3g", what, c->B,
                       T, Mm, p, CFG_MAX_PLAN);
    term_stats one; /* term statistics: one pass without replicas (only whether it is set counts) */
    eval_opts o = {.batch = c->B, .tgt_len = (int)T, .mem_len = (int)Mm,
                   .max_tokens = (size_t)c->o->max_tokens, .label = c->label,
                   .max_segments = (size_t)(segments > 0 ? segments : 0),
                   .stats = segments > 0 ? &one : NULL};
    double bytes;
    char who[160];
    snprintf(who, sizeof who, "%s: the evaluation at batch %d x tgt_len %lld with mem_len %lld",
             what, c->B, T, Mm);
    return eval_plan_bytes(&c->mc, &c->ts, &o, &bytes, e) ||
                   sys_check_memory(who, bytes, gemm_as_reserve(), e)
               ? -1 : 0;
}

/* The call's settings from the options, the data opened and tokenized, every setting
 * checked. */
static int call_init(eval_call *c, txl_model *m, const txl_eval_opts *o, long segments,
                     txl_err *e)
{
    static const int one = 1;
    const run_config *cfg = &m->cfg.c;
    memset(c, 0, sizeof *c);
    c->m = m;
    c->o = o;
    c->mc = cfg->model;
    if (o->clamp_len >= 0)
        c->mc.clamp_len = o->clamp_len;
    c->base_tgt = o->tgt_len > 0 ? o->tgt_len : cfg->model.tgt_len;
    c->base_mem = o->mem_len >= 0 ? o->mem_len : cfg->model.mem_len;
    c->B = o->batch > 0 ? o->batch : cfg->train.batch_size;
    c->factors = o->factors && o->n_factors > 0 ? o->factors : &one;
    c->n = o->factors && o->n_factors > 0 ? o->n_factors : 1;
    c->is_sweep = c->n > 1 || c->factors[0] != 1 || o->mode != TXL_SWEEP_MEMORY;
    int split = o->split ? split_find(o->split) : SPLIT_VALID;
    if (split < 0)
        return err_set(e, ERR_INPUT, "split '%s': expected valid, test or train", o->split);
    if (cfg_open_text(o->data, split, &cfg->data, &c->c, &c->span, &c->label, e) ||
        cfg_tokens(cfg, m->vocab, c->span, &c->ts, e))
        return -1;
    /* too few tokens for B streams fails here (eval_plan_bytes lays out the batches) */
    if (check_setting(c, c->base_tgt, c->base_mem, segments, "the setting", e))
        return -1;
    for (int k = 0; k < c->n && segments <= 0; k++) {
        long long T, Mm;
        char what[48];
        setting_lengths(c, c->factors[k], &T, &Mm);
        snprintf(what, sizeof what, "sweep factor %d", c->factors[k]);
        if (check_setting(c, T, Mm, 0, what, e))
            return -1;
    }
    return 0;
}

static void call_free(eval_call *c)
{
    tok_stream_free(&c->ts);
    corpus_close(&c->c);
}

/* The row of one setting: the typed view and its JSON (the line txl eval --json prints). */
static void make_row(const eval_call *c, int fct, int T, int Mm, const eval_result *r,
                     txl_eval_row *row, char *json, size_t cap)
{
    const txl_model *m = c->m;
    const char *mode = mode_names[c->o->mode];
    *row = (txl_eval_row){
        .loss = r->loss, .bpc = r->bpc, .ppl = exp(r->loss), .tokens = r->tokens,
        .bytes = r->bytes, .anchor_tokens = r->anchor_tokens, .anchor_bits = r->anchor_bits,
        .tgt_len = T, .mem_len = Mm, .clamp_len = c->mc.clamp_len, .batch = c->B,
        .factor = fct, .is_sweep = c->is_sweep, .mode = mode, .seconds = r->seconds,
        .tok_per_s = r->segments * (double)c->B * T / (r->seconds > 0 ? r->seconds : 1e-9),
        .data = c->span.path, .split = c->label, .json = json};
    size_t o = (size_t)snprintf(
        json, cap,
        "{\"loss\":%.8f,\"bpc\":%.8f,\"ppl\":%.6f,\"tokens\":%zu,\"bytes\":%zu,"
        "\"anchor_tokens\":%zu,\"anchor_bits\":%.6g,\"tgt_len\":%d,\"mem_len\":%d,"
        "\"clamp_len\":%d,\"batch\":%d,\"warmup\":%s,\"same_length\":%s,\"data\":\"%s\","
        "\"split\":\"%s\",\"pos_scheme\":\"%s\",\"step\":%ld,\"seconds\":%.3f,"
        "\"tok_per_s\":%.1f,\"cpu_s\":%.3f,\"precision\":\"%s\",\"gemm_share\":%.4f",
        r->loss, row->bpc, row->ppl, r->tokens, r->bytes, r->anchor_tokens, r->anchor_bits, T,
        Mm, c->mc.clamp_len, c->B, c->o->warmup ? "true" : "false",
        c->o->same_length ? "true" : "false", c->span.path, c->label,
        pos_scheme_name(c->mc.pos), m->step, r->seconds, row->tok_per_s, r->cpu_seconds,
        gemm_get_precision() == GEMM_BF16 ? "bf16" : "fp32", r->gemm_share);
    if (c->is_sweep && o < cap)
        o += (size_t)snprintf(json + o, cap - o, ",\"factor\":%d,\"sweep_mode\":\"%s\"", fct,
                              mode);
    /* the checkpoint measured (null for a model made in memory): rows of several
     * checkpoints tell theirs apart (txl plot --sweep draws a curve per checkpoint) */
    if (o + 14 < cap) {
        o += (size_t)snprintf(json + o, cap - o, ",\"checkpoint\":");
        int n = json_str(json + o, cap - o, txl_model_path(m));
        o += n > 0 ? (size_t)n : 0;
    }
    if (o < cap)
        snprintf(json + o, cap - o, "}");
}

int txl_eval(txl_model *m, const txl_eval_opts *o, txl_eval_fn fn, void *ctx, txl_err *e)
{
    api_err_clear(e);
    model_bf16_sync(&m->mdl, 0); /* bf16: the weights' copy the products read */
    eval_call c;
    int rc = call_init(&c, m, o, 0, e);
    for (int k = 0; rc == 0 && k < c.n; k++) {
        int fct = c.factors[k];
        long long TT, MM;
        setting_lengths(&c, fct, &TT, &MM);
        int T = (int)TT, Mm = (int)MM; /* checked by call_init */
        char label[96], json[16384]; /* two paths of TXL_PATH_MAX, escaped */
        if (c.is_sweep) /* the progress line says which factor it is on */
            snprintf(label, sizeof label, "%s %dx (%d of %d)", c.label, fct, k + 1, c.n);
        else
            snprintf(label, sizeof label, "%s", c.label);
        eval_opts eo = {.batch = c.B, .tgt_len = T, .mem_len = Mm, .warmup = o->warmup,
                        .max_tokens = (size_t)o->max_tokens, .progress = o->progress,
                        .label = label, .same_length = o->same_length,
                        .anchor_base = (txl_tok)m->cfg.c.data.vocab_tokens};
        eval_result r;
        txl_eval_row row;
        if (eval_stream(&m->mdl, &c.mc, &c.ts, &eo, &r, e)) {
            rc = -1;
            break;
        }
        make_row(&c, fct, T, Mm, &r, &row, json, sizeof json);
        rc = fn(ctx, &row);
    }
    call_free(&c);
    return rc;
}

/* A stream's text as one string (open_memstream), or NULL. */
static char *capture(void (*put)(FILE *f, const void *arg), const void *arg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    put(f, arg);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

typedef struct {
    const model_config *mc;
    const term_stats *st;
    int layer, json;
    const terms_pass *tp;
    int B, T, Mm;
} terms_item;

static void put_layer(FILE *f, const void *arg)
{
    const terms_item *t = arg;
    terms_print_layer(f, t->mc, t->st, t->layer, t->json);
}

static void put_head(FILE *f, const void *arg)
{
    const terms_item *t = arg;
    fprintf(f, "score terms of %s (scaled by 1/sqrt(d_head)), %zu segments of batch %d x "
            "tgt_len %d, mem_len %d:\n", pos_scheme_name(t->mc->pos), t->tp->segments, t->B,
            t->T, t->Mm);
    terms_table_head(f);
}

int txl_eval_terms(txl_model *m, const txl_eval_opts *o, long segments,
                   int (*fn)(void *ctx, const txl_terms_row *row), void *ctx, txl_err *e)
{
    api_err_clear(e);
    model_bf16_sync(&m->mdl, 0);
    eval_call c;
    terms_pass tp = {0};
    if (o->same_length)
        return err_set(e, ERR_INPUT, "same_length: the score terms are taken with the trained "
                       "mask (txl_eval alone evaluates with the same length)");
    int rc = call_init(&c, m, o, segments, e);
    if (rc == 0 && (terms_init(&tp, &m->mdl, &c.mc, &c.ts, c.B, c.base_tgt, c.base_mem,
                               (size_t)segments, e) ||
                    terms_run(&tp, e)))
        rc = -1;
    terms_item it = {.mc = &c.mc, .tp = &tp, .B = c.B, .T = c.base_tgt, .Mm = c.base_mem};
    char *head = rc ? NULL : capture(put_head, &it);
    if (rc == 0 && !head)
        rc = err_set(e, ERR_RUNTIME, "out of memory");
    for (int l = 0; rc == 0 && l < c.mc.n_layer; l++) {
        it.st = &tp.st[l];
        it.layer = l;
        it.json = 1;
        char *json = capture(put_layer, &it);
        it.json = 0;
        char *text = capture(put_layer, &it);
        if (!json || !text)
            rc = err_set(e, ERR_RUNTIME, "out of memory");
        else
            rc = fn(ctx, &(txl_terms_row){.layer = l, .n_layer = c.mc.n_layer, .json = json,
                                          .text = text, .head = head});
        free(json);
        free(text);
    }
    free(head);
    terms_free(&tp);
    call_free(&c);
    return rc;
}

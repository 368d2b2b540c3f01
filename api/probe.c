/* probe.c: include/txl.h's probes: the options checked and their defaults resolved, the
 * model's lengths and anchors, the text opened, then eval/probe_<kind>.c, whose rows go to
 * the caller's function (doc/design.md, "Probes"). */
#include <limits.h>
#include <string.h>

#include "../eval/probe.h"
#include "../model/pos.h"
#include "api.h"

/* A list option into l: at most PROBE_MAX_LIST values, each in [lo, hi]. */
static int take_list(const char *name, const int *v, int n, long lo, long hi, probe_list *l,
                     txl_err *e)
{
    l->n = v && n > 0 ? n : 0;
    if (l->n > PROBE_MAX_LIST)
        return err_set(e, ERR_INPUT, "%s: %d values, at most %d", name, n, PROBE_MAX_LIST);
    for (int i = 0; i < l->n; i++) {
        if (v[i] < lo || v[i] > hi)
            return err_set(e, ERR_INPUT, "%s: %d is out of range [%ld, %ld]", name, v[i], lo,
                           hi);
        l->v[i] = v[i];
    }
    return 0;
}

static int range(const char *name, long x, long lo, long hi, txl_err *e)
{
    return x < lo || x > hi ? err_set(e, ERR_INPUT, "%s: %ld is out of range [%ld, %ld]", name,
                                      x, lo, hi)
                            : 0;
}

/* The probe's settings from the options (the ranges of txl probe's flags). */
static int take_opts(const txl_probe_opts *o, const char *ckpt, probe_opts *a, txl_err *e)
{
    memset(a, 0, sizeof *a);
    a->kind = o->kind ? o->kind : "";
    if (strcmp(a->kind, "needle") && strcmp(a->kind, "recall") && strcmp(a->kind, "shift"))
        return err_set(e, ERR_INPUT, "probe '%s': expected needle, recall or shift", a->kind);
    a->ckpt = ckpt ? ckpt : "the model";
    a->trials = o->trials > 0 ? o->trials : 20;
    a->string_len = o->string_len > 0 ? o->string_len : 24;
    a->max_tokens = o->max_tokens > 0 ? o->max_tokens : 20000;
    a->seed = o->seed;
    a->mode = (probe_mode)o->mode;
    if (o->mode != TXL_PROBE_MEMORY && o->mode != TXL_PROBE_WINDOW && o->mode != TXL_PROBE_BOTH)
        return err_set(e, ERR_INPUT, "mode %d: expected memory, window or both", (int)o->mode);
    return range("trials", a->trials, 1, TXL_PROBE_MAX_TRIALS, e) ||
           range("string_len", a->string_len, 2, 4096, e) ||
           range("max_tokens", a->max_tokens, 2, 1L << 40, e) ||
           range("tgt_len", o->tgt_len, LONG_MIN, 1 << 20, e) ||
           range("mem_len", o->mem_len, LONG_MIN, 1 << 22, e) ||
           take_list("lengths", o->lengths, o->n_lengths, 1, 1024, &a->lengths, e) ||
           take_list("depths", o->depths, o->n_depths, 0, 100, &a->depths, e) ||
           take_list("distances", o->distances, o->n_distances, 1, 1 << 24, &a->distances, e) ||
           take_list("offsets", o->offsets, o->n_offsets, 0, 1 << 30, &a->offsets, e)
               ? -1 : 0;
}

int txl_probe(txl_model *m, const txl_probe_opts *o,
              int (*fn)(void *ctx, const txl_probe_row *row), void *ctx, txl_err *e)
{
    api_err_clear(e);
    model_bf16_sync(&m->mdl, 0); /* bf16: the weights' copy the products read */
    probe_opts a;
    if (take_opts(o, txl_model_path(m), &a, e))
        return -1;
    const run_config *cfg = &m->cfg.c;
    int split = o->split ? split_find(o->split) : SPLIT_VALID;
    if (split < 0)
        return err_set(e, ERR_INPUT, "split '%s': expected valid, test or train", o->split);
    probe_ctx p = {.a = &a, .cfg = cfg, .mdl = &m->mdl, .step = m->step,
                   .ckpt_path = txl_model_path(m),
                   .T = o->tgt_len > 0 ? o->tgt_len : cfg->model.tgt_len,
                   .M = o->mem_len >= 0 ? o->mem_len : cfg->model.mem_len,
                   .progress = o->progress, .units = cfg_units(cfg), .v = m->vocab,
                   .tokens = m->vocab && vocab_get_kind(m->vocab) != VOCAB_BYTE,
                   .coords = pos_get(cfg->model.pos)->needs_coords, .fn = fn, .ctx = ctx};
    int rc = cfg_open_text(o->data, split, &cfg->data, &p.c, &p.span, &p.label, e);
    if (rc == 0 && strcmp(a.kind, "shift")) /* shift reads only the tokens it evaluates */
        rc = probe_text_init(&p, e);
    if (rc == 0)
        rc = strcmp(a.kind, "needle") == 0   ? probe_needle(&p, e)
             : strcmp(a.kind, "recall") == 0 ? probe_recall(&p, e)
                                              : probe_shift(&p, e);
    probe_text_free(&p);
    corpus_close(&p.c);
    return rc;
}

/* eval.c: `txl eval` — deterministic evaluation of a checkpoint over a file or a split of the
 * run's corpus (doc/design.md, "Evaluation"), and the length-extrapolation sweep. Every number is
 * printed with the settings that produced it (batch, tgt_len, mem_len, clamp_len, tokens, data). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../data/corpus.h"
#include "../io/checkpoint.h"
#include "cli.h"
#include "cmds.h"
#include "../eval/evaluate.h"
#include "../eval/terms.h"

typedef enum { SWEEP_MEMORY, SWEEP_WINDOW, SWEEP_BOTH } sweep_mode;

typedef struct {
    const char *data;
    int split;                /* index into split_names */
    long tgt_len, mem_len, clamp_len, batch, max_tokens, threads, term_stats;
    int warmup, json, quiet;
    cli_list sweep;
    int sweep_mode;           /* sweep_mode */
} eval_args;

static const char *const split_names[] = {"valid", "test", "train", NULL};
static const char *const mode_names[] = {"memory", "window", "both", NULL};
#define CLAMP_UNSET LONG_MIN

#define O(f) offsetof(eval_args, f)
static const cli_opt eval_options[] = {
    {.name = "--data", .type = CLI_FILE, .off = O(data), .metavar = "FILE", .glob = "*",
     .excludes = "--split", .help = "evaluate this file, whole, plain or gzip'd ('-' = stdin)",
     .def_doc = "the run's --split"},
    {.name = "--split", .type = CLI_CHOICE, .off = O(split), .choices = split_names,
     .metavar = "NAME", .help = "valid, test or train, resolved from the checkpoint's config"},
    {.name = "--tgt-len", .type = CLI_INT, .off = O(tgt_len), .lo = 1, .hi = 1 << 20,
     .def = -1, .metavar = "N", .help = "segment length", .def_doc = "the trained tgt_len"},
    {.name = "--mem-len", .type = CLI_INT, .off = O(mem_len), .lo = 0, .hi = 1 << 22,
     .def = -1, .metavar = "N", .help = "memory length", .def_doc = "the trained mem_len"},
    {.name = "--clamp-len", .type = CLI_INT, .off = O(clamp_len), .lo = 0, .hi = 1L << 30,
     .def = CLAMP_UNSET, .metavar = "N",
     .help = "xl: clamp relative distances; 0: off", .def_doc = "the trained value"},
    {.name = "--batch", .type = CLI_INT, .off = O(batch), .lo = 1, .hi = 1 << 16, .def = -1,
     .metavar = "N", .help = "number of parallel streams",
     .def_doc = "the trained batch_size"},
    {.name = "--warmup", .type = CLI_SWITCH, .off = O(warmup),
     .help = "score only segments whose memory is already full"},
    {.name = "--max-tokens", .type = CLI_INT, .off = O(max_tokens), .lo = 2, .hi = LONG_MAX,
     .def = 0, .metavar = "N", .help = "use only the first N bytes of the data",
     .def_doc = "all"},
    {.name = "--sweep", .type = CLI_LIST, .off = O(sweep), .lo = 1, .hi = 1024,
     .cap = CLI_MAX_LIST, .metavar = "LIST", .suggest = "1,2,4,8 1,2,4,8,16",
     .help = "evaluate at each factor of the trained length, e.g. 1,2,4,8: the "
             "extrapolation table"},
    {.name = "--sweep-mode", .type = CLI_CHOICE, .off = O(sweep_mode), .choices = mode_names,
     .metavar = "M",
     .help = "memory: tgt_len fixed, mem_len x factor (trained without memory: mem_len = "
             "tgt_len x (factor-1)); window: mem_len 0, tgt_len x factor; both: tgt_len and "
             "mem_len x factor"},
    {.name = "--term-stats", .type = CLI_OPT_INT, .off = O(term_stats), .lo = 1,
     .hi = 1L << 30, .def = 0, .implicit = TERM_STATS_SEGMENTS, .metavar = "N",
     .def_doc = "",
     .help = "per layer, mean and std of the score terms over the first N segments (N "
             "defaults to 4): xl's content, content-position, global content bias and global "
             "position bias; mlp/alibi: content and distance bias"},
    CLI_OPT_JSON(O(json), "one JSON object per setting on stdout"),
    CLI_OPT_THREADS(O(threads), 0, "threads, 0 = all cores"),
    CLI_OPT_QUIET(O(quiet), "no progress line and no settings note on stderr"),
};
#undef O

const cli_spec eval_spec = {
    CLI_OPTS(eval_options),
    .about = "Evaluates a checkpoint: mean loss (nats per byte), bits per byte and perplexity "
             "over one deterministic pass with memory carried across segments. CKPT may be a "
             "run directory: its best checkpoint (else last).",
    .notes = "On a terminal a progress line (segment, bpc so far, tokens/s, ETA) is drawn on "
             "stderr.",
    .example = "example: txl eval runs/tiny/best.safetensors.gz --split test --sweep 1,2,4,8 "
               "--json",
    .pos_max = 1,
    .pos_extra = "unexpected argument '%s' (one checkpoint at a time)",
    .pos_glob = "*.@(safetensors|safetensors.gz)",
};


/* The lengths of one sweep setting (in long long: factor x length may not fit an int). */
static void sweep_lengths(sweep_mode mode, int fct, int base_tgt, int base_mem, long long *T,
                          long long *Mm)
{
    *T = base_tgt;
    *Mm = base_mem;
    if (mode == SWEEP_MEMORY) /* a model trained without memory: context = factor x tgt_len */
        *Mm = base_mem > 0 ? (long long)base_mem * fct : (long long)base_tgt * (fct - 1);
    if (mode == SWEEP_WINDOW) {
        *T = (long long)base_tgt * fct;
        *Mm = 0;
    }
    if (mode == SWEEP_BOTH) {
        *T = (long long)base_tgt * fct;
        *Mm = (long long)base_mem * fct;
    }
}

/* Refuses a setting whose lengths or activation plan are beyond what txl can represent
 * (flags and sweep factors multiply the trained lengths), or whose pass (eval_plan_bytes:
 * the same plan eval_stream makes) does not fit this machine, before any work. */
static int check_setting(const eval_args *a, const model_config *mc, const tok_stream *ts,
                         const char *label, int B, long long T, long long Mm, const char *what,
                         txl_err *e)
{
    if (T + Mm > INT_MAX / 2)
        return err_set(e, ERR_INPUT, "%s: tgt_len %lld + mem_len %lld is too long (at most %d)",
                       what, T, Mm, INT_MAX / 2);
    double p;
    if (acts_plan_floats(mc, B, (int)T, (int)Mm, 0, &p, e))
        return -1;
    if (p > CFG_MAX_PLAN)
        return err_set(e, ERR_INPUT, "%s: batch %d x tgt_len %lld with mem_len %lld needs about "
                       "%.3g floats of activations, more than txl's limit of %.3g", what, B, T,
                       Mm, p, CFG_MAX_PLAN);
    term_stats one; /* --term-stats: one pass without replicas (only whether it is set counts) */
    eval_opts o = {.batch = B, .tgt_len = (int)T, .mem_len = (int)Mm,
                   .max_tokens = (size_t)a->max_tokens, .label = label,
                   .max_segments = (size_t)(a->term_stats > 0 ? a->term_stats : 0),
                   .stats = a->term_stats > 0 ? &one : NULL};
    double bytes;
    char who[160];
    snprintf(who, sizeof who, "%s: the evaluation at batch %d x tgt_len %lld with mem_len %lld",
             what, B, T, Mm);
    return eval_plan_bytes(mc, ts, &o, &bytes, e) || sys_check_memory(who, bytes, e) ? -1 : 0;
}

/* --term-stats: the score terms' mean and standard deviation per layer, with a verdict. */
static int print_term_stats(model *mdl, const model_config *mc, const tok_stream *ts, int B,
                            int T, int Mm, size_t segments, int json, txl_err *e)
{
    terms_pass tp;
    if (terms_init(&tp, mdl, mc, ts, B, T, Mm, segments, e) || terms_run(&tp, e)) {
        terms_free(&tp);
        return -1;
    }
    if (!json) {
        printf("score terms of %s (scaled by 1/sqrt(d_head)), %zu segments of batch %d x "
               "tgt_len %d, mem_len %d:\n", pos_scheme_name(mc->pos), tp.segments, B, T, Mm);
        terms_table_head(stdout);
    }
    for (int l = 0; l < mc->n_layer; l++) {
        terms_print_layer(stdout, mc, &tp.st[l], l, json);
        if (json)
            printf("\n");
    }
    terms_free(&tp);
    return 0;
}

/* The data to score: --data FILE whole, or the --split of the checkpoint's data config. */
static int open_span(const eval_args *a, const data_config *d, corpus *c, token_span *span,
                     const char **label, txl_err *e)
{
    static const int split_ids[] = {SPLIT_VALID, SPLIT_TEST, SPLIT_TRAIN}; /* split_names */
    return cfg_open_text(a->data, split_ids[a->split], d, c, span, label, e);
}

/* Every setting (the base lengths and each sweep factor) fits txl's limits, and the tokens
 * hold B streams, before anything is printed. */
static int check_settings(const eval_args *a, const model_config *mc, const tok_stream *ts,
                          int B, int base_tgt, int base_mem, const char *label, txl_err *e)
{
    /* too few tokens for B streams fails here (eval_plan_bytes lays out the batches) */
    if (check_setting(a, mc, ts, label, B, base_tgt, base_mem, "--batch/--tgt-len/--mem-len",
                      e))
        return -1;
    for (int k = 0; k < a->sweep.n; k++) {
        long long T, Mm;
        char what[48];
        sweep_lengths(a->sweep_mode, a->sweep.v[k], base_tgt, base_mem, &T, &Mm);
        snprintf(what, sizeof what, "--sweep factor %d", a->sweep.v[k]);
        if (check_setting(a, mc, ts, label, B, T, Mm, what, e))
            return -1;
    }
    return 0;
}

/* What every printed row shares. */
typedef struct {
    const eval_args *a;
    const model_config *mc;
    token_span span;
    tok_stream ts;            /* the span's tokens (anchors, coordinates) */
    const char *label;
    int B, is_sweep;
    long step;
} eval_run;

/* One evaluated setting: a JSON object or a table row on stdout; -1 when stdout failed. */
static int print_row(const eval_run *run, int fct, int T, int Mm, const eval_result *r)
{
    const eval_args *a = run->a;
    if (a->json) {
        printf("{\"loss\":%.8f,\"bpc\":%.8f,\"ppl\":%.6f,\"tokens\":%zu,\"bytes\":%zu,"
               "\"anchor_tokens\":%zu,\"anchor_bits\":%.6g,\"tgt_len\":%d,"
               "\"mem_len\":%d,\"clamp_len\":%d,\"batch\":%d,\"warmup\":%s,"
               "\"same_length\":false,\"data\":\"%s\",\"split\":\"%s\",\"pos_scheme\":\"%s\","
               "\"step\":%ld,\"seconds\":%.3f,\"tok_per_s\":%.1f,\"gemm_share\":%.4f",
               r->loss, r->loss / M_LN2, exp(r->loss), r->tokens, r->bytes, r->anchor_tokens,
               r->anchor_bits, T, Mm, run->mc->clamp_len,
               run->B, a->warmup ? "true" : "false", run->span.path,
               a->data ? "file" : split_names[a->split], pos_scheme_name(run->mc->pos),
               run->step, r->seconds,
               r->segments * (double)run->B * T / (r->seconds > 0 ? r->seconds : 1e-9),
               r->gemm_share);
        if (run->is_sweep)
            printf(",\"factor\":%d,\"sweep_mode\":\"%s\"", fct, mode_names[a->sweep_mode]);
        printf("}\n");
    } else {
        char fs[16] = "";
        if (run->is_sweep)
            snprintf(fs, sizeof fs, "%dx", fct);
        printf("%-7s %8d %8d %10.6f %8.4f %10.4f %12zu\n", fs, T, Mm, r->loss, r->loss / M_LN2,
               exp(r->loss), r->tokens);
    }
    return cli_stdout_flush();
}

/* Evaluates every sweep factor (one factor 1 without --sweep) and prints its row. */
static int run_sweep(model *mdl, const eval_run *run, int base_tgt, int base_mem, txl_err *e)
{
    const eval_args *a = run->a;
    if (!a->json)
        printf("%-7s %8s %8s %10s %8s %10s %12s\n", run->is_sweep ? "factor" : "", "tgt_len",
               "mem_len", "loss", "bpc", "ppl", "tokens");
    for (int k = 0; k < a->sweep.n; k++) {
        int fct = a->sweep.v[k];
        long long TT, MM;
        sweep_lengths(a->sweep_mode, fct, base_tgt, base_mem, &TT, &MM);
        int T = (int)TT, Mm = (int)MM; /* checked by check_settings */
        char label[96];
        if (run->is_sweep) /* the progress line says which factor it is on */
            snprintf(label, sizeof label, "%s %dx (%d of %d)", run->label, fct, k + 1,
                     a->sweep.n);
        else
            snprintf(label, sizeof label, "%s", run->label);
        eval_opts o = {.batch = run->B, .tgt_len = T, .mem_len = Mm, .warmup = a->warmup,
                       .max_tokens = (size_t)a->max_tokens,
                       .progress = !a->quiet && cli_isatty_stderr(), .label = label};
        eval_result r;
        if (eval_stream(mdl, run->mc, &run->ts, &o, &r, e))
            return -1;
        if (print_row(run, fct, T, Mm, &r))
            return 0; /* the rest would be lost too; main reports stdout's failure */
    }
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    eval_args a;
    cli_pos pos;
    int rc = cli_parse(txl_command("eval"), argc, argv, &a, &pos);
    if (rc >= 0)
        return rc;
    const char *ckpt = pos.n ? pos.v[0] : NULL;
    if (!ckpt)
        return cli_usage("eval", "missing the checkpoint to evaluate");

    txl_err e = {0};
    st_file f;
    run_config cfg;
    model mdl;
    if (cli_load_checkpoint(ckpt, "eval", a.quiet, &f, &cfg, &mdl, &e))
        return cli_fail("eval", &e);
    long long step_ll;
    int bad_step = ckpt_meta_count(&f, "step", 0, &step_ll, &e);
    st_free(&f);
    if (bad_step) {
        model_free(&mdl);
        return cli_fail("eval", &e);
    }
    cli_threads((int)a.threads);

    corpus c = {0};
    eval_run run = {.a = &a, .step = (long)step_ll};
    int base_tgt = a.tgt_len > 0 ? (int)a.tgt_len : cfg.model.tgt_len;
    int base_mem = a.mem_len >= 0 ? (int)a.mem_len : cfg.model.mem_len;
    run.B = a.batch > 0 ? (int)a.batch : cfg.train.batch_size;
    model_config mc = cfg.model;
    if (a.clamp_len != CLAMP_UNSET)
        mc.clamp_len = (int)a.clamp_len;
    run.mc = &mc;
    if (a.sweep.n == 0) {
        a.sweep.v[0] = 1;
        a.sweep.n = 1;
    }
    run.is_sweep = a.sweep.n > 1 || a.sweep.v[0] != 1 || a.sweep_mode != SWEEP_MEMORY;
    if (open_span(&a, &cfg.data, &c, &run.span, &run.label, &e) ||
        cfg_tokens(&cfg, run.span, &run.ts, &e) ||
        check_settings(&a, &mc, &run.ts, run.B, base_tgt, base_mem, run.label, &e))
        goto fail;
    if (a.term_stats > 0)
        rc = print_term_stats(&mdl, &mc, &run.ts, run.B, base_tgt, base_mem,
                              (size_t)a.term_stats, a.json, &e);
    else
        rc = run_sweep(&mdl, &run, base_tgt, base_mem, &e);
    if (rc)
        goto fail;
    if (!a.json && !a.quiet && a.term_stats == 0)
        fprintf(stderr, "(%s, %s, batch %d, clamp_len %d%s)\n", run.span.path,
                a.data ? "whole file" : split_names[a.split], run.B, mc.clamp_len,
                a.warmup ? ", warmup" : "");
    tok_stream_free(&run.ts);
    corpus_close(&c);
    model_free(&mdl);
    return 0;
fail:
    tok_stream_free(&run.ts);
    corpus_close(&c);
    model_free(&mdl);
    return cli_fail("eval", &e);
}

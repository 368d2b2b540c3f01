/* eval.c: `txl eval` — deterministic evaluation of a checkpoint over a file or a split of the
 * run's corpus (DESIGN.md §6), and the length-extrapolation sweep. Every number is printed
 * with the settings that produced it (batch, tgt_len, mem_len, clamp_len, tokens, data). */
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
#include "evaluate.h"

#define MAX_SWEEP 32

static const char *eval_help =
    "usage: txl eval CKPT [--data FILE | --split valid|test|train] [--tgt-len N] [--mem-len N]\n"
    "                [--clamp-len N] [--batch N] [--warmup] [--max-tokens N]\n"
    "                [--sweep 1,2,4,8 [--sweep-mode memory|window|both]] [--term-stats [N]]\n"
    "                [--json] [--threads N] [--quiet]\n"
    "\n"
    "Evaluates a checkpoint: mean loss (nats per byte), bits per byte and perplexity over one\n"
    "deterministic pass with memory carried across segments.\n"
    "\n"
    "  --data FILE       evaluate this file, whole (plain or gzip); default: the run's --split\n"
    "  --split NAME      valid (default), test or train, resolved from the checkpoint's config\n"
    "  --tgt-len N       segment length (default: the trained tgt_len)\n"
    "  --mem-len N       memory length (default: the trained mem_len)\n"
    "  --clamp-len N     xl: clamp relative distances (<= 0: off; default: trained value)\n"
    "  --batch N         number of parallel streams (default: the trained batch_size)\n"
    "  --warmup          score only segments whose memory is already full\n"
    "  --max-tokens N    use only the first N bytes of the data\n"
    "  --sweep LIST      evaluate at each factor of the trained length (extrapolation table)\n"
    "  --sweep-mode M    memory (default): tgt_len fixed, mem_len x factor (trained without\n"
    "                    memory: mem_len = tgt_len x (factor-1)); window: mem_len 0, tgt_len x\n"
    "                    factor; both: tgt_len and mem_len x factor\n"
    "  --term-stats [N]  per layer, mean and std of the score terms over the first N segments\n"
    "                    (default 4): xl's content, content-position, global content bias and\n"
    "                    global position bias; mlp/alibi: content and distance bias\n"
    "  --json            one JSON object per setting on stdout\n"
    "  --threads N       threads (default 0: all cores)\n"
    "  -q, --quiet       no progress line and no settings note on stderr\n"
    "\n"
    "On a terminal a progress line (segment, bpc so far, tokens/s, ETA) is drawn on stderr.\n"
    "\n"
    "example: txl eval runs/tiny/best.safetensors.gz --split test --sweep 1,2,4,8 --json\n";

typedef enum { SWEEP_MEMORY, SWEEP_WINDOW, SWEEP_BOTH } sweep_mode;

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
 * (flags and sweep factors multiply the trained lengths), before any work. */
static int check_setting(const model_config *mc, int B, long long T, long long Mm,
                         const char *what, txl_err *e)
{
    if (T + Mm > INT_MAX / 2)
        return err_set(e, ERR_INPUT, "%s: tgt_len %lld + mem_len %lld is too long (at most %d)",
                       what, T, Mm, INT_MAX / 2);
    double p = cfg_plan_floats(mc, B, (int)T, (int)Mm);
    if (p > CFG_MAX_PLAN)
        return err_set(e, ERR_INPUT, "%s: batch %d x tgt_len %lld with mem_len %lld needs about "
                       "%.3g floats of activations, more than txl's limit of %.3g", what, B, T,
                       Mm, p, CFG_MAX_PLAN);
    return 0;
}

/* --term-stats: the score terms' mean and standard deviation per layer (DESIGN.md §3,
 * Diagnostics). A term stuck at zero points at a broken position path. */
static int print_term_stats(model *mdl, const model_config *mc, token_span span, int B, int T,
                            int Mm, size_t segments, int json, txl_err *e)
{
    int N = mc->n_layer;
    term_stats *st = calloc((size_t)N, sizeof *st);
    if (!st)
        return err_set(e, ERR_RUNTIME, "out of memory");
    eval_opts o = {.batch = B, .tgt_len = T, .mem_len = Mm, .max_segments = segments,
                   .stats = st, .label = "term-stats"};
    eval_result r;
    if (eval_span(mdl, mc, span, &o, &r, e)) {
        free(st);
        return -1;
    }
    static const char *xl_names[4] = {"content", "content_position", "global_content_bias",
                                      "global_position_bias"};
    static const char *bias_names[4] = {"content", "distance_bias", "", ""};
    int xl = mc->pos == POS_XL, biased = mc->pos == POS_MLP || mc->pos == POS_ALIBI;
    int nterms = xl ? 4 : biased ? 2 : 1;
    const char *const *names = xl ? xl_names : bias_names;
    if (!json)
        printf("score terms of %s (scaled by 1/sqrt(d_head)), %zu segments of batch %d x "
               "tgt_len %d, mem_len %d:\n%-6s %-22s %12s %12s\n", pos_scheme_name(mc->pos),
               r.segments, B, T, Mm, "layer", "term", "mean", "std");
    for (int l = 0; l < N; l++) {
        if (json)
            printf("{\"layer\":%d,\"pos_scheme\":\"%s\",\"entries\":%.0f", l,
                   pos_scheme_name(mc->pos), st[l].count);
        for (int t = 0; t < nterms; t++) {
            double n = st[l].count > 0 ? st[l].count : 1;
            double mean = st[l].acc[t][0] / n;
            double var = st[l].acc[t][1] / n - mean * mean;
            double sd = sqrt(var > 0 ? var : 0);
            if (json)
                printf(",\"%s\":{\"mean\":%.6g,\"std\":%.6g}", names[t], mean, sd);
            else
                printf("%-6d %-22s %12.5f %12.5f\n", l, names[t], mean, sd);
        }
        if (json)
            printf("}\n");
    }
    free(st);
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    const char *ckpt = NULL, *data = NULL, *split = "valid";
    long tgt = -1, mlen = -1, batch = -1, clamp = LONG_MIN, threads = 0, max_tokens = 0;
    int json = 0, warmup = 0, quiet = 0, sweep[MAX_SWEEP], nsweep = 0, have_clamp = 0;
    long term_segments = 0;
    sweep_mode mode = SWEEP_MEMORY;
    txl_err e = {0};
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r;
        if (cli_switch(argv[i], "-h") || cli_switch(argv[i], "--help")) {
            fputs(eval_help, stdout);
            return 0;
        } else if (cli_switch(argv[i], "--json")) {
            json = 1;
        } else if (cli_switch(argv[i], "--term-stats")) {
            term_segments = 4;
            if (i + 1 < argc && argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9' &&
                cli_long("--term-stats", argv[++i], 1, 1L << 30, &term_segments, &e))
                return cli_fail("eval", &e);
        } else if (cli_switch(argv[i], "--warmup")) {
            warmup = 1;
        } else if (cli_switch(argv[i], "-q") || cli_switch(argv[i], "--quiet")) {
            quiet = 1;
        } else if ((r = cli_flag(argc, argv, &i, NULL, "--data", &v))) {
            if (r < 0)
                return cli_usage("eval", "--data needs a file");
            data = v;
        } else if ((r = cli_flag(argc, argv, &i, NULL, "--split", &v))) {
            if (r < 0)
                return cli_usage("eval", "--split needs valid, test or train");
            if (strcmp(v, "valid") && strcmp(v, "test") && strcmp(v, "train"))
                return cli_usage("eval", "--split: expected valid, test or train, found '%s'", v);
            split = v;
        } else if ((r = cli_flag(argc, argv, &i, NULL, "--tgt-len", &v))) {
            if (r < 0 || cli_long("--tgt-len", v, 1, 1 << 20, &tgt, &e))
                return r < 0 ? cli_usage("eval", "--tgt-len needs a number") : cli_fail("eval", &e);
        } else if ((r = cli_flag(argc, argv, &i, NULL, "--mem-len", &v))) {
            if (r < 0 || cli_long("--mem-len", v, 0, 1 << 22, &mlen, &e))
                return r < 0 ? cli_usage("eval", "--mem-len needs a number") : cli_fail("eval", &e);
        } else if ((r = cli_flag(argc, argv, &i, NULL, "--clamp-len", &v))) {
            if (r < 0 || cli_long("--clamp-len", v, -(1L << 30), 1L << 30, &clamp, &e))
                return r < 0 ? cli_usage("eval", "--clamp-len needs a number") : cli_fail("eval", &e);
            have_clamp = 1;
        } else if ((r = cli_flag(argc, argv, &i, NULL, "--batch", &v))) {
            if (r < 0 || cli_long("--batch", v, 1, 1 << 16, &batch, &e))
                return r < 0 ? cli_usage("eval", "--batch needs a number") : cli_fail("eval", &e);
        } else if ((r = cli_flag(argc, argv, &i, NULL, "--max-tokens", &v))) {
            if (r < 0 || cli_long("--max-tokens", v, 2, LONG_MAX, &max_tokens, &e))
                return r < 0 ? cli_usage("eval", "--max-tokens needs a number") : cli_fail("eval", &e);
        } else if ((r = cli_flag(argc, argv, &i, NULL, "--threads", &v))) {
            if (r < 0 || cli_long("--threads", v, 0, 1024, &threads, &e))
                return r < 0 ? cli_usage("eval", "--threads needs a number") : cli_fail("eval", &e);
        } else if ((r = cli_flag(argc, argv, &i, NULL, "--sweep", &v))) {
            if (r < 0)
                return cli_usage("eval", "--sweep needs a list like 1,2,4,8");
            if (cli_int_list("--sweep", v, sweep, MAX_SWEEP, &nsweep, &e))
                return cli_fail("eval", &e);
        } else if ((r = cli_flag(argc, argv, &i, NULL, "--sweep-mode", &v))) {
            if (r < 0)
                return cli_usage("eval", "--sweep-mode needs memory, window or both");
            if (strcmp(v, "memory") == 0)
                mode = SWEEP_MEMORY;
            else if (strcmp(v, "window") == 0)
                mode = SWEEP_WINDOW;
            else if (strcmp(v, "both") == 0)
                mode = SWEEP_BOTH;
            else
                return cli_usage("eval", "--sweep-mode: expected memory, window or both, found '%s'", v);
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage("eval", "unknown option '%s'", argv[i]);
        } else if (!ckpt) {
            ckpt = argv[i];
        } else {
            return cli_usage("eval", "unexpected argument '%s' (one checkpoint at a time)", argv[i]);
        }
    }
    if (!ckpt)
        return cli_usage("eval", "missing the checkpoint to evaluate");

    st_file f;
    txl_config cfg;
    model mdl;
    if (cli_load_checkpoint(ckpt, &f, &cfg, &mdl, &e))
        return cli_fail("eval", &e);
    long long step_ll;
    int bad_step = cli_meta_count(&f, "step", 0, &step_ll, &e);
    long step = (long)step_ll;
    st_free(&f);
    if (bad_step) {
        model_free(&mdl);
        return cli_fail("eval", &e);
    }
    cli_threads((int)threads);

    corpus c = {0};
    token_span span;
    const char *label = split;
    if (data) {
        if (corpus_open(&c, data, &e))
            goto fail;
        span = corpus_all(&c);
        label = "file";
    } else {
        const data_config *d = &cfg.data;
        data_paths p = {d->train, d->valid, d->test, d->split};
        int idx = strcmp(split, "train") == 0 ? SPLIT_TRAIN
                  : strcmp(split, "valid") == 0 ? SPLIT_VALID : SPLIT_TEST;
        if (data_open_split(&p, idx, &c, &span, &e)) {
            err_wrap(&e, "--split %s (from the checkpoint's data config; pass --data FILE to "
                     "evaluate another file)", split);
            goto fail;
        }
    }

    int base_tgt = tgt > 0 ? (int)tgt : cfg.model.tgt_len;
    int base_mem = mlen >= 0 ? (int)mlen : cfg.model.mem_len;
    int B = batch > 0 ? (int)batch : cfg.train.batch_size;
    model_config mc = cfg.model;
    if (have_clamp)
        mc.clamp_len = (int)clamp;
    if (nsweep == 0) {
        sweep[0] = 1;
        nsweep = 1;
    }
    if (check_setting(&mc, B, base_tgt, base_mem, "--batch/--tgt-len/--mem-len", &e))
        goto fail;
    batcher probe; /* a span too short for B streams fails before anything is printed */
    token_span ps = span;
    if (max_tokens > 0 && ps.n > (size_t)max_tokens)
        ps.n = (size_t)max_tokens;
    if (batcher_init(&probe, ps, B, base_tgt, 2, label, &e))
        goto fail;
    for (int k = 0; k < nsweep; k++) {
        long long T, Mm;
        char what[48];
        sweep_lengths(mode, sweep[k], base_tgt, base_mem, &T, &Mm);
        snprintf(what, sizeof what, "--sweep factor %d", sweep[k]);
        if (check_setting(&mc, B, T, Mm, what, &e))
            goto fail;
    }
    if (term_segments > 0) {
        if (print_term_stats(&mdl, &mc, span, B, base_tgt, base_mem, (size_t)term_segments,
                             json, &e))
            goto fail;
        corpus_close(&c);
        model_free(&mdl);
        return 0;
    }
    int is_sweep = nsweep > 1 || sweep[0] != 1 || mode != SWEEP_MEMORY;
    if (!json)
        printf("%-7s %8s %8s %10s %8s %10s %12s\n", is_sweep ? "factor" : "", "tgt_len",
               "mem_len", "loss", "bpc", "ppl", "tokens");
    for (int k = 0; k < nsweep; k++) {
        int fct = sweep[k];
        long long TT, MM;
        sweep_lengths(mode, fct, base_tgt, base_mem, &TT, &MM);
        int T = (int)TT, Mm = (int)MM; /* checked above */
        eval_opts o = {.batch = B, .tgt_len = T, .mem_len = Mm, .warmup = warmup,
                       .max_tokens = (size_t)max_tokens,
                       .progress = !quiet && cli_isatty_stderr(), .label = label};
        eval_result r;
        if (eval_span(&mdl, &mc, span, &o, &r, &e))
            goto fail;
        if (json) {
            printf("{\"loss\":%.8f,\"bpc\":%.8f,\"ppl\":%.6f,\"tokens\":%zu,\"tgt_len\":%d,"
                   "\"mem_len\":%d,\"clamp_len\":%d,\"batch\":%d,\"warmup\":%s,"
                   "\"same_length\":false,\"data\":\"%s\",\"split\":\"%s\",\"pos_scheme\":\"%s\","
                   "\"step\":%ld,\"seconds\":%.3f,\"tok_per_s\":%.1f",
                   r.loss, r.loss / M_LN2, exp(r.loss), r.tokens, T, Mm, mc.clamp_len, B,
                   warmup ? "true" : "false", span.path, data ? "file" : split,
                   pos_scheme_name(mc.pos), step, r.seconds,
                   r.segments * (double)B * T / (r.seconds > 0 ? r.seconds : 1e-9));
            if (is_sweep)
                printf(",\"factor\":%d,\"sweep_mode\":\"%s\"", fct,
                       mode == SWEEP_MEMORY ? "memory" : mode == SWEEP_WINDOW ? "window" : "both");
            printf("}\n");
        } else {
            char fs[16] = "";
            if (is_sweep)
                snprintf(fs, sizeof fs, "%dx", fct);
            printf("%-7s %8d %8d %10.6f %8.4f %10.4f %12zu\n", fs, T, Mm, r.loss, r.loss / M_LN2,
                   exp(r.loss), r.tokens);
        }
        fflush(stdout);
    }
    if (!json && !quiet)
        fprintf(stderr, "(%s, %s, batch %d, clamp_len %d%s)\n", span.path,
                data ? "whole file" : split, B, mc.clamp_len, warmup ? ", warmup" : "");
    corpus_close(&c);
    model_free(&mdl);
    return 0;
fail:
    corpus_close(&c);
    model_free(&mdl);
    return cli_fail("eval", &e);
}

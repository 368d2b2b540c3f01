/* eval.c: `txl eval` — deterministic evaluation of a checkpoint over a file or a split of the
 * run's corpus (doc/design.md, "Evaluation"), and the length-extrapolation sweep. Every number is
 * printed with the settings that produced it (batch, tgt_len, mem_len, clamp_len, tokens, data). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmds.h"

typedef struct {
    const char *data;
    int split;                /* index into split_names */
    long tgt_len, mem_len, clamp_len, batch, max_tokens, threads, term_stats;
    int warmup, json, quiet, same_length;
    int precision;            /* cli_precision_names */
    cli_list sweep;
    int sweep_mode;           /* txl_sweep_mode */
} eval_args;

static const char *const split_names[] = {"valid", "test", "train", NULL};
static const char *const mode_names[] = {"memory", "window", "both", NULL}; /* txl_sweep_mode */
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
    {.name = "--same-length", .type = CLI_SWITCH, .off = O(same_length),
     .excludes = "--term-stats",
     .help = "every query sees the same number of keys, mem_len (its own included), as in "
             "Dai et al.'s evaluation; needs a memory (not --sweep-mode window)"},
    {.name = "--max-tokens", .type = CLI_INT, .off = O(max_tokens), .lo = 2, .hi = LONG_MAX,
     .def = 0, .metavar = "N", .help = "use only the first N tokens of the data (bytes for a byte model)",
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
     .hi = 1L << 30, .def = 0, .implicit = TXL_TERM_SEGMENTS, .metavar = "N",
     .def_doc = "",
     .help = "per layer, mean and std of the score terms over the first N segments (N "
             "defaults to 4): xl's content, content-position, global content bias and global "
             "position bias; mlp/alibi/t5: content and distance bias; hier, fire: content "
             "and their bias"},
    CLI_OPT_JSON(O(json), "one JSON object per setting on stdout"),
    CLI_OPT_PRECISION(O(precision)),
    CLI_OPT_THREADS(O(threads), 0, "threads, 0 = all cores"),
    CLI_OPT_QUIET(O(quiet), "no progress line and no settings note on stderr"),
};
#undef O

const cli_spec eval_spec = {
    CLI_OPTS(eval_options),
    .about = "Evaluates a checkpoint: mean loss (nats per byte), bits per byte and perplexity "
             "over one deterministic pass with memory carried across segments. CKPT may be a "
             "run directory: its best checkpoint (else last). Several checkpoints (or a quoted "
             "glob: 'runs/x/step-*') are evaluated one after the other, each row naming its "
             "checkpoint.",
    .notes = "On a terminal a progress line (segment, bpc so far, tokens/s, ETA) is drawn on "
             "stderr.",
    .example = "example: txl eval runs/tiny/best.safetensors.gz --split test --sweep 1,2,4,8 "
               "--json",
    .pos_max = -1,
    .pos_glob = "*.@(safetensors|safetensors.gz)",
};


/* Prints one evaluated setting: its JSON, or a table row (the heading before the first). */
typedef struct {
    const eval_args *a;
    int rows;
    /* of the last row, for the closing note: copies (a row's strings live as long as the
     * callback, txl.h) */
    char data[TXL_PATH_MAX], split[16];
    int batch, clamp_len;
} print_ctx;

static int print_row(void *ctx, const txl_eval_row *r)
{
    print_ctx *p = ctx;
    if (p->a->json) {
        printf("%s\n", r->json);
    } else {
        if (p->rows == 0)
            printf("%-7s %8s %8s %10s %8s %10s %12s\n", r->is_sweep ? "factor" : "",
                   "tgt_len", "mem_len", "loss", "bpc", "ppl", "tokens");
        char fs[16] = "";
        if (r->is_sweep)
            snprintf(fs, sizeof fs, "%dx", r->factor);
        printf("%-7s %8d %8d %10.6f %8.4f %10.4f %12zu\n", fs, r->tgt_len, r->mem_len, r->loss,
               r->bpc, r->ppl, r->tokens);
    }
    p->rows++;
    snprintf(p->data, sizeof p->data, "%s", r->data ? r->data : "");
    snprintf(p->split, sizeof p->split, "%s", r->split ? r->split : "");
    p->batch = r->batch;
    p->clamp_len = r->clamp_len;
    /* stdout failed: the rest would be lost too. 1, not -1: the call returns the value, and
     * -1 would read as its own failure (an empty message before main's) */
    return cli_stdout_flush() ? 1 : 0;
}

static int print_terms(void *ctx, const txl_terms_row *r)
{
    const eval_args *a = ctx;
    if (a->json)
        printf("%s\n", r->json);
    else
        printf("%s%s", r->layer == 0 ? r->head : "", r->text);
    return cli_stdout_flush() ? 1 : 0;
}

/* One checkpoint evaluated and its rows printed (a heading first when there are several):
 * 0, stdout's failure (> 0), or the exit code of a failure (printed). */
static int eval_one(const char *ckpt, const eval_args *a, int several)
{
    txl_err e = {0};
    txl_model *m = txl_model_load(ckpt, &e);
    if (!m)
        return cli_fail("eval", &e);
    if (txl_model_from_dir(m) && !a->quiet)
        fprintf(stderr, "txl eval: %s is a run directory: using %s\n", ckpt, txl_model_path(m));
    if (several && !a->json) {
        printf("checkpoint %s (step %ld)\n", txl_model_path(m), txl_model_step(m));
        if (cli_stdout_flush())
            return txl_model_free(m), 1;
    }
    txl_eval_opts o = {.data = a->data, .split = split_names[a->split], .tgt_len = (int)a->tgt_len,
                       .mem_len = (int)a->mem_len,
                       .clamp_len = a->clamp_len == CLAMP_UNSET ? -1 : (int)a->clamp_len,
                       .batch = (int)a->batch, .warmup = a->warmup, .max_tokens = a->max_tokens,
                       .factors = a->sweep.n ? a->sweep.v : NULL, .n_factors = a->sweep.n,
                       .mode = (txl_sweep_mode)a->sweep_mode, .same_length = a->same_length,
                       .progress = !a->quiet && cli_isatty_stderr()};
    print_ctx p = {.a = a};
    int rc = a->term_stats > 0 ? txl_eval_terms(m, &o, a->term_stats, print_terms, (void *)a, &e)
                               : txl_eval(m, &o, print_row, &p, &e);
    txl_model_free(m);
    if (rc < 0)
        return cli_fail("eval", &e);
    if (rc == 0 && !a->json && !a->quiet && a->term_stats == 0)
        fprintf(stderr, "(%s, %s, batch %d, clamp_len %d%s%s)\n", p.data,
                a->data ? "whole file" : p.split, p.batch, p.clamp_len,
                a->warmup ? ", warmup" : "", a->same_length ? ", same length" : "");
    return rc; /* > 0: stdout failed, which main reports */
}

int cmd_eval(int argc, char **argv)
{
    eval_args a;
    cli_pos pos;
    int rc = cli_parse(txl_command("eval"), argc, argv, &a, &pos);
    if (rc >= 0)
        return rc;
    if (pos.n == 0)
        return cli_usage("eval", "missing the checkpoint to evaluate");
    txl_err e = {0};
    cli_globbed ck;
    if (cli_glob(&pos, &ck, &e))
        return cli_fail("eval", &e);
    if (ck.n > 1 && a.data && strcmp(a.data, "-") == 0) {
        int n = ck.n;
        cli_globbed_free(&ck);
        return cli_usage("eval", "--data - reads standard input once: one checkpoint at a "
                         "time (%d given)", n);
    }
    /* every checkpoint's header and config read before the first is evaluated: a bad one
     * stops the command before any result is printed */
    for (int i = 0; i < ck.n && ck.n > 1; i++) {
        txl_config *c = txl_config_of_checkpoint(ck.v[i], 0, &e);
        if (!c) {
            cli_globbed_free(&ck);
            return cli_fail("eval", &e);
        }
        txl_config_free(c);
    }
    txl_set_threads((int)a.threads);
    rc = cli_set_precision("eval", a.precision, a.quiet);
    for (int i = 0; i < ck.n && rc == 0; i++)
        rc = eval_one(ck.v[i], &a, ck.n > 1);
    cli_globbed_free(&ck);
    return rc;
}

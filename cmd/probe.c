/* probe.c: `txl probe KIND CKPT` — the long-context probes (doc/design.md, "Probes"):
 * needle in a haystack, recall by distance, translation invariance. The command parses the
 * flags, loads the checkpoint and prints the rows txl_probe reports (include/txl.h): their
 * JSON with --json, else a table; notes on stderr. */
#include <stdio.h>
#include <string.h>

#include "cmds.h"

static const char *const split_names[] = {"valid", "test", "train", NULL};
static const char *const mode_names[] = {"memory", "window", "both", NULL}; /* txl_probe_mode */

/* a flag's list is handed to txl_probe whole */
_Static_assert(CLI_MAX_LIST <= TXL_PROBE_MAX_LIST,
               "a list flag holds more values than txl_probe takes");

typedef struct {
    const char *kind, *ckpt, *data;
    int split;
    long trials, tgt_len, mem_len, threads, string_len, max_tokens;
    unsigned long long seed;
    cli_list lengths, depths, distances, offsets;
    int mode, json, quiet;
    int precision;            /* cli_precision_names */
} probe_args;

#define O(f) offsetof(probe_args, f)
static const cli_opt probe_options[] = {
    {.name = "--data", .type = CLI_FILE, .off = O(data), .metavar = "FILE", .glob = "*",
     .excludes = "--split", .help = "draw the text (haystacks, filler) from this file ('-' = stdin)",
     .def_doc = "the run's --split"},
    {.name = "--split", .type = CLI_CHOICE, .off = O(split), .choices = split_names,
     .metavar = "NAME", .help = "valid, test or train, resolved from the checkpoint's config"},
    {.name = "--trials", .type = CLI_INT, .off = O(trials), .lo = 1,
     .hi = TXL_PROBE_MAX_TRIALS, .def = 20,
     .metavar = "N", .help = "needle, recall: trials per cell (run side by side as streams)"},
    {.name = "--lengths", .type = CLI_LIST, .off = O(lengths), .lo = 1, .hi = 1024,
     .cap = CLI_MAX_LIST, .metavar = "LIST", .suggest = "1,2,4,8",
     .help = "needle: context lengths as factors of the trained context tgt_len + mem_len",
     .def_doc = "those of 1,2,4,8 that hold the needle and its question, 75 bytes "
                "(word, bpe models: tokens)"},
    {.name = "--depths", .type = CLI_LIST, .off = O(depths), .lo = 0, .hi = 100,
     .cap = CLI_MAX_LIST, .metavar = "LIST", .suggest = "0,25,50,75,100",
     .help = "needle: where the needle sits, in percent of the context; sorted, each once",
     .def_doc = "0,25,50,75,100"},
    {.name = "--distances", .type = CLI_LIST, .off = O(distances), .lo = 1, .hi = 1 << 24,
     .cap = CLI_MAX_LIST, .metavar = "LIST", .suggest = "16,64,256,1024",
     .help = "recall: bytes (word, bpe models: tokens) of text between the two occurrences "
             "of the string; sorted, each once",
     .def_doc = "16, 32, ... up to 8x the trained context"},
    {.name = "--string-len", .type = CLI_INT, .off = O(string_len), .lo = 2, .hi = 4096,
     .def = 24, .metavar = "N", .help = "recall: length of the random string (bytes or tokens)"},
    {.name = "--offsets", .type = CLI_LIST, .off = O(offsets), .lo = 0, .hi = 1 << 30,
     .cap = CLI_MAX_LIST, .metavar = "LIST", .suggest = "0,1,1000,100000",
     .help = "shift: position offsets K to evaluate at", .def_doc = "0,1,1000,100000"},
    {.name = "--max-tokens", .type = CLI_INT, .off = O(max_tokens), .lo = 2, .hi = 1L << 40,
     .def = 20000, .metavar = "N", .help = "shift: bytes (word, bpe models: tokens) of text evaluated at each offset"},
    {.name = "--mode", .type = CLI_CHOICE, .off = O(mode), .choices = mode_names, .def = 2,
     .metavar = "M",
     .help = "needle, recall: memory (segments of tgt_len through the memory, as trained), "
             "window (the whole context as one window, no memory) or both"},
    {.name = "--tgt-len", .type = CLI_INT, .off = O(tgt_len), .lo = 1, .hi = 1 << 20,
     .def = -1, .metavar = "N", .help = "segment length of the memory mode",
     .def_doc = "the trained tgt_len"},
    {.name = "--mem-len", .type = CLI_INT, .off = O(mem_len), .lo = 0, .hi = 1 << 22,
     .def = -1, .metavar = "N", .help = "memory length of the memory mode",
     .def_doc = "the trained mem_len"},
    {.name = "--seed", .type = CLI_U64, .off = O(seed), .def = 1, .metavar = "S",
     .help = "random seed of the trials: same seed, same texts"},
    CLI_OPT_JSON(O(json), "one JSON object per cell on stdout"),
    CLI_OPT_PRECISION(O(precision)),
    CLI_OPT_THREADS(O(threads), 0, "threads, 0 = all cores"),
    CLI_OPT_QUIET(O(quiet), "no progress on stderr"),
};
#undef O

const cli_spec probe_spec = {
    CLI_OPTS(probe_options),
    .about = "Measures whether a model uses its context. needle: a planted fact (\"The secret "
             "number of Kelvard is 583194.\") at depths of contexts 1x-8x the trained one, "
             "asked for at the end; per cell the exact-match accuracy of the greedy answer, "
             "its bits, and the retrieval gain over the same context with another number "
             "planted. recall: a random string, then D bytes of text, then the string "
             "again; by distance the bits saved on the second occurrence against a control "
             "with the first one replaced, and the effective context (the largest D that "
             "keeps half the gain of the smallest; unknown when the gain at the smallest is not "
             "significantly above 0). With anchors, trials whose texts make fewer tokens are "
             "padded on the left with spaces, never cut. shift: the "
             "same text evaluated at position offsets K; relative schemes must not change. "
             "For word and BPE models lengths, distances and strings count the "
             "vocabulary's tokens and the sentence is in its tokens (a word model's key and "
             "value are its words).",
    .notes = "Every cell reports the mean and a 95% interval over the trials; a gain is "
             "significantly above 0 when the interval's lower end is. CKPT may be a "
             "run directory: its best checkpoint (else last).",
    .example = "example: txl probe needle runs/tiny/best.safetensors.gz --trials 20 --json > "
               "needle.jsonl\n         txl plot --probe needle.jsonl -o needle.png",
    .pos_max = 2,
    .pos_extra = "unexpected argument '%s' (txl probe KIND CKPT)",
    .pos_glob = "*.@(safetensors|safetensors.gz)",
};

/* Prints a row: its JSON (--json), or its table line (the heading before the first); a
 * note on stderr (not with -q). */
static int print_row(void *ctx, const txl_probe_row *r)
{
    const probe_args *a = ctx;
    if (r->note) {
        if (!a->quiet)
            fprintf(stderr, "txl probe: %s\n", r->note);
        return 0;
    }
    if (a->json)
        printf("%s\n", r->json);
    else
        printf("%s%s%s\n", r->head ? r->head : "", r->head ? "\n" : "", r->text);
    /* stdout failed: the rest would be lost too. 1, not -1: the call returns the value, and
     * -1 would read as its own failure (an empty message before main's) */
    return cli_stdout_flush() ? 1 : 0;
}

int cmd_probe(int argc, char **argv)
{
    probe_args a;
    cli_pos pos;
    int rc = cli_parse(txl_command("probe"), argc, argv, &a, &pos);
    if (rc >= 0)
        return rc;
    if (pos.n < 2)
        return cli_usage("probe", "%s", pos.n == 0 ? "missing the probe (needle, recall or "
                                                     "shift) and the checkpoint"
                                                   : "missing the checkpoint");
    a.kind = pos.v[0];
    a.ckpt = pos.v[1];
    if (strcmp(a.kind, "needle") && strcmp(a.kind, "recall") && strcmp(a.kind, "shift"))
        return cli_usage("probe", "expected the probe needle, recall or shift, found '%s'",
                         a.kind);
    txl_err e = {0};
    txl_model *m = txl_model_load(a.ckpt, &e);
    if (!m)
        return cli_fail("probe", &e);
    if (txl_model_from_dir(m) && !a.quiet)
        fprintf(stderr, "txl probe: %s is a run directory: using %s\n", a.ckpt,
                txl_model_path(m));
    txl_set_threads((int)a.threads);
    if ((rc = cli_set_precision("probe", a.precision, a.quiet)) != 0) {
        txl_model_free(m);
        return rc;
    }
    txl_probe_opts o = {
        .kind = a.kind, .data = a.data, .split = split_names[a.split], .trials = (int)a.trials,
        .lengths = a.lengths.v, .n_lengths = a.lengths.n, .depths = a.depths.v,
        .n_depths = a.depths.n, .distances = a.distances.v, .n_distances = a.distances.n,
        .string_len = (int)a.string_len, .offsets = a.offsets.v, .n_offsets = a.offsets.n,
        .max_tokens = a.max_tokens, .mode = (txl_probe_mode)a.mode, .tgt_len = (int)a.tgt_len,
        .mem_len = (int)a.mem_len, .seed = a.seed, .progress = !a.quiet && cli_isatty_stderr()};
    rc = txl_probe(m, &o, print_row, &a, &e);
    txl_model_free(m);
    if (rc < 0)
        return cli_fail("probe", &e);
    return 0; /* rc > 0: stdout failed, which main reports */
}

/* probe.c: `txl probe KIND CKPT` — the long-context probes (doc/design.md, "Probes"):
 * needle in a haystack, recall by distance, translation invariance. This file holds the
 * command (options, loading, the text), what the probes share and their statistics; each
 * probe is in probe_<kind>.c. */
#include "probe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/units.h"
#include "../model/gemm.h"
#include "cmds.h"

static const char *const split_names[] = {"valid", "test", "train", NULL};
static const char *const mode_names[] = {"memory", "window", "both", NULL};

#define O(f) offsetof(probe_args, f)
static const cli_opt probe_options[] = {
    {.name = "--data", .type = CLI_FILE, .off = O(data), .metavar = "FILE", .glob = "*",
     .excludes = "--split", .help = "draw the text (haystacks, filler) from this file ('-' = stdin)",
     .def_doc = "the run's --split"},
    {.name = "--split", .type = CLI_CHOICE, .off = O(split), .choices = split_names,
     .metavar = "NAME", .help = "valid, test or train, resolved from the checkpoint's config"},
    {.name = "--trials", .type = CLI_INT, .off = O(trials), .lo = 1, .hi = 4096, .def = 20,
     .metavar = "N", .help = "needle, recall: trials per cell (run side by side as streams)"},
    {.name = "--lengths", .type = CLI_LIST, .off = O(lengths), .lo = 1, .hi = 1024,
     .cap = CLI_MAX_LIST, .metavar = "LIST", .suggest = "1,2,4,8",
     .help = "needle: context lengths as factors of the trained context tgt_len + mem_len",
     .def_doc = "those of 1,2,4,8 that hold the needle and its question, 75 bytes"},
    {.name = "--depths", .type = CLI_LIST, .off = O(depths), .lo = 0, .hi = 100,
     .cap = CLI_MAX_LIST, .metavar = "LIST", .suggest = "0,25,50,75,100",
     .help = "needle: where the needle sits, in percent of the context; sorted, each once",
     .def_doc = "0,25,50,75,100"},
    {.name = "--distances", .type = CLI_LIST, .off = O(distances), .lo = 1, .hi = 1 << 24,
     .cap = CLI_MAX_LIST, .metavar = "LIST", .suggest = "16,64,256,1024",
     .help = "recall: bytes of text between the two occurrences of the string; sorted, each "
             "once",
     .def_doc = "16, 32, ... up to 8x the trained context"},
    {.name = "--string-len", .type = CLI_INT, .off = O(string_len), .lo = 2, .hi = 4096,
     .def = 24, .metavar = "N", .help = "recall: length of the random string"},
    {.name = "--offsets", .type = CLI_LIST, .off = O(offsets), .lo = 0, .hi = 1 << 30,
     .cap = CLI_MAX_LIST, .metavar = "LIST", .suggest = "0,1,1000,100000",
     .help = "shift: position offsets K to evaluate at", .def_doc = "0,1,1000,100000"},
    {.name = "--max-tokens", .type = CLI_INT, .off = O(max_tokens), .lo = 2, .hi = 1L << 40,
     .def = 20000, .metavar = "N", .help = "shift: bytes of text evaluated at each offset"},
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
             "same text evaluated at position offsets K; relative schemes must not change.",
    .notes = "Every cell reports the mean and a 95% interval over the trials; a gain is "
             "significantly above 0 when the interval's lower end is. CKPT may be a "
             "run directory: its best checkpoint (else last).",
    .example = "example: txl probe needle runs/tiny/best.safetensors.gz --trials 20 --json > "
               "needle.jsonl\n         txl plot --probe needle.jsonl -o needle.png",
    .pos_max = 2,
    .pos_extra = "unexpected argument '%s' (txl probe KIND CKPT)",
    .pos_glob = "*.@(safetensors|safetensors.gz)",
};

int probe_exact(const uint8_t *hit, int n)
{
    for (int i = 0; i < n; i++)
        if (!hit[i])
            return 0;
    return 1;
}

/* Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom (then ~normal). */
static double t95(int df)
{
    static const double t[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                               2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                               2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                               2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
    return df < 1 ? NAN : df <= 30 ? t[df - 1] : 1.96 + 2.4 / df;
}

stat_ci stat_mean(const double *v, int n)
{
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    double mean = n > 0 ? s / n : NAN;
    for (int i = 0; i < n; i++)
        ss += (v[i] - mean) * (v[i] - mean);
    double half = n > 1 ? t95(n - 1) * sqrt(ss / (n - 1) / n) : NAN;
    return (stat_ci){mean, mean - half, mean + half};
}

stat_ci stat_proportion(int k, int n)
{
    if (n <= 0)
        return (stat_ci){NAN, NAN, NAN};
    double z = 1.96, p = (double)k / n, d = 1 + z * z / n;
    double c = (p + z * z / (2.0 * n)) / d;
    double h = z * sqrt(p * (1 - p) / n + z * z / (4.0 * n * n)) / d;
    return (stat_ci){p, c - h > 0 ? c - h : 0, c + h < 1 ? c + h : 1};
}

void print_num(double x)
{
    if (isfinite(x))
        printf("%.6g", x);
    else
        printf("null");
}

void print_ci(const char *name, stat_ci s)
{
    printf(",\"%s\":", name);
    print_num(s.mean);
    printf(",\"%s_ci\":[", name);
    print_num(s.lo);
    printf(",");
    print_num(s.hi);
    printf("]");
}

int probe_text(const probe_ctx *p, rng_t *r, uint8_t *buf, size_t n, txl_err *e)
{
    if (p->span.n < n)
        return err_set(e, ERR_INPUT, "%s: the %s text has %zu bytes, the probe needs %zu "
                       "(use a longer --data FILE or fewer/shorter cells)", p->span.path,
                       p->label, p->span.n, n);
    size_t off = (size_t)(rng_uniform(r) * (double)(p->span.n - n + 1));
    return corpus_read(p->span.c, p->span.begin + off, buf, n, e);
}

void probe_tokens_free(probe_tokens *pt)
{
    free(pt->tok);
    free(pt->co);
    free(pt->map);
    free(pt->pad);
    memset(pt, 0, sizeof *pt);
}

/* Text b's tokens, coordinates and byte map, from a fresh state (a file's start); returns
 * its token count. */
static int tokenize_one(const probe_ctx *p, const uint8_t *text, int nbytes, txl_tok *tok,
                        int32_t *co, int *map)
{
    units_state st;
    units_init(&st, &p->units);
    int k = 0;
    for (int i = 0; i < nbytes; i++) {
        k += (int)units_tokenize(&st, text + i, 1, tok + k,
                                 co ? co + (size_t)k * TXL_N_COORDS : NULL);
        map[i] = k - 1;
    }
    return k;
}

/* Aligning the streams. They run side by side, so they must have one length n, and they
 * end together: the probed bytes (a recall string's second occurrence, a needle's question
 * and value) then sit at the same token index in every stream, against the same segment
 * boundaries of the memory mode. With anchors the same bytes make different token counts
 * (one trial's text has more sentences than another's). Cutting the longer streams from the
 * left to the shortest loses context the probe means the model to have: a recall string's
 * first occurrence or a needle at depth 0 went, and the trial reported a gain of 0 as if the
 * model had not used it. So the shorter streams are padded on the left instead, with
 * PROBE_PAD (a space), to the longest. What the model sees of the text is unchanged:
 * - the text's own tokens, anchors and coordinates are those of the unpadded text, from a
 *   fresh state (the pad does not go through the units machine), and the pad's tokens and
 *   coordinates (0: no unit started) are what that machine gives for leading spaces, so a
 *   padded stream is the tokenization of the same text after a run of blanks, a text the
 *   model can meet in training (whitespace before a document's first word);
 * - the pad comes before everything the probe scores and its control compares: the recall
 *   trial and its control (the same text but for the first occurrence, the same units,
 *   hence the same token count and pad), the needle and its control (only the digits of the
 *   planted number differ), so a gain, a difference between the two, cannot come from the
 *   pad: spaces carry nothing about the string or the number;
 * - the distances that matter, from the first occurrence or the needle to the end, are the
 *   text's own, and the end is aligned as before, so what the segments, the memory or the
 *   window let the model reach is what it was; the pad only shifts the text's absolute
 *   positions (cutting did too), which relative schemes do not see.
 * Without anchors every stream has the same count: no pad, the streams as before. */
int probe_tokenize(const probe_ctx *p, const uint8_t *bytes, int B, int nbytes,
                   probe_tokens *pt, txl_err *e)
{
    memset(pt, 0, sizeof *pt);
    int cap = p->units.anchors ? 2 * nbytes : nbytes; /* at most one anchor per byte */
    pt->B = B;
    pt->nbytes = nbytes;
    pt->tok = malloc((size_t)B * cap * sizeof *pt->tok);
    pt->co = p->coords ? malloc((size_t)B * cap * TXL_N_COORDS * sizeof *pt->co) : NULL;
    pt->map = malloc((size_t)B * nbytes * sizeof *pt->map);
    pt->pad = malloc((size_t)B * sizeof *pt->pad);
    if (!pt->tok || (p->coords && !pt->co) || !pt->map || !pt->pad) {
        probe_tokens_free(pt);
        return err_set(e, ERR_RUNTIME, "out of memory");
    }
    for (int b = 0; b < B; b++) { /* pad[b] holds the token count until the pads are known */
        pt->pad[b] = tokenize_one(p, bytes + (size_t)b * nbytes, nbytes,
                                  pt->tok + (size_t)b * cap,
                                  pt->co ? pt->co + (size_t)b * cap * TXL_N_COORDS : NULL,
                                  pt->map + (size_t)b * nbytes);
        pt->n = pt->pad[b] > pt->n ? pt->pad[b] : pt->n;
    }
    /* pack at stride n <= cap, each text at the end of its row: row b's tokens move from
     * [b cap, b cap + len) to [b n + pad, (b + 1) n), which ends before row b + 1's, so
     * going up the rows never overwrites a row not yet moved; the pad is written after */
    for (int b = 0; b < B; b++) {
        int len = pt->pad[b], pad = pt->n - len;
        txl_tok *t = pt->tok + (size_t)b * pt->n;
        memmove(t + pad, pt->tok + (size_t)b * cap, (size_t)len * sizeof *t);
        for (int j = 0; j < pad; j++)
            t[j] = PROBE_PAD;
        if (pt->co) {
            int32_t *c = pt->co + (size_t)b * pt->n * TXL_N_COORDS;
            memmove(c + (size_t)pad * TXL_N_COORDS, pt->co + (size_t)b * cap * TXL_N_COORDS,
                    (size_t)len * TXL_N_COORDS * sizeof *c);
            memset(c, 0, (size_t)pad * TXL_N_COORDS * sizeof *c);
        }
        int *m = pt->map + (size_t)b * nbytes;
        for (int i = 0; i < nbytes; i++)
            m[i] += pad;
        pt->pad[b] = pad;
        pt->pad_max = pad > pt->pad_max ? pad : pt->pad_max;
    }
    return 0;
}

double probe_bits(const probe_tokens *pt, const float *loss, int b, int a, int b_end)
{
    const int *m = pt->map + (size_t)b * pt->nbytes;
    int first = a > 0 ? m[a - 1] + 1 : pt->pad[b], last = m[b_end - 1];
    double s = 0;
    for (int j = first < 1 ? 1 : first; j <= last; j++)
        s += loss[(size_t)b * pt->n + j - 1];
    return s / M_LN2;
}

int probe_cut(const probe_tokens *pt, int b)
{
    const int *m = pt->map + (size_t)b * pt->nbytes;
    return pt->pad[b] < 0 || m[pt->nbytes - 1] >= pt->n;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int probe_sort_unique(int *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_int);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (k == 0 || v[i] != v[k - 1])
            v[k++] = v[i];
    return k;
}

int probe_streams(const probe_ctx *p, probe_mode mode, int B, int len, stream_eval *s,
                  txl_err *e)
{
    int T = mode == MODE_WINDOW ? len : p->T, M = mode == MODE_WINDOW ? 0 : p->M;
    double bytes;
    char who[160];
    snprintf(who, sizeof who, "probe %s, %s mode: %d trials x tgt_len %d with mem_len %d",
             p->a->kind, mode == MODE_WINDOW ? "window" : "memory", B, T, M);
    /* and a snapshot of the memory (needle's shared prefixes) */
    if (streams_plan_bytes(&p->cfg.model, B, T, M, &bytes, e) ||
        sys_check_memory(who, bytes + mem_plan_bytes(&p->cfg.model, B, M), gemm_as_reserve(), e))
        return -1;
    return streams_init(s, &((probe_ctx *)p)->mdl, &p->cfg.model, B, T, M, e);
}

/* The probe's text: --data FILE, or a split of the checkpoint's corpus. */
static int open_text(probe_ctx *p, txl_err *e)
{
    static const int split_ids[] = {SPLIT_VALID, SPLIT_TEST, SPLIT_TRAIN}; /* split_names */
    return cfg_open_text(p->a->data, split_ids[p->a->split], &p->cfg.data, &p->c, &p->span,
                         &p->label, e);
}

static int run(probe_ctx *p, txl_err *e)
{
    st_file f;
    if (cli_load_checkpoint(p->a->ckpt, "probe", p->a->quiet, &f, &p->cfg, &p->mdl, e))
        return -1;
    long long step = 0;
    int rc = ckpt_meta_count(&f, "step", 0, &step, e);
    st_free(&f);
    if (rc)
        return -1;
    p->step = (long)step;
    cli_threads((int)p->a->threads);
    p->T = p->a->tgt_len > 0 ? (int)p->a->tgt_len : p->cfg.model.tgt_len;
    p->M = p->a->mem_len >= 0 ? (int)p->a->mem_len : p->cfg.model.mem_len;
    p->progress = !p->a->quiet && cli_isatty_stderr();
    p->units = cfg_units(&p->cfg);
    p->coords = pos_get(p->cfg.model.pos)->needs_coords;
    if (open_text(p, e))
        return -1;
    if (strcmp(p->a->kind, "needle") == 0)
        return probe_needle(p, e);
    if (strcmp(p->a->kind, "recall") == 0)
        return probe_recall(p, e);
    return probe_shift(p, e);
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
    probe_ctx p = {.a = &a};
    txl_err e = {0};
    rc = run(&p, &e) ? cli_fail("probe", &e) : 0;
    corpus_close(&p.c);
    model_free(&p.mdl);
    return rc;
}

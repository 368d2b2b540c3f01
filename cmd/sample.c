/* sample.c: `txl sample` — text from a checkpoint (doc/design.md, "Sampling"), on the
 * decoder of include/txl.h: the flags, the prompts (a flag, a file, stdin, -i's lines) and
 * where the text goes (stdout as it comes, or N samples kept and printed at the end), the
 * anchors' markers, -n's tokens and --stats. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/line.h"
#include "../common/tok.h"
#include "cli.h"
#include "cmds.h"
#include "sample.h"

typedef struct {
    const char *prompt, *prompt_file, *prompts;
    long n, top_k, mem_len, threads, num_samples, batch;
    double temperature, top_p;
    unsigned long long seed;
    int echo, stats, quiet, interactive, show_anchors, json;
    int precision;            /* cli_precision_names */
    int cache;                /* cache_names, -1: the model's default */
    cli_strs stop;
} sample_args;

static const char *const cache_names[] = {"fp32", "bf16", "q8", NULL};

#define O(f) offsetof(sample_args, f)
static const cli_opt sample_options[] = {
    {.short_name = "-p", .name = "--prompt", .type = CLI_STR, .off = O(prompt),
     .metavar = "TEXT", .needs = "text", .excludes = "--prompt-file",
     .help = "prompt text ('-' = stdin)"},
    {.name = "--prompt-file", .type = CLI_FILE, .off = O(prompt_file), .metavar = "F",
     .glob = "*", .excludes = "--prompts", .help = "prompt from a file ('-' = stdin)"},
    {.name = "--prompts", .type = CLI_FILE, .off = O(prompts), .metavar = "FILE", .glob = "*",
     .excludes = "--prompt",
     .help = "one prompt per line of FILE ('-' = stdin; empty lines skipped), each sampled "
             "on its own (a fresh memory), its --num-samples printed after it"},
    {.short_name = "-n", .name = "--tokens", .type = CLI_INT, .off = O(n), .lo = 0,
     .hi = 1L << 40, .def = 500, .metavar = "N",
     .help = "tokens to generate, of the model's vocabulary: bytes for a byte model, words "
             "and line ends (<eos>) for a word model, pieces for BPE; the anchors a model "
             "inserts come on top"},
    {.short_name = "-t", .name = "--temperature", .type = CLI_NUM, .off = O(temperature),
     .dlo = 0, .dhi = 100, .ddef = 1.0, .metavar = "T",
     .help = "softmax temperature; 0 = greedy", .def_doc = "1.0"},
    {.name = "--top-k", .type = CLI_INT, .off = O(top_k), .lo = 0, .hi = 65536, .def = 0,
     .metavar = "K", .help = "sample among the K most likely tokens; 0 (or K >= the vocabulary) = all"},
    {.name = "--top-p", .type = CLI_NUM, .off = O(top_p), .dlo = 1e-9, .dhi = 1, .ddef = 1.0,
     .metavar = "P", .help = "nucleus sampling: the smallest set with probability >= P"},
    {.name = "--seed", .type = CLI_U64, .off = O(seed), .def = 1, .metavar = "S",
     .help = "random seed, 0 to 2^64-1 like train.seed: same seed, same text on the same "
             "machine (the products' rounding follows the CPU's kernels and, past 16 "
             "--num-samples, its cache through --batch's default)"},
    {.name = "--num-samples", .type = CLI_INT, .off = O(num_samples), .lo = 1, .hi = 4096,
     .def = 1, .metavar = "N",
     .help = "N samples of the same prompt, generated side by side as a batch; printed one "
             "after the other, each followed by a line of dashes"},
    {.name = "--batch", .type = CLI_INT, .off = O(batch), .lo = 0, .hi = 4096, .def = 0,
     .metavar = "B", .excludes = "--interactive",
     .help = "decode at most B of the --num-samples side by side, the rest in groups after "
             "them (each sample draws its own random numbers whatever B, though the products' "
             "rounding, and rarely a draw, can differ with the group's size); 0 = as many as "
             "fit a quarter of the CPU's last-level cache (at most 64 MB) with the weights"},
    {.short_name = "-i", .name = "--interactive", .type = CLI_SWITCH, .off = O(interactive),
     .excludes = "--num-samples",
     .help = "read prompts from stdin, one per line (a '> ' marker on stderr when stdin is "
             "a terminal); after each, generate until a newline (or -n tokens), keeping the "
             "model's memory from line to line. A line ending in \\ is continued: fed "
             "without the \\ and its newline, the answer completes it"},
    {.name = "--stop", .type = CLI_STR, .off = O(stop), .flags = CLI_REPEAT,
     .cap = SAMPLE_MAX_STOPS, .metavar = "STRING", .needs = "a string",
     .help = "end a sample where STRING appears (not printed; up to 8 of them, of up to 64 "
             "bytes; \\n is a newline)"},
    CLI_OPT_JSON(O(json), "one JSON object per sample on stdout, printed when all are drawn: "
                          "sample, prompt, text, tokens, bytes, seconds, finish"),
    {.name = "--mem-len", .type = CLI_INT, .off = O(mem_len), .lo = 0, .hi = 1 << 20,
     .def = -1, .metavar = "N", .help = "memory length while sampling",
     .def_doc = "the trained mem_len"},
    {.name = "--echo", .type = CLI_SWITCH, .off = O(echo),
     .help = "print the prompt before the generated text"},
    {.name = "--show-anchors", .type = CLI_SWITCH, .off = O(show_anchors),
     .help = "print the anchor tokens the model generates as <|bos|>, <|para|>, <|sent|> "
             "(by default they are not printed)"},
    {.name = "--stats", .type = CLI_SWITCH, .off = O(stats),
     .help = "print timing as one JSON line on stderr at the end"},
    {.name = "--cache", .type = CLI_CHOICE, .off = O(cache), .choices = cache_names,
     .metavar = "C", .def = -1, .def_doc = "fp32 for an fp32 model, bf16 for a quantized one",
     .help = "the cached keys and values (and xl's position rows) in fp32, or rounded to "
             "bf16: half the bytes a token reads from them, which at long memories outweigh "
             "the weights; or q8: int8 keys and values with a scale per row and head (a "
             "quarter of fp32's bytes; position rows bf16), for many streams at long memories"},
    CLI_OPT_PRECISION(O(precision)),
    CLI_OPT_THREADS(O(threads), 1, "threads: one token at a time is latency-bound; 0 = all "
                                   "cores, which helps a long prompt and many samples"),
    CLI_OPT_QUIET(O(quiet), "no progress line on stderr"),
};
#undef O

const cli_spec sample_spec = {
    CLI_OPTS(sample_options),
    .about = "Generates text from a checkpoint and streams it to stdout, -n tokens of the "
             "model's vocabulary (bytes, words or BPE pieces). Without --prompt or "
             "--prompt-file the prompt is read from stdin when it is not a terminal, else it is "
             "a newline. A long prompt is fed through the model first, with a progress line on "
             "stderr (terminal). CKPT may be a run directory: its best checkpoint (else last).",
    .example = "example: txl sample runs/tiny/best.safetensors.gz --prompt 'ROMEO:' -n 300 -t 0.8",
    .pos_max = 1,
    .pos_extra = "unexpected argument '%s'",
    .pos_glob = "*.@(safetensors|safetensors.gz)",
};

/* The longest prompt, and line of -i: 16 MiB. A model attends to tgt_len + mem_len tokens
 * (a few thousand; what came before reaches it only through the memory), so a longer
 * prompt is a mistake, such as --prompt-file /dev/zero, which grew to 6.4 GB in 8 s. */
#define PROMPT_MAX ((size_t)16 << 20)

/* All of f into *out (malloc'd) and *len: 0; 1 when f holds more than PROMPT_MAX bytes
 * (read no further); -1 on a read error or out of memory. */
static int read_stream(FILE *f, char **out, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    if (!b)
        return -1;
    size_t got;
    while ((got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n > PROMPT_MAX) {
            free(b);
            return 1;
        }
        if (n == cap) {
            size_t nc = cap * 2 > PROMPT_MAX + 1 ? PROMPT_MAX + 1 : cap * 2;
            char *nb = realloc(b, nc);
            if (!nb) {
                free(b);
                return -1;
            }
            b = nb;
            cap = nc;
        }
    }
    if (ferror(f)) {
        free(b);
        return -1;
    }
    *out = b;
    *len = n;
    return 0;
}

/* The prompt: --prompt, --prompt-file, stdin when it is not a terminal, else a newline.
 * '-' for either means stdin. *text is malloc'd (the caller frees it); *len > 0. */
static int read_prompt(const sample_args *a, char **text, size_t *len, txl_err *e)
{
    *text = NULL;
    *len = 0;
    const char *file = a->prompt && strcmp(a->prompt, "-") == 0 ? "-" : a->prompt_file;
    const char *flag = a->prompt_file ? "--prompt-file" : "--prompt";
    int rr = 0;
    if (a->prompt && !file) {
        *len = strlen(a->prompt);
        *text = malloc(*len + 1);
        if (*text)
            memcpy(*text, a->prompt, *len + 1);
    } else if (file) {
        FILE *pf = strcmp(file, "-") == 0 ? stdin : fopen(file, "rb");
        if (!pf)
            return err_set(e, ERR_INPUT, "--prompt-file %s: cannot open: %s", file,
                           strerror(errno));
        rr = read_stream(pf, text, len);
        int er = errno;
        if (pf != stdin)
            fclose(pf);
        if (rr < 0)
            return err_set(e, ERR_INPUT, "%s %s: read error: %s", flag, file, strerror(er));
    } else if (!isatty(0) && !a->interactive) {
        file = "stdin";
        flag = "the prompt from";
        rr = read_stream(stdin, text, len);
        if (rr < 0)
            return err_set(e, ERR_INPUT, "stdin: read error: %s", strerror(errno));
    }
    if (rr > 0)
        return err_set(e, ERR_INPUT, "%s %s: longer than %zu MiB, the most a prompt may be (the "
                       "model attends to its last tgt_len + mem_len tokens: give it the end of "
                       "the text)", flag, file, PROMPT_MAX >> 20);
    if (!*text || *len == 0) { /* no prompt: start from a newline, like a fresh line of text */
        free(*text);
        *text = malloc(2);
        if (!*text)
            return err_set(e, ERR_RUNTIME, "out of memory");
        strcpy(*text, "\n");
        *len = 1;
    }
    return 0;
}

/* Tokens drawn at most per stream for -n tokens: anchors come on top of them (about one
 * per sentence); a model that draws little but anchors stops here. */
static long token_budget(long n)
{
    return n > 0 ? 2 * n + 16 : 0;
}

/* One generate into the sink (reset first), then its end (held-back text, the newline). */
static long generate(txl_decoder *d, sink *k, long n, txl_err *e)
{
    sink_reset(k, sys_now());
    long g = txl_decoder_generate(d, token_budget(n), sink_put, k, e);
    if (g >= 0)
        sink_end(k, sys_now()); /* a failed stdout: main reports it */
    return g;
}

/* Several samples or --json: generated side by side, then printed one after the other. */
static long sample_batch(txl_decoder *d, sink *k, const sample_args *a, txl_err *e)
{
    long g = generate(d, k, a->n, e);
    if (g >= 0 && !k->live)
        sink_print(k, a->json, -1);
    return g;
}

/* stdin can be read: not closed (`<&-`: main's cli_std_fds put a write-only /dev/null in
 * its place) nor open for writing only. */
static int stdin_readable(void)
{
    int fl = fcntl(0, F_GETFL);
    return fl != -1 && (fl & O_ACCMODE) != O_WRONLY;
}

/* -i: a prompt per line of stdin; after each, text until a newline or -n tokens, the
 * decoder's memory going on from both. A line ending in a backslash is continued: fed
 * without it and its newline, and printed again, so the answer completes the line. With
 * stdin a terminal, '> ' on stderr asks for each line. A stdin at its end at once has no
 * prompts: nothing to do, not an error. */
static long sample_interactive(txl_decoder *d, const sample_args *a, sink *k, txl_err *e)
{
    char *line = NULL;
    size_t cap = 0;
    long len, total = 0;
    int marker = isatty(0) && !a->quiet;
    for (;;) {
        if (marker)
            fputs("> ", stderr), fflush(stderr);
        if ((len = line_read(stdin, PROMPT_MAX, &line, &cap)) <= 0)
            break;
        size_t fed = (size_t)len;
        int cont = fed >= 2 && line[fed - 1] == '\n' && line[fed - 2] == '\\';
        if (cont)
            fed -= 2;
        if (fed && txl_decoder_feed(d, line, fed, e)) {
            free(line);
            return -1;
        }
        if (cont && (fwrite(line, 1, fed, stdout) != fed || cli_stdout_flush()))
            break; /* the typed part of the line, which the answer completes */
        if (cont && fed)
            k->last = (unsigned char)line[fed - 1];
        long g = generate(d, k, a->n, e);
        if (g < 0) {
            free(line);
            return -1;
        }
        total += g;
        if (ferror(stdout))
            break; /* no more answers: main reports stdout's failure */
    }
    int er = errno;
    free(line);
    if (len == -1)
        return err_set(e, ERR_INPUT, "-i: stdin: a line longer than %zu MiB, the most a prompt "
                       "may be", PROMPT_MAX >> 20);
    if (len < 0)
        return err_set(e, er == EBADF ? ERR_INPUT : ERR_RUNTIME, "-i: reading the prompts "
                       "from stdin: %s", strerror(er));
    return total;
}

/* --stats: one JSON line on stderr. Tokens are summed over the streams; the full_ figures
 * are the tokens drawn once the memory was full (txl_decoder_stats); no rate without them.
 * After a failure, the rates of the groups that ran before it are left out. */
static void print_stats(const txl_model *m, const txl_decoder *d, const sink *k,
                        const sample_args *a, size_t tlen, long generated, int threads,
                        double prompt_s, double s, double cpu)
{
    long ft = 0;
    double fs = 0, fc = 0;
    int M, batch;
    txl_decoder_plan(d, &M, &batch);
    if (generated >= 0)
        txl_decoder_stats(d, &ft, &fs, &fc);
    else
        batch = 1;
    char full[32] = "null", full_cpu[32] = "null";
    if (ft > 0) {
        snprintf(full, sizeof full, "%.1f", ft / (fs > 0 ? fs : 1e-9));
        snprintf(full_cpu, sizeof full_cpu, "%.1f", ft / (fc > 0 ? fc : 1e-9));
    }
    long tokens = generated < 0 ? 0 : generated;
    fprintf(stderr, "{\"prompt_tokens\":%zu,\"prompt_s\":%.4f,\"tokens\":%ld,\"seconds\":%.4f,"
            "\"cpu_s\":%.4f,\"tok_per_s\":%.1f,\"full_tokens\":%ld,\"full_s\":%.4f,"
            "\"full_cpu_s\":%.4f,\"full_tok_per_s\":%s,\"full_tok_per_cpu_s\":%s,"
            "\"mem_len\":%d,\"samples\":%ld,\"batch\":%d,\"threads\":%d,\"weights\":\"%s\","
            "\"weight_bytes\":%zu,\"cache\":\"%s\",\"precision\":\"%s\"}\n", tlen, prompt_s,
            tokens, s, cpu, tokens / (s > 0 ? s : 1e-9), ft, fs, fc, full, full_cpu, M,
            a->num_samples, batch, threads, txl_model_quant(m), txl_model_weight_bytes(m),
            txl_decoder_cache(d), k->precision ? k->precision : "fp32");
}

/* The --stop strings as bytes (\\n a newline, \\t a tab, \\\\ a backslash), into buf. */
static int take_stops(const sample_args *a, char buf[][SAMPLE_STOP_MAX], const char **stops)
{
    for (int i = 0; i < a->stop.n; i++) {
        const char *s = a->stop.v[i];
        size_t n = 0;
        for (; *s; s++) {
            char c = *s;
            if (c == '\\' && (s[1] == 'n' || s[1] == 't' || s[1] == '\\'))
                c = *++s == 'n' ? '\n' : *s == 't' ? '\t' : '\\';
            if (n + 1 >= SAMPLE_STOP_MAX)
                return cli_usage("sample", "--stop '%s': longer than %d bytes", a->stop.v[i],
                                 SAMPLE_STOP_MAX - 1);
            buf[i][n++] = c;
        }
        buf[i][n] = 0;
        if (n == 0)
            return cli_usage("sample", "--stop: an empty string would stop every sample at "
                             "once");
        stops[i] = buf[i];
    }
    return 0;
}

/* The decoder's options from the flags. */
static txl_decode_opts decode_opts(const sample_args *a)
{
    return (txl_decode_opts){.streams = (int)a->num_samples, .batch = (int)a->batch,
                             .mem_len = (int)a->mem_len, .temperature = a->temperature,
                             .top_k = (int)a->top_k, .top_p = a->top_p, .seed = a->seed,
                             .progress = !a->quiet && cli_isatty_stderr(),
                             .cache = a->cache >= 0 ? cache_names[a->cache] : NULL};
}

/* --prompts FILE: each non-empty line a prompt of its own (a fresh decoder: a fresh
 * memory), its samples printed after it (--echo: the prompt first), or as JSON objects
 * naming its index. */
static int sample_prompts(txl_model *m, const sample_args *a, sink *k, txl_err *e)
{
    FILE *f = strcmp(a->prompts, "-") == 0 ? stdin : fopen(a->prompts, "rb");
    if (!f)
        return err_set(e, ERR_INPUT, "--prompts %s: cannot open: %s", a->prompts,
                       strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    long len, index = 0;
    int rc = 0;
    txl_decode_opts o = decode_opts(a);
    while (rc == 0 && (len = line_read(f, PROMPT_MAX, &line, &cap)) > 0) {
        size_t n = (size_t)len - (line[len - 1] == '\n');
        if (n == 0)
            continue;
        txl_decoder *d = txl_decoder_new(m, &o, e);
        if (!d || txl_decoder_feed(d, line, n, e))
            rc = -1;
        if (rc == 0 && a->echo && !a->json)
            fwrite(line, 1, n, stdout);
        if (rc == 0 && generate(d, k, a->n, e) < 0)
            rc = -1;
        if (rc == 0 && k->live)
            fputs("---------------\n", stdout);
        if (rc == 0 && (k->live ? cli_stdout_flush() : sink_print(k, a->json, index)))
            rc = 1; /* stdout failed: main reports it */
        txl_decoder_free(d);
        index++;
    }
    int er = errno;
    if (f != stdin)
        fclose(f);
    free(line);
    if (rc == 0 && len == -1)
        return err_set(e, ERR_INPUT, "--prompts %s: a line longer than %zu MiB, the most a "
                       "prompt may be", a->prompts, PROMPT_MAX >> 20);
    if (rc == 0 && len < 0)
        return err_set(e, ERR_INPUT, "--prompts %s: read error: %s", a->prompts, strerror(er));
    return rc < 0 ? -1 : 0;
}

/* The model and the samples' sink, in that order (what each fails on is reported in that
 * order; the decoders come after: txl_decoder_new counts the sink in the address space the
 * process holds). */
static txl_model *open_model(const char *ckpt, const sample_args *a, const char *const *stops,
                             sink *k, int *threads, txl_err *e)
{
    txl_model *m = txl_model_load(ckpt, e);
    if (!m)
        return NULL;
    if (txl_model_from_dir(m) && !a->quiet)
        fprintf(stderr, "txl sample: %s is a run directory: using %s\n", ckpt,
                txl_model_path(m));
    *threads = txl_set_threads((int)a->threads);
    const char *took, *kernel;
    if (txl_set_precision(cli_precision_names[a->precision], &took, &kernel, e))
        return txl_model_free(m), NULL;
    if (a->precision == 2 && !a->quiet)
        fprintf(stderr, "txl sample: precision auto: %s%s%s%s\n", took, *kernel ? " (" : "",
                kernel, *kernel ? ")" : "");
    int live = a->interactive || (a->num_samples == 1 && !a->json);
    if (sink_init(k, m, (int)a->num_samples, a->n, live, a->show_anchors, stops, a->stop.n, e))
        return txl_model_free(m), NULL;
    k->stop_at_newline = a->interactive;
    k->precision = took;
    return m;
}

/* The flags that cannot go together, before anything is read. */
static int check_flags(const sample_args *a)
{
    if (a->interactive && (a->prompt_file || a->prompts || (a->prompt && !strcmp(a->prompt, "-"))))
        return cli_usage("sample", "-i reads the prompts from stdin: it cannot read a prompt "
                         "from stdin too (nor take --prompt-file or --prompts)");
    if (a->interactive && a->json)
        return cli_usage("sample", "--json prints the samples when they are drawn; -i answers "
                         "line by line: use one or the other");
    if (a->prompts && a->prompt_file)
        return cli_usage("sample", "--prompts and --prompt-file: one source of prompts");
    if (a->interactive && !stdin_readable()) /* before loading the model for nothing */
        return cli_usage("sample", "-i reads the prompts from stdin, which is closed (or open "
                         "for writing only)");
    return 0;
}

/* One prompt (a flag, a file, stdin, or -i's lines): fed, then the samples or answers. */
static int sample_one(txl_model *m, const sample_args *a, sink *k, int threads, txl_err *e)
{
    char *text;
    size_t tlen;
    if (read_prompt(a, &text, &tlen, e))
        return -1;
    txl_decode_opts o = decode_opts(a);
    double t0 = sys_now();
    txl_decoder *d = txl_decoder_new(m, &o, e);
    int rc = 0;
    if (!d || txl_decoder_feed(d, text, tlen, e)) {
        rc = -1;
    } else {
        if (a->echo && !a->json) { /* after the progress line, which would erase it */
            fwrite(text, 1, tlen, stdout);
            cli_stdout_flush();
            k->last = tlen ? (unsigned char)text[tlen - 1] : -1;
        }
        double t1 = sys_now(), c1 = sys_cpu_now();
        long generated = a->interactive ? sample_interactive(d, a, k, e)
                                        : sample_batch(d, k, a, e);
        rc = generated < 0 ? -1 : 0;
        double t2 = sys_now(), c2 = sys_cpu_now();
        if (a->stats)
            print_stats(m, d, k, a, tlen, generated, threads, t1 - t0, t2 - t1, c2 - c1);
    }
    txl_decoder_free(d);
    free(text);
    return rc;
}

int cmd_sample(int argc, char **argv)
{
    sample_args a;
    cli_pos pos;
    int rc = cli_parse(txl_command("sample"), argc, argv, &a, &pos);
    if (rc >= 0)
        return rc;
    const char *ckpt = pos.n ? pos.v[0] : NULL;
    if (!ckpt)
        return cli_usage("sample", "missing the checkpoint to sample from");
    char stopbuf[SAMPLE_MAX_STOPS][SAMPLE_STOP_MAX];
    const char *stops[SAMPLE_MAX_STOPS];
    if ((rc = check_flags(&a)) != 0 || (rc = take_stops(&a, stopbuf, stops)) != 0)
        return rc;
    txl_err e = {0};
    sink k = {0};
    int threads = 1;
    txl_model *m = open_model(ckpt, &a, stops, &k, &threads, &e);
    int st = !m ? -1 : a.prompts ? sample_prompts(m, &a, &k, &e)
                                 : sample_one(m, &a, &k, threads, &e);
    txl_model_free(m);
    sink_free(&k);
    return st < 0 ? cli_fail("sample", &e) : 0; /* stdout's failure: main reports it */
}

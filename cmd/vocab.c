/* vocab.c: `txl vocab build|import-gpt2|encode|decode|info` — vocabularies and token files
 * (doc/design.md, "Vocabularies") on include/txl.h's txl_vocab. VOCAB is a vocabulary file,
 * or a checkpoint or run directory (its vocab tensor; a byte model's is the byte
 * vocabulary). Bad input (a vocabulary, a token file, ids, flags) exits 2 naming the file
 * and the place, and writes nothing: decode checks every id before it prints a byte. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/json.h"
#include "cmds.h"

static const char *const tokenizer_names[] = {"word", "bpe", NULL};

typedef struct {
    int tokenizer;           /* -1: not given */
    long size, min_freq;
    const char *out, *data;
    int binary, json, quiet;
} vocab_args;

#define O(f) offsetof(vocab_args, f)
static const cli_opt vocab_options[] = {
    {.name = "--tokenizer", .type = CLI_CHOICE, .off = O(tokenizer), .choices = tokenizer_names,
     .def = -1, .metavar = "KIND", .def_doc = "",
     .help = "build: word (official Transformer-XL's words) or bpe (byte-level BPE)"},
    {.name = "--size", .type = CLI_INT, .off = O(size), .lo = 0, .hi = 1 << 30, .def = -1,
     .metavar = "N", .def_doc = "word: all words; bpe: required",
     .help = "build: word: at most N words besides <eos> and <unk> (0: all); bpe: the "
             "vocabulary's size, 256 bytes and N - 256 merges"},
    {.name = "--min-freq", .type = CLI_INT, .off = O(min_freq), .lo = 0, .hi = 1L << 40,
     .metavar = "N", .help = "build, word: leave out words seen fewer than N times"},
    {.short_name = "-o", .name = "--output", .type = CLI_FILE, .off = O(out), .metavar = "FILE",
     .glob = "*", .help = "build, import-gpt2: the vocabulary file to write; encode --binary: "
                          "the token file"},
    {.name = "--binary", .type = CLI_SWITCH, .off = O(binary),
     .help = "encode: write a token file (-o) instead of ids on stdout"},
    {.name = "--data", .type = CLI_FILE, .off = O(data), .metavar = "FILE", .glob = "*",
     .help = "info: the compression on this text (bytes per token)"},
    CLI_OPT_JSON(O(json), "info: one JSON object on stdout"),
    CLI_OPT_QUIET(O(quiet), "no message on stderr"),
};
#undef O

const cli_spec vocab_spec = {
    CLI_OPTS(vocab_options),
    .about = "Vocabularies and token files. build learns a vocabulary from corpora (plain or "
             "gzip'd; '-' stdin): word as official Transformer-XL's Vocab (a line's "
             "whitespace-separated words and <eos>; by count, ties in first-seen order), bpe "
             "as GPT-2's byte-level BPE (GPT-2's pre-tokenization, merges of the most frequent "
             "pair). import-gpt2 reads GPT-2's encoder.json and vocab.bpe. encode prints a "
             "text's ids (or writes a token file), decode turns ids back into the text's bytes "
             "(FILE: a token file, told by its first bytes, or ids as text; stdin: ids as "
             "text), info describes a vocabulary.\n\n"
             "VOCAB is a vocabulary file, or a checkpoint or run directory: its vocab tensor "
             "(a byte model has none: its vocabulary is the 256 bytes). Files are written "
             "atomically; -o may not be an input, a directory, a device or a FIFO. Bad input "
             "exits 2, naming the file and the line or the offset, and writes nothing.",
    .example = "example: txl vocab build --tokenizer bpe --size 4096 "
               "tests/data/tinyshakespeare.txt.gz -o shakespeare.vocab\n"
               "         txl vocab encode shakespeare.vocab tests/data/tinyshakespeare.txt.gz "
               "--binary -o shakespeare.tok\n"
               "         txl vocab info shakespeare.vocab --data tests/data/tinyshakespeare.txt.gz",
    .pos_max = -1,
    .pos_glob = "*",
};

/* ---- Writing ids ------------------------------------------------------------------------ */

typedef struct {
    int first;
} ids_out;

static int print_ids(void *ctx, const uint32_t *ids, size_t n)
{
    ids_out *o = ctx;
    char buf[16 * 4096];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k > sizeof buf - 16) {
            fwrite(buf, 1, k, stdout);
            k = 0;
        }
        if (!o->first)
            buf[k++] = ' ';
        o->first = 0;
        k += (size_t)snprintf(buf + k, 16, "%u", ids[i]);
    }
    fwrite(buf, 1, k, stdout);
    return cli_stdout_flush() ? 1 : 0;
}

/* ---- The actions -------------------------------------------------------------------------- */

static int do_build(const vocab_args *a, const cli_pos *pos)
{
    txl_err e = {0};
    if (a->tokenizer < 0)
        return cli_usage("vocab", "build needs --tokenizer word|bpe");
    if (pos->n < 2)
        return cli_usage("vocab", "build needs the corpora to count");
    if (!a->out)
        return cli_usage("vocab", "build needs -o FILE, the vocabulary to write");
    if (a->tokenizer == 1 && a->size < 0)
        return cli_usage("vocab", "build --tokenizer bpe needs --size N (256 bytes and N - 256 "
                         "merges)");
    if (a->tokenizer == 1 && a->min_freq)
        return cli_usage("vocab", "--min-freq is for --tokenizer word");
    const char *in[CLI_MAX_REPEAT];
    int n = 0;
    for (int i = 1; i < pos->n && n < CLI_MAX_REPEAT; i++)
        in[n++] = pos->v[i];
    if (pos->n - 1 > CLI_MAX_REPEAT)
        return cli_usage("vocab", "at most %d corpora", CLI_MAX_REPEAT);
    if (cli_check_output("-o", a->out, in, n, &e))
        return cli_fail("vocab", &e);
    txl_vocab *v = txl_vocab_build(tokenizer_names[a->tokenizer], in, n,
                                   a->size < 0 ? 0 : a->size, a->min_freq,
                                   !a->quiet && cli_isatty_stderr(), &e);
    int rc = !v || txl_vocab_save(v, a->out, &e) ? cli_fail("vocab", &e) : 0;
    if (!rc && !a->quiet)
        fprintf(stderr, "txl vocab: a %s vocabulary of %zu tokens from %d %s -> %s\n",
                txl_vocab_kind(v), txl_vocab_size(v), n, n == 1 ? "text" : "texts", a->out);
    txl_vocab_free(v);
    return rc;
}

static int do_import(const vocab_args *a, const cli_pos *pos)
{
    txl_err e = {0};
    if (pos->n != 3)
        return cli_usage("vocab", "import-gpt2 needs ENCODER.json and VOCAB.bpe");
    if (!a->out)
        return cli_usage("vocab", "import-gpt2 needs -o FILE, the vocabulary to write");
    const char *in[2] = {pos->v[1], pos->v[2]};
    if (cli_check_output("-o", a->out, in, 2, &e))
        return cli_fail("vocab", &e);
    txl_vocab *v = txl_vocab_import_gpt2(in[0], in[1], &e);
    int rc = !v || txl_vocab_save(v, a->out, &e) ? cli_fail("vocab", &e) : 0;
    if (!rc && !a->quiet)
        fprintf(stderr, "txl vocab: GPT-2's vocabulary, %zu tokens and %zu merges -> %s\n",
                txl_vocab_size(v), txl_vocab_merges(v), a->out);
    txl_vocab_free(v);
    return rc;
}

/* VOCAB and the one text of encode, decode (default "-"); the vocabulary loaded */
static txl_vocab *vocab_and_text(const char *what, const cli_pos *pos, const char **text,
                                 int *rc)
{
    txl_err e = {0};
    *rc = 0;
    if (pos->n < 2 || pos->n > 3) {
        *rc = cli_usage("vocab", "%s needs VOCAB and at most one FILE (default '-', stdin)",
                        what);
        return NULL;
    }
    *text = pos->n == 3 ? pos->v[2] : "-";
    txl_vocab *v = txl_vocab_load(pos->v[1], &e);
    if (!v)
        *rc = cli_fail("vocab", &e);
    return v;
}

static int do_encode(const vocab_args *a, const cli_pos *pos)
{
    txl_err e = {0};
    if (a->out && !a->binary)
        return cli_usage("vocab", "encode writes ids on stdout; -o goes with --binary");
    if (a->binary && !a->out)
        return cli_usage("vocab", "encode --binary needs -o FILE, the token file to write");
    const char *text;
    int rc;
    txl_vocab *v = vocab_and_text("encode", pos, &text, &rc);
    if (!v)
        return rc;
    size_t tokens = 0, bytes = 0;
    if (a->binary) {
        const char *in[3] = {pos->v[1], text, txl_vocab_path(v)};
        rc = cli_check_output("-o", a->out, in, 3, &e) ||
             txl_vocab_write_tokens(v, text, a->out, &tokens, &bytes, &e) ? cli_fail("vocab", &e)
                                                                           : 0;
        if (!rc && !a->quiet)
            fprintf(stderr, "txl vocab: %zu bytes -> %zu tokens in %s\n", bytes, tokens, a->out);
    } else {
        ids_out o = {1};
        rc = txl_vocab_encode_file(v, text, print_ids, &o, &bytes, &e);
        rc = rc < 0 ? cli_fail("vocab", &e) : rc;
        if (!rc)
            fputc('\n', stdout);
    }
    txl_vocab_free(v);
    return rc;
}

/* ---- decode ------------------------------------------------------------------------------- */

/* Where decode's ids go: kept (stdin, to be checked whole before a byte is printed),
 * counted (a file's first pass), or decoded to stdout. */
typedef struct {
    const txl_vocab *v;
    int mode;                /* IDS_KEEP, IDS_CHECK, IDS_PRINT */
    uint32_t *ids;
    size_t n, cap;
    long prev;               /* the last id printed, -1 at the start */
} id_sink;

enum { IDS_KEEP, IDS_CHECK, IDS_PRINT };

static int print_text(id_sink *s, const uint32_t *ids, size_t n)
{
    char buf[1 << 16];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t need = txl_vocab_decode(s->v, s->prev, ids[i], NULL, 0);
        if (need > sizeof buf - k) {
            fwrite(buf, 1, k, stdout);
            k = 0;
        }
        if (need > sizeof buf) { /* a long token alone */
            char *big = malloc(need);
            if (!big)
                return -1;
            fwrite(big, 1, txl_vocab_decode(s->v, s->prev, ids[i], big, need), stdout);
            free(big);
        } else {
            k += txl_vocab_decode(s->v, s->prev, ids[i], buf + k, need);
        }
        s->prev = ids[i];
    }
    fwrite(buf, 1, k, stdout);
    return cli_stdout_flush() ? 1 : 0;
}

static int take_ids(void *ctx, const uint32_t *ids, size_t n)
{
    id_sink *s = ctx;
    if (s->mode == IDS_PRINT)
        return print_text(s, ids, n);
    if (s->mode == IDS_CHECK) {
        s->n += n;
        return 0;
    }
    if (s->n + n > s->cap) {
        size_t nc = s->cap ? s->cap : 1 << 16;
        while (nc < s->n + n)
            nc *= 2;
        uint32_t *ni = realloc(s->ids, nc * sizeof *ni);
        if (!ni)
            return -1;
        s->ids = ni;
        s->cap = nc;
    }
    memcpy(s->ids + s->n, ids, n * sizeof *ids);
    s->n += n;
    return 0;
}

/* One id of the text (tok[0 .. n), at line:col): below V, or ERR_INPUT naming it. */
static int take_id(const char *tok, size_t n, size_t V, const char *name, long line, long col,
                   id_sink *l, txl_err *e)
{
    unsigned long long x = 0;
    size_t i = 0;
    for (; i < n && tok[i] >= '0' && tok[i] <= '9'; i++)
        x = x > V ? x : 10 * x + (unsigned)(tok[i] - '0');
    if (i < n || n == 0)
        return err_set(e, ERR_INPUT, "%s:%ld:%ld: '%.*s%s' is not a token id (a number below "
                       "%zu)", name, line, col, (int)(n < 24 ? n : 24), tok, n > 24 ? "..." : "",
                       V);
    if (x >= V)
        return err_set(e, ERR_INPUT, "%s:%ld:%ld: id %.*s%s is not below the vocabulary's size "
                       "%zu", name, line, col, (int)(n < 24 ? n : 24), tok, n > 24 ? "..." : "",
                       V);
    uint32_t id = (uint32_t)x;
    int rc = take_ids(l, &id, 1);
    return rc < 0 ? err_set(e, ERR_RUNTIME, "out of memory for %zu ids", l->n) : rc;
}

/* Ids as text: decimal numbers separated by blanks, each below V; a fault names the line
 * and column of the word. */
static int parse_ids(FILE *f, const char *name, size_t V, id_sink *l, txl_err *e)
{
    long line = 1, col = 0, at_col = 0;
    char tok[32];
    size_t n = 0, len = 0; /* the word's first bytes, its whole length */
    for (int c;;) {
        c = getc(f);
        col++;
        int blank = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == EOF;
        if (!blank) {
            if (len == 0)
                at_col = col;
            if (n < sizeof tok)
                tok[n++] = (char)c;
            len++;
            continue;
        }
        int rc = len ? take_id(tok, len > n ? n : len, V, name, line, at_col, l, e) : 0;
        if (rc)
            return rc;
        if (len > n) /* too long for an id: take_id named its start */
            return err_set(e, ERR_INPUT, "%s:%ld:%ld: a word of %zu bytes is not a token id",
                           name, line, at_col, len);
        n = len = 0;
        if (c == '\n')
            line++, col = 0;
        if (c == EOF)
            break;
    }
    if (ferror(f))
        return err_set(e, ERR_INPUT, "%s: cannot read the ids", name);
    return 0;
}

/* Ids as text from a file, checked whole (a first pass) before any is decoded (a second),
 * or from stdin, held until checked. */
static int decode_text_ids(const txl_vocab *v, const char *text, txl_err *e)
{
    int std_in = strcmp(text, "-") == 0;
    const char *name = std_in ? "<stdin>" : text;
    id_sink s = {.v = v, .mode = std_in ? IDS_KEEP : IDS_CHECK, .prev = -1};
    FILE *f = std_in ? stdin : fopen(text, "rb");
    if (!f)
        return err_set(e, ERR_INPUT, "%s: cannot open the ids: %s", text, strerror(errno));
    int rc = parse_ids(f, name, txl_vocab_size(v), &s, e);
    if (!rc && !std_in) {
        rewind(f);
        s.mode = IDS_PRINT;
        rc = parse_ids(f, name, txl_vocab_size(v), &s, e);
    }
    if (f != stdin)
        fclose(f);
    if (!rc && std_in) {
        s.mode = IDS_PRINT;
        rc = print_text(&s, s.ids, s.n);
    }
    free(s.ids);
    return rc;
}

static int do_decode(const cli_pos *pos)
{
    txl_err e = {0};
    const char *text;
    int rc;
    txl_vocab *v = vocab_and_text("decode", pos, &text, &rc);
    if (!v)
        return rc;
    if (strcmp(text, "-") != 0 && txl_is_token_file(text)) { /* checked whole, then read */
        id_sink s = {.v = v, .mode = IDS_PRINT, .prev = -1};
        rc = txl_vocab_read_tokens(v, text, take_ids, &s, &e);
    } else {
        rc = decode_text_ids(v, text, &e);
    }
    rc = rc < 0 ? cli_fail("vocab", &e) : rc;
    txl_vocab_free(v);
    return rc;
}

/* ---- info --------------------------------------------------------------------------------- */

typedef struct {
    size_t tokens;
} counter;

static int count_ids(void *ctx, const uint32_t *ids, size_t n)
{
    (void)ids;
    ((counter *)ctx)->tokens += n;
    return 0;
}

#define N_LONGEST 10

/* The N_LONGEST longest tokens (by their bytes), longest first, ties by id. */
static int longest(const txl_vocab *v, uint32_t *ids, size_t *lens)
{
    int k = 0;
    for (uint32_t t = 0; t < txl_vocab_size(v); t++) {
        int sp;
        size_t n = txl_vocab_token(v, t, 0, NULL, 0, &sp);
        if (sp || (k == N_LONGEST && n <= lens[k - 1]))
            continue;
        int i = k < N_LONGEST ? k++ : N_LONGEST - 1;
        for (; i > 0 && lens[i - 1] < n; i--) {
            ids[i] = ids[i - 1];
            lens[i] = lens[i - 1];
        }
        ids[i] = t;
        lens[i] = n;
    }
    return k;
}

static void info_text(const txl_vocab *v, const char *arg, const uint32_t *ids,
                      const size_t *lens, int k, const char *data, size_t bytes, size_t tokens)
{
    const char *src = txl_vocab_source(v);
    printf("vocabulary: %s", arg);
    if (src && strcmp(src, "file"))
        printf(" (%s: %s)", txl_vocab_path(v), strcmp(src, "bytes") == 0
               ? "a byte model, no vocab tensor: the 256 bytes" : "its vocab tensor");
    int na = txl_vocab_anchors(v);
    printf("\nkind: %s\nsize: %zu tokens", txl_vocab_kind(v), txl_vocab_size(v));
    if (txl_vocab_merges(v))
        printf(" (%zu merges)", txl_vocab_merges(v));
    if (na)
        printf(" + %d anchor%s (the model's %zu)", na, na == 1 ? "" : "s",
               txl_vocab_size(v) + (size_t)na);
    printf("\nspecials:");
    const char *name;
    uint32_t id;
    char anames[32] = "";
    int i = 0;
    for (; txl_vocab_special(v, i, &name, &id) == 0; i++) {
        printf(" %s=%u", name, id);
        if (id >= txl_vocab_size(v)) /* an anchor */
            snprintf(anames + strlen(anames), sizeof anames - strlen(anames), "%s%s",
                     anames[0] ? ", " : "", name);
    }
    if (na)
        printf(" (%s: the model's anchor%s)", anames, na == 1 ? "" : "s");
    printf("%s\nfingerprint: %016llx\nlongest tokens:", i ? "" : " none",
           (unsigned long long)txl_vocab_fingerprint(v));
    for (int j = 0; j < k; j++) {
        char buf[256];
        size_t n = txl_vocab_token(v, ids[j], 1, buf, sizeof buf - 1, NULL);
        buf[n < sizeof buf - 1 ? n : sizeof buf - 1] = 0;
        printf("%s %u (%zu bytes) %s", j ? "," : "", ids[j], lens[j], buf);
    }
    printf("\n");
    if (data)
        printf("data: %s: %zu bytes, %zu tokens, %.4f bytes per token\n", data, bytes, tokens,
               tokens ? (double)bytes / (double)tokens : 0.0);
}

static void info_json(const txl_vocab *v, const char *arg, const uint32_t *ids,
                      const size_t *lens, int k, const char *data, size_t bytes, size_t tokens)
{
    cJSON *o = cJSON_CreateObject(), *sp = cJSON_CreateObject(), *lg = cJSON_CreateArray();
    char fp[24], buf[512];
    cJSON_AddStringToObject(o, "vocab", arg);
    cJSON_AddStringToObject(o, "source", txl_vocab_source(v) ? txl_vocab_source(v) : "file");
    if (txl_vocab_path(v))
        cJSON_AddStringToObject(o, "path", txl_vocab_path(v));
    cJSON_AddStringToObject(o, "kind", txl_vocab_kind(v));
    cJSON_AddNumberToObject(o, "size", (double)txl_vocab_size(v));
    cJSON_AddNumberToObject(o, "merges", (double)txl_vocab_merges(v));
    const char *name;
    uint32_t id;
    for (int i = 0; txl_vocab_special(v, i, &name, &id) == 0; i++)
        cJSON_AddNumberToObject(sp, name, id);
    cJSON_AddItemToObject(o, "specials", sp);
    cJSON_AddNumberToObject(o, "anchors", txl_vocab_anchors(v));
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)txl_vocab_fingerprint(v));
    cJSON_AddStringToObject(o, "fingerprint", fp);
    for (int j = 0; j < k; j++) {
        cJSON *t = cJSON_CreateObject();
        size_t n = txl_vocab_token(v, ids[j], 1, buf, sizeof buf - 1, NULL);
        buf[n < sizeof buf - 1 ? n : sizeof buf - 1] = 0;
        cJSON_AddNumberToObject(t, "id", ids[j]);
        cJSON_AddNumberToObject(t, "bytes", (double)lens[j]);
        cJSON_AddStringToObject(t, "text", buf);
        cJSON_AddItemToArray(lg, t);
    }
    cJSON_AddItemToObject(o, "longest", lg);
    if (data) {
        cJSON *d = cJSON_AddObjectToObject(o, "data");
        cJSON_AddStringToObject(d, "file", data);
        cJSON_AddNumberToObject(d, "bytes", (double)bytes);
        cJSON_AddNumberToObject(d, "tokens", (double)tokens);
        cJSON_AddNumberToObject(d, "bytes_per_token", tokens ? (double)bytes / (double)tokens : 0);
    }
    json_put_line(stdout, o);
    cJSON_Delete(o);
}

static int do_info(const vocab_args *a, const cli_pos *pos)
{
    txl_err e = {0};
    if (pos->n != 2)
        return cli_usage("vocab", "info needs one VOCAB");
    txl_vocab *v = txl_vocab_load(pos->v[1], &e);
    if (!v)
        return cli_fail("vocab", &e);
    uint32_t ids[N_LONGEST];
    size_t lens[N_LONGEST], bytes = 0;
    int k = longest(v, ids, lens);
    counter c = {0};
    int rc = a->data ? txl_vocab_encode_file(v, a->data, count_ids, &c, &bytes, &e) : 0;
    if (rc)
        rc = cli_fail("vocab", &e);
    else if (a->json)
        info_json(v, pos->v[1], ids, lens, k, a->data, bytes, c.tokens);
    else
        info_text(v, pos->v[1], ids, lens, k, a->data, bytes, c.tokens);
    txl_vocab_free(v);
    return rc;
}

int cmd_vocab(int argc, char **argv)
{
    vocab_args a;
    cli_pos pos;
    int rc = cli_parse(txl_command("vocab"), argc, argv, &a, &pos);
    if (rc >= 0)
        return rc;
    const char *act = pos.n ? pos.v[0] : "";
    int build = !strcmp(act, "build"), import = !strcmp(act, "import-gpt2"),
        encode = !strcmp(act, "encode"), decode = !strcmp(act, "decode"),
        info = !strcmp(act, "info");
    if (!build && !import && !encode && !decode && !info)
        return cli_usage("vocab", "%s%s%s: expected build, import-gpt2, encode, decode or info",
                         *act ? "unknown action '" : "missing the action", act, *act ? "'" : "");
    if (!build && (a.tokenizer >= 0 || a.size >= 0 || a.min_freq))
        return cli_usage("vocab", "--tokenizer, --size and --min-freq are for 'vocab build'");
    if (!encode && a.binary)
        return cli_usage("vocab", "--binary is for 'vocab encode'");
    if (!info && (a.data || a.json))
        return cli_usage("vocab", "%s is for 'vocab info'", a.data ? "--data" : "--json");
    if ((decode || info) && a.out)
        return cli_usage("vocab", "-o is for build, import-gpt2 and encode --binary");
    return build ? do_build(&a, &pos) : import ? do_import(&a, &pos)
           : encode ? do_encode(&a, &pos) : decode ? do_decode(&pos) : do_info(&a, &pos);
}

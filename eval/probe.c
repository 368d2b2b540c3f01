/* probe.c: what the long-context probes share (doc/design.md, "Probes"): the text they
 * draw from, its tokens with the streams aligned by pads, the bits of a stretch of bytes,
 * the streams of a mode, and the statistics of a cell; each probe is in probe_<kind>.c. */
#include "probe.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/gemm.h"
#include "../common/json.h"
#include "../common/sys.h"
#include "../data/textenc.h"
#include "../data/units.h"

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

void print_num(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.6g", x);
    else
        fprintf(f, "null");
}

void print_ci(FILE *f, const char *name, stat_ci s)
{
    fprintf(f, ",\"%s\":", name);
    print_num(f, s.mean);
    fprintf(f, ",\"%s_ci\":[", name);
    print_num(f, s.lo);
    fprintf(f, ",");
    print_num(f, s.hi);
    fprintf(f, "]");
}

void probe_json_end(const probe_ctx *p, FILE *json)
{
    fputs(",\"checkpoint\":", json);
    if (json_put_str(json, p->ckpt_path))
        fputs("null", json); /* out of memory: the row stays whole */
    fputc('}', json);
}

int probe_row_begin(probe_row *r, txl_err *e)
{
    memset(r, 0, sizeof *r);
    r->json = open_memstream(&r->jbuf, &r->jlen);
    r->text = r->json ? open_memstream(&r->tbuf, &r->tlen) : NULL;
    if (!r->text) {
        if (r->json)
            fclose(r->json);
        free(r->jbuf);
        return err_set(e, ERR_RUNTIME, "out of memory");
    }
    return 0;
}

int probe_row_end(probe_ctx *p, probe_row *r, const char *mode, int summary, txl_err *e)
{
    int bad = fclose(r->json) != 0;
    bad |= fclose(r->text) != 0;
    int rc = bad ? err_set(e, ERR_RUNTIME, "out of memory")
                 : p->fn(p->ctx, &(txl_probe_row){.kind = p->a->kind, .mode = mode,
                                                  .summary = summary, .json = r->jbuf,
                                                  .text = r->tbuf,
                                                  .head = p->rows ? NULL : p->head});
    p->rows++;
    free(r->jbuf);
    free(r->tbuf);
    memset(r, 0, sizeof *r);
    return rc;
}

int probe_note(probe_ctx *p, const char *fmt, ...)
{
    char note[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note, sizeof note, fmt, ap);
    va_end(ap);
    return p->fn(p->ctx, &(txl_probe_row){.kind = p->a->kind, .note = note});
}

int probe_text_init(probe_ctx *p, txl_err *e)
{
    memset(&p->text, 0, sizeof p->text);
    if (!p->tokens)
        return 0;
    units_config none = p->units; /* the tokens alone: anchors go in per composed text */
    none.anchors = 0;
    return tok_stream_open(&p->text, p->span, p->v, &none, 0, e);
}

void probe_text_free(probe_ctx *p)
{
    tok_stream_free(&p->text);
}

const char *probe_unit(const probe_ctx *p) { return p->tokens ? "token" : "byte"; }

const char *probe_units(const probe_ctx *p) { return p->tokens ? "tokens" : "bytes"; }

size_t probe_text_len(const probe_ctx *p)
{
    return p->tokens ? p->text.n : p->span.n;
}

int probe_text(const probe_ctx *p, rng_t *r, txl_tok *buf, size_t n, txl_err *e)
{
    size_t len = probe_text_len(p);
    if (len < n)
        return err_set(e, ERR_INPUT, "%s: the %s text has %zu %s, the probe needs %zu "
                       "(use a longer --data FILE or fewer/shorter cells)", p->span.path,
                       p->label, len, p->tokens ? "tokens of the model's vocabulary" : "bytes",
                       n);
    size_t off = (size_t)(rng_uniform(r) * (double)(len - n + 1));
    if (p->tokens) {
        memcpy(buf, p->text.tok + off, n * sizeof *buf);
        return 0;
    }
    uint8_t *bytes = (uint8_t *)buf; /* read into buf's front, widened from the back */
    if (corpus_read(p->span.c, p->span.begin + off, bytes, n, e))
        return -1;
    for (size_t i = n; i-- > 0;)
        buf[i] = bytes[i];
    return 0;
}

txl_tok probe_pad(const probe_ctx *p)
{
    if (!p->tokens)
        return PROBE_PAD;
    long t = vocab_get_kind(p->v) == VOCAB_WORD ? vocab_special_id(p->v, SPECIAL_EOS)
                                                 : vocab_lookup(p->v, (const uint8_t *)" ", 1);
    return (txl_tok)t; /* a word vocabulary has <eos>, a BPE one every byte */
}

void probe_tokens_free(probe_tokens *pt)
{
    free(pt->tok);
    free(pt->co);
    free(pt->map);
    free(pt->lens);
    free(pt->pad);
    memset(pt, 0, sizeof *pt);
}

/* Where tokenize_one writes a text's tokens. */
typedef struct {
    txl_tok *tok;
    int32_t *co;
    int k, cap;
} tok_sink;

static int sink_token(void *ctx, const textenc_tok *t)
{
    tok_sink *s = ctx;
    if (s->k == s->cap)
        return 1; /* cannot happen: at most one anchor before each unit */
    s->tok[s->k] = t->tok;
    if (s->co)
        memcpy(s->co + (size_t)s->k * TXL_N_COORDS, t->co, sizeof t->co);
    s->k++;
    return 0;
}

/* A text's tokens, coordinates and unit map, from a fresh state (a file's start): its
 * units one at a time through textenc_token (bytes: units_tokenize of each byte, as the
 * probes always did). Returns its token count, or -1 with e. */
static int tokenize_one(const probe_ctx *p, const txl_tok *text, int len, int cap,
                        txl_tok *tok, int32_t *co, int *map, txl_err *e)
{
    textenc te;
    if (textenc_init(&te, p->v, &p->units, e))
        return -1;
    tok_sink s = {.tok = tok, .co = co, .cap = cap};
    int rc = 0;
    for (int i = 0; rc == 0 && i < len; i++) {
        rc = textenc_token(&te, text[i], sink_token, &s, e);
        map[i] = s.k - 1;
    }
    textenc_free(&te);
    if (rc > 0)
        return err_set(e, ERR_RUNTIME, "a probe's text made more tokens than it holds");
    return rc ? -1 : s.k;
}

/* Aligning the streams. They run side by side, so they must have one length n, and they
 * end together: the probed units (a recall string's second occurrence, a needle's question
 * and value) then sit at the same token index in every stream, against the same segment
 * boundaries of the memory mode. With anchors the same units make different token counts
 * (one trial's text has more sentences than another's), and in BPE tokens the needle's
 * sentence is longer in one trial than in another (its key and value encode to more
 * tokens). Cutting the longer streams from the left to the shortest loses context the probe
 * means the model to have: a recall string's first occurrence or a needle at depth 0 went,
 * and the trial reported a gain of 0 as if the model had not used it. So the shorter
 * streams are padded on the left instead, with probe_pad's token, to the longest. What the
 * model sees of the text is unchanged:
 * - the text's own tokens, anchors and coordinates are those of the unpadded text, from a
 *   fresh state (the pad does not go through the units machine), and the pad's tokens and
 *   coordinates (0: no unit started) are what that machine gives for leading whitespace
 *   (spaces; a word vocabulary's <eos>, empty lines), so a padded stream is the same text
 *   after a run of blanks, a text the model can meet in training (whitespace before a
 *   document's first word; for a word vocabulary exactly its tokenization of blank lines
 *   before the text, for BPE one space token each, which its merges may write otherwise);
 * - the pad comes before everything the probe scores and its control compares: the recall
 *   trial and its control (the same text but for the first occurrence, the same units,
 *   hence the same token count and pad), the needle and its control (only the planted
 *   value differs, in as many tokens), so a gain, a difference between the two, cannot
 *   come from the pad: blanks carry nothing about the string or the value;
 * - the distances that matter, from the first occurrence or the needle to the end, are the
 *   text's own, and the end is aligned as before, so what the segments, the memory or the
 *   window let the model reach is what it was; the pad only shifts the text's absolute
 *   positions (cutting did too), which relative schemes do not see.
 * Without anchors and with texts of one length every stream has the same count: no pad,
 * the streams as before. */
int probe_tokenize(const probe_ctx *p, const txl_tok *text, int B, int len, const int *lens,
                   probe_tokens *pt, txl_err *e)
{
    memset(pt, 0, sizeof *pt);
    int cap = p->units.anchors ? 2 * len : len; /* at most one anchor per unit */
    pt->B = B;
    pt->len = len;
    pt->tok = malloc((size_t)B * cap * sizeof *pt->tok);
    pt->co = p->coords ? malloc((size_t)B * cap * TXL_N_COORDS * sizeof *pt->co) : NULL;
    pt->map = malloc((size_t)B * len * sizeof *pt->map);
    pt->lens = malloc((size_t)B * sizeof *pt->lens);
    pt->pad = malloc((size_t)B * sizeof *pt->pad);
    if (!pt->tok || (p->coords && !pt->co) || !pt->map || !pt->lens || !pt->pad) {
        probe_tokens_free(pt);
        return err_set(e, ERR_RUNTIME, "out of memory");
    }
    for (int b = 0; b < B; b++) { /* pad[b] holds the token count until the pads are known */
        pt->lens[b] = lens ? lens[b] : len;
        pt->pad[b] = tokenize_one(p, text + (size_t)b * len, pt->lens[b], cap,
                                  pt->tok + (size_t)b * cap,
                                  pt->co ? pt->co + (size_t)b * cap * TXL_N_COORDS : NULL,
                                  pt->map + (size_t)b * len, e);
        if (pt->pad[b] < 0) {
            probe_tokens_free(pt);
            return -1;
        }
        pt->n = pt->pad[b] > pt->n ? pt->pad[b] : pt->n;
    }
    /* pack at stride n <= cap, each text at the end of its row: row b's tokens move from
     * [b cap, b cap + k) to [b n + pad, (b + 1) n), which ends before row b + 1's, so
     * going up the rows never overwrites a row not yet moved; the pad is written after */
    txl_tok pad_tok = probe_pad(p);
    for (int b = 0; b < B; b++) {
        int k = pt->pad[b], pad = pt->n - k;
        txl_tok *t = pt->tok + (size_t)b * pt->n;
        memmove(t + pad, pt->tok + (size_t)b * cap, (size_t)k * sizeof *t);
        for (int j = 0; j < pad; j++)
            t[j] = pad_tok;
        if (pt->co) {
            int32_t *c = pt->co + (size_t)b * pt->n * TXL_N_COORDS;
            memmove(c + (size_t)pad * TXL_N_COORDS, pt->co + (size_t)b * cap * TXL_N_COORDS,
                    (size_t)k * TXL_N_COORDS * sizeof *c);
            memset(c, 0, (size_t)pad * TXL_N_COORDS * sizeof *c);
        }
        int *m = pt->map + (size_t)b * len;
        for (int i = 0; i < pt->lens[b]; i++)
            m[i] += pad;
        pt->pad[b] = pad;
        pt->pad_max = pad > pt->pad_max ? pad : pt->pad_max;
    }
    return 0;
}

double probe_bits(const probe_tokens *pt, const float *loss, int b, int a, int b_end)
{
    const int *m = pt->map + (size_t)b * pt->len;
    int first = a > 0 ? m[a - 1] + 1 : pt->pad[b], last = m[b_end - 1];
    double s = 0;
    for (int j = first < 1 ? 1 : first; j <= last; j++)
        s += loss[(size_t)b * pt->n + j - 1];
    return s / M_LN2;
}

int probe_cut(const probe_tokens *pt, int b)
{
    const int *m = pt->map + (size_t)b * pt->len;
    return pt->pad[b] < 0 || m[pt->lens[b] - 1] >= pt->n;
}

int probe_same_shape(const probe_ctx *p, const probe_tokens *a, const probe_tokens *b)
{
    if (a->B != b->B || a->n != b->n || (!a->co) != (!b->co))
        return 0;
    for (int i = 0; i < a->B; i++)
        if (a->pad[i] != b->pad[i])
            return 0;
    size_t n = (size_t)a->B * a->n;
    for (size_t j = 0; j < n; j++) {
        unsigned ka = units_token_anchor(&p->units, a->tok[j]);
        if (ka != units_token_anchor(&p->units, b->tok[j]) || (ka && a->tok[j] != b->tok[j]))
            return 0;
    }
    return !a->co || memcmp(a->co, b->co, n * TXL_N_COORDS * sizeof *a->co) == 0;
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
    if (streams_plan_bytes(&p->cfg->model, B, T, M, &bytes, e) ||
        sys_check_memory(who, bytes + mem_plan_bytes(&p->cfg->model, B, M),
                         gemm_as_reserve(), e))
        return -1;
    return streams_init(s, p->mdl, &p->cfg->model, B, T, M, e);
}


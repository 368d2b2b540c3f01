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
    if (streams_plan_bytes(&p->cfg->model, B, T, M, &bytes, e) ||
        sys_check_memory(who, bytes + mem_plan_bytes(&p->cfg->model, B, M),
                         gemm_as_reserve(), e))
        return -1;
    return streams_init(s, p->mdl, &p->cfg->model, B, T, M, e);
}


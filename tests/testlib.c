/* testlib.c: see testlib.h. */
#include "testlib.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

int tl_failures = 0;
int tl_checks = 0;

void tl_check(int cond, const char *fmt, ...)
{
    va_list ap;
    tl_checks++;
    if (!cond)
        tl_failures++;
    printf("%s ", cond ? "  ok  " : "  FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

int tl_done(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, tl_checks, tl_failures);
    return tl_failures ? 1 : 0;
}

static uint64_t next(tl_rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

float tl_uniform(tl_rng *r, float scale)
{
    return (float)(((next(r) >> 11) * (1.0 / 9007199254740992.0)) * 2.0 - 1.0) * scale;
}

float tl_normal(tl_rng *r, float scale)
{
    double u1 = ((next(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2) * scale);
}

void tl_fill(tl_rng *r, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = tl_normal(r, scale);
}

double tl_max_rel_err(const float *a, const double *b, size_t n, double floor)
{
    double maxdiff = 0, maxref = floor;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= maxdiff))
            maxdiff = d; /* also catches NaN */
        if (fabs(b[i]) > maxref)
            maxref = fabs(b[i]);
    }
    return maxdiff / maxref;
}

/* ---- Vocabulary tests ----------------------------------------------------------------- */

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../data/vocab.h"

uint8_t *vt_read_file(const char *path, size_t *len)
{
    gzFile f = gzopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (int got; buf && (got = gzread(f, buf + n, (unsigned)(cap - n))) > 0;) {
        n += (size_t)got;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    gzclose(f);
    *len = n;
    return buf;
}

typedef struct {
    txl_tok *t;
    size_t *off, *len;
    size_t n, cap;
} vt_toks;

static int vt_push(void *ctx, txl_tok t, size_t off, size_t len)
{
    vt_toks *v = ctx;
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 1024;
        v->t = realloc(v->t, v->cap * sizeof *v->t);
        v->off = realloc(v->off, v->cap * sizeof *v->off);
        v->len = realloc(v->len, v->cap * sizeof *v->len);
        if (!v->t || !v->off || !v->len)
            return 1;
    }
    v->t[v->n] = t;
    v->off[v->n] = off;
    v->len[v->n++] = len;
    return 0;
}

static void vt_free(vt_toks *v)
{
    free(v->t);
    free(v->off);
    free(v->len);
}

/* Encodes text in chunks of random sizes (rng NULL: whole). */
static int vt_encode(const vocab *v, const uint8_t *text, size_t len, tl_rng *r, vt_toks *out)
{
    txl_err e = {0};
    vocab_encoder *en = vocab_encoder_new(v, &e);
    if (!en)
        return -1;
    int rc = 0;
    for (size_t at = 0; at < len && !rc;) {
        size_t n = len - at;
        if (r) {
            uint64_t x = next(r);
            size_t cap = (x & 3) == 0 ? 4 : (x & 3) == 1 ? 64 : 4096;
            n = (size_t)((x >> 8) % (cap + 1));
            n = n > len - at ? len - at : n;
        }
        rc = vocab_encoder_feed(en, text + at, n, vt_push, out, &e);
        at += n;
    }
    if (!rc)
        rc = vocab_encoder_finish(en, vt_push, out, &e);
    vocab_encoder_free(en);
    return rc;
}

int vt_chunked_equal(const struct vocab *v, const uint8_t *text, size_t len, int rounds,
                     uint64_t seed)
{
    vt_toks whole = {0};
    if (vt_encode(v, text, len, NULL, &whole))
        return 0;
    int ok = 1;
    tl_rng r = {seed | 1};
    for (int k = 0; k < rounds && ok; k++) {
        vt_toks part = {0};
        ok = vt_encode(v, text, len, &r, &part) == 0 && part.n == whole.n;
        for (size_t i = 0; ok && i < whole.n; i++)
            ok = part.t[i] == whole.t[i] && part.off[i] == whole.off[i] &&
                 part.len[i] == whole.len[i];
        if (!ok)
            printf("        chunking %d differs (%zu tokens, whole %zu)\n", k, part.n, whole.n);
        vt_free(&part);
    }
    vt_free(&whole);
    return ok;
}

int vt_offsets_ok(const struct vocab *v, const uint8_t *text, size_t len)
{
    vt_toks w = {0};
    if (vt_encode(v, text, len, NULL, &w))
        return 0;
    int ok = 1;
    size_t at = 0;
    for (size_t i = 0; ok && i < w.n; i++) {
        size_t n;
        const uint8_t *p = vocab_piece(v, w.t[i], &n);
        vocab_special_kind sp = vocab_special(v, w.t[i]);
        if (vocab_get_kind(v) != VOCAB_WORD) {
            ok = w.off[i] == at && w.len[i] == n && !memcmp(text + at, p, n);
            at += n;
        } else if (sp == SPECIAL_EOS) {
            const uint8_t *q = text + w.off[i];
            ok = w.off[i] >= at && (w.len[i] == 0 ? w.off[i] == len
                 : w.len[i] == 1 ? *q == '\n' || *q == '\r'
                 : w.len[i] == 2 ? q[0] == '\r' && q[1] == '\n'
                 : w.len[i] == 5 && !memcmp(q, "<eos>", 5)); /* the word <eos> */
            at = w.off[i] + w.len[i];
        } else {
            ok = w.off[i] >= at && w.off[i] + w.len[i] <= len &&
                 (sp == SPECIAL_UNK || (w.len[i] == n && !memcmp(text + w.off[i], p, n)));
            at = w.off[i] + w.len[i];
        }
        if (!ok)
            printf("        token %zu (id %u) at %zu+%zu does not cover its bytes\n", i, w.t[i],
                   w.off[i], w.len[i]);
    }
    if (ok && vocab_get_kind(v) != VOCAB_WORD && at != len)
        ok = 0;
    vt_free(&w);
    return ok;
}

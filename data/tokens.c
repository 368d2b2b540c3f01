/* tokens.c: see tokens.h. */
#include "tokens.h"

#include "textenc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tok_stream_free(tok_stream *ts)
{
    free(ts->tok);
    free(ts->coords);
    free(ts->nbytes);
    memset(ts, 0, sizeof *ts);
}

/* The growing arrays of tok_stream_open. */
typedef struct {
    tok_stream *ts;
    size_t cap;
    int coords;
} stream_sink;

static int grow(tok_stream *ts, size_t *capp, int coords)
{
    size_t cap = *capp ? 2 * *capp : 1 << 16;
    txl_tok *tok = realloc(ts->tok, cap * sizeof *tok);
    if (tok)
        ts->tok = tok;
    uint32_t *nb = tok ? realloc(ts->nbytes, cap * sizeof *nb) : NULL;
    if (nb)
        ts->nbytes = nb;
    int32_t *co = nb && coords ? realloc(ts->coords, cap * TXL_N_COORDS * sizeof *co) : NULL;
    if (co)
        ts->coords = co;
    if (!tok || !nb || (coords && !co))
        return -1;
    *capp = cap;
    return 0;
}

int tok_stream_push(tok_stream *ts, size_t *cap, int coords, const textenc_tok *t)
{
    if (ts->n == *cap && grow(ts, cap, coords))
        return -1;
    ts->tok[ts->n] = t->tok;
    ts->nbytes[ts->n] = t->nbytes;
    if (coords)
        memcpy(ts->coords + ts->n * TXL_N_COORDS, t->co, sizeof t->co);
    ts->bytes += t->nbytes;
    ts->n++;
    return 0;
}

static int sink_token(void *ctx, const textenc_tok *t)
{
    stream_sink *k = ctx;
    return tok_stream_push(k->ts, &k->cap, k->coords, t) ? 2 : 0; /* 2: out of memory */
}

/* A token file's ids under v: held to v (its size and fingerprint), then each through the
 * units as its text would go (anchors, coordinates, bytes: textenc_token). */
static int feed_ids(textenc *te, const token_span *span, const vocab *v, stream_sink *k,
                    txl_err *e)
{
    const tokfile *tf = &span->c->tf;
    if (!v || vocab_get_kind(v) == VOCAB_BYTE) {
        err_set(e, ERR_INPUT, "%s: a token file, whose ids need their vocabulary: a byte model "
                "reads text (data.tokenizer word or bpe, with data.vocab the file's vocabulary)",
                span->path);
        return -2;
    }
    if (tf->vocab_size != vocab_size(v) || tf->fingerprint != vocab_fingerprint(v)) {
        err_set(e, ERR_INPUT, "%s: a token file of another vocabulary (%u tokens, fingerprint "
                "%016llx; the model's has %zu, %016llx)", span->path, tf->vocab_size,
                (unsigned long long)tf->fingerprint, vocab_size(v),
                (unsigned long long)vocab_fingerprint(v));
        return -2;
    }
    txl_tok ids[4096];
    for (size_t off = 0; off < span->n;) {
        size_t len = span->n - off < 4096 ? span->n - off : 4096;
        if (tokfile_read(tf, span->begin + off, len, ids, e))
            return -2;
        for (size_t i = 0; i < len; i++) {
            int rc = textenc_token(te, ids[i], sink_token, k, e);
            if (rc)
                return rc;
        }
        off += len;
    }
    return 0;
}

/* A text's bytes through the vocabulary's encoder. */
static int feed_text(textenc *te, const token_span *span, stream_sink *k, txl_err *e)
{
    uint8_t buf[1 << 16];
    for (size_t off = 0; off < span->n;) {
        size_t len = span->n - off < sizeof buf ? span->n - off : sizeof buf;
        if (corpus_read(span->c, span->begin + off, buf, len, e))
            return -2; /* e names the file */
        int rc = textenc_feed(te, buf, len, sink_token, k, e);
        if (rc)
            return rc;
        off += len;
    }
    return textenc_finish(te, sink_token, k, e);
}

int tok_stream_open(tok_stream *ts, token_span span, const vocab *v, const units_config *u,
                    int coords, txl_err *e)
{
    memset(ts, 0, sizeof *ts);
    ts->span = span;
    ts->n = ts->bytes = span.n;
    int bytes = !v || vocab_get_kind(v) == VOCAB_BYTE;
    int ids = span.c && span.c->kind == CORPUS_TOKENS;
    if (bytes && !ids && !u->anchors && !coords)
        return 0;
    ts->n = ts->bytes = 0;
    textenc te;
    if (textenc_init(&te, bytes ? NULL : v, u, e))
        return -1;
    stream_sink k = {.ts = ts, .coords = coords};
    int rc = ids ? feed_ids(&te, &span, v, &k, e) : feed_text(&te, &span, &k, e);
    textenc_free(&te);
    if (rc == 0 && !ts->tok && grow(ts, &k.cap, coords)) /* an empty text: arrays all the same */
        rc = 2;
    if (rc) {
        tok_stream_free(ts);
        if (rc == 2)
            return err_set(e, ERR_RUNTIME, "%s: out of memory for its tokens", span.path);
        return rc == -1 ? err_wrap(e, "%s", span.path) : -1;
    }
    return 0;
}

int tok_stream_read(const tok_stream *ts, size_t off, txl_tok *tok, int32_t *coords, size_t n,
                    txl_err *e)
{
    if (ts->tok) {
        memcpy(tok, ts->tok + off, n * sizeof *tok);
        if (coords && ts->coords)
            memcpy(coords, ts->coords + off * TXL_N_COORDS, n * TXL_N_COORDS * sizeof *coords);
        return 0;
    }
    uint8_t buf[4096];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < sizeof buf ? n - done : sizeof buf;
        if (corpus_read(ts->span.c, ts->span.begin + off + done, buf, k, e))
            return -1;
        for (size_t i = 0; i < k; i++)
            tok[done + i] = buf[i];
        done += k;
    }
    return 0;
}

void tok_stream_bytes(const tok_stream *ts, size_t off, uint32_t *nb, size_t n)
{
    if (ts->nbytes)
        memcpy(nb, ts->nbytes + off, n * sizeof *nb);
    else
        for (size_t i = 0; i < n; i++)
            nb[i] = 1;
}

int batcher_init(batcher *bt, const tok_stream *ts, int B, int Lq, int whole, size_t min_len,
                 const char *what, txl_err *e)
{
    memset(bt, 0, sizeof *bt);
    bt->ts = ts;
    bt->B = B;
    bt->Lq = Lq;
    bt->whole = whole;
    size_t T = ts->n;
    /* whole: n targets per stream need n + 1 tokens; training: n tokens */
    bt->n = B <= 0 ? 0 : whole ? (T > 0 ? (T - 1) / (size_t)B : 0) : T / (size_t)B;
    size_t have = whole ? bt->n + 1 : bt->n;
    if (min_len < 2)
        min_len = 2;
    if (whole && have < min_len) {
        const char *sp = strcmp(what, "file") ? " split" : "";
        if (T < 2)
            return err_set(e, ERR_INPUT, "%s: the %s%s has %zu token%s: scoring needs at least 2 "
                           "(an input and its target)", ts->span.path, what, sp, T,
                           T == 1 ? "" : "s");
        return err_set(e, ERR_INPUT, "%s: the %s%s has %zu tokens, too few for %d streams (each "
                       "needs an input and its target); use a batch of at most %zu",
                       ts->span.path, what, sp, T, B, T - 1);
    }
    if (have < min_len) {
        char why[64];
        if (min_len == (size_t)Lq + 1)
            snprintf(why, sizeof why, "tgt_len %d + 1", Lq);
        else
            snprintf(why, sizeof why, "an input and its target");
        return err_set(e, ERR_INPUT,
                       "%s: the %s split has %zu tokens: %d streams of %zu tokens each, but each "
                       "stream needs at least %zu (%s); use a larger corpus or %s", ts->span.path,
                       what, T, B, have, min_len, why,
                       min_len == (size_t)Lq + 1 ? "a smaller batch_size/tgt_len"
                                                 : "fewer streams (batch)");
    }
    return 0;
}

/* Targets per stream in one pass: whole n, training n - 1. */
static size_t stream_targets(const batcher *bt)
{
    return bt->whole ? bt->n : (bt->n >= 1 ? bt->n - 1 : 0);
}

int batcher_next(batcher *bt, txl_tok *x, txl_tok *y, int32_t *co, uint32_t *yb, txl_err *e)
{
    size_t nt = stream_targets(bt);
    if (bt->pos >= nt)
        return 0;
    size_t len = nt - bt->pos;
    if (len > (size_t)bt->Lq)
        len = (size_t)bt->Lq;
    for (int b = 0; b < bt->B; b++) { /* inputs, and the targets one token on */
        size_t at = (size_t)b * bt->n + bt->pos;
        if (tok_stream_read(bt->ts, at, x + (size_t)b * len,
                            co ? co + (size_t)b * len * TXL_N_COORDS : NULL, len, e) ||
            tok_stream_read(bt->ts, at + 1, y + (size_t)b * len, NULL, len, e))
            return -1;
        if (yb)
            tok_stream_bytes(bt->ts, at + 1, yb + (size_t)b * len, len);
    }
    bt->pos += len;
    return (int)len;
}

size_t batcher_segments(const batcher *bt)
{
    size_t nt = stream_targets(bt);
    return (nt + (size_t)bt->Lq - 1) / (size_t)bt->Lq;
}

void batcher_tail(const batcher *bt, size_t *first, size_t *n)
{
    *first = (size_t)bt->B * bt->n;
    *n = bt->whole && bt->ts->n > *first + 1 ? bt->ts->n - 1 - *first : 0;
}

size_t batcher_tokens(const batcher *bt)
{
    size_t first, tail;
    batcher_tail(bt, &first, &tail);
    return (size_t)bt->B * stream_targets(bt) + tail;
}

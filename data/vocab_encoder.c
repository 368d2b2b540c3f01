/* vocab_encoder.c: the chunked encoder (vocab.h): a text fed in pieces of any size, its
 * tokens emitted as soon as they are final, over each kind's scanner (bytes here; word.c's
 * word_scan, bpe.c's bpe_scan), and vocab_encode, a whole text at once. */
#include "vocab_impl.h"

#include <stdlib.h>
#include <string.h>

vocab_encoder *vocab_encoder_new(const vocab *v, txl_err *e)
{
    vocab_encoder *en = calloc(1, sizeof *en);
    if (!en) {
        err_set(e, ERR_RUNTIME, "out of memory for an encoder");
        return NULL;
    }
    en->v = v;
    if (v->kind == VOCAB_BPE && bpe_encoder_init(en, e)) {
        free(en);
        return NULL;
    }
    return en;
}

void vocab_encoder_free(vocab_encoder *en)
{
    if (!en)
        return;
    bpe_encoder_free(en);
    free(en->buf);
    free(en);
}

static int emit_bytes(vocab_encoder *en, int final, vocab_emit_fn emit, void *ctx, txl_err *e)
{
    (void)final;
    (void)e;
    for (size_t i = 0; i < en->len; i++) {
        int rc = emit(ctx, en->buf[i], en->base + i, 1);
        if (rc)
            return rc;
    }
    return 0;
}

/* Runs the kind's scanner over the held bytes and keeps what it did not consume. */
static int encode_held(vocab_encoder *en, int final, vocab_emit_fn emit, void *ctx, txl_err *e)
{
    int rc = 0;
    long used;
    if (en->v->kind == VOCAB_BYTE) {
        rc = emit_bytes(en, final, emit, ctx, e);
        used = rc ? -1 : (long)en->len;
    } else {
        used = en->v->kind == VOCAB_WORD ? word_scan(en, final, emit, ctx, &rc, e)
                                          : bpe_scan(en, final, emit, ctx, &rc, e);
    }
    if (used < 0)
        return rc ? rc : -1;
    memmove(en->buf, en->buf + used, en->len - (size_t)used);
    en->len -= (size_t)used;
    en->base += (size_t)used;
    return 0;
}

int vocab_encoder_feed(vocab_encoder *en, const uint8_t *text, size_t n, vocab_emit_fn emit,
                       void *ctx, txl_err *e)
{
    if (n == 0)
        return 0;
    if (en->len + n > en->cap) {
        size_t nc = en->cap ? en->cap : 4096;
        while (nc < en->len + n)
            nc *= 2;
        uint8_t *nb = realloc(en->buf, nc);
        if (!nb)
            return err_set(e, ERR_RUNTIME, "out of memory encoding (%zu bytes held)", en->len);
        en->buf = nb;
        en->cap = nc;
    }
    memcpy(en->buf + en->len, text, n);
    en->len += n;
    return encode_held(en, 0, emit, ctx, e);
}

int vocab_encoder_finish(vocab_encoder *en, vocab_emit_fn emit, void *ctx, txl_err *e)
{
    int rc = encode_held(en, 1, emit, ctx, e);
    en->len = 0;
    en->base = 0;
    en->mid_line = 0;
    return rc;
}

int vocab_encoder_flush(vocab_encoder *en, vocab_emit_fn emit, void *ctx, txl_err *e)
{
    return encode_held(en, VOCAB_FLUSH, emit, ctx, e); /* the line and the offsets go on */
}

typedef struct {
    txl_tok *t;
    size_t n, cap;
    txl_err *e;
} tok_vec;

static int push_tok(void *ctx, txl_tok t, size_t off, size_t len)
{
    (void)off;
    (void)len;
    tok_vec *tv = ctx;
    if (tv->n == tv->cap) {
        size_t nc = tv->cap ? 2 * tv->cap : 1024;
        txl_tok *nt = realloc(tv->t, nc * sizeof *nt);
        if (!nt)
            return err_set(tv->e, ERR_RUNTIME, "out of memory for %zu tokens", tv->n);
        tv->t = nt;
        tv->cap = nc;
    }
    tv->t[tv->n++] = t;
    return 0;
}

int vocab_encode(const vocab *v, const uint8_t *text, size_t len, txl_tok **out, size_t *n,
                 txl_err *e)
{
    *out = NULL;
    *n = 0;
    vocab_encoder *en = vocab_encoder_new(v, e);
    if (!en)
        return -1;
    tok_vec tv = {.e = e};
    int rc = vocab_encoder_feed(en, text, len, push_tok, &tv, e);
    if (!rc)
        rc = vocab_encoder_finish(en, push_tok, &tv, e);
    vocab_encoder_free(en);
    if (rc) {
        free(tv.t);
        return -1;
    }
    *out = tv.t;
    *n = tv.n;
    return 0;
}


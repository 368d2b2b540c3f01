/* textenc.c: see textenc.h. */
#include "textenc.h"

#include <stdlib.h>
#include <string.h>

static int is_bytes(const vocab *v)
{
    return !v || vocab_get_kind(v) == VOCAB_BYTE;
}

void text_pos_init(text_pos *p, const vocab *v, const units_config *u)
{
    memset(p, 0, sizeof *p);
    p->v = is_bytes(v) ? NULL : v;
    p->u = *u;
    p->u.base = (txl_tok)(v ? vocab_size(v) : TXL_BYTES);
    p->prev = -1;
    units_init(&p->us, &p->u);
}

unsigned text_pos_anchor(const text_pos *p, txl_tok tok)
{
    return units_token_anchor(&p->u, tok);
}

size_t text_pos_decoded(const text_pos *p, txl_tok tok, uint8_t *buf, size_t cap)
{
    if (text_pos_anchor(p, tok))
        return 0;
    if (!p->v) {
        if (cap)
            buf[0] = (uint8_t)tok;
        return 1;
    }
    return vocab_decoded(p->v, p->prev, tok, buf, cap);
}

/* Runs the units over the bytes a text token adds; returns the units that start there. */
static unsigned push_text(units_state *s, const uint8_t *b, size_t n)
{
    unsigned st = 0;
    for (size_t i = 0; i < n; i++) {
        st |= units_starting(s, b[i]);
        units_push_byte(s, b[i]);
    }
    return st;
}

void text_pos_push(text_pos *p, txl_tok tok, int32_t *co)
{
    unsigned kind = text_pos_anchor(p, tok);
    if (kind)
        units_push_anchor(&p->us, kind);
    else if (!p->v)
        units_push_byte(&p->us, (uint8_t)tok);
    else {
        uint8_t small[256];
        size_t n = vocab_decoded(p->v, p->prev, tok, small, sizeof small);
        if (n <= sizeof small) {
            push_text(&p->us, small, n);
        } else { /* a long word: its bytes are its piece, after a space when decoded so */
            size_t len;
            const uint8_t *piece = vocab_piece(p->v, tok, &len);
            push_text(&p->us, small, n - len < sizeof small ? n - len : 0);
            push_text(&p->us, piece, len);
        }
        p->prev = tok;
    }
    if (co)
        memcpy(co, p->us.count, sizeof p->us.count);
}

int textenc_init(textenc *t, const vocab *v, const units_config *u, txl_err *e)
{
    memset(t, 0, sizeof *t);
    text_pos_init(&t->pos, v, u);
    if (t->pos.v && !(t->en = vocab_encoder_new(v, e)))
        return -1;
    return 0;
}

void textenc_free(textenc *t)
{
    vocab_encoder_free(t->en);
    free(t->buf);
    memset(t, 0, sizeof *t);
}

/* The bytes token tok adds after pos.prev, in t->buf (grown as needed); -1 out of memory. */
static long decoded(textenc *t, txl_tok tok)
{
    size_t n = vocab_decoded(t->pos.v, t->pos.prev, tok, NULL, 0);
    if (n > t->cap) {
        size_t cap = n > 2 * t->cap ? n : 2 * t->cap;
        uint8_t *b = realloc(t->buf, cap);
        if (!b)
            return -1;
        t->buf = b, t->cap = cap;
    }
    vocab_decoded(t->pos.v, t->pos.prev, tok, t->buf, t->cap);
    return (long)n;
}

static int emit_anchor(text_pos *p, unsigned kind, size_t off, textenc_fn fn, void *ctx)
{
    units_push_anchor(&p->us, kind);
    textenc_tok a = {.tok = (txl_tok)units_anchor_token(&p->u, kind), .off = off};
    memcpy(a.co, p->us.count, sizeof a.co);
    return fn(ctx, &a);
}

/* One text token of a word or BPE vocabulary from [off, off + len) of the text (len < 0:
 * not encoded from text): the anchor its text calls for, then the token. */
static int text_token(textenc *t, txl_tok tok, size_t off, long len, textenc_fn fn, void *ctx,
                      txl_err *e)
{
    text_pos *p = &t->pos;
    long n = decoded(t, tok);
    if (n < 0)
        return err_set(e, ERR_RUNTIME, "out of memory for a token's text");
    units_state before = p->us;
    unsigned st = push_text(&p->us, t->buf, (size_t)n);
    unsigned kind = p->u.anchors ? units_anchor_before(&p->u, st) : 0;
    if (kind) { /* the anchor goes first: the token's bytes again after it */
        p->us = before;
        int rc = emit_anchor(p, kind, off, fn, ctx);
        if (rc)
            return rc;
        push_text(&p->us, t->buf, (size_t)n);
    }
    textenc_tok o = {.tok = tok, .nbytes = (uint32_t)n, .off = off,
                     .len = len < 0 ? (size_t)n : (size_t)len};
    if (len >= 0 && vocab_special(p->v, tok) != SPECIAL_EOS) {
        /* a word covers its own bytes in the text (an <unk>'s word too) and its space */
        size_t piece;
        vocab_piece(p->v, tok, &piece);
        o.nbytes = (uint32_t)((size_t)n - piece + (size_t)len);
    }
    memcpy(o.co, p->us.count, sizeof o.co);
    p->prev = tok;
    return fn(ctx, &o);
}

static int encoder_emit(void *ctx, txl_tok tok, size_t off, size_t len)
{
    textenc *t = ctx;
    return text_token(t, tok, off, (long)len, t->fn, t->ctx, t->e);
}

/* The byte vocabulary: units_tokenize over the text, a chunk at a time. */
static int feed_bytes(textenc *t, const uint8_t *text, size_t n, textenc_fn fn, void *ctx)
{
    enum { CHUNK = 1024 };
    txl_tok tok[2 * CHUNK];
    int32_t co[2 * CHUNK * TXL_N_COORDS];
    for (size_t at = 0; at < n;) {
        size_t len = n - at < CHUNK ? n - at : CHUNK;
        size_t k = units_tokenize(&t->pos.us, text + at, len, tok, co);
        for (size_t i = 0; i < k; i++) {
            int byte = tok[i] < TXL_BYTES;
            textenc_tok o = {.tok = tok[i], .nbytes = (uint32_t)byte, .off = t->fed,
                             .len = (size_t)byte};
            memcpy(o.co, co + i * TXL_N_COORDS, sizeof o.co);
            t->fed += (size_t)byte;
            int rc = fn(ctx, &o);
            if (rc)
                return rc;
        }
        at += len;
    }
    return 0;
}

int textenc_feed(textenc *t, const uint8_t *text, size_t n, textenc_fn fn, void *ctx,
                 txl_err *e)
{
    if (!t->pos.v)
        return feed_bytes(t, text, n, fn, ctx);
    t->fn = fn, t->ctx = ctx, t->e = e;
    return vocab_encoder_feed(t->en, text, n, encoder_emit, t, e);
}

int textenc_finish(textenc *t, textenc_fn fn, void *ctx, txl_err *e)
{
    if (!t->pos.v)
        return 0;
    t->fn = fn, t->ctx = ctx, t->e = e;
    return vocab_encoder_finish(t->en, encoder_emit, t, e);
}

int textenc_flush(textenc *t, textenc_fn fn, void *ctx, txl_err *e)
{
    if (!t->pos.v)
        return 0;
    t->fn = fn, t->ctx = ctx, t->e = e;
    return vocab_encoder_flush(t->en, encoder_emit, t, e);
}

/* fuzz_vocab.c: vocabulary files (data/vocab_file.c) and token files (data/tokfile.c), read as
 * `txl vocab` and the data layer read them, and the encoders of what parses.
 *
 * Input: one byte of mode, then the file's bytes.
 * - mode even: a vocabulary file (vocab_load). Refused: ERR_INPUT naming the file. Parsed:
 *   its canonical writing parses back to the same vocabulary (size, kind, fingerprint) and
 *   is written again byte for byte; the input itself, as a text, encodes the same whole and
 *   in chunks of (mode >> 1) % 7 + 1 bytes, its tokens' offsets tile it (byte, bpe: and
 *   their pieces joined are it) or cover their words (word), and a word vocabulary without
 *   <unk> refuses an unknown word with ERR_INPUT naming its offset.
 * - mode odd: a token file, read with a 300-token vocabulary (2-byte ids) or, when mode & 2,
 *   with none: refused naming the file, or every id read is below the size it records. */
#include <string.h>

#include "../../data/tokfile.h"
#include "../../data/vocab.h"
#include "fuzz.h"

typedef struct {
    txl_tok *t;
    size_t *off, *len, n, cap;
} toks;

static int push(void *ctx, txl_tok t, size_t off, size_t len)
{
    toks *v = ctx;
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 256;
        v->t = realloc(v->t, v->cap * sizeof *v->t);
        v->off = realloc(v->off, v->cap * sizeof *v->off);
        v->len = realloc(v->len, v->cap * sizeof *v->len);
        FUZZ_CHECK(v->t && v->off && v->len, "malloc");
    }
    v->t[v->n] = t;
    v->off[v->n] = off;
    v->len[v->n++] = len;
    return 0;
}

static int encode(const vocab *v, const uint8_t *p, size_t n, size_t chunk, toks *out,
                  txl_err *e)
{
    vocab_encoder *en = vocab_encoder_new(v, e);
    FUZZ_CHECK(en != NULL, "encoder: %s", e->msg);
    int rc = 0;
    for (size_t at = 0; at < n && !rc; at += chunk)
        rc = vocab_encoder_feed(en, p + at, n - at < chunk ? n - at : chunk, push, out, e);
    if (!rc)
        rc = vocab_encoder_finish(en, push, out, e);
    vocab_encoder_free(en);
    return rc;
}

static void check_tokens(const vocab *v, const uint8_t *p, size_t n, const toks *a)
{
    size_t at = 0;
    for (size_t i = 0; i < a->n; i++) {
        FUZZ_CHECK(a->t[i] < vocab_size(v), "id %u >= V %zu", a->t[i], vocab_size(v));
        size_t len;
        const uint8_t *q = vocab_piece(v, a->t[i], &len);
        if (vocab_get_kind(v) != VOCAB_WORD) {
            FUZZ_CHECK(a->off[i] == at && a->len[i] == len && !memcmp(p + at, q, len),
                       "token %zu does not tile the text", i);
            at += len;
        } else {
            FUZZ_CHECK(a->off[i] >= at && a->off[i] + a->len[i] <= n, "token %zu out of order", i);
            if (vocab_special(v, a->t[i]) == SPECIAL_NONE)
                FUZZ_CHECK(a->len[i] == len && !memcmp(p + a->off[i], q, len),
                           "word %zu is not its bytes", i);
            at = a->off[i] + a->len[i];
        }
    }
    if (vocab_get_kind(v) != VOCAB_WORD)
        FUZZ_CHECK(at == n, "the tokens cover %zu of %zu bytes", at, n);
}

static void parsed(const vocab *v, const uint8_t *p, size_t n, size_t chunk)
{
    txl_err e = {0};
    uint8_t *b1, *b2;
    size_t n1, n2;
    FUZZ_CHECK(vocab_serialize(v, &b1, &n1, &e) == 0, "serialize: %s", e.msg);
    vocab *w = vocab_parse(b1, n1, "again", &e);
    FUZZ_CHECK(w != NULL, "its own writing does not parse: %s", e.msg);
    FUZZ_CHECK(vocab_size(w) == vocab_size(v) && vocab_get_kind(w) == vocab_get_kind(v) &&
               vocab_fingerprint(w) == vocab_fingerprint(v), "parsed back otherwise");
    FUZZ_CHECK(vocab_serialize(w, &b2, &n2, &e) == 0 && n2 == n1 && !memcmp(b1, b2, n1),
               "written again otherwise");
    free(b1);
    free(b2);
    vocab_free(w);
    toks a = {0}, b = {0};
    int ra = encode(v, p, n, n ? n : 1, &a, &e), rb = encode(v, p, n, chunk, &b, &e);
    FUZZ_CHECK(ra == rb, "whole %d, in chunks %d", ra, rb);
    if (ra) {
        FUZZ_CHECK(vocab_get_kind(v) == VOCAB_WORD && vocab_special_id(v, SPECIAL_UNK) < 0 &&
                   e.kind == ERR_INPUT && strstr(e.msg, "byte "), "encoding failed: %s", e.msg);
    } else {
        FUZZ_CHECK(a.n == b.n && !memcmp(a.t, b.t, a.n * sizeof *a.t) &&
                   !memcmp(a.off, b.off, a.n * sizeof *a.off), "chunks of %zu differ", chunk);
        check_tokens(v, p, n, &a);
    }
    free(a.t), free(a.off), free(a.len), free(b.t), free(b.off), free(b.len);
}

static void token_file(const uint8_t *p, size_t n, int with_vocab)
{
    static vocab *v300;
    txl_err e = {0};
    if (!v300) { /* a word vocabulary of 300 tokens: the size and fingerprint to match */
        char f[8192];
        int o = snprintf(f, sizeof f, "txl-vocab 1\nkind word\nsize 300\nspecial eos 0\n"
                         "tokens\n0 <eos>\n");
        for (int i = 1; i < 300; i++)
            o += snprintf(f + o, sizeof f - (size_t)o, "%d w%d\n", i, i);
        snprintf(f + o, sizeof f - (size_t)o, "end\n");
        v300 = vocab_parse((const uint8_t *)f, strlen(f), "v300", &e);
        FUZZ_CHECK(v300 != NULL, "%s", e.msg);
    }
    const char *path = fuzz_file("tok", ".tok", p, n);
    if (!path)
        return;
    tokfile f;
    if (tokfile_open(&f, path, with_vocab ? v300 : NULL, &e)) {
        FUZZ_CHECK(e.kind == ERR_INPUT && strstr(e.msg, path), "unnamed: %s", e.msg);
        return;
    }
    FUZZ_CHECK(f.n * (size_t)f.width + TOKFILE_HEADER == n, "size %zu for %zu tokens", n, f.n);
    txl_tok buf[512];
    for (size_t at = 0; at < f.n; at += 512) {
        size_t k = f.n - at < 512 ? f.n - at : 512;
        if (tokfile_read(&f, at, k, buf, &e)) {
            FUZZ_CHECK(e.kind == ERR_INPUT && strstr(e.msg, path) && strstr(e.msg, "token "),
                       "unnamed: %s", e.msg);
            break;
        }
        for (size_t i = 0; i < k; i++)
            FUZZ_CHECK(buf[i] < f.vocab_size, "id %u >= %u", buf[i], f.vocab_size);
    }
    tokfile_close(&f);
}

int txl_fuzz_vocab(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    if (mode & 1) {
        token_file(p, n, !(mode & 2));
        return 0;
    }
    const char *path = fuzz_file("vocab", ".vocab", p, n);
    if (!path)
        return 0;
    txl_err e = {0};
    vocab *v = vocab_load(path, &e);
    if (!v) {
        FUZZ_CHECK(e.kind && e.msg[0] && (e.kind == ERR_RUNTIME || strstr(e.msg, path)),
                   "unnamed: %s", e.msg);
        return 0;
    }
    parsed(v, p, n, (size_t)(mode >> 1) % 7 + 1);
    vocab_free(v);
    return 0;
}

FUZZ_ENTRY(txl_fuzz_vocab)

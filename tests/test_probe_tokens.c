/* test_probe_tokens.c: the probes' texts in a vocabulary's tokens (eval/probe.h,
 * data/textenc.h), on a word and a BPE vocabulary built from a small text, with every
 * anchor kind and a document separator (doc/design.md, "Probes").
 *
 * - textenc_token: a sequence of tokens composed at random (not encoded from text) gets the
 *   anchors and coordinates the units machine gives the text they decode to, worked out
 *   here independently from the byte-level tokenization of that text (units_tokenize): an
 *   anchor before a token when the bytes' stream has one before one of its bytes, of that
 *   kind and with those coordinates; a token's coordinates those of its last byte.
 * - probe_tokenize: rows of different lengths and sentence counts end together, the shorter
 *   padded on the left with <eos> (word) or the space token (bpe), coordinates 0; each
 *   row's tokens after its pad are those of its text alone; the map points at each unit's
 *   own token; no row is cut.
 * - probe_control_string: recall's control keeps the tokens that shape units (<eos>,
 *   whitespace, sentence stops, the separator's "=") and changes every other one for one
 *   with the same leading space or none, and a text with the control where the string
 *   stood lines up with the trial (probe_same_shape: the same tokens' count, anchors,
 *   coordinates), over many random strings; a '.' put for a plain token is caught.
 * - bytes: textenc_token of each byte is units_tokenize's token for token, and without
 *   anchors probe_tokenize neither pads nor moves a byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/textenc.h"
#include "../data/vocab.h"
#include "../eval/probe.h"
#include "testlib.h"

static const char TEXT[] =
    " = = Heading one = = \n"
    "The cat sat on the mat . It was happy ! Was it ? Yes .\n"
    "\n"
    "Mr. Smith said hello to the dog and the cat , twice .\n"
    " = = Heading two = = \n"
    "A dog ran far away ; it did not stop . The end\n";

#define MAXT 512

static int read_text(void *ctx, size_t off, uint8_t *buf, size_t n, txl_err *e)
{
    (void)ctx, (void)e;
    memcpy(buf, TEXT + off, n);
    return 0;
}

static vocab *build(vocab_kind k, long size)
{
    vocab_build_opts o = {.read = read_text, .text_len = sizeof TEXT - 1, .text_name = "TEXT",
                          .max_size = size};
    txl_err e = {0};
    vocab *v = vocab_build(k, &o, &e);
    CHECK(v != NULL, "a %s vocabulary of the test text (%s, %zu tokens)", vocab_kind_name(k),
          v ? "ok" : e.msg, v ? vocab_size(v) : 0);
    return v;
}

/* Collects a tokenization. */
typedef struct {
    txl_tok tok[MAXT];
    int32_t co[MAXT][TXL_N_COORDS];
    int n;
} toks;

static int collect(void *ctx, const textenc_tok *t)
{
    toks *k = ctx;
    if (k->n == MAXT)
        return 1;
    k->tok[k->n] = t->tok;
    memcpy(k->co[k->n], t->co, sizeof t->co);
    k->n++;
    return 0;
}

/* The expected model tokens of a token sequence, from the bytes it decodes to: the byte
 * stream with anchors (units_tokenize) read back token by token: the anchors among a
 * token's bytes before it, its coordinates those of its last byte. -1 when a token holds
 * two anchors (a word vocabulary's cannot). */
static int expected(const vocab *v, const units_config *u, const txl_tok *seq, int n, toks *out)
{
    static uint8_t text[8 * MAXT];
    static txl_tok bt[16 * MAXT];
    static int32_t bc[16 * MAXT][TXL_N_COORDS];
    size_t end[MAXT], len = 0; /* token i's bytes end at end[i] */
    for (int i = 0; i < n; i++) {
        len += vocab_decoded(v, i ? (long)seq[i - 1] : -1, seq[i], text + len,
                             sizeof text - len);
        end[i] = len;
    }
    units_config ub = *u;
    ub.base = 0; /* the byte vocabulary's anchors: 256, 257, ... */
    units_state st;
    units_init(&st, &ub);
    size_t k = units_tokenize(&st, text, len, bt, &bc[0][0]), j = 0, bi = 0;
    int32_t co[TXL_N_COORDS] = {0};
    out->n = 0;
    for (int i = 0; i < n; i++) {
        int anchors = 0;
        while (bi < end[i] && j < k) {
            unsigned kind = units_token_anchor(&ub, bt[j]);
            if (kind) {
                out->tok[out->n] = (txl_tok)units_anchor_token(u, kind);
                memcpy(out->co[out->n++], bc[j], sizeof co);
                anchors++;
            } else {
                memcpy(co, bc[j], sizeof co);
                bi++;
            }
            j++;
        }
        out->tok[out->n] = seq[i];
        memcpy(out->co[out->n++], co, sizeof co);
        if (anchors > 1)
            return -1;
    }
    return 0;
}

static int same(const toks *a, const toks *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (a->tok[i] != b->tok[i] || memcmp(a->co[i], b->co[i], sizeof a->co[i]))
            return 0;
    return 1;
}

/* A random token sequence: a third of the tokens among those that shape units (sentence
 * stops, <eos>, the separator's "="), so sentences, paragraphs and documents start often. */
static int draw_seq(const vocab *v, rng_t *r, txl_tok *seq, int n)
{
    static const char *const shaping[] = {".", "!", "?", "=", "\n", " ", "Mr.", " ."};
    long eos = vocab_special_id(v, SPECIAL_EOS);
    for (int i = 0; i < n; i++) {
        uint64_t x = rng_next(r) % 13;
        const char *w = x < 8 ? shaping[x] : NULL;
        long id = w ? vocab_lookup(v, (const uint8_t *)w, strlen(w)) : x == 8 ? eos : -1;
        seq[i] = id >= 0 ? (txl_tok)id : (txl_tok)(rng_next(r) % vocab_size(v));
    }
    return n;
}

static units_config word_units(const vocab *v)
{
    units_config u = {.anchors = ANCHOR_ALL, .base = (txl_tok)vocab_size(v)};
    snprintf(u.sep, sizeof u.sep, "= =");
    return u;
}

static void test_textenc_token(const vocab *v)
{
    units_config u = word_units(v);
    rng_t r = {11};
    int good = 0, rounds = 300, anchors = 0;
    for (int k = 0; k < rounds; k++) {
        txl_tok seq[64];
        int n = draw_seq(v, &r, seq, 1 + (int)(rng_next(&r) % 64));
        toks got = {0}, want = {0};
        textenc te;
        txl_err e = {0};
        int rc = textenc_init(&te, v, &u, &e);
        for (int i = 0; rc == 0 && i < n; i++)
            rc = textenc_token(&te, seq[i], collect, &got, &e);
        textenc_free(&te);
        good += rc == 0 && expected(v, &u, seq, n, &want) == 0 && same(&got, &want);
        anchors += got.n - n;
    }
    CHECK(good == rounds && anchors > rounds,
          "%s: textenc_token: %d of %d random token sequences get the anchors and coordinates "
          "of the text they decode to, by the bytes' units (%d anchors in all)",
          vocab_kind_name(vocab_get_kind(v)), good, rounds, anchors);
    textenc te;
    txl_err e = {0};
    toks got = {0};
    int rc = textenc_init(&te, v, &u, &e) ? -2
             : textenc_token(&te, (txl_tok)vocab_size(v), collect, &got, &e);
    textenc_free(&te);
    CHECK(rc == -1 && e.kind == ERR_INPUT && got.n == 0 && strstr(e.msg, "not a text token"),
          "textenc_token: an id past the vocabulary is ERR_INPUT (%s)", e.msg);
}

static probe_opts opts = {.kind = "recall", .ckpt = "test"};

static void test_align(const vocab *v)
{
    enum { B = 3, LEN = 40 };
    const int lens[B] = {40, 25, 33};
    probe_ctx p = {.a = &opts, .v = v, .tokens = 1, .units = word_units(v), .coords = 1};
    txl_tok text[B * LEN];
    rng_t r = {5};
    toks want[B];
    int n = 0, ok_rows = 0;
    for (int b = 0; b < B; b++) {
        draw_seq(v, &r, text + b * LEN, lens[b]);
        expected(v, &p.units, text + b * LEN, lens[b], &want[b]);
        n = want[b].n > n ? want[b].n : n;
    }
    probe_tokens pt;
    txl_err e = {0};
    int rc = probe_tokenize(&p, text, B, LEN, lens, &pt, &e);
    const char *kind = vocab_kind_name(vocab_get_kind(v));
    CHECK(rc == 0 && pt.n == n, "%s: probe_tokenize: 3 rows of 40, 25, 33 tokens: streams of "
          "the longest's %d tokens (%d) %s", kind, n, rc ? -1 : pt.n, e.msg);
    if (rc)
        return;
    long pad_tok = vocab_get_kind(v) == VOCAB_WORD ? vocab_special_id(v, SPECIAL_EOS)
                                                    : vocab_lookup(v, (const uint8_t *)" ", 1);
    for (int b = 0; b < B; b++) {
        const txl_tok *t = pt.tok + (size_t)b * pt.n;
        const int32_t *c = pt.co + (size_t)b * pt.n * TXL_N_COORDS;
        const int *m = pt.map + (size_t)b * LEN;
        int pad = pt.n - want[b].n, ok = pt.pad[b] == pad && !probe_cut(&pt, b);
        for (int j = 0; j < pad; j++)
            ok &= t[j] == (txl_tok)pad_tok && !c[j * 3] && !c[j * 3 + 1] && !c[j * 3 + 2];
        for (int j = 0; j < want[b].n; j++)
            ok &= t[pad + j] == want[b].tok[j] &&
                  !memcmp(c + (size_t)(pad + j) * 3, want[b].co[j], sizeof want[b].co[j]);
        for (int i = 0; i < lens[b]; i++)
            ok &= t[m[i]] == text[b * LEN + i] && (i == 0 || m[i] > m[i - 1]) &&
                  m[i] - (i ? m[i - 1] : pad - 1) <= 2;
        ok &= m[lens[b] - 1] == pt.n - 1;
        ok_rows += ok;
        CHECK(ok, "  ... row %d: %d pads of %s (coordinates 0), then its own %d tokens; each "
              "unit's own token mapped, an anchor at most before it; its last unit ends the "
              "stream", b, pad, vocab_get_kind(v) == VOCAB_WORD ? "<eos>" : "' '", want[b].n);
    }
    CHECK(pt.pad_max > 0, "  ... the rows needed pads (pad_max %d)", pt.pad_max);
    probe_tokens_free(&pt);
}

/* A token recall's control may change: no special, no unit-shaping byte in its text (but
 * a BPE token's leading space): 1 without a leading space, 2 with one; else 0. */
static int plain(const vocab *v, txl_tok t)
{
    size_t n;
    const uint8_t *s = vocab_piece(v, t, &n);
    int lead = vocab_get_kind(v) == VOCAB_BPE && n > 1 && s[0] == ' ';
    if (vocab_special(v, t) != SPECIAL_NONE || n == 0)
        return 0;
    for (size_t i = (size_t)lead; i < n; i++)
        if (!s[i] || strchr(".!?= \t\n\v\f\r", s[i]))
            return 0;
    return 1 + lead;
}

static void test_control(const vocab *v)
{
    enum { S = 8, LEAD = 6, MID = 10, LD = LEAD + 2 * S + MID };
    probe_ctx p = {.a = &opts, .v = v, .tokens = 1, .units = word_units(v), .coords = 1};
    txl_tok *pool;
    size_t np;
    txl_err e = {0};
    if (vocab_encode(v, (const uint8_t *)TEXT, sizeof TEXT - 1, &pool, &np, &e))
        return (void)CHECK(0, "encoding the test text: %s", e.msg);
    rng_t r = {3}, rc = {4};
    int rounds = 400, kept = 0, changed = 0, lined = 0, bad = 0, broken = 0;
    for (int k = 0; k < rounds; k++) {
        txl_tok x[LD], xc[LD], *str = x + LEAD;
        for (int i = 0; i < LD; i++)
            x[i] = pool[rng_next(&r) % np];
        memcpy(str + S + MID, str, S * sizeof *str);
        memcpy(xc, x, sizeof x);
        if (probe_control_string(&p, &rc, str, S, pool, np, xc + LEAD, &e)) {
            bad++;
            continue;
        }
        for (int i = 0; i < S; i++) {
            int pl = plain(v, str[i]);
            kept += !pl && xc[LEAD + i] == str[i];
            changed += pl && xc[LEAD + i] != str[i] && plain(v, xc[LEAD + i]) == pl;
            bad += (pl != 0) != (xc[LEAD + i] != str[i]);
        }
        probe_tokens a, c;
        if (probe_tokenize(&p, x, 1, LD, NULL, &a, &e) ||
            probe_tokenize(&p, xc, 1, LD, NULL, &c, &e)) {
            bad++;
            continue;
        }
        lined += probe_same_shape(&p, &a, &c);
        probe_tokens_free(&c);
        /* a sentence stop for a plain token before one that starts a word: the check must
         * see the sentence it starts */
        int starts = vocab_get_kind(v) == VOCAB_WORD ? 1 : 2;
        for (int i = 0; i + 1 < S; i++)
            if (plain(v, str[i]) && plain(v, str[i + 1]) == starts) {
                xc[LEAD + i] = (txl_tok)vocab_lookup(v, (const uint8_t *)".", 1);
                break;
            }
        if (!probe_tokenize(&p, xc, 1, LD, NULL, &c, &e)) {
            broken += !probe_same_shape(&p, &a, &c);
            probe_tokens_free(&c);
        }
        probe_tokens_free(&a);
    }
    free(pool);
    CHECK(bad == 0 && kept > 0 && changed > 0,
          "%s: probe_control_string: every plain token of %d random strings changed for "
          "another plain token with the same leading space or none (%d), every unit-shaping "
          "token kept (%d), no fault (%d) %s", vocab_kind_name(vocab_get_kind(v)), rounds,
          changed, kept, bad, e.msg);
    CHECK(lined == rounds, "  ... and the control lines up with the trial (the same tokens' "
          "count, anchors, coordinates) in %d of %d", lined, rounds);
    CHECK(broken > rounds / 4, "  ... where a '.' replaces a plain word it does not (%d of %d "
          "such controls caught)", broken, rounds);
}

static void test_bytes(void)
{
    const char *t = "One two. Three!\n\nNew para? yes.\n  \n Last";
    size_t len = strlen(t);
    units_config u = {.anchors = ANCHOR_ALL};
    units_state st;
    units_init(&st, &u);
    txl_tok bt[128];
    int32_t bc[128][TXL_N_COORDS];
    size_t k = units_tokenize(&st, (const uint8_t *)t, len, bt, &bc[0][0]);
    toks got = {0};
    textenc te;
    txl_err e = {0};
    int rc = textenc_init(&te, NULL, &u, &e);
    for (size_t i = 0; rc == 0 && i < len; i++)
        rc = textenc_token(&te, (uint8_t)t[i], collect, &got, &e);
    textenc_free(&te);
    int ok = rc == 0 && got.n == (int)k;
    for (size_t i = 0; ok && i < k; i++)
        ok = got.tok[i] == bt[i] && !memcmp(got.co[i], bc[i], sizeof bc[i]);
    CHECK(ok, "bytes: textenc_token byte by byte is units_tokenize (%d tokens, %zu)", got.n, k);
    probe_ctx p = {.a = &opts};
    txl_tok text[2 * 20];
    for (int i = 0; i < 40; i++)
        text[i] = (uint8_t)t[i];
    probe_tokens pt;
    ok = probe_tokenize(&p, text, 2, 20, NULL, &pt, &e) == 0 && pt.n == 20 && pt.pad_max == 0;
    for (int i = 0; ok && i < 40; i++)
        ok = pt.tok[i] == text[i] && pt.map[i] == i % 20;
    CHECK(ok, "bytes without anchors: probe_tokenize neither pads nor moves a byte");
    probe_tokens_free(&pt);
}

int main(void)
{
    for (int k = 0; k < 2; k++) {
        vocab *v = k ? build(VOCAB_BPE, 300) : build(VOCAB_WORD, 0);
        if (v) {
            test_textenc_token(v);
            test_align(v);
            test_control(v);
        }
        vocab_free(v);
    }
    test_bytes();
    return tl_done("test_probe_tokens");
}

/* word.c: the word tokenizer, official Transformer-XL's Vocab (pytorch/utils/vocabulary.py
 * and data_utils.py, kimiyoung/transformer-xl) as it prepares WikiText-103 and PTB:
 *
 * - A text is read as lines, as Python reads a file opened in text mode (universal
 *   newlines): "\n", "\r\n" and a lone "\r" end a line. Each line is split on whitespace
 *   (str.split(): the characters for which Python's str.isspace() holds, U+0009..U+000D,
 *   U+001C..U+001F, U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
 *   U+202F, U+205F, U+3000) and ends with <eos>, also the last line when the text does not
 *   end with a line end. Case is kept (official's wt103 and wt2; its ptb lowers).
 * - Building (count_file, then build_vocab): words are counted (<eos> is not), <eos> is id 0,
 *   then Counter.most_common(max_size) order: by falling count, ties in first-seen order; a
 *   word seen fewer than min_freq times ends the list. A word "<eos>" in the text takes its
 *   place in that list but adds nothing (add_symbol skips it), as in official. `<unk>` is
 *   the text's own word "<unk>" when it is kept (WikiText has it), else a special added at
 *   id 1: every held-out text has words the train split lacks (official fails on them).
 * - Encoding: each word is its id, a word outside the vocabulary <unk> (an error when the
 *   vocabulary has none); the word "<eos>" is <eos> (official's sym2idx has it).
 *
 * Official reads UTF-8 strictly; txl takes any bytes: a byte that is not part of a
 * whitespace character is part of a word. */
#include "vocab_impl.h"

#include "strcount.h"
#include "whitespace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a scan reports: each word (its bytes and offset) and each line end. */
typedef struct {
    int (*word)(void *ctx, const uint8_t *p, size_t n, size_t off);
    int (*eol)(void *ctx, size_t off, size_t n);
    void *ctx;
} word_sink;

/* Scans buf[0 .. len) (text offset base): reports every word and line end that is final
 * (all of them when `final`) and returns the bytes consumed (the rest waits for more), or
 * -1 (*rc: the sink's value). *mid_line: bytes were consumed since the last line end. */
static long scan(const uint8_t *buf, size_t len, size_t base, int final, int *mid_line,
                 const word_sink *s, int *rc)
{
    size_t i = 0;
    while (i < len) {
        uint8_t c = buf[i];
        if (c == '\n' || c == '\r') {
            if (c == '\r' && i + 1 == len && !final)
                break;
            size_t n = c == '\r' && i + 1 < len && buf[i + 1] == '\n' ? 2 : 1;
            if ((*rc = s->eol(s->ctx, base + i, n)) != 0)
                return -1;
            i += n;
            *mid_line = 0;
            continue;
        }
        int sp = whitespace_at(buf + i, len - i);
        if (sp < 0 && !final)
            break;
        if (sp > 0) {
            i += (size_t)sp;
            *mid_line = 1;
            continue;
        }
        size_t j = i + 1;
        for (; j < len && buf[j] != '\n' && buf[j] != '\r'; j++) {
            sp = whitespace_at(buf + j, len - j);
            if (sp > 0 || (sp < 0 && !final))
                break;
        }
        if (!final && (j == len || sp < 0))
            break;
        if ((*rc = s->word(s->ctx, buf + i, j - i, base + i)) != 0)
            return -1;
        i = j;
        *mid_line = 1;
    }
    if (final == 1 && *mid_line) { /* the text's end (not a flush): its last line ends */
        if ((*rc = s->eol(s->ctx, base + len, 0)) != 0)
            return -1;
        *mid_line = 0;
    }
    return (long)i;
}

/* ---- Encoding ---------------------------------------------------------------------------- */

typedef struct {
    const vocab *v;
    vocab_emit_fn emit;
    void *ctx;
    txl_err *e;
    int failed;            /* the encoder's own error (not emit's) */
} enc_ctx;

static int enc_word(void *ctx, const uint8_t *p, size_t n, size_t off)
{
    enc_ctx *c = ctx;
    long t = vocab_lookup(c->v, p, n);
    if (t < 0)
        t = c->v->special_id[SPECIAL_UNK];
    if (t < 0) {
        c->failed = 1;
        return err_set(c->e, ERR_INPUT, "byte %zu: the word '%.*s%s' is not in the vocabulary, "
                       "which has no <unk> (a vocabulary file without the special unk)",
                       off, (int)(n < 60 ? n : 60), (const char *)p, n > 60 ? "..." : "");
    }
    return c->emit(c->ctx, (txl_tok)t, off, n);
}

static int enc_eol(void *ctx, size_t off, size_t n)
{
    enc_ctx *c = ctx;
    return c->emit(c->ctx, (txl_tok)c->v->special_id[SPECIAL_EOS], off, n);
}

long word_scan(vocab_encoder *en, int final, vocab_emit_fn emit, void *ctx, int *rc,
               txl_err *e)
{
    enc_ctx c = {en->v, emit, ctx, e, 0};
    word_sink s = {enc_word, enc_eol, &c};
    long used = scan(en->buf, en->len, en->base, final, &en->mid_line, &s, rc);
    if (used < 0 && c.failed)
        *rc = -1;
    return used;
}

/* ---- Building ---------------------------------------------------------------------------- */

typedef struct {
    strcount c;
    /* the bytes held between chunks */
    uint8_t *held;
    size_t held_n, held_cap;
    int mid_line;
    txl_err *e;
} word_counts;

static int count_word(void *ctx, const uint8_t *p, size_t n, size_t off)
{
    (void)off;
    word_counts *wc = ctx;
    if (strcount_add(&wc->c, p, n, 1))
        return err_set(wc->e, ERR_RUNTIME, "out of memory counting %zu distinct words",
                       wc->c.n);
    return 0;
}

static int count_eol(void *ctx, size_t off, size_t n)
{
    (void)ctx;
    (void)off;
    (void)n;
    return 0;
}

/* One chunk of an input (final: its end), after the bytes held from the last. */
static int count_chunk(void *ctx, const uint8_t *p, size_t n, int final, txl_err *e)
{
    (void)e;
    word_counts *wc = ctx;
    if (wc->held_n + n > wc->held_cap) {
        size_t nc = wc->held_cap ? wc->held_cap : 1 << 16;
        while (nc < wc->held_n + n)
            nc *= 2;
        uint8_t *nb = realloc(wc->held, nc);
        if (!nb)
            return err_set(wc->e, ERR_RUNTIME, "out of memory holding a word of %zu bytes",
                           wc->held_n);
        wc->held = nb;
        wc->held_cap = nc;
    }
    if (n)
        memcpy(wc->held + wc->held_n, p, n);
    wc->held_n += n;
    word_sink s = {count_word, count_eol, wc};
    int rc = 0;
    long used = scan(wc->held, wc->held_n, 0, final, &wc->mid_line, &s, &rc);
    if (used < 0)
        return -1;
    memmove(wc->held, wc->held + used, wc->held_n - (size_t)used);
    wc->held_n -= (size_t)used;
    return 0;
}

typedef struct {
    long count;
    uint32_t k;            /* first-seen index */
} ranked;

/* Counter.most_common: falling count, ties in first-seen (insertion) order */
static int by_count(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return x->k < y->k ? -1 : 1;
}

static void counts_free(word_counts *wc)
{
    strcount_free(&wc->c);
    free(wc->held);
}

/* The vocabulary of the sorted words: <eos>, <unk> when the text's own <unk> was not kept,
 * then the words kept. */
static vocab *words_to_vocab(const strcount *wc, const ranked *order,
                             const vocab_build_opts *o, txl_err *e)
{
    size_t take = o->max_size > 0 && (size_t)o->max_size < wc->n ? (size_t)o->max_size : wc->n;
    size_t kept = 0, has_unk = 0;
    for (size_t k = 0; k < take; k++) {
        const strcount_entry *w = &wc->w[order[k].k];
        if (o->min_freq > 1 && w->count < o->min_freq)
            break;
        has_unk |= w->len == 5 && memcmp(strcount_bytes(wc, order[k].k), "<unk>", 5) == 0;
        kept++;
    }
    vocab *v = vb_new(VOCAB_WORD, e);
    if (!v || vb_add(v, NULL, 0, SPECIAL_EOS, e) ||
        (!has_unk && vb_add(v, (const uint8_t *)"<unk>", 5, SPECIAL_UNK, e))) {
        vocab_free(v);
        return NULL;
    }
    for (size_t k = 0; k < kept; k++) {
        const strcount_entry *w = &wc->w[order[k].k];
        const uint8_t *p = strcount_bytes(wc, order[k].k);
        if (w->len == 5 && memcmp(p, "<eos>", 5) == 0)
            continue;
        int unk = w->len == 5 && memcmp(p, "<unk>", 5) == 0;
        if (vb_add(v, p, w->len, unk ? SPECIAL_UNK : SPECIAL_NONE, e)) {
            vocab_free(v);
            return NULL;
        }
    }
    return v;
}

vocab *word_build(const vocab_build_opts *o, txl_err *e)
{
    word_counts wc = {.e = e};
    vocab *v = NULL;
    ranked *order = NULL;
    if (strcount_init(&wc.c)) {
        err_set(e, ERR_RUNTIME, "out of memory counting words");
        goto out;
    }
    if (vocab_read_inputs(o, count_chunk, &wc, e))
        goto out;
    order = malloc((wc.c.n + 1) * sizeof *order);
    if (!order) {
        err_set(e, ERR_RUNTIME, "out of memory sorting %zu words", wc.c.n);
        goto out;
    }
    for (size_t k = 0; k < wc.c.n; k++)
        order[k] = (ranked){wc.c.w[k].count, (uint32_t)k};
    qsort(order, wc.c.n, sizeof *order, by_count);
    v = words_to_vocab(&wc.c, order, o, e);
    if (v && vb_seal(v, "the word vocabulary built", 0, 0, e)) {
        vocab_free(v);
        v = NULL;
    }
out:
    free(order);
    counts_free(&wc);
    return v;
}

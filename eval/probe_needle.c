/* probe_needle.c: needle in a haystack (doc/design.md, "Probes").
 *
 * A trial is a context of L units (bytes, or the tokens of a word or BPE vocabulary: see
 * probe.h) of text drawn from the corpus with the needle, a sentence giving a key's value,
 * inserted at depth d (0% = the start of the context, 100% = right before the question),
 * ending with the question; the model is scored on the value that follows (random key
 * and value per trial, the same at every depth). The sentence in each vocabulary:
 * - bytes: " The secret number of Kelvard is 583194. ", the question
 *   " The secret number of Kelvard is ", the value its 6 digits;
 * - bpe: " The secret number of Kelvard is" encoded, then the value " 583194" encoded apart
 *   (its own piece, so it is the same tokens in the needle and after the question), then
 *   "." encoded; the control's value is another number of as many tokens;
 * - word: "The secret word of KEY is VALUE ." with KEY and VALUE words of the vocabulary
 *   (a random number or name would be <unk>): alphabetic words of mid-frequency ids.
 * Its control is the same context with another value planted: the retrieval gain is the
 * bits the needle saves on the true value. Trials run side by side as streams. In memory
 * mode (segments of tgt_len through the memory, as trained) the text before the needle is
 * the same at every depth, so when every stream has the same layout (no anchors, sentences
 * of one length) it runs once per trial: the memory is saved where each depth's needle goes
 * and restored for the needle's run, its control and the next depth. The texts become
 * tokens by the model's rules (anchors, coordinates: probe_tokenize). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/sys.h"
#include "probe.h"

#define VALUE_LEN 6             /* digits of a number value */
#define Q_MAX 48                /* units of a question at most (bytes: 33) */
#define V_MAX 8                 /* of a value (bytes: 6; bpe: " 583194", 7 at most) */
#define T_MAX 2                 /* of the needle after its value (bytes: ". ") */
#define KEY_TOKENS 8            /* bpe: tokens of " Kelvard" at most (a space, 7 letters) */

/* The needle's sentence of one trial in the model's units: the question (the key in it),
 * the value and the control's value, in as many units. The needle is q, v, the tail. */
typedef struct {
    txl_tok q[Q_MAX], v[V_MAX], c[V_MAX];
    int ql, vl;
} needle_trial;

/* What the sentences are made of in the model's vocabulary, the same for every trial. */
enum { W_THE, W_SECRET, W_WORD, W_OF, W_IS, W_STOP, N_WORDS };
typedef struct {
    vocab_kind kind;        /* VOCAB_BYTE for bytes */
    txl_tok tail[T_MAX];    /* the needle after its value */
    int tl;
    txl_tok word[N_WORDS];  /* word: the sentence's own words */
    txl_tok *pool;          /* word: the words keys and values are drawn from */
    int np, lo, hi;         /* their number, and the ids they are drawn among [lo, hi) */
} needle_vocab;

static const char *const sentence_words[N_WORDS] = {"The", "secret", "word", "of", "is", "."};

typedef struct {
    int L, ld, B;           /* context units; units per stream row (L + the longest value) */
    int uniform;            /* every stream has the same layout: no anchors, one sentence length */
    const needle_vocab *nv;
    needle_trial *tr;       /* [B] the sentences */
    int *h, *lens;          /* [B] haystack units, units of the row (L + its value's) */
    txl_tok *hay;           /* [B][L] (h[b] used) */
    txl_tok *x;             /* [B][ld] one stream layout, units */
    probe_tokens pt;        /* ... as the model's tokens */
    float *loss;            /* [B][2 ld] per target (a token's loss at its index - 1) */
    uint8_t *hit;
    double *bits, *ctrl;    /* [B] bits of the value with the needle, in the control */
    int *exact;             /* [B] */
    uint8_t *cut;           /* [B] a token of the trial not fed, needle or control (none) */
    int pad_max;            /* the most pad tokens of a stream in the cell (probe_tokenize) */
} needle_set;

static void random_key(rng_t *r, char key[8])
{
    static const char cons[] = "bcdfghjklmnprstvz", vow[] = "aeiou";
    for (int i = 0; i < 7; i++)
        key[i] = i % 2 ? vow[rng_next(r) % 5] : cons[rng_next(r) % 17];
    key[0] = (char)(key[0] - 'a' + 'A');
    key[7] = '\0';
}

/* The tokens of text under a BPE vocabulary into buf (at most cap), their count into *n. */
static int encode_into(const vocab *v, const char *text, txl_tok *buf, int cap, int *n,
                       txl_err *e)
{
    txl_tok *t;
    size_t k;
    if (vocab_encode(v, (const uint8_t *)text, strlen(text), &t, &k, e))
        return err_wrap(e, "the needle's \"%s\"", text);
    if (k > (size_t)cap) {
        free(t);
        return err_set(e, ERR_RUNTIME, "the needle's \"%s\" is %zu tokens, more than %d", text,
                       k, cap);
    }
    memcpy(buf, t, k * sizeof *t);
    free(t);
    *n = (int)k;
    return 0;
}

/* A word keys and values are drawn from: letters only, at least 3, not the sentence's own. */
static int key_word(const vocab *v, const needle_vocab *nv, txl_tok t)
{
    size_t len;
    const uint8_t *s = vocab_piece(v, t, &len);
    if (vocab_special(v, t) != SPECIAL_NONE || len < 3)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
            return 0;
    for (int k = 0; k < N_WORDS; k++)
        if (t == nv->word[k])
            return 0;
    return 1;
}

/* A word vocabulary's sentence: its words looked up, and the pool of keys and values (ids
 * from V/10 to V/2: a word vocabulary lists its words by falling count). */
static int words_init(const probe_ctx *p, needle_vocab *nv, txl_err *e)
{
    char missing[96] = "";
    for (int k = 0; k < N_WORDS; k++) {
        const char *w = sentence_words[k];
        long id = vocab_lookup(p->v, (const uint8_t *)w, strlen(w));
        nv->word[k] = id < 0 ? 0 : (txl_tok)id;
        if (id < 0)
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s'%s'",
                     missing[0] ? ", " : "", w);
    }
    if (missing[0])
        return err_set(e, ERR_INPUT, "%s: the needle's sentence \"The secret word of KEY is "
                       "VALUE .\" is made of the model's words, and its word vocabulary has no "
                       "%s", p->a->ckpt, missing);
    size_t V = vocab_size(p->v);
    nv->lo = (int)(V / 10), nv->hi = (int)(V / 2);
    if (!(nv->pool = malloc((size_t)(nv->hi - nv->lo + 1) * sizeof *nv->pool)))
        return err_set(e, ERR_RUNTIME, "out of memory");
    for (int t = nv->lo; t < nv->hi; t++)
        if (key_word(p->v, nv, (txl_tok)t))
            nv->pool[nv->np++] = (txl_tok)t;
    if (nv->np < 3)
        return err_set(e, ERR_INPUT, "%s: the needle's keys and values are words of the "
                       "model's vocabulary of ids %d..%d (of %zu) made of 3 letters or more: it "
                       "has %d such words, at least 3 needed", p->a->ckpt, nv->lo, nv->hi - 1,
                       V, nv->np);
    nv->tail[0] = nv->word[W_STOP];
    nv->tl = 1;
    return 0;
}

static int vocab_init(const probe_ctx *p, needle_vocab *nv, txl_err *e)
{
    memset(nv, 0, sizeof *nv);
    nv->kind = p->tokens ? vocab_get_kind(p->v) : VOCAB_BYTE;
    if (nv->kind == VOCAB_WORD)
        return words_init(p, nv, e);
    if (nv->kind == VOCAB_BPE)
        return encode_into(p->v, ".", nv->tail, T_MAX, &nv->tl, e);
    nv->tail[0] = '.', nv->tail[1] = ' ', nv->tl = 2;
    return 0;
}

/* The bytes of s as units. */
static int bytes_into(const char *s, txl_tok *buf)
{
    int n = (int)strlen(s);
    for (int i = 0; i < n; i++)
        buf[i] = (uint8_t)s[i];
    return n;
}

/* Draws one trial's sentence: the key, the value, the control's value. */
static int draw_sentence(const probe_ctx *p, const needle_vocab *nv, rng_t *r, needle_trial *t,
                         txl_err *e)
{
    if (nv->kind == VOCAB_WORD) {
        txl_tok key = nv->pool[rng_next(r) % (unsigned)nv->np], val, oth;
        do
            val = nv->pool[rng_next(r) % (unsigned)nv->np];
        while (val == key);
        do
            oth = nv->pool[rng_next(r) % (unsigned)nv->np];
        while (oth == key || oth == val);
        const txl_tok q[] = {nv->word[W_THE], nv->word[W_SECRET], nv->word[W_WORD],
                             nv->word[W_OF], key, nv->word[W_IS]};
        memcpy(t->q, q, sizeof q);
        t->ql = 6, t->v[0] = val, t->c[0] = oth, t->vl = 1;
        return 0;
    }
    char key[8], q[64], val[16];
    random_key(r, key);
    unsigned value = (unsigned)(rng_next(r) % 1000000);
    unsigned other = (value + 1 + (unsigned)(rng_next(r) % 999999)) % 1000000;
    if (nv->kind == VOCAB_BYTE) {
        snprintf(q, sizeof q, " The secret number of %s is ", key);
        t->ql = bytes_into(q, t->q);
        snprintf(val, sizeof val, "%06u", value);
        t->vl = bytes_into(val, t->v);
        snprintf(val, sizeof val, "%06u", other);
        bytes_into(val, t->c);
        return 0;
    }
    int cl = 0;
    snprintf(q, sizeof q, " The secret number of %s is", key);
    snprintf(val, sizeof val, " %06u", value);
    if (encode_into(p->v, q, t->q, Q_MAX, &t->ql, e) ||
        encode_into(p->v, val, t->v, V_MAX, &t->vl, e))
        return -1;
    for (int k = 0; k < 1000 && cl != t->vl; k++) { /* a control of as many tokens */
        if (k)
            other = (value + 1 + (unsigned)(rng_next(r) % 999999)) % 1000000;
        snprintf(val, sizeof val, " %06u", other);
        if (encode_into(p->v, val, t->c, V_MAX, &cl, e))
            return -1;
    }
    if (cl != t->vl)
        return err_set(e, ERR_INPUT, "%s: the needle's control needs another number of as many "
                       "tokens as \" %06u\" (%d), and 1000 draws found none", p->a->ckpt,
                       value, t->vl);
    return 0;
}

/* Units of trial t's needle and of its question together. */
static int sentence_units(const needle_vocab *nv, const needle_trial *t)
{
    return 2 * t->ql + t->vl + nv->tl;
}

/* The shortest context: the needle, the question and a unit of haystack (bytes: 75); for
 * bpe, whose key and value vary in tokens, with the longest key and value. */
static int min_context(const probe_ctx *p, const needle_vocab *nv, txl_err *e)
{
    needle_trial t = {.ql = 6, .vl = 1}; /* word */
    if (nv->kind == VOCAB_BYTE) {
        t.ql = (int)strlen(" The secret number of Kelvard is "), t.vl = VALUE_LEN;
    } else if (nv->kind == VOCAB_BPE) {
        int a, b;
        if (encode_into(p->v, " The secret number of", t.q, Q_MAX, &a, e) ||
            encode_into(p->v, " is", t.q, Q_MAX, &b, e))
            return -1;
        t.ql = a + KEY_TOKENS + b, t.vl = 1 + VALUE_LEN;
    }
    return sentence_units(nv, &t) + 1;
}

/* Stream b for depth d (percent): hay[0:p] needle(v) hay[p:h] question value. */
static int layout(needle_set *n, int b, int depth, int control)
{
    txl_tok *row = n->x + (size_t)b * n->ld;
    const txl_tok *hay = n->hay + (size_t)b * n->L;
    const needle_trial *t = &n->tr[b];
    int h = n->h[b], p = (int)((double)depth / 100.0 * h), at = 0;
#define PUT(src, k) (memcpy(row + at, (src), (size_t)(k) * sizeof *row), at += (k))
    PUT(hay, p);
    PUT(t->q, t->ql);
    PUT(control ? t->c : t->v, t->vl);
    PUT(n->nv->tail, n->nv->tl);
    PUT(hay + p, h - p);
    PUT(t->q, t->ql);
    PUT(t->v, t->vl);
#undef PUT
    return p;
}

static void set_free(needle_set *n)
{
    free(n->tr), free(n->h), free(n->lens), free(n->hay), free(n->x);
    probe_tokens_free(&n->pt);
    free(n->loss), free(n->hit), free(n->bits), free(n->ctrl), free(n->exact), free(n->cut);
}

/* A context too short for a trial's needle and question: ERR_INPUT. */
static int too_short(const probe_ctx *p, int L, int need, txl_err *e)
{
    return err_set(e, ERR_INPUT, "--lengths: a context of %d %s cannot hold the needle and the "
                   "question (%d %s)", L, probe_units(p), need, probe_units(p));
}

/* Draws the trials of one context length: sentences and haystacks (bytes and words: the
 * haystack first, the sentence's length being known; bpe: the sentence first). */
static int draw_trials(needle_set *n, const probe_ctx *p, rng_t *r, txl_err *e)
{
    int fixed = n->nv->kind != VOCAB_BPE, need = fixed ? min_context(p, n->nv, e) : 0, vmax = 0;
    if (need < 0)
        return -1;
    if (need > n->L)
        return too_short(p, n->L, need, e);
    n->uniform = !p->units.anchors;
    for (int b = 0; b < n->B; b++) {
        needle_trial *t = &n->tr[b];
        txl_tok *hay = n->hay + (size_t)b * n->L;
        n->h[b] = n->L - need + 1;
        if ((fixed && probe_text(p, r, hay, (size_t)n->h[b], e)) ||
            draw_sentence(p, n->nv, r, t, e))
            return -1;
        if (!fixed) {
            n->h[b] = n->L - sentence_units(n->nv, t);
            if (n->h[b] < 1)
                return too_short(p, n->L, sentence_units(n->nv, t) + 1, e);
            if (probe_text(p, r, hay, (size_t)n->h[b], e))
                return -1;
        }
        n->lens[b] = n->L + t->vl;
        vmax = t->vl > vmax ? t->vl : vmax;
        n->uniform &= t->ql == n->tr[0].ql && t->vl == n->tr[0].vl;
    }
    n->ld = n->L + vmax;
    return 0;
}

/* Draws the trials of one context length and sizes the cell's buffers. */
static int set_init(needle_set *n, const probe_ctx *p, const needle_vocab *nv, int L, rng_t *r,
                    txl_err *e)
{
    memset(n, 0, sizeof *n);
    n->L = L;
    n->nv = nv;
    n->B = (int)p->a->trials;
    size_t B = (size_t)n->B;
    n->tr = malloc(B * sizeof *n->tr);
    n->h = malloc(B * sizeof *n->h);
    n->lens = malloc(B * sizeof *n->lens);
    n->hay = malloc(B * (size_t)L * sizeof *n->hay);
    if (!n->tr || !n->h || !n->lens || !n->hay)
        return err_set(e, ERR_RUNTIME, "out of memory");
    if (draw_trials(n, p, r, e))
        return -1;
    size_t ld = (size_t)n->ld;
    n->x = malloc(B * ld * sizeof *n->x);
    n->loss = malloc(2 * B * ld * sizeof *n->loss); /* anchors: up to 2 tokens a unit */
    n->hit = malloc(2 * B * ld);
    n->bits = malloc(B * sizeof *n->bits);
    n->ctrl = malloc(B * sizeof *n->ctrl);
    n->exact = malloc(B * sizeof *n->exact);
    n->cut = malloc(B);
    if (!n->x || !n->loss || !n->hit || !n->bits || !n->ctrl || !n->exact || !n->cut)
        return err_set(e, ERR_RUNTIME, "out of memory");
    return 0;
}

/* Bits of the value and exact match of stream b, from the last feed's scores. */
static double value_bits(const needle_set *n, int b, int *exact)
{
    const int *m = n->pt.map + (size_t)b * n->pt.len;
    int first = m[n->L - 1] + 1, last = m[n->L + n->tr[b].vl - 1];
    size_t row = (size_t)b * n->pt.n;
    double s = 0;
    for (int j = first; j <= last; j++)
        s += n->loss[row + j - 1];
    if (exact) /* the value's targets: those of tokens first..last */
        *exact = probe_exact(n->hit + row + first - 1, last - first + 1);
    return s / M_LN2;
}

/* Starts a cell's count of cut trials and pads. */
static void cell_start(needle_set *n)
{
    memset(n->cut, 0, (size_t)n->B);
    n->pad_max = 0;
}

/* The streams as laid out (n->x) into tokens, counted into the cell's cuts and pads. */
static int tokens_of(const probe_ctx *p, needle_set *n, txl_err *e)
{
    probe_tokens_free(&n->pt);
    if (probe_tokenize(p, n->x, n->B, n->ld, n->lens, &n->pt, e))
        return -1;
    for (int b = 0; b < n->B; b++)
        n->cut[b] |= (uint8_t)probe_cut(&n->pt, b);
    n->pad_max = n->pt.pad_max > n->pad_max ? n->pt.pad_max : n->pad_max;
    return 0;
}

/* Every stream from token `from` on (the memory holding the tokens before it). */
static void run_suffix(stream_eval *s, needle_set *n, int from)
{
    const probe_tokens *pt = &n->pt;
    streams_feed(s, pt->tok + from, pt->tok + from + 1,
                 pt->co ? pt->co + (size_t)from * TXL_N_COORDS : NULL, pt->n - 1 - from,
                 (size_t)pt->n, n->loss + from, n->hit + from);
}

/* The cell's row: its JSON and its table line. */
static int cell_row(probe_ctx *p, const needle_set *n, probe_mode mode, int factor, int depth,
                    const stream_eval *s, double seconds, txl_err *e)
{
    int k = 0, cut = 0;
    double gain[TXL_PROBE_MAX_TRIALS], vt = 0; /* api/probe.c checks the trials */
    for (int b = 0; b < n->B; b++) {
        k += n->exact[b];
        cut += n->cut[b];
        gain[b] = n->ctrl[b] - n->bits[b];
        vt += n->tr[b].vl;
    }
    stat_ci acc = stat_proportion(k, n->B), vb = stat_mean(n->bits, n->B);
    stat_ci cb = stat_mean(n->ctrl, n->B), g = stat_mean(gain, n->B);
    const char *mn = mode == MODE_MEMORY ? "memory" : "window";
    probe_row r;
    if (probe_row_begin(&r, e))
        return -1;
    fprintf(r.json, "{\"probe\":\"needle\",\"mode\":\"%s\",\"factor\":%d,\"length\":%d,"
            "\"depth\":%d,\"trials\":%d,\"unit\":\"%s\"", mn, factor, n->L, depth, n->B,
            probe_unit(p));
    if (p->tokens)
        fprintf(r.json, ",\"value_tokens\":%.6g", vt / n->B);
    print_ci(r.json, "accuracy", acc);
    print_ci(r.json, "value_bits", vb);
    print_ci(r.json, "control_bits", cb);
    print_ci(r.json, "gain_bits", g);
    fprintf(r.json, ",\"cut_trials\":%d,\"pad_max\":%d", cut, n->pad_max);
    fprintf(r.json, ",\"tgt_len\":%d,\"mem_len\":%d,\"pos_scheme\":\"%s\",\"step\":%ld,"
            "\"tok_per_s\":%.1f,\"seed\":%llu", s->T, s->M,
            pos_scheme_name(p->cfg->model.pos), p->step,
            s->tokens / (seconds > 0 ? seconds : 1e-9), p->a->seed);
    probe_json_end(p, r.json);
    fprintf(r.text, "%-7s %3dx %7d %5d%%   %5.2f [%4.2f,%4.2f]   %7.2f [%6.2f,%6.2f]   %7.2f",
            mn, factor, n->L, depth, acc.mean, acc.lo, acc.hi, g.mean, g.lo, g.hi, vb.mean);
    return probe_row_end(p, &r, mn, 0, e);
}

/* One depth from scratch, the needle's run and its control's: window mode, and memory mode
 * when the streams' layouts differ (anchors, sentences of different lengths: the text
 * before the needle is then not at the same tokens in every stream). */
static int depth_whole(probe_ctx *p, stream_eval *s, needle_set *n, int depth, txl_err *e)
{
    cell_start(n);
    for (int pass = 0; pass < 2; pass++) {
        for (int b = 0; b < n->B; b++)
            layout(n, b, depth, pass);
        if (tokens_of(p, n, e))
            return -1;
        streams_reset(s);
        run_suffix(s, n, 0);
        for (int b = 0; b < n->B; b++) {
            if (pass)
                n->ctrl[b] = value_bits(n, b, NULL);
            else
                n->bits[b] = value_bits(n, b, &n->exact[b]);
        }
    }
    return 0;
}

/* Memory mode with one layout for every stream: the text before each depth's needle (the
 * same units, so the same tokens, in every stream) runs once; the memory is saved there and
 * restored for the needle's run, its control and the next depth. */
static int depths_shared(probe_ctx *p, stream_eval *s, needle_set *n, model_mem *snap,
                         const int *depths, int nd, int factor, double t0, txl_err *e)
{
    int at = 0;
    streams_reset(s);
    for (int k = 0; k < nd; k++) {
        int pd = 0;
        cell_start(n);
        for (int b = 0; b < n->B; b++)
            pd = layout(n, b, depths[k], 0);
        if (tokens_of(p, n, e))
            return -1;
        const probe_tokens *pt = &n->pt;
        if (pd > at) /* the text up to this depth's needle, continuing the last one's */
            streams_feed(s, pt->tok + at, NULL, pt->co ? pt->co + (size_t)at * TXL_N_COORDS : NULL,
                         pd - at, (size_t)pt->n, NULL, NULL);
        at = pd;
        streams_save(s, snap);
        run_suffix(s, n, pd);
        for (int b = 0; b < n->B; b++)
            n->bits[b] = value_bits(n, b, &n->exact[b]);
        streams_restore(s, snap);
        for (int b = 0; b < n->B; b++)
            layout(n, b, depths[k], 1);
        if (tokens_of(p, n, e))
            return -1;
        run_suffix(s, n, pd);
        for (int b = 0; b < n->B; b++)
            n->ctrl[b] = value_bits(n, b, NULL);
        streams_restore(s, snap);
        int rc = cell_row(p, n, MODE_MEMORY, factor, depths[k], s, sys_now() - t0, e);
        if (rc)
            return rc;
    }
    return 0;
}

/* One (mode, length) group of cells: 0, the row function's stop, or -1. */
static int run_length(probe_ctx *p, const needle_vocab *nv, probe_mode mode, int factor,
                      const int *depths, int nd, txl_err *e)
{
    int L = factor * (p->cfg->model.tgt_len + p->cfg->model.mem_len);
    rng_t r = {rng_key(p->a->seed, (uint64_t)factor)}; /* the same trials in both modes */
    needle_set n;
    stream_eval s;
    model_mem snap = {0};
    int rc = set_init(&n, p, nv, L, &r, e);
    /* a window holds the whole stream: with anchors up to two tokens a unit */
    int win = (p->units.anchors ? 2 : 1) * n.ld;
    if (!rc && (rc = probe_streams(p, mode, n.B, win, &s, e)) == 0) {
        double t0 = sys_now();
        if (mode == MODE_MEMORY && n.uniform) {
            if (!(rc = streams_snapshot_init(&s, &snap, e)))
                rc = depths_shared(p, &s, &n, &snap, depths, nd, factor, t0, e);
            mem_free(&snap);
        } else {
            for (int k = 0; !rc && k < nd; k++)
                if (!(rc = depth_whole(p, &s, &n, depths[k], e)))
                    rc = cell_row(p, &n, mode, factor, depths[k], &s, sys_now() - t0, e);
        }
        if (p->progress)
            fprintf(stderr, "needle %s %dx: %d cells in %.1fs, %.0f tok/s\n",
                    mode == MODE_MEMORY ? "memory" : "window", factor, nd, sys_now() - t0,
                    s.tokens / (sys_now() - t0 > 0 ? sys_now() - t0 : 1e-9));
        streams_free(&s);
    }
    set_free(&n);
    return rc;
}

/* The default lengths: the factors 1, 2, 4, 8 whose context holds the needle and its
 * question (a model whose context is under 75 bytes, or the tokens a word or BPE needle
 * needs, skips the shorter ones, and says so in a note); none of them: an error that says
 * the model's context is too short, and the factor that would do. Their count into *n;
 * returns 0, the note's stop, or -1. */
static int default_lengths(probe_ctx *p, const needle_vocab *nv, int *lengths, int *n,
                           txl_err *e)
{
    static const int def[] = {1, 2, 4, 8};
    int ctx = p->cfg->model.tgt_len + p->cfg->model.mem_len, min = min_context(p, nv, e);
    const char *u = probe_units(p);
    char skipped[64] = "";
    *n = 0;
    if (min < 0)
        return -1;
    for (int k = 0; k < 4; k++) {
        if ((long)def[k] * ctx >= min)
            lengths[(*n)++] = def[k];
        else
            snprintf(skipped + strlen(skipped), sizeof skipped - strlen(skipped), "%s%dx",
                     k ? ", " : "", def[k]);
    }
    if (*n == 0)
        return err_set(e, ERR_INPUT, "%s: the model's context (tgt_len + mem_len = %d %s) is "
                       "too short for the needle probe: its default lengths, 1x to 8x that "
                       "(at most %d %s), cannot hold the needle and the question (%d %s "
                       "at least); ask for longer ones, e.g. --lengths %d", p->a->ckpt, ctx, u,
                       8 * ctx, u, min, u, (min + ctx - 1) / ctx);
    if (*n < 4)
        return probe_note(p, "needle: skipping the default lengths %s: the model's context "
                          "(%d %s) times that cannot hold the needle and the question (%d "
                          "%s)", skipped, ctx, u, min, u);
    return 0;
}

/* For a word or BPE model, a note on what the needle is in its tokens. */
static int vocab_note(probe_ctx *p, const needle_vocab *nv)
{
    size_t a, b;
    if (nv->kind == VOCAB_WORD) {
        const uint8_t *w0 = vocab_piece(p->v, nv->pool[0], &a);
        const uint8_t *w1 = vocab_piece(p->v, nv->pool[nv->np - 1], &b);
        return probe_note(p, "needle: in the model's words, \"The secret word of KEY is VALUE "
                          ".\", KEY and VALUE drawn from its %d words of 3 letters or more "
                          "among ids %d..%d (from \"%.*s\" to \"%.*s\"); lengths and depths "
                          "in tokens", nv->np, nv->lo, nv->hi - 1, (int)a, (const char *)w0,
                          (int)b, (const char *)w1);
    }
    return probe_note(p, "needle: in the model's BPE tokens, \" The secret number of KEY is\", "
                      "the value \" NNNNNN\" encoded apart, \".\" (KEY 7 random letters, NNNNNN "
                      "6 random digits; the control's number as many tokens); lengths and "
                      "depths in tokens");
}

int probe_needle(probe_ctx *p, txl_err *e)
{
    const probe_opts *a = p->a;
    static const int def_depths[] = {0, 25, 50, 75, 100};
    int lengths[PROBE_MAX_LIST], depths[PROBE_MAX_LIST], nl = a->lengths.n, nd = a->depths.n;
    needle_vocab nv;
    int rc = vocab_init(p, &nv, e);
    if (!rc && p->tokens)
        rc = vocab_note(p, &nv);
    if (!rc && nl)
        memcpy(lengths, a->lengths.v, (size_t)nl * sizeof(int));
    else if (!rc)
        rc = default_lengths(p, &nv, lengths, &nl, e);
    memcpy(depths, nd ? a->depths.v : def_depths, (nd ? nd : 5) * sizeof(int));
    nd = probe_sort_unique(depths, nd ? nd : 5);
    snprintf(p->head, sizeof p->head, "%-7s %4s %7s %6s   %-17s   %-24s   %7s", "mode", "len",
             probe_units(p), "depth", "accuracy [95%]", "gain bits [95%]", "bits");
    for (int m = MODE_MEMORY; !rc && m <= MODE_WINDOW; m++) {
        if (a->mode != MODE_BOTH && a->mode != (probe_mode)m)
            continue;
        for (int k = 0; !rc && k < nl; k++)
            rc = run_length(p, &nv, (probe_mode)m, lengths[k], depths, nd, e);
    }
    free(nv.pool);
    return rc;
}

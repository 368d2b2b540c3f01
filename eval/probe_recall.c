/* probe_recall.c: recall by distance, how far back the model can copy (doc/design.md,
 * "Probes").
 *
 * A trial is, in the model's units (bytes, or the tokens of a word or BPE vocabulary: see
 * probe.h): 64 units of text, a random string S (string_len units drawn from the text's own
 * units, so its characters or words are the corpus's), D units of text, S again. Its
 * control is the same text with the first occurrence replaced by another string C of S's
 * shape, so the same units of text (data/units.h), anchors and coordinates: bytes keep S's
 * whitespace and sentence stops and change every other byte; tokens keep S's tokens that
 * shape units (specials, whitespace, sentence stops, the document separator's bytes) and
 * change every other one for another such plain token with the same leading space or none
 * (which decides whether a word starts there). The gain is the bits per unit the first
 * occurrence saves on the second: the second occurrence's bits in the control minus in the
 * trial. Both runs put the second occurrence at the same place with the same text around
 * it, so what the segments, the memory or the window let the model see is the same in both
 * but for S: a model that cannot reach back D + S units gains nothing, whatever its context
 * length (comparing the second occurrence with the first instead would credit the first's
 * shorter context). The bits of the first occurrence are reported too. The effective
 * context is the largest D whose gain is still at least half the gain at the smallest D,
 * unknown (null) when that gain is not significantly above 0 (effective_context). The
 * texts become tokens by the model's rules (probe_tokenize: anchors make their token
 * counts differ, and the shorter streams are padded, never cut). JSON rows name the bits per
 * unit after the unit: gain_bpc, first_bpc, ... (bits per byte) for bytes, gain_bpt,
 * first_bpt, ... (bits per token) for tokens.
 * Trials run side by side as streams, in memory mode (segments of tgt_len through the
 * memory) and/or window mode (one window, no memory). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/sys.h"
#include "probe.h"

#define LEAD 64

typedef struct {
    int D, S, ld, B;
    txl_tok *x, *xc;     /* [B][ld]: lead, S, D units of text, S; the control: C for the first S */
    probe_tokens pt, ptc;/* as the model's tokens */
    float *loss, *lossc; /* [B][pt.n], [B][ptc.n] per target */
    double *first, *second, *control, *gain; /* [B] bits per unit */
    int cut, pad_max;    /* trials with a token not fed (probe_cut: none), most pad tokens */
} recall_set;

static void set_free(recall_set *r)
{
    free(r->x), free(r->xc), free(r->loss), free(r->lossc);
    free(r->first), free(r->second), free(r->control), free(r->gain);
    probe_tokens_free(&r->pt);
    probe_tokens_free(&r->ptc);
}

/* Bytes the control keeps from S: those that decide where units start (data/units.h:
 * whitespace, sentence stops, the document separator's bytes). */
static int shapes_units(const probe_ctx *p, uint8_t b)
{
    return b == ' ' || (b >= '\t' && b <= '\r') || b == '.' || b == '!' || b == '?' ||
           (b && strchr(p->units.sep, b));
}

/* The control's string: S's unit-shaping bytes, every other byte another byte of the pool
 * (one that shapes no unit either), drawn from r. */
static void control_bytes(const probe_ctx *p, rng_t *r, const txl_tok *s, int n,
                          const txl_tok *pool, size_t np, txl_tok *c)
{
    for (int i = 0; i < n; i++) {
        c[i] = s[i];
        for (int k = 0; k < 256 && !shapes_units(p, (uint8_t)s[i]) && c[i] == s[i]; k++) {
            uint8_t b = (uint8_t)pool[rng_next(r) % np];
            if (!shapes_units(p, b))
                c[i] = b;
        }
        if (!shapes_units(p, (uint8_t)s[i]) && c[i] == s[i]) /* a pool of one such byte */
            c[i] = s[i] == 'x' ? 'y' : 'x';
    }
}

/* A token's shape: -1 when it shapes units (a special; whitespace, a sentence stop or a
 * separator's byte in its text but a BPE token's leading space), else whether its text
 * starts with a space (bpe; a word's separating space is the vocabulary's, always there
 * but after <eos>, which the control keeps). Tokens of one shape >= 0 start the same units
 * wherever they stand, and leave the units state as the other would. */
static int token_shape(const probe_ctx *p, txl_tok t)
{
    size_t len;
    const uint8_t *s = vocab_piece(p->v, t, &len);
    if (vocab_special(p->v, t) != SPECIAL_NONE)
        return -1;
    int lead = vocab_get_kind(p->v) == VOCAB_BPE && len > 0 && s[0] == ' ';
    if ((size_t)lead == len)
        return -1;
    for (size_t i = (size_t)lead; i < len; i++)
        if (shapes_units(p, s[i]))
            return -1;
    return lead;
}

/* The control's string in tokens: S's tokens that shape units, every other one another
 * token of its shape, from the pool (r's draws), else the next of the vocabulary's. */
static int control_tokens(const probe_ctx *p, rng_t *r, const txl_tok *s, int n,
                          const txl_tok *pool, size_t np, txl_tok *c, txl_err *e)
{
    size_t V = vocab_size(p->v);
    for (int i = 0; i < n; i++) {
        int sh = token_shape(p, s[i]);
        c[i] = s[i];
        for (int k = 0; k < 256 && sh >= 0 && c[i] == s[i]; k++) {
            txl_tok t = pool[rng_next(r) % np];
            if (t != s[i] && token_shape(p, t) == sh)
                c[i] = t;
        }
        for (size_t k = 1; k < V && sh >= 0 && c[i] == s[i]; k++) /* a pool of few such */
            if (token_shape(p, (txl_tok)((s[i] + k) % V)) == sh)
                c[i] = (txl_tok)((s[i] + k) % V);
        if (sh >= 0 && c[i] == s[i])
            return err_set(e, ERR_INPUT, "%s: recall's control needs a token of the shape of "
                           "token %lu (plain text, %s leading space) other than it, and the "
                           "vocabulary has none", p->a->ckpt, (unsigned long)s[i],
                           sh ? "a" : "no");
    }
    return 0;
}

int probe_control_string(const probe_ctx *p, rng_t *r, const txl_tok *s, int n,
                         const txl_tok *pool, size_t np, txl_tok *c, txl_err *e)
{
    if (p->tokens)
        return control_tokens(p, r, s, n, pool, np, c, e);
    control_bytes(p, r, s, n, pool, np, c);
    return 0;
}

static int set_init(recall_set *s, const probe_ctx *p, int D, rng_t *r, txl_err *e)
{
    memset(s, 0, sizeof *s);
    s->D = D;
    s->S = (int)p->a->string_len;
    s->ld = LEAD + 2 * s->S + D;
    s->B = (int)p->a->trials;
    size_t B = (size_t)s->B, ld = (size_t)s->ld;
    s->x = malloc(B * ld * sizeof *s->x);
    s->xc = malloc(B * ld * sizeof *s->xc);
    s->loss = malloc(2 * B * ld * sizeof *s->loss); /* anchors: up to 2 tokens a unit */
    s->lossc = malloc(2 * B * ld * sizeof *s->lossc);
    s->first = malloc(B * sizeof(double));
    s->second = malloc(B * sizeof(double));
    s->control = malloc(B * sizeof(double));
    s->gain = malloc(B * sizeof(double));
    txl_tok *pool = malloc(4096 * sizeof *pool);
    if (!s->x || !s->xc || !s->loss || !s->lossc || !s->first || !s->second || !s->control ||
        !s->gain || !pool) {
        free(pool);
        return err_set(e, ERR_RUNTIME, "out of memory");
    }
    /* the controls' draws: their own generator, so the trials are those of r alone */
    rng_t rc = {rng_key(p->a->seed, 0x2000u + (uint64_t)D)};
    int bad = 0;
    size_t np = 4096 < probe_text_len(p) ? 4096 : probe_text_len(p);
    for (int b = 0; b < s->B && !bad; b++) {
        txl_tok *row = s->x + (size_t)b * ld, *str = row + LEAD;
        txl_tok *ctl = s->xc + (size_t)b * ld + LEAD;
        /* the lead and the D units of text are one draw; S from another stretch's units */
        bad = probe_text(p, r, row, LEAD, e) || probe_text(p, r, str + s->S, (size_t)D, e) ||
              probe_text(p, r, pool, np, e);
        for (int i = 0; !bad && i < s->S; i++)
            str[i] = pool[rng_next(r) % np];
        memcpy(str + s->S + D, str, (size_t)s->S * sizeof *str);
        memcpy(s->xc + (size_t)b * ld, row, ld * sizeof *row);
        if (!bad)
            bad = probe_control_string(p, &rc, str, s->S, pool, np, ctl, e);
    }
    free(pool);
    return bad;
}

/* Bits per unit of S at its first and second occurrence, and of the second in the control
 * (the tokens of those units). */
static void score(recall_set *s)
{
    int second = LEAD + s->S + s->D;
    s->cut = 0;
    s->pad_max = s->pt.pad_max > s->ptc.pad_max ? s->pt.pad_max : s->ptc.pad_max;
    for (int b = 0; b < s->B; b++) {
        s->cut += probe_cut(&s->pt, b) || probe_cut(&s->ptc, b);
        s->first[b] = probe_bits(&s->pt, s->loss, b, LEAD, LEAD + s->S) / s->S;
        s->second[b] = probe_bits(&s->pt, s->loss, b, second, second + s->S) / s->S;
        s->control[b] = probe_bits(&s->ptc, s->lossc, b, second, second + s->S) / s->S;
        s->gain[b] = s->control[b] - s->second[b];
    }
}

/* A distance's row: its JSON and its table line. */
static int distance_row(probe_ctx *p, probe_mode mode, const recall_set *s,
                        const stream_eval *ev, double sec, txl_err *e)
{
    stat_ci gi = stat_mean(s->gain, s->B), fi = stat_mean(s->first, s->B);
    stat_ci se = stat_mean(s->second, s->B), ci = stat_mean(s->control, s->B);
    const char *mn = mode == MODE_MEMORY ? "memory" : "window";
    probe_row r;
    if (probe_row_begin(&r, e))
        return -1;
    fprintf(r.json, "{\"probe\":\"recall\",\"mode\":\"%s\",\"distance\":%d,"
            "\"string_len\":%d,\"trials\":%d,\"unit\":\"%s\"", mn, s->D, s->S, s->B,
            probe_unit(p));
    /* the bits per unit: bpc (bits per byte) for bytes, bpt (bits per token) for tokens */
    const char *u = p->tokens ? "bpt" : "bpc";
    static const char *const what[] = {"gain", "first", "second", "control"};
    const stat_ci *st[] = {&gi, &fi, &se, &ci};
    for (int k = 0; k < 4; k++) {
        char name[32];
        snprintf(name, sizeof name, "%s_%s", what[k], u);
        print_ci(r.json, name, *st[k]);
    }
    fprintf(r.json, ",\"cut_trials\":%d,\"pad_max\":%d", s->cut, s->pad_max);
    fprintf(r.json, ",\"tgt_len\":%d,\"mem_len\":%d,\"pos_scheme\":\"%s\",\"step\":%ld,"
            "\"tok_per_s\":%.1f,\"seed\":%llu", ev->T, ev->M,
            pos_scheme_name(p->cfg->model.pos), p->step, ev->tokens / (sec > 0 ? sec : 1e-9),
            p->a->seed);
    probe_json_end(p, r.json);
    fprintf(r.text, "%-7s %8d   %6.3f [%6.3f,%6.3f]   %6.3f   %6.3f   %7.3f", mn, s->D, gi.mean,
            gi.lo, gi.hi, fi.mean, se.mean, ci.mean);
    return probe_row_end(p, &r, mn, 0, e);
}

/* The control's tokens line up with the trial's (probe_control_string's promise, checked:
 * a broken promise would compare the second occurrences at different tokens). */
static int lined_up(const probe_ctx *p, const recall_set *s, txl_err *e)
{
    if (probe_same_shape(p, &s->pt, &s->ptc))
        return 0;
    return err_set(e, ERR_RUNTIME, "recall, distance %d: the control's tokens do not line up "
                   "with the trial's (anchors or coordinates differ): a bug", s->D);
}

/* One distance: every trial once, then its control. The gain (bits per unit: its mean and
 * 95% interval over the trials) into *g; returns 0, the row function's stop, or -1. */
static int run_distance(probe_ctx *p, probe_mode mode, int D, stat_ci *g, txl_err *e)
{
    rng_t r = {rng_key(p->a->seed, 0x1000u + (uint64_t)D)};
    recall_set s;
    stream_eval ev;
    int rc = -1;
    if (!set_init(&s, p, D, &r, e) && !probe_tokenize(p, s.x, s.B, s.ld, NULL, &s.pt, e) &&
        !probe_tokenize(p, s.xc, s.B, s.ld, NULL, &s.ptc, e) && !lined_up(p, &s, e) &&
        !probe_streams(p, mode, s.B, (s.pt.n > s.ptc.n ? s.pt.n : s.ptc.n) - 1, &ev, e)) {
        double t0 = sys_now();
        const probe_tokens *pt = &s.pt, *pc = &s.ptc;
        streams_feed(&ev, pt->tok, pt->tok + 1, pt->co, pt->n - 1, (size_t)pt->n, s.loss, NULL);
        streams_reset(&ev);
        streams_feed(&ev, pc->tok, pc->tok + 1, pc->co, pc->n - 1, (size_t)pc->n, s.lossc, NULL);
        score(&s);
        rc = distance_row(p, mode, &s, &ev, sys_now() - t0, e);
        *g = stat_mean(s.gain, s.B);
        streams_free(&ev);
    }
    set_free(&s);
    return rc;
}

/* The distances, ascending and each once: --distances, or 16, 32, ... up to 8x the trained
 * context. */
static int distances(const probe_ctx *p, int *d)
{
    if (p->a->distances.n) {
        memcpy(d, p->a->distances.v, (size_t)p->a->distances.n * sizeof *d);
        return probe_sort_unique(d, p->a->distances.n);
    }
    int n = 0, top = 8 * (p->cfg->model.tgt_len + p->cfg->model.mem_len);
    for (long D = 16; D <= top && n < PROBE_MAX_LIST; D *= 2)
        d[n++] = (int)D;
    if (n == 0)
        d[n++] = 16;
    return n;
}

/* The effective context of a mode: the largest distance whose mean gain is at least half
 * the mean gain at the shortest distance d[0], or -1 (unknown) when the gain at d[0] is not
 * significantly above 0, i.e. the lower end of its 95% interval (Student's t over the
 * trials, the interval every row prints) is not above 0: then "half of it" is half of noise
 * (or of a loss), and any distance would pass. One trial has no interval: unknown too. */
static int effective_context(const int *d, const stat_ci *g, int nd)
{
    if (!(g[0].lo > 0))
        return -1;
    int eff = d[0];
    for (int k = 1; k < nd; k++)
        if (g[k].mean >= 0.5 * g[0].mean)
            eff = d[k];
    return eff;
}

/* A mode's summary row: the effective context. */
static int summary_row(probe_ctx *p, probe_mode mode, const int *d, const stat_ci *g, int nd,
                       txl_err *e)
{
    const char *mn = mode == MODE_MEMORY ? "memory" : "window";
    int eff = effective_context(d, g, nd);
    probe_row r;
    if (probe_row_begin(&r, e))
        return -1;
    fprintf(r.json, "{\"probe\":\"recall\",\"mode\":\"%s\",\"effective_context\":", mn);
    if (eff >= 0)
        fprintf(r.json, "%d", eff);
    else
        fprintf(r.json, "null");
    fprintf(r.json, ",\"shortest_distance\":%d,\"unit\":\"%s\"", d[0], probe_unit(p));
    print_ci(r.json, "gain_at_shortest", g[0]);
    if (eff < 0)
        fprintf(r.json, ",\"note\":\"the gain at the shortest distance is not significantly "
                "above 0 (the lower end of its 95%% interval is not above 0)\"");
    fprintf(r.json, ",\"pos_scheme\":\"%s\",\"step\":%ld", pos_scheme_name(p->cfg->model.pos),
            p->step);
    probe_json_end(p, r.json);
    if (eff >= 0)
        fprintf(r.text, "%s: effective context %d %s (gain >= half of %.3f %s, the gain at "
                "%d)", mn, eff, probe_units(p), g[0].mean, p->tokens ? "bits/token" : "bpc",
                d[0]);
    else
        fprintf(r.text, "%s: effective context unknown: the gain at the shortest distance (%d) "
                "is not significantly above 0 (%.3f %s, 95%% interval [%.3f, %.3f])", mn, d[0],
                g[0].mean, p->tokens ? "bits/token" : "bpc", g[0].lo, g[0].hi);
    return probe_row_end(p, &r, mn, 1, e);
}

int probe_recall(probe_ctx *p, txl_err *e)
{
    int d[PROBE_MAX_LIST], nd = distances(p, d), rc;
    snprintf(p->head, sizeof p->head, "%-7s %8s   %-22s   %6s   %6s   %7s", "mode", "distance",
             p->tokens ? "gain bits/tok [95%]" : "gain bpc [95%]", "first", "second", "control");
    for (int m = MODE_MEMORY; m <= MODE_WINDOW; m++) {
        if (p->a->mode != MODE_BOTH && p->a->mode != (probe_mode)m)
            continue;
        stat_ci g[PROBE_MAX_LIST] = {{0}};
        for (int k = 0; k < nd; k++)
            if ((rc = run_distance(p, (probe_mode)m, d[k], &g[k], e)))
                return rc;
        if ((rc = summary_row(p, (probe_mode)m, d, g, nd, e)))
            return rc;
    }
    return 0;
}

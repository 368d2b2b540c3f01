/* probe_needle.c: needle in a haystack (doc/design.md, "Probes").
 *
 * A trial is a context of L bytes: text drawn from the corpus with the needle
 * " The secret number of Kelvard is 583194. " inserted at depth d (0% = the start of the
 * context, 100% = right before the question), ending with the question
 * " The secret number of Kelvard is "; the model is scored on the 6 digits that follow
 * (random key word and value per trial, the same at every depth). Its control is the same
 * context with another number planted: the retrieval gain is the bits the needle saves on
 * the true value. Trials run side by side as streams. In memory mode (segments of tgt_len
 * through the memory, as trained) the text before the needle is the same at every depth,
 * so it runs once per trial: the memory is saved where each depth's needle goes and
 * restored for the needle's run, its control and the next depth. The texts become tokens
 * by the model's rules (anchors, coordinates: probe_tokenize). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/sys.h"
#include "probe.h"

#define VALUE_LEN 6

typedef struct {
    int L, h;               /* context bytes, haystack bytes */
    int nl, ql;             /* needle and question lengths */
    int ld;                 /* bytes per stream row: L + VALUE_LEN */
    int B;
    uint8_t *hay;           /* [B][h] */
    char (*key)[8];         /* [B] */
    unsigned *value, *other;/* [B] the value and the control's value */
    uint8_t *x;             /* [B][ld] one stream layout, bytes */
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

static int needle_len(void)
{
    return (int)strlen(" The secret number of Kelvard is 583194. ");
}

static int question_len(void) { return (int)strlen(" The secret number of Kelvard is "); }

/* The shortest context: the needle, the question and a byte of haystack. */
static int min_context(void) { return needle_len() + question_len() + 1; }

/* Stream b for depth d (percent): hay[0:p] needle(v) hay[p:h] question value. */
static int layout(needle_set *n, int b, int depth, unsigned v)
{
    uint8_t *row = n->x + (size_t)b * n->ld;
    const uint8_t *hay = n->hay + (size_t)b * n->h;
    int p = (int)((double)depth / 100.0 * n->h);
    char needle[64], q[64], val[8];
    snprintf(needle, sizeof needle, " The secret number of %s is %06u. ", n->key[b], v);
    snprintf(q, sizeof q, " The secret number of %s is ", n->key[b]);
    snprintf(val, sizeof val, "%06u", n->value[b]);
    memcpy(row, hay, (size_t)p);
    memcpy(row + p, needle, (size_t)n->nl);
    memcpy(row + p + n->nl, hay + p, (size_t)(n->h - p));
    memcpy(row + n->h + n->nl, q, (size_t)n->ql);
    memcpy(row + n->L, val, VALUE_LEN);
    return p;
}

static void set_free(needle_set *n)
{
    free(n->hay), free(n->key), free(n->value), free(n->other), free(n->x);
    probe_tokens_free(&n->pt);
    free(n->loss), free(n->hit), free(n->bits), free(n->ctrl), free(n->exact), free(n->cut);
}

/* Draws the trials of one context length: haystacks, keys, values. */
static int set_init(needle_set *n, const probe_ctx *p, int L, rng_t *r, txl_err *e)
{
    memset(n, 0, sizeof *n);
    n->L = L;
    n->nl = needle_len();
    n->ql = question_len();
    n->h = L - n->nl - n->ql;
    n->ld = L + VALUE_LEN;
    n->B = (int)p->a->trials;
    if (n->h < 1)
        return err_set(e, ERR_INPUT, "--lengths: a context of %d bytes cannot hold the needle "
                       "and the question (%d bytes)", L, min_context());
    size_t B = (size_t)n->B, ld = (size_t)n->ld;
    n->hay = malloc(B * n->h);
    n->key = malloc(B * sizeof *n->key);
    n->value = malloc(B * sizeof *n->value);
    n->other = malloc(B * sizeof *n->other);
    n->x = malloc(B * ld);
    n->loss = malloc(2 * B * ld * sizeof *n->loss); /* anchors: up to 2 tokens a byte */
    n->hit = malloc(2 * B * ld);
    n->bits = malloc(B * sizeof *n->bits);
    n->ctrl = malloc(B * sizeof *n->ctrl);
    n->exact = malloc(B * sizeof *n->exact);
    n->cut = malloc(B);
    if (!n->hay || !n->key || !n->value || !n->other || !n->x || !n->loss || !n->hit ||
        !n->bits || !n->ctrl || !n->exact || !n->cut)
        return err_set(e, ERR_RUNTIME, "out of memory");
    for (int b = 0; b < n->B; b++) {
        if (probe_text(p, r, n->hay + (size_t)b * n->h, (size_t)n->h, e))
            return -1;
        random_key(r, n->key[b]);
        n->value[b] = (unsigned)(rng_next(r) % 1000000);
        n->other[b] = (n->value[b] + 1 + (unsigned)(rng_next(r) % 999999)) % 1000000;
    }
    return 0;
}

/* Bits of the value and exact match of stream b, from the last feed's scores. */
static double value_bits(const needle_set *n, int b, int *exact)
{
    const int *m = n->pt.map + (size_t)b * n->ld;
    int first = m[n->L - 1] + 1, last = m[n->L + VALUE_LEN - 1];
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

/* The streams as laid out (n->x) into tokens, counted into the cell's cuts and pads; then
 * every stream from token `from` on (the memory holding the tokens before it). */
static int tokens_of(const probe_ctx *p, needle_set *n, txl_err *e)
{
    probe_tokens_free(&n->pt);
    if (probe_tokenize(p, n->x, n->B, n->ld, &n->pt, e))
        return -1;
    for (int b = 0; b < n->B; b++)
        n->cut[b] |= (uint8_t)probe_cut(&n->pt, b);
    n->pad_max = n->pt.pad_max > n->pad_max ? n->pt.pad_max : n->pad_max;
    return 0;
}

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
    double gain[TXL_PROBE_MAX_TRIALS]; /* api/probe.c checks the trials */
    for (int b = 0; b < n->B; b++) {
        k += n->exact[b];
        cut += n->cut[b];
        gain[b] = n->ctrl[b] - n->bits[b];
    }
    stat_ci acc = stat_proportion(k, n->B), vb = stat_mean(n->bits, n->B);
    stat_ci cb = stat_mean(n->ctrl, n->B), g = stat_mean(gain, n->B);
    const char *mn = mode == MODE_MEMORY ? "memory" : "window";
    probe_row r;
    if (probe_row_begin(&r, e))
        return -1;
    fprintf(r.json, "{\"probe\":\"needle\",\"mode\":\"%s\",\"factor\":%d,\"length\":%d,"
            "\"depth\":%d,\"trials\":%d", mn, factor, n->L, depth, n->B);
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
 * with anchors (the text before the needle is then not the same tokens in every stream). */
static int depth_whole(probe_ctx *p, stream_eval *s, needle_set *n, int depth, txl_err *e)
{
    cell_start(n);
    for (int pass = 0; pass < 2; pass++) {
        for (int b = 0; b < n->B; b++)
            layout(n, b, depth, pass ? n->other[b] : n->value[b]);
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

/* Memory mode without anchors: the text before each depth's needle (the same bytes, so the
 * same tokens, in every stream) runs once; the memory is saved there and restored for the
 * needle's run, its control and the next depth. */
static int depths_shared(probe_ctx *p, stream_eval *s, needle_set *n, model_mem *snap,
                         const int *depths, int nd, int factor, double t0, txl_err *e)
{
    int at = 0;
    streams_reset(s);
    for (int k = 0; k < nd; k++) {
        int pd = 0;
        cell_start(n);
        for (int b = 0; b < n->B; b++)
            pd = layout(n, b, depths[k], n->value[b]);
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
            layout(n, b, depths[k], n->other[b]);
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
static int run_length(probe_ctx *p, probe_mode mode, int factor, const int *depths,
                      int nd, txl_err *e)
{
    int L = factor * (p->cfg->model.tgt_len + p->cfg->model.mem_len);
    rng_t r = {rng_key(p->a->seed, (uint64_t)factor)}; /* the same trials in both modes */
    needle_set n;
    stream_eval s;
    model_mem snap = {0};
    int rc = set_init(&n, p, L, &r, e);
    /* a window holds the whole stream: with anchors up to two tokens a byte */
    int win = (p->units.anchors ? 2 : 1) * n.ld;
    if (!rc && (rc = probe_streams(p, mode, n.B, win, &s, e)) == 0) {
        double t0 = sys_now();
        if (mode == MODE_MEMORY && !p->units.anchors) {
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
 * question (a model whose context is under 75 bytes skips the shorter ones, and says so in
 * a note); none of them: an error that says the model's context is too short, and the
 * factor that would do. Their count into *n; returns 0, the note's stop, or -1. */
static int default_lengths(probe_ctx *p, int *lengths, int *n, txl_err *e)
{
    static const int def[] = {1, 2, 4, 8};
    int ctx = p->cfg->model.tgt_len + p->cfg->model.mem_len, min = min_context();
    char skipped[64] = "";
    *n = 0;
    for (int k = 0; k < 4; k++) {
        if ((long)def[k] * ctx >= min)
            lengths[(*n)++] = def[k];
        else
            snprintf(skipped + strlen(skipped), sizeof skipped - strlen(skipped), "%s%dx",
                     k ? ", " : "", def[k]);
    }
    if (*n == 0)
        return err_set(e, ERR_INPUT, "%s: the model's context (tgt_len + mem_len = %d bytes) is "
                       "too short for the needle probe: its default lengths, 1x to 8x that "
                       "(at most %d bytes), cannot hold the needle and the question (%d bytes "
                       "at least); ask for longer ones, e.g. --lengths %d", p->a->ckpt, ctx,
                       8 * ctx, min, (min + ctx - 1) / ctx);
    if (*n < 4)
        return probe_note(p, "needle: skipping the default lengths %s: the model's context "
                          "(%d bytes) times that cannot hold the needle and the question (%d "
                          "bytes)", skipped, ctx, min);
    return 0;
}

int probe_needle(probe_ctx *p, txl_err *e)
{
    const probe_opts *a = p->a;
    static const int def_depths[] = {0, 25, 50, 75, 100};
    int lengths[PROBE_MAX_LIST], depths[PROBE_MAX_LIST], nl = a->lengths.n, nd = a->depths.n;
    int rc = 0;
    if (nl)
        memcpy(lengths, a->lengths.v, (size_t)nl * sizeof(int));
    else if ((rc = default_lengths(p, lengths, &nl, e)))
        return rc;
    memcpy(depths, nd ? a->depths.v : def_depths, (nd ? nd : 5) * sizeof(int));
    nd = probe_sort_unique(depths, nd ? nd : 5);
    snprintf(p->head, sizeof p->head, "%-7s %4s %7s %6s   %-17s   %-24s   %7s", "mode", "len",
             "bytes", "depth", "accuracy [95%]", "gain bits [95%]", "bits");
    for (int m = MODE_MEMORY; m <= MODE_WINDOW; m++) {
        if (a->mode != MODE_BOTH && a->mode != (probe_mode)m)
            continue;
        for (int k = 0; k < nl; k++)
            if ((rc = run_length(p, (probe_mode)m, lengths[k], depths, nd, e)))
                return rc;
    }
    return 0;
}

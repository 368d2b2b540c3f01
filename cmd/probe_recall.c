/* probe_recall.c: recall by distance, how far back the model can copy (doc/design.md,
 * "Probes").
 *
 * A trial is: 64 bytes of text, a random string S (string_len bytes drawn from the text's
 * own bytes, so its characters are the corpus's), D bytes of text, S again. The bits per
 * byte of S's second occurrence against its first are the gain of having seen it D bytes
 * earlier. The effective context is the largest D whose gain is still at least half the
 * gain at the smallest D. Trials run side by side as streams, in memory mode (segments of
 * tgt_len through the memory) and/or window mode (one window, no memory). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

#define LEAD 64

typedef struct {
    int D, S, ld, B;
    uint8_t *x;          /* [B][ld]: lead, S, D bytes of text, S */
    probe_tokens pt;     /* as the model's tokens */
    float *loss;         /* [B][pt.n] per target */
    double *first, *second, *gain; /* [B] bits per byte */
} recall_set;

static void set_free(recall_set *r)
{
    free(r->x), free(r->loss), free(r->first), free(r->second), free(r->gain);
    probe_tokens_free(&r->pt);
}

static int set_init(recall_set *s, const probe_ctx *p, int D, rng_t *r, txl_err *e)
{
    memset(s, 0, sizeof *s);
    s->D = D;
    s->S = (int)p->a->string_len;
    s->ld = LEAD + 2 * s->S + D;
    s->B = (int)p->a->trials;
    size_t B = (size_t)s->B, ld = (size_t)s->ld;
    s->x = malloc(B * ld);
    s->loss = malloc(2 * B * ld * sizeof *s->loss); /* anchors: up to 2 tokens a byte */
    s->first = malloc(B * sizeof(double));
    s->second = malloc(B * sizeof(double));
    s->gain = malloc(B * sizeof(double));
    uint8_t *pool = malloc(4096);
    if (!s->x || !s->loss || !s->first || !s->second || !s->gain || !pool) {
        free(pool);
        return err_set(e, ERR_RUNTIME, "out of memory");
    }
    int rc = 0;
    for (int b = 0; b < s->B && !rc; b++) {
        uint8_t *row = s->x + (size_t)b * ld, *str = row + LEAD;
        /* the lead and the D bytes of text are one draw; S from another stretch's bytes */
        rc = probe_text(p, r, row, LEAD, e) || probe_text(p, r, str + s->S, (size_t)D, e) ||
             probe_text(p, r, pool, 4096 < p->span.n ? 4096 : p->span.n, e);
        size_t np = 4096 < p->span.n ? 4096 : p->span.n;
        for (int i = 0; !rc && i < s->S; i++)
            str[i] = pool[rng_next(r) % np];
        memcpy(str + s->S + D, str, (size_t)s->S);
    }
    free(pool);
    return rc;
}

/* Bits per byte of S at its first and second occurrence (the tokens of those bytes). */
static void score(recall_set *s)
{
    int second = LEAD + s->S + s->D;
    for (int b = 0; b < s->B; b++) {
        s->first[b] = probe_bits(&s->pt, s->loss, b, LEAD, LEAD + s->S) / s->S;
        s->second[b] = probe_bits(&s->pt, s->loss, b, second, second + s->S) / s->S;
        s->gain[b] = s->first[b] - s->second[b];
    }
}

/* One distance: every trial once. Returns the mean gain (bits per byte). */
static double run_distance(const probe_ctx *p, probe_mode mode, int D, int *failed,
                           txl_err *e)
{
    rng_t r = {rng_key(p->a->seed, 0x1000u + (uint64_t)D)};
    recall_set s;
    stream_eval ev;
    *failed = 1;
    double g = NAN;
    if (!set_init(&s, p, D, &r, e) && !probe_tokenize(p, s.x, s.B, s.ld, &s.pt, e) &&
        !probe_streams(p, mode, s.B, s.pt.n - 1, &ev, e)) {
        double t0 = cli_now();
        const probe_tokens *pt = &s.pt;
        streams_feed(&ev, pt->tok, pt->tok + 1, pt->co, pt->n - 1, (size_t)pt->n, s.loss, NULL);
        score(&s);
        stat_ci gi = stat_mean(s.gain, s.B), fi = stat_mean(s.first, s.B);
        stat_ci se = stat_mean(s.second, s.B);
        double sec = cli_now() - t0;
        if (p->a->json) {
            printf("{\"probe\":\"recall\",\"mode\":\"%s\",\"distance\":%d,\"string_len\":%d,"
                   "\"trials\":%d", mode == MODE_MEMORY ? "memory" : "window", D, s.S, s.B);
            print_ci("gain_bpc", gi);
            print_ci("first_bpc", fi);
            print_ci("second_bpc", se);
            printf(",\"tgt_len\":%d,\"mem_len\":%d,\"pos_scheme\":\"%s\",\"step\":%ld,"
                   "\"tok_per_s\":%.1f,\"seed\":%llu}\n", ev.T, ev.M,
                   pos_scheme_name(p->cfg.model.pos), p->step,
                   ev.tokens / (sec > 0 ? sec : 1e-9), p->a->seed);
        } else {
            printf("%-7s %8d   %6.3f [%6.3f,%6.3f]   %6.3f   %6.3f\n",
                   mode == MODE_MEMORY ? "memory" : "window", D, gi.mean, gi.lo, gi.hi, fi.mean,
                   se.mean);
        }
        fflush(stdout);
        g = gi.mean;
        *failed = 0;
        streams_free(&ev);
    }
    set_free(&s);
    return g;
}

/* The distances: --distances, or 16, 32, ... up to 8x the trained context. */
static int distances(const probe_ctx *p, int *d)
{
    if (p->a->distances.n) {
        memcpy(d, p->a->distances.v, (size_t)p->a->distances.n * sizeof *d);
        return p->a->distances.n;
    }
    int n = 0, top = 8 * (p->cfg.model.tgt_len + p->cfg.model.mem_len);
    for (long D = 16; D <= top && n < CLI_MAX_LIST; D *= 2)
        d[n++] = (int)D;
    if (n == 0)
        d[n++] = 16;
    return n;
}

int probe_recall(probe_ctx *p, txl_err *e)
{
    int d[CLI_MAX_LIST], nd = distances(p, d);
    if (!p->a->json)
        printf("%-7s %8s   %-22s   %6s   %6s\n", "mode", "distance", "gain bpc [95%]", "first",
               "second");
    for (int m = MODE_MEMORY; m <= MODE_WINDOW; m++) {
        if (p->a->mode != MODE_BOTH && p->a->mode != m)
            continue;
        double g[CLI_MAX_LIST] = {0};
        int eff = 0;
        for (int k = 0; k < nd; k++) {
            int failed;
            g[k] = run_distance(p, (probe_mode)m, d[k], &failed, e);
            if (failed)
                return -1;
            if (g[k] >= 0.5 * g[0] && g[0] > 0 && d[k] > eff)
                eff = d[k];
        }
        const char *mn = m == MODE_MEMORY ? "memory" : "window";
        if (p->a->json)
            printf("{\"probe\":\"recall\",\"mode\":\"%s\",\"effective_context\":%d,"
                   "\"gain_at_shortest\":%.6g,\"pos_scheme\":\"%s\",\"step\":%ld}\n", mn, eff,
                   isfinite(g[0]) ? g[0] : 0.0, pos_scheme_name(p->cfg.model.pos), p->step);
        else
            printf("%s: effective context %d bytes (gain >= half of %.3f bpc)\n", mn, eff, g[0]);
    }
    return 0;
}

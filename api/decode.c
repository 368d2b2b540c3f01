/* decode.c: include/txl.h's decoder (doc/design.md, "Sampling"). A fed text runs through
 * model_forward in segments of tgt_len with one stream's memory carried; each generate then
 * draws its streams' tokens one at a time with the memory's keys and values cached
 * (model/decode.h), in groups of streams side by side, each group's decoding caches primed
 * from copies of that memory. The anchors and coordinates of the text (data/units.h) go on
 * from what was fed and, with one stream, from what was generated. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/rng.h"
#include "../common/sys.h"
#include "../data/textenc.h"
#include "../model/decode.h"
#include "../model/gemm.h"
#include "../model/kv_cache.h"
#include "../model/pos.h"
#include "../model/quant.h"
#include "../model/sampler.h"
#include "api.h"

#define STREAMS_MAX 65536
/* The longest text of one token handed to a txl_token_fn (a longer word is cut). */
#define TOKEN_TEXT_MAX 4096

/* A feed tokenizes the text a piece at a time and runs a segment whenever Lq tokens are
 * held: the segments of the whole text, whatever its length and however many tokens a piece
 * makes, from a buffer of Lq tokens. */
#define FEED_TOKENS(Lq) ((size_t)(Lq))

/* Streams decoded side by side at a time (opts.batch; <= 0 = auto). A step reads the
 * weights once for all its streams and each stream's cached keys and values once: while
 * the weights and the streams' caches fit the CPU's last-level cache together, more streams
 * share the weight reads; past it every step streams them from DRAM. On the 2-core Xeon of
 * doc/performance.md (L3 reported 260 MB, a share of it in practice), S's throughput fell
 * once the working set passed 70-80 MB: 32 streams at mem_len 1024 (270 MB) ran at 0.65x
 * the rate of 8. So auto decodes all N together when they fit a quarter of the reported L3,
 * at most BATCH_BUDGET_MAX, else as few groups as hold them with each fitting (sizes
 * differing by at most one), one after the other; with room for fewer than 2 streams (or no
 * L3 reported) grouping would give up the shared weight reads for nothing, and all N run
 * together. The cap: a VM reports its host's L3 (480 MB on the same Xeon later), of which
 * one core reads a 34 MB buffer at 26 GB/s and a 70 MB one at 12 (DRAM's); S's 32 streams
 * at mem_len 512 (71 MB with q8 weights, 80 with fp32 by this count) ran 1.5x (1.3x) faster
 * in the groups the cap makes (16, 11) than all together (doc/performance.md). */
#define BATCH_BUDGET_MAX (64.0 * 1048576.0)
static int batch_streams(const txl_decoder *d)
{
    const int N = d->N;
    if (d->o.batch > 0)
        return d->o.batch < N ? d->o.batch : N;
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 <= 0 || N <= 2)
        return N;
    double budget = 0.25 * (double)l3, weights = (double)txl_model_weight_bytes(d->m);
    if (budget > BATCH_BUDGET_MAX)
        budget = BATCH_BUDGET_MAX;
    double per = (d->cache == DECODE_CACHE_BF16 ? 2.0 /* a stream's keys, values */
                  : d->cache == DECODE_CACHE_Q8 ? 1.0 + 4.0 / d->c->d_head
                                                : 4.0) *
                 (double)kv_rows_floats(d->c, 1, d->M);
    if (weights + N * per <= budget)
        return N;
    double fit = per > 0 ? (budget - weights) / per : N;
    return fit >= 2 ? (int)fit : N;
}

/* What the decoder will allocate, from the same plans (model.h, decode.h): the feed's
 * activations, memory and tokens, the decoding caches and the memory copies of the largest
 * group. Checked against the machine before any of it is allocated. */
static int check_memory(const txl_decoder *d, txl_err *e)
{
    const model_config *c = d->c;
    double act, bytes;
    /* the caches in double first: decode_plan_floats counts in size_t */
    double kv = 4.0 * decode_cache_floats(c, d->G, d->M, (decode_cache)d->cache);
    if (kv > 0x1p60) {
        bytes = kv; /* no machine holds it */
    } else {
        if (acts_plan_floats(c, 1, d->Lq, d->M, 0, &act, e))
            return -1;
        bytes = 4.0 * act + mem_plan_bytes(c, 1, d->M) + 4.0 * d->V +
                (double)FEED_TOKENS(d->Lq) * (sizeof(txl_tok) + TXL_N_COORDS * sizeof(int32_t)) +
                4.0 * decode_plan_floats(c, d->G, d->M, (decode_cache)d->cache) +
                (d->G > 1 ? mem_plan_bytes(c, d->G, d->M) : 0) +
                /* the weights in bf16 for the matrix units (decode.h) */
                (d->G >= DECODE_BF16W_ROWS && gemm_get_precision() == GEMM_BF16
                     ? 2.0 * d->m->mdl.n_weights : 0);
    }
    char who[160];
    snprintf(who, sizeof who, "sampling with mem_len %d: %d sample%s, %d side by side,", d->M,
             d->N, d->N > 1 ? "s" : "", d->G);
    return sys_check_memory(who, bytes, gemm_as_reserve(), e);
}

/* The options within their ranges (txl.h), resolved into d. */
static int take_opts(txl_decoder *d, const txl_decode_opts *o, txl_err *e)
{
    d->o = *o;
    d->N = o->streams > 0 ? o->streams : 1;
    d->Lq = d->c->tgt_len;
    d->M = o->mem_len >= 0 ? o->mem_len : d->c->mem_len;
    d->V = d->c->vocab;
    if (d->N > STREAMS_MAX)
        return err_set(e, ERR_INPUT, "%d streams: at most %d", d->N, STREAMS_MAX);
    if ((long long)d->Lq + d->M > INT_MAX / 2)
        return err_set(e, ERR_INPUT, "tgt_len %d + mem_len %d is too long (at most %d)", d->Lq,
                       d->M, INT_MAX / 2);
    if (!(o->temperature >= 0 && isfinite(o->temperature)))
        return err_set(e, ERR_INPUT, "temperature %g: expected a number >= 0", o->temperature);
    if (o->top_k < 0)
        return err_set(e, ERR_INPUT, "top_k %d: expected 0 (all) or more", o->top_k);
    if (!(o->top_p >= 0 && o->top_p <= 1))
        return err_set(e, ERR_INPUT, "top_p %g: expected a probability in (0, 1], or 0 (all)",
                       o->top_p);
    if (d->o.top_p == 0)
        d->o.top_p = 1;
    const char *cache = o->cache && *o->cache ? o->cache : NULL;
    if (cache && strcmp(cache, "fp32") && strcmp(cache, "bf16") && strcmp(cache, "q8"))
        return err_set(e, ERR_INPUT, "cache '%s': expected fp32, bf16 or q8", cache);
    if (cache)
        d->cache = strcmp(cache, "q8") == 0     ? DECODE_CACHE_Q8
                   : strcmp(cache, "bf16") == 0 ? DECODE_CACHE_BF16
                                                : DECODE_CACHE_FP32;
    else
        d->cache = quant_model_type(&d->m->mdl) != QT_F32 ? DECODE_CACHE_BF16 : DECODE_CACHE_FP32;
    d->o.cache = NULL; /* not kept: the caller's string */
    d->G = batch_streams(d);
    d->n_groups = (d->N + d->G - 1) / d->G; /* sizes differing by at most one: a small last
                                             * group would share its weight reads among few */
    d->batch = d->N / d->n_groups + (d->N % d->n_groups > 0);
    return 0;
}

txl_decoder *txl_decoder_new(txl_model *m, const txl_decode_opts *o, txl_err *e)
{
    api_err_clear(e);
    txl_decoder *d = calloc(1, sizeof *d);
    if (!d) {
        err_set(e, ERR_RUNTIME, "out of memory");
        return NULL;
    }
    d->m = m;
    d->c = &m->mdl.cfg;
    model_bf16_sync(&m->mdl, 0); /* bf16: the weights' copy the products read */
    if (take_opts(d, o, e) || check_memory(d, e) ||
        acts_init(&d->A, d->c, 1, d->Lq, d->M, 0, e) || mem_init(&d->mem, d->c, 1, d->M, e)) {
        txl_decoder_free(d);
        return NULL;
    }
    d->logits = malloc((size_t)d->V * sizeof *d->logits);
    d->tok = malloc(FEED_TOKENS(d->Lq) * sizeof *d->tok);
    d->co = malloc(FEED_TOKENS(d->Lq) * TXL_N_COORDS * sizeof *d->co);
    if (!d->logits || !d->tok || !d->co) {
        err_set(e, ERR_RUNTIME, "out of memory for the decoder");
        txl_decoder_free(d);
        return NULL;
    }
    units_config u = cfg_units(&m->cfg.c);
    if (textenc_init(&d->te, m->vocab, &u, e)) { /* the first text fed starts a document */
        txl_decoder_free(d);
        return NULL;
    }
    d->coords = pos_get(d->c->pos)->needs_coords;
    return d;
}

void txl_decoder_free(txl_decoder *d)
{
    if (!d)
        return;
    free(d->logits);
    free(d->tok);
    free(d->co);
    textenc_free(&d->te);
    mem_free(&d->mem);
    acts_free(&d->A);
    free(d);
}

/* A feed's progress line on stderr, from half a second on, redrawn every quarter second
 * while segments remain. */
typedef struct {
    int on;
    size_t n;                /* the text's tokens */
    double start, drawn;
} feed_progress;

static void progress_draw(feed_progress *p, size_t done)
{
    double now = sys_now(), el = now - p->start;
    if (p->on && el > 0.5 && now - p->drawn > 0.25 && done < p->n) {
        char etas[32];
        sys_fmt_duration(etas, sizeof etas, el / done * (p->n - done));
        fprintf(stderr, "\r\033[Kprompt: %zu/%zu tokens (%.0f%%)  %.0f tokens/s  ETA %s",
                done, p->n, 100.0 * done / p->n, done / el, etas);
        p->drawn = now;
    }
}

/* A feed's tokens, run a segment at a time as they come. */
typedef struct {
    txl_decoder *d;
    feed_progress *p;
    size_t held, done;       /* tokens in d->tok; tokens run */
    int last_len;            /* of the last segment run */
} feed_sink;

static void run_held(feed_sink *k)
{
    txl_decoder *d = k->d;
    fwd_opts fo = {.training = 0, .coords = d->coords ? d->co : NULL};
    model_forward(&d->m->mdl, &d->A, &d->mem, d->tok, NULL, (int)k->held, &fo);
    k->last_len = (int)k->held;
    k->done += k->held;
    k->held = 0;
    progress_draw(k->p, k->done);
}

static int feed_token(void *ctx, const textenc_tok *t)
{
    feed_sink *k = ctx;
    txl_decoder *d = k->d;
    d->tok[k->held] = t->tok;
    memcpy(d->co + k->held * TXL_N_COORDS, t->co, sizeof t->co);
    if (++k->held == (size_t)d->Lq)
        run_held(k);
    return 0;
}

/* A feed's token count for the progress line: the same text through a copy. */
static int count_token(void *ctx, const textenc_tok *t)
{
    (void)t;
    ++*(size_t *)ctx;
    return 0;
}

static size_t count_tokens(const txl_decoder *d, const uint8_t *t, size_t len)
{
    textenc c;
    size_t n = 0;
    txl_err ignored;
    if (textenc_init(&c, d->m->vocab, &d->te.pos.u, &ignored))
        return 0;
    c.pos = d->te.pos;
    if (textenc_feed(&c, t, len, count_token, &n, &ignored) == 0)
        textenc_flush(&c, count_token, &n, &ignored);
    textenc_free(&c);
    return n;
}

int txl_decoder_feed(txl_decoder *d, const char *text, size_t len, txl_err *e)
{
    api_err_clear(e);
    const uint8_t *t = (const uint8_t *)text;
    feed_progress p = {.on = d->o.progress, .start = sys_now()};
    if (p.on)
        p.n = count_tokens(d, t, len);
    feed_sink k = {.d = d, .p = &p};
    int rc = 0;
    for (size_t at = 0; rc == 0 && at < len;) { /* pieces of tgt_len bytes */
        size_t chunk = len - at < (size_t)d->Lq ? len - at : (size_t)d->Lq;
        rc = textenc_feed(&d->te, t + at, chunk, feed_token, &k, e);
        at += chunk;
    }
    if (rc == 0) /* the prompt ends here: what the tokenizer held back goes in now */
        rc = textenc_flush(&d->te, feed_token, &k, e);
    if (rc)
        return -1;
    if (k.held)
        run_held(&k);
    if (p.drawn > 0)
        fputs("\r\033[K", stderr);
    if (k.last_len > 0) {
        model_row_logprobs(&d->m->mdl, &d->A, (size_t)(k.last_len - 1), 1, d->logits);
        d->has_logits = 1;
    }
    d->consumed += (long)k.done;
    return 0;
}

/* The memory of stream 0, copied into every stream of a batch memory. */
static void replicate_mem(const model_mem *one, model_mem *many)
{
    size_t rows = (size_t)one->M * one->d;
    for (int l = 0; l < one->n_layer; l++)
        for (int b = 0; b < many->B; b++)
            memcpy(mem_layer(many, l) + (size_t)b * rows, mem_layer(one, l),
                   rows * sizeof(float));
    if (one->coords)
        for (int b = 0; b < many->B; b++)
            memcpy(many->coords + (size_t)b * one->M * TXL_N_COORDS, one->coords,
                   (size_t)one->M * TXL_N_COORDS * sizeof(int32_t));
    many->m = one->m;
}

/* The decoding caches of n streams, primed from the text's memory. */
static int group_init(txl_decoder *d, int n, decode_state *ds, txl_err *e)
{
    model_mem many = {0};
    if ((n > 1 && mem_init(&many, d->c, n, d->M, e)) ||
        decode_init(ds, &d->m->mdl, n, d->M, (decode_cache)d->cache, e)) {
        mem_free(&many);
        return -1;
    }
    if (n > 1)
        replicate_mem(&d->mem, &many);
    decode_prime(ds, &d->m->mdl, n > 1 ? &many : &d->mem, d->consumed);
    mem_free(&many);
    return 0;
}

/* What one group's draws need besides its caches. */
typedef struct {
    txl_tok *next;           /* [n] the step's tokens */
    int32_t *co;             /* [n][TXL_N_COORDS] their coordinates */
    double *scratch;         /* [3 V] the sampler's */
    int *idx;                /* [V] */
    rng_t *rng;              /* [n] stream b0 + j's random numbers */
    text_pos *pos;           /* [n] where its text is (units, the last token) */
    uint8_t *text;           /* [TOKEN_TEXT_MAX] a token's text */
    unsigned char *done;     /* [n] fn said done */
} group_bufs;

static int bufs_init(group_bufs *g, const txl_decoder *d, int b0, int n, txl_err *e)
{
    g->next = malloc((size_t)n * sizeof *g->next);
    g->co = malloc((size_t)n * TXL_N_COORDS * sizeof *g->co);
    g->scratch = malloc(3 * (size_t)d->V * sizeof *g->scratch);
    g->idx = malloc((size_t)d->V * sizeof *g->idx);
    g->rng = malloc((size_t)n * sizeof *g->rng);
    g->pos = malloc((size_t)n * sizeof *g->pos);
    g->text = malloc(TOKEN_TEXT_MAX);
    g->done = calloc((size_t)n, 1);
    if (!g->next || !g->co || !g->scratch || !g->idx || !g->rng || !g->pos || !g->text ||
        !g->done)
        return err_set(e, ERR_RUNTIME, "out of memory for the sampler of %d streams", n);
    for (int j = 0; j < n; j++) { /* stream b's numbers from the seed and b alone */
        g->rng[j].s = rng_key(d->o.seed, 0x5a3 + (uint64_t)(b0 + j) * 0x10001);
        g->pos[j] = d->te.pos;
    }
    return 0;
}

static void bufs_free(group_bufs *g)
{
    free(g->next), free(g->co), free(g->scratch), free(g->idx);
    free(g->rng), free(g->pos), free(g->text), free(g->done);
}

/* Streams b0 .. b0 + n - 1, decoded side by side from the fed text's logits and memory
 * until each is done or has `budget` tokens. Returns the tokens drawn (*stop set when fn
 * asked to stop), or -1 with e. With all the streams in this group of one, the memory and
 * the units go on from its text. */
static long generate_group(txl_decoder *d, int b0, int n, long budget, txl_token_fn fn,
                           void *ctx, int *stop, txl_err *e)
{
    const int V = d->V, one = d->N == 1;
    sampler_opts so = {.temperature = d->o.temperature, .top_k = d->o.top_k,
                       .top_p = d->o.top_p};
    decode_state ds;
    group_bufs g = {0};
    if (group_init(d, n, &ds, e))
        return -1;
    long generated = 0, steps = 0, full_from = -1;
    double t_full = 0, c_full = 0;
    if (bufs_init(&g, d, b0, n, e)) {
        generated = -1;
        budget = 0;
    }
    for (long i = 0; i < budget; i++) {
        int live = 0;
        if (full_from < 0 && ds.m == ds.M) { /* the tokens from here attend to a full memory */
            full_from = generated;
            t_full = sys_now();
            c_full = sys_cpu_now();
        }
        for (int j = 0; j < n; j++) {
            const float *lg = i == 0 ? d->logits : decode_logits(&ds) + (size_t)j * V;
            g.next[j] = (txl_tok)sampler_pick(lg, V, &so, rng_uniform(&g.rng[j]), g.scratch,
                                              g.idx);
            size_t tl = 0;
            if (fn && !g.done[j]) /* its text, after the stream's text so far */
                tl = text_pos_decoded(&g.pos[j], g.next[j], g.text, TOKEN_TEXT_MAX);
            /* coordinates and anchors go on */
            text_pos_push(&g.pos[j], g.next[j], g.co + (size_t)j * TXL_N_COORDS);
            int r = g.done[j] ? 1 : fn ? fn(ctx, b0 + j, g.next[j], (const char *)g.text,
                                            tl < TOKEN_TEXT_MAX ? tl : TOKEN_TEXT_MAX) : 0;
            if (r < 0) {
                *stop = 1;
                live = 0;
                break;
            }
            g.done[j] = r > 0;
            live |= r == 0;
            generated++;
        }
        /* one stream: its last token goes into the memory too, for what follows */
        if ((live && i + 1 < budget) || one) {
            decode_step(&ds, &d->m->mdl, g.next, g.co);
            steps++;
        }
        if (!live)
            break;
    }
    if (full_from >= 0) {
        d->full_tokens += generated - full_from;
        d->full_s += sys_now() - t_full;
        d->full_cpu_s += sys_cpu_now() - c_full;
    }
    if (one && steps > 0) { /* the memory goes on from the text */
        decode_sync_mem(&ds, &d->mem);
        memcpy(d->logits, decode_logits(&ds), (size_t)V * sizeof *d->logits);
        d->consumed += steps;
        d->te.pos = g.pos[0];
    }
    bufs_free(&g);
    decode_free(&ds);
    return generated;
}

long txl_decoder_generate(txl_decoder *d, long max_tokens, txl_token_fn fn, void *ctx,
                          txl_err *e)
{
    api_err_clear(e);
    if (!d->has_logits)
        return err_set(e, ERR_INPUT, "nothing to continue: feed a text (a prompt) before "
                       "generating");
    long total = 0;
    int stop = 0;
    for (int k = 0, b0 = 0; k < d->n_groups && !stop; k++) {
        int n = d->N / d->n_groups + (k < d->N % d->n_groups);
        long t = generate_group(d, b0, n, max_tokens > 0 ? max_tokens : 0, fn, ctx, &stop, e);
        if (t < 0)
            return -1;
        total += t;
        b0 += n;
    }
    return total;
}

const char *txl_token_name(const txl_model *m, int token)
{
    if (token < 0 || token >= m->mdl.cfg.vocab)
        return NULL;
    units_config u = cfg_units(&m->cfg.c);
    unsigned kind = units_token_anchor(&u, (txl_tok)token);
    return kind == ANCHOR_BOS ? "bos" : kind == ANCHOR_PARA ? "para"
                                    : kind == ANCHOR_SENT   ? "sent"
                                                            : NULL;
}

void txl_decoder_plan(const txl_decoder *d, int *mem_len, int *batch)
{
    *mem_len = d->M;
    *batch = d->batch;
}

const char *txl_decoder_cache(const txl_decoder *d)
{
    return d->cache == DECODE_CACHE_BF16 ? "bf16" : d->cache == DECODE_CACHE_Q8 ? "q8" : "fp32";
}

void txl_decoder_stats(const txl_decoder *d, long *tokens, double *seconds, double *cpu)
{
    *tokens = d->full_tokens;
    *seconds = d->full_s;
    *cpu = d->full_cpu_s;
}

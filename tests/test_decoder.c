/* test_decoder.c: the decoder of include/txl.h (api/decode.c) on small models drawn from a
 * seed. A feed runs its text a segment at a time (tokenized tgt_len bytes at a time) and
 * must give the logits and the memory of the whole text's tokens run in segments of
 * tgt_len, bit for bit, anchors and coordinates included; generate's callback contract
 * (done streams get no more calls, -1 stops all, the count returned); a stream's text
 * whatever the streams and groups beside it; one stream's memory going on from its text
 * (against feeding that text, up to the rounding of decoding vs model_forward); the
 * token names; the checks of txl_decoder_new (options, memory) and of generate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../api/api.h"
#include "../model/pos.h"
#include "testlib.h"

static txl_model *micro(const char *pos, const char *anchors)
{
    const char *set[] = {"model.n_layer=2", "model.d_model=32", "model.n_head=2",
                         "model.d_head=16", "model.d_inner=64", "model.tgt_len=8",
                         "model.mem_len=8", "data.train=tests/data/tinyshakespeare.txt.gz"};
    char a[64], p[64];
    snprintf(a, sizeof a, "data.anchors=%s", anchors);
    snprintf(p, sizeof p, "model.pos_scheme=%s", pos);
    txl_err e = {0};
    txl_config *c = txl_config_new();
    int rc = !c || txl_config_set(c, a, &e) || txl_config_set(c, p, &e);
    for (size_t i = 0; !rc && i < sizeof set / sizeof *set; i++)
        rc = txl_config_set(c, set[i], &e);
    txl_model *m = rc ? NULL : txl_model_new(c, &e);
    txl_config_free(c);
    CHECK(m, "a micro model (%s, anchors %s)%s%s", pos, anchors, m ? "" : ": ", e.msg);
    return m;
}

/* A text with words, sentences and paragraphs (every anchor kind), len bytes. */
static char *some_text(size_t len)
{
    static const char unit[] = "The king said. Then we go!\n\nA why? ROMEO: x, y. ";
    char *t = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
        t[i] = unit[i % (sizeof unit - 1)];
    t[len] = '\0';
    return t;
}

/* feed == the whole text's tokens in segments of tgt_len: logits and memory, bit for bit */
static void check_feed(txl_model *m, const char *label, size_t len, size_t min_tokens)
{
    txl_err e = {0};
    txl_decode_opts o = {.mem_len = -1, .temperature = 1};
    txl_decoder *d = txl_decoder_new(m, &o, &e);
    char *text = some_text(len);
    if (!d || txl_decoder_feed(d, text, len, &e)) {
        CHECK(0, "%s: feed: %s", label, e.msg);
        free(text);
        txl_decoder_free(d);
        return;
    }
    const model_config *c = &m->mdl.cfg;
    units_config u = cfg_units(&m->cfg.c);
    units_state us;
    units_init(&us, &u);
    txl_tok *tok = malloc((2 * len + 1) * sizeof *tok);
    int32_t *co = malloc((2 * len + 1) * TXL_N_COORDS * sizeof *co);
    size_t n = units_tokenize(&us, (const uint8_t *)text, len, tok, co);
    model_acts A;
    model_mem mem;
    if (acts_init(&A, c, 1, c->tgt_len, c->mem_len, 0, &e) ||
        mem_init(&mem, c, 1, c->mem_len, &e)) {
        CHECK(0, "%s: reference: %s", label, e.msg);
        return;
    }
    int coords = pos_get(c->pos)->needs_coords, last = 0;
    fwd_opts fo = {.training = 0};
    for (size_t at = 0; at < n; at += (size_t)last) {
        last = n - at < (size_t)c->tgt_len ? (int)(n - at) : c->tgt_len;
        fo.coords = coords ? co + at * TXL_N_COORDS : NULL;
        model_forward(&m->mdl, &A, &mem, tok + at, NULL, last, &fo);
    }
    const float *lg = A.logits + (size_t)(last - 1) * c->vocab;
    size_t rows = (size_t)c->mem_len * c->d_model;
    int same_mem = mem.m == d->mem.m;
    for (int l = 0; l < c->n_layer; l++)
        same_mem &= !memcmp(mem_layer(&mem, l), mem_layer(&d->mem, l), rows * sizeof(float));
    if (mem.coords)
        same_mem &= !memcmp(mem.coords, d->mem.coords,
                            (size_t)c->mem_len * TXL_N_COORDS * sizeof(int32_t));
    CHECK(n >= min_tokens, "%s: %zu bytes are %zu tokens (at least %zu)", label, len, n,
          min_tokens);
    CHECK(!memcmp(lg, d->logits, (size_t)c->vocab * sizeof(float)) && same_mem &&
              d->consumed == (long)n && !memcmp(&us, &d->te.pos.us, sizeof us),
          "%s: the logits, memory, position and units of the whole text in segments, bit for bit",
          label);
    mem_free(&mem);
    acts_free(&A);
    free(tok);
    free(co);
    free(text);
    txl_decoder_free(d);
}

/* What a generate passed to its callback. */
typedef struct {
    int N;
    long calls[8];
    int tok[8][64];
    int done_stream, done_at;   /* stream done_stream says 1 at its done_at-th call */
    int stop_stream, stop_at;   /* -1 at that call */
    long after_stop;            /* calls after the -1 */
    int stopped;
} rec;

static int record(void *ctx, int stream, int token, const char *text, size_t len)
{
    (void)text, (void)len;
    rec *r = ctx;
    if (r->stopped) {
        r->after_stop++;
        return -1;
    }
    long i = r->calls[stream]++;
    if (i < 64)
        r->tok[stream][i] = token;
    if (stream == r->stop_stream && i + 1 == r->stop_at) {
        r->stopped = 1;
        return -1;
    }
    return stream == r->done_stream && i + 1 >= r->done_at;
}

/* streams N in groups of `batch`: what each stream drew (max_tokens each) */
static long draw(txl_model *m, int N, int batch, long max_tokens, rec *r, int *plan_batch)
{
    txl_err e = {0};
    txl_decode_opts o = {.streams = N, .batch = batch, .mem_len = -1, .temperature = 1,
                         .top_k = 40, .seed = 99};
    txl_decoder *d = txl_decoder_new(m, &o, &e);
    long g = -1;
    if (d && txl_decoder_feed(d, "ROMEO: Is the day", 17, &e) == 0)
        g = txl_decoder_generate(d, max_tokens, record, r, &e);
    if (d && plan_batch) {
        int mem_len;
        txl_decoder_plan(d, &mem_len, plan_batch);
    }
    if (g < 0)
        CHECK(0, "draw %d streams: %s", N, e.msg);
    txl_decoder_free(d);
    return g;
}

static void check_callbacks(txl_model *m)
{
    rec a = {.N = 3, .done_stream = 1, .done_at = 3, .stop_stream = -1};
    long g = draw(m, 3, 0, 10, &a, NULL);
    CHECK(g == 30 && a.calls[0] == 10 && a.calls[1] == 3 && a.calls[2] == 10,
          "3 streams, stream 1 done at its 3rd token: 10, 3 and 10 calls (%ld %ld %ld), 30 "
          "tokens drawn (%ld: a done stream goes on drawing beside the others)",
          a.calls[0], a.calls[1], a.calls[2], g);
    rec b = {.N = 3, .done_stream = -1, .stop_stream = 0, .stop_at = 5};
    g = draw(m, 3, 0, 10, &b, NULL);
    CHECK(g == 12 && b.after_stop == 0 && b.calls[1] == 4 && b.calls[2] == 4,
          "-1 at stream 0's 5th token: no call after it, 12 tokens drawn (%ld)", g);
    rec c = {.N = 3, .done_stream = -1, .stop_stream = -1};
    CHECK(draw(m, 3, 0, 10, &c, NULL) == 30 &&
              !memcmp(a.tok[0], c.tok[0], 10 * sizeof(int)) &&
              !memcmp(a.tok[2], c.tok[2], 10 * sizeof(int)),
          "  ... the other streams draw the same tokens whether stream 1 stopped or not");
    txl_err e = {0};
    txl_decode_opts o = {.streams = 4, .mem_len = -1, .temperature = 1};
    txl_decoder *d = txl_decoder_new(m, &o, &e);
    CHECK(d && txl_decoder_feed(d, "x", 1, &e) == 0 &&
              txl_decoder_generate(d, 7, NULL, NULL, &e) == 28,
          "fn NULL: every stream draws max_tokens (28 of 4 x 7)");
    txl_decoder_free(d);
}

/* stream b draws from (seed, b) whatever the streams beside it and the groups */
static void check_streams(txl_model *m)
{
    rec one = {.done_stream = -1, .stop_stream = -1}, five = one, grouped = one;
    int b5, b2, b3;
    draw(m, 1, 0, 40, &one, NULL);
    draw(m, 5, 0, 40, &five, &b5);
    draw(m, 5, 2, 40, &grouped, &b2);
    int same = !memcmp(one.tok[0], five.tok[0], 40 * sizeof(int));
    for (int b = 0; b < 5; b++)
        same &= !memcmp(five.tok[b], grouped.tok[b], 40 * sizeof(int));
    int differ = memcmp(five.tok[0], five.tok[1], 40 * sizeof(int)) != 0;
    CHECK(same && differ, "5 streams: stream 0 is the single stream's text, each stream the "
          "same in groups of 2, and streams differ");
    rec r3 = {.done_stream = -1, .stop_stream = -1};
    draw(m, 5, 3, 1, &r3, &b3);
    CHECK(b5 == 5 && b2 == 2 && b3 == 3, "txl_decoder_plan: batch 5 (all), 2 (2+2+1), 3 "
          "(3+2): %d %d %d", b5, b2, b3);
}

/* one stream: the memory goes on from the generated text, as if it had been fed a token
 * at a time (each token then attends to the mem_len rows before it, as in decoding) */
static void check_continue(txl_model *m)
{
    txl_err e = {0};
    txl_decode_opts o = {.mem_len = -1, .temperature = 0.8, .seed = 4};
    txl_decoder *d = txl_decoder_new(m, &o, &e), *f = txl_decoder_new(m, &o, &e);
    rec r = {.done_stream = -1, .stop_stream = -1};
    long g = -1;
    if (d && f && txl_decoder_feed(d, "To be, or not", 13, &e) == 0)
        g = txl_decoder_generate(d, 30, record, &r, &e);
    char text[64];
    int bytes = 1;
    for (int i = 0; i < 30; i++) {
        text[i] = (char)r.tok[0][i];
        bytes &= r.tok[0][i] < TXL_BYTES;
    }
    long full;
    double s, cpu;
    txl_decoder_stats(d, &full, &s, &cpu);
    CHECK(g == 30 && full == 30 && s >= 0 && cpu >= 0,
          "30 tokens drawn with the memory full (mem_len 8 < the prompt): stats %ld", full);
    int rc = g != 30 || !bytes || txl_decoder_feed(f, "To be, or not", 13, &e);
    for (int i = 0; !rc && i < 30; i++)
        rc = txl_decoder_feed(f, text + i, 1, &e);
    if (rc) {
        CHECK(0, "continuing: %s", bytes ? e.msg : "an anchor drawn (the model has none)");
        txl_decoder_free(d);
        txl_decoder_free(f);
        return;
    }
    const model_config *c = &m->mdl.cfg;
    double err = 0, mx = 0;
    for (int v = 0; v < c->vocab; v++) {
        err = fmax(err, fabs(d->logits[v] - f->logits[v]));
        mx = fmax(mx, fabs(f->logits[v]));
    }
    for (int l = 0; l < c->n_layer; l++)
        for (size_t k = 0; k < (size_t)c->mem_len * c->d_model; k++)
            err = fmax(err, fabs(mem_layer(&d->mem, l)[k] - mem_layer(&f->mem, l)[k]));
    CHECK(d->consumed == f->consumed && err <= 1e-4 * fmax(mx, 1),
          "one stream: logits and memory after 30 generated tokens are those of feeding them "
          "(max diff %.2g, positions %ld %ld)", err, d->consumed, f->consumed);
    txl_decoder_free(d);
    txl_decoder_free(f);
}

static void check_refusals(txl_model *m)
{
    txl_err e = {0};
    struct {
        txl_decode_opts o;
        const char *needle;
    } bad[] = {{{.temperature = -1}, "temperature -1"},
               {{.temperature = NAN}, "temperature nan"},
               {{.top_p = 1.5}, "top_p 1.5"},
               {{.top_k = -2}, "top_k -2"},
               {{.streams = 70000}, "70000 streams: at most 65536"},
               {{.mem_len = 1 << 30}, "mem_len 1073741824 is too long"},
               {{.mem_len = (1 << 30) - 64, .streams = 3},
                "sampling with mem_len 1073741760: 3 samples, 3 side by side, needs about"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        txl_decoder *d = txl_decoder_new(m, &bad[i].o, &e);
        CHECK(!d && e.kind == TXL_ERR_INPUT && strstr(e.msg, bad[i].needle),
              "refused: %s (%s)", bad[i].needle, e.msg);
        txl_decoder_free(d);
    }
    txl_decode_opts o = {0};
    txl_decoder *d = txl_decoder_new(m, &o, &e);
    CHECK(d && txl_decoder_generate(d, 5, NULL, NULL, &e) == -1 &&
              e.kind == TXL_ERR_INPUT && strstr(e.msg, "feed a text"),
          "generate before any feed: TXL_ERR_INPUT (%s)", e.msg);
    txl_decoder_free(d);
}

static void check_names(txl_model *all, txl_model *none)
{
    txl_model *sent = micro("xl", "[sent]");
    const char *b = txl_token_name(all, 256), *p = txl_token_name(all, 257),
               *s = txl_token_name(all, 258);
    CHECK(b && p && s && !strcmp(b, "bos") && !strcmp(p, "para") && !strcmp(s, "sent") &&
              !txl_token_name(all, 259) && !txl_token_name(all, 'a') &&
              !txl_token_name(all, -1) && !txl_token_name(none, 256),
          "token names: 256-258 bos, para, sent; bytes, 259 and -1 none; no anchors, none");
    CHECK(sent && txl_token_name(sent, 256) && !strcmp(txl_token_name(sent, 256), "sent"),
          "  ... anchors [sent]: 256 is sent");
    txl_model_free(sent);
}

int main(void)
{
    txl_set_threads(1);
    txl_model *xl = micro("xl", "[]"), *hier = micro("hier", "[bos, para, sent]");
    if (!xl || !hier)
        return tl_done("test_decoder");
    check_feed(xl, "xl, 25 whole segments", 200, 200);
    check_feed(xl, "xl, 25 segments and 3 tokens", 203, 203);
    check_feed(hier, "hier with every anchor", 157, 170);
    check_feed(hier, "hier, a text under a segment", 3, 4);
    check_callbacks(hier);
    check_streams(hier);
    check_continue(xl);
    check_refusals(xl);
    check_names(hier, xl);
    txl_model_free(xl);
    txl_model_free(hier);
    return tl_done("test_decoder");
}

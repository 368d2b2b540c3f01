/* fuzz_corpus.c: corpus loading (plain or gzip'd) and the stream batching of doc/design.md, "The
 * model", as `txl train` and `txl eval --data` use them.
 *
 * Input: 4 bytes of parameters (batch B = 1 + p0 % 8, tgt_len = 1 + p1 % 64, training or
 * eval minimum stream length by p2 & 1, anchor kinds by p2 >> 1, split fractions from
 * p3), then the file's bytes.
 * TXL_MAX_CORPUS_MB is 1 (unless set): what is held in memory stays within it.
 * Invariants: errors name the file; the split spans cover the corpus in order; one pass of
 * the batcher yields segments of at most tgt_len whose inputs and targets are the streams'
 * tokens shifted by one, B*(n-1) targets in batcher_segments() segments when training, and
 * every token after the first (streams and tail) when evaluating. */
#include <string.h>

#include "../../data/corpus.h"
#include "../../data/tokens.h"
#include "fuzz.h"

static void check_err(const txl_err *e, const char *path)
{
    FUZZ_CHECK(e->kind == ERR_INPUT || e->kind == ERR_RUNTIME, "kind %d", e->kind);
    FUZZ_CHECK(strnlen(e->msg, sizeof e->msg) < sizeof e->msg && e->msg[0], "empty message");
    if (e->kind == ERR_INPUT)
        FUZZ_CHECK(strstr(e->msg, path) != NULL, "message does not name the file: %s", e->msg);
}

/* One pass of the batcher over the tokens of s (anchors as given; whole: evaluation). */
static void one_pass(token_span s, int B, int Lq, size_t min_len, unsigned anchors, int whole,
                     const char *path)
{
    batcher bt;
    tok_stream ts;
    txl_err e = {0};
    units_config u = {.anchors = anchors};
    if (tok_stream_open(&ts, s, NULL, &u, anchors != 0, &e)) {
        check_err(&e, path);
        return;
    }
    FUZZ_CHECK(anchors || ts.n == s.n, "tokens %zu of %zu bytes without anchors", ts.n, s.n);
    FUZZ_CHECK(ts.n >= s.n, "fewer tokens (%zu) than bytes (%zu)", ts.n, s.n);
    if (batcher_init(&bt, &ts, B, Lq, whole, min_len, "train", &e)) {
        check_err(&e, path);
        size_t have = whole ? (ts.n ? (ts.n - 1) / (size_t)B + 1 : 0) : ts.n / (size_t)B;
        FUZZ_CHECK(have < (min_len < 2 ? 2 : min_len), "refused long enough tokens");
        tok_stream_free(&ts);
        return;
    }
    txl_tok *x = malloc((size_t)B * Lq * sizeof *x), *y = malloc((size_t)B * Lq * sizeof *y);
    txl_tok *src = malloc((Lq + 1) * sizeof *src);
    int32_t *co = anchors ? malloc((size_t)B * Lq * TXL_N_COORDS * sizeof *co) : NULL;
    FUZZ_CHECK(x && y && src && (!anchors || co), "malloc");
    size_t pos = 0, segs = 0, scored = 0;
    int len;
    while ((len = batcher_next(&bt, x, y, co, NULL, &e)) > 0) {
        FUZZ_CHECK(len <= Lq, "segment of %d > tgt_len %d", len, Lq);
        for (int b = 0; b < B; b++) {
            FUZZ_CHECK(tok_stream_read(&ts, (size_t)b * bt.n + pos, src, NULL, (size_t)len + 1,
                                       &e) == 0, "stream %d: %s", b, e.msg);
            FUZZ_CHECK(memcmp(x + (size_t)b * len, src, (size_t)len * sizeof *x) == 0,
                       "x of stream %d", b);
            FUZZ_CHECK(memcmp(y + (size_t)b * len, src + 1, (size_t)len * sizeof *y) == 0,
                       "y of stream %d", b);
        }
        pos += (size_t)len;
        segs++;
        scored += (size_t)B * len;
        FUZZ_CHECK(segs <= bt.n, "runaway batcher");
    }
    size_t first, tail;
    batcher_tail(&bt, &first, &tail);
    FUZZ_CHECK(pos == (whole ? bt.n : bt.n - 1), "pass covered %zu", pos);
    FUZZ_CHECK(!whole || scored + tail == ts.n - 1, "whole: %zu + tail %zu of %zu tokens",
               scored, tail, ts.n);
    FUZZ_CHECK(segs == batcher_segments(&bt), "%zu segments, batcher_segments %zu", segs,
               batcher_segments(&bt));
    FUZZ_CHECK(scored + tail == batcher_tokens(&bt), "scored %zu, batcher_tokens %zu", scored,
               batcher_tokens(&bt));
    FUZZ_CHECK(len == 0, "batcher_next failed: %s", e.msg);
    FUZZ_CHECK(batcher_next(&bt, x, y, co, NULL, &e) == 0, "pass did not stay over");
    free(x), free(y), free(src), free(co);
    tok_stream_free(&ts);
}

int txl_fuzz_corpus(const uint8_t *data, size_t size)
{
    /* a small memory limit: bombs and large streams reach the refusal quickly */
    setenv("TXL_MAX_CORPUS_MB", "1", 0);
    if (size < 4)
        return 0;
    int B = 1 + data[0] % 8, Lq = 1 + data[1] % 64;
    size_t min_len = (data[2] & 1) ? (size_t)Lq + 1 : 2;
    double f0 = (1 + data[3] % 10) / 10.0, f1 = (data[3] / 10 % 5) / 10.0;
    double frac[3] = {f0, f1, f0 + f1 <= 1 ? 1 - f0 - f1 : 0};
    const char *path = fuzz_file("corpus", ".txt", data + 4, size - 4);
    if (!path)
        return 0;
    corpus c;
    txl_err e = {0};
    if (corpus_open(&c, path, &e)) {
        check_err(&e, path);
        FUZZ_CHECK(c.kind == CORPUS_NONE && c.owned == NULL, "failed open left state");
        return 0;
    }
    FUZZ_CHECK(c.len > 0 && c.kind != CORPUS_NONE, "empty corpus opened");
    size_t limit;
    FUZZ_CHECK(corpus_mem_limit(path, &limit, &e) == 0 &&
               (c.kind != CORPUS_MEMORY || c.len <= limit), "%zu bytes in memory, limit %zu",
               c.len, limit);
    int gz = size - 4 >= 2 && data[4] == 0x1f && data[5] == 0x8b;
    FUZZ_CHECK(c.gzipped == gz && (c.kind == CORPUS_MEMORY) == gz, "gzip detection");
    if (!gz) {
        uint8_t *all = malloc(c.len);
        FUZZ_CHECK(all && corpus_read(&c, 0, all, c.len, &e) == 0, "read back: %s", e.msg);
        FUZZ_CHECK(c.len == size - 4 && memcmp(all, data + 4, c.len) == 0, "plain bytes");
        free(all);
    }
    token_span sp[3];
    corpus_split(&c, frac, sp);
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        FUZZ_CHECK(sp[i].c == &c && sp[i].begin == at, "split %d start", i);
        at += sp[i].n;
    }
    FUZZ_CHECK(at <= c.len, "splits past the end");
    unsigned anchors = (data[2] >> 1) & ANCHOR_ALL;
    one_pass(corpus_all(&c), B, Lq, min_len, anchors, 0, path);
    one_pass(sp[0], B, Lq, min_len, 0, 0, path);
    one_pass(sp[1], B, Lq, 2, anchors, 1, path);
    corpus_close(&c);
    return 0;
}

FUZZ_ENTRY(txl_fuzz_corpus)

/* fuzz_corpus.c: corpus loading (plain or gzip'd) and the stream batching of DESIGN.md §3,
 * as `txl train` and `txl eval --data` use them.
 *
 * Input: 4 bytes of parameters (batch B = 1 + p0 % 8, tgt_len = 1 + p1 % 64, training or
 * eval minimum stream length by p2 & 1, split fractions from p3), then the file's bytes.
 * TXL_MAX_CORPUS_MB is 1 (unless set): what is held in memory stays within it.
 * Invariants: errors name the file; the split spans cover the corpus in order; one pass of
 * the batcher yields segments of at most tgt_len whose inputs and targets are the streams'
 * bytes shifted by one, B*(n-1) targets in batcher_segments() segments. */
#include <string.h>

#include "../../data/corpus.h"
#include "fuzz.h"

static void check_err(const txl_err *e, const char *path)
{
    FUZZ_CHECK(e->kind == ERR_INPUT || e->kind == ERR_RUNTIME, "kind %d", e->kind);
    FUZZ_CHECK(strnlen(e->msg, sizeof e->msg) < sizeof e->msg && e->msg[0], "empty message");
    if (e->kind == ERR_INPUT)
        FUZZ_CHECK(strstr(e->msg, path) != NULL, "message does not name the file: %s", e->msg);
}

static void one_pass(token_span s, int B, int Lq, size_t min_len, const char *path)
{
    batcher bt;
    txl_err e = {0};
    if (batcher_init(&bt, s, B, Lq, min_len, "train", &e)) {
        check_err(&e, path);
        FUZZ_CHECK(s.n / (size_t)B < (min_len < 2 ? 2 : min_len), "refused a long enough span");
        return;
    }
    FUZZ_CHECK(bt.n == s.n / (size_t)B && bt.n >= 2, "n %zu", bt.n);
    uint8_t *x = malloc((size_t)B * Lq), *y = malloc((size_t)B * Lq), *src = malloc(Lq + 1);
    FUZZ_CHECK(x && y && src, "malloc");
    size_t pos = 0, segs = 0, scored = 0;
    int len;
    while ((len = batcher_next(&bt, x, y, &e)) > 0) {
        FUZZ_CHECK(len <= Lq, "segment of %d > tgt_len %d", len, Lq);
        for (int b = 0; b < B; b++) {
            FUZZ_CHECK(corpus_read(s.c, s.begin + (size_t)b * bt.n + pos, src, (size_t)len + 1,
                                   &e) == 0, "stream %d: %s", b, e.msg);
            FUZZ_CHECK(memcmp(x + (size_t)b * len, src, (size_t)len) == 0, "x of stream %d", b);
            FUZZ_CHECK(memcmp(y + (size_t)b * len, src + 1, (size_t)len) == 0, "y of stream %d", b);
        }
        pos += (size_t)len;
        segs++;
        scored += (size_t)B * len;
        FUZZ_CHECK(segs <= bt.n, "runaway batcher");
    }
    FUZZ_CHECK(pos == bt.n - 1, "pass covered %zu of %zu", pos, bt.n - 1);
    FUZZ_CHECK(segs == batcher_segments(&bt), "%zu segments, batcher_segments %zu", segs,
               batcher_segments(&bt));
    FUZZ_CHECK(scored == batcher_tokens(&bt), "scored %zu, batcher_tokens %zu", scored,
               batcher_tokens(&bt));
    FUZZ_CHECK(len == 0, "batcher_next failed: %s", e.msg);
    FUZZ_CHECK(batcher_next(&bt, x, y, &e) == 0, "pass did not stay over");
    free(x);
    free(y);
    free(src);
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
    one_pass(corpus_all(&c), B, Lq, min_len, path);
    one_pass(sp[0], B, Lq, min_len, path);
    one_pass(sp[1], B, Lq, 2, path);
    corpus_close(&c);
    return 0;
}

FUZZ_ENTRY(txl_fuzz_corpus)

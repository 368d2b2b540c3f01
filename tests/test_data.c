/* test_data.c: unit test of data/corpus.c on files built here: a plain corpus is read in
 * place, so a file truncated after corpus_open makes batcher_next (and an evaluation pass
 * over it, cmd/evaluate.c) fail with a message naming the file instead of faulting; a
 * gzip'd corpus is held in memory and unaffected. Files live in $TMPDIR (default /tmp). */
#include "../cmd/evaluate.h"
#include "../data/corpus.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static char paths[4][512];

static const char *scratch(int k, const char *name)
{
    const char *dir = getenv("TMPDIR");
    snprintf(paths[k], sizeof paths[k], "%s/txl-test-data-%ld-%s", dir && *dir ? dir : "/tmp",
             (long)getpid(), name);
    return paths[k];
}

static int has(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

static uint8_t text[20000];

static int write_text(const char *path, size_t n, int gz)
{
    if (gz) {
        gzFile g = gzopen(path, "wb");
        int ok = g && gzwrite(g, text, (unsigned)n) == (int)n;
        return g && gzclose(g) == Z_OK && ok ? 0 : -1;
    }
    FILE *fp = fopen(path, "wb");
    int ok = fp && fwrite(text, 1, n, fp) == n;
    return fp && fclose(fp) == 0 && ok ? 0 : -1;
}

/* One batcher over a plain file, truncated after the first segment. */
static void test_truncated_batcher(void)
{
    const char *path = scratch(0, "plain.txt");
    CHECK(write_text(path, sizeof text, 0) == 0, "truncate: wrote %zu bytes", sizeof text);
    corpus c;
    txl_err e = {0};
    int rc = corpus_open(&c, path, &e);
    CHECK(rc == 0 && c.kind == CORPUS_FILE && c.len == sizeof text,
          "truncate: a plain file is read in place (%s)", rc ? e.msg : "ok");
    if (rc)
        return;
    batcher bt;
    uint8_t x[4 * 16], y[4 * 16];
    rc = batcher_init(&bt, corpus_all(&c), 4, 16, 17, "train", &e);
    int len = rc ? -1 : batcher_next(&bt, x, y, &e);
    CHECK(len == 16 && memcmp(x, text, 16) == 0 && memcmp(y, text + 1, 16) == 0 &&
              memcmp(x + 16, text + 5000, 16) == 0,
          "truncate: the first segment reads streams 0 and 1 (len %d)", len);
    CHECK(truncate(path, 6000) == 0, "truncate: the file cut to 6000 bytes");
    size_t pos = bt.pos;
    e.msg[0] = 0;
    len = batcher_next(&bt, x, y, &e);
    CHECK(len == -1 && e.kind == ERR_INPUT && bt.pos == pos && has(e.msg, path) &&
              has(e.msg, "the corpus was truncated while txl was reading it: byte 10016 is past "
                         "its end (20000 bytes when opened, 6000 now)"),
          "truncate: the next segment fails, naming the file, the byte and the sizes, the "
          "position unchanged: %s", e.msg);
    corpus_close(&c);
    CHECK(c.kind == CORPUS_NONE, "truncate: closed");
    corpus_close(&c); /* twice, and on a zeroed struct: harmless */
    unlink(path);
}

/* A gzip'd corpus lives in memory: removing its file changes nothing. */
static void test_memory_corpus(void)
{
    const char *path = scratch(1, "text.gz");
    write_text(path, sizeof text, 1);
    corpus c;
    txl_err e = {0};
    int rc = corpus_open(&c, path, &e);
    CHECK(rc == 0 && c.kind == CORPUS_MEMORY && c.gzipped && c.len == sizeof text,
          "gzip: held in memory (%s)", rc ? e.msg : "ok");
    if (rc)
        return;
    unlink(path);
    uint8_t buf[100];
    CHECK(corpus_read(&c, 19900, buf, 100, &e) == 0 && memcmp(buf, text + 19900, 100) == 0,
          "gzip: read after the file is gone");
    corpus_close(&c);
}

/* An evaluation pass over a file truncated after it was opened: eval_span reports the
 * batcher's error (the call site in cmd/evaluate.c). */
static void test_truncated_eval(void)
{
    const char *path = scratch(2, "eval.txt");
    write_text(path, sizeof text, 0);
    model_config mc = {.vocab = 256, .n_layer = 1, .d_model = 8, .n_head = 2, .d_head = 4,
                       .d_inner = 8, .tgt_len = 8, .mem_len = 8, .pos = POS_XL};
    model mdl;
    corpus c;
    txl_err e = {0};
    int rc = model_init(&mdl, &mc, &e) || corpus_open(&c, path, &e);
    CHECK(rc == 0, "eval: a model and a corpus (%s)", rc ? e.msg : "ok");
    if (rc)
        return;
    model_init_weights(&mdl, 1);
    eval_opts o = {.batch = 2, .tgt_len = 8, .mem_len = 8};
    eval_result r;
    rc = eval_span(&mdl, &mc, corpus_all(&c), &o, &r, &e);
    CHECK(rc == 0 && r.tokens == 2 * 9999, "eval: the whole file scores %zu tokens",
          rc ? 0 : r.tokens);
    CHECK(truncate(path, 100) == 0, "eval: the file cut to 100 bytes");
    e.msg[0] = 0;
    rc = eval_span(&mdl, &mc, corpus_all(&c), &o, &r, &e);
    CHECK(rc == -1 && e.kind == ERR_INPUT && has(e.msg, path) && has(e.msg, "truncated"),
          "eval: the pass fails naming the file: %s", e.msg);
    corpus_close(&c);
    model_free(&mdl);
    unlink(path);
}

int main(void)
{
    tl_rng r = {99};
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (uint8_t)(128 + 127 * tl_uniform(&r, 1.0f));
    test_truncated_batcher();
    test_memory_corpus();
    test_truncated_eval();
    return tl_done("test_data");
}

/* test_data.c: unit test of data/corpus.c on files built here: a plain corpus is read in
 * place, so a file truncated after corpus_open makes batcher_next (and an evaluation pass
 * over it, eval/evaluate.c) fail with a message naming the file instead of faulting; a
 * gzip'd corpus is held in memory and unaffected; an evaluation pass of a long memory in
 * groups of streams computes the whole batch's numbers; the train/valid/test split rule,
 * with eval's one-split entry point agreeing with training's. Files live in $TMPDIR
 * (default /tmp). */
#include "../eval/evaluate.h"
#include "../data/corpus.h"
#include "../common/par.h"
#include "testlib.h"

#include <math.h>
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
    tok_stream ts;
    txl_tok x[4 * 16], y[4 * 16];
    units_config u = {.anchors = 0};
    rc = tok_stream_open(&ts, corpus_all(&c), NULL, &u, 0, &e) ||
         batcher_init(&bt, &ts, 4, 16, 0, 17, "train", &e);
    int len = rc ? -1 : batcher_next(&bt, x, y, NULL, NULL, &e);
    int same = len == 16;
    for (int i = 0; same && i < 16; i++)
        same = x[i] == text[i] && y[i] == text[i + 1] && x[16 + i] == text[5000 + i];
    CHECK(same, "truncate: the first segment reads streams 0 and 1 (len %d)", len);
    CHECK(truncate(path, 6000) == 0, "truncate: the file cut to 6000 bytes");
    size_t pos = bt.pos;
    e.msg[0] = 0;
    len = batcher_next(&bt, x, y, NULL, NULL, &e);
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

/* An evaluation pass scores every token after the first (streams, then the tail), and over
 * a file truncated after it was opened, eval_stream reports the batcher's error. */
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
    tok_stream ts;
    units_config u = {.anchors = 0};
    rc = tok_stream_open(&ts, corpus_all(&c), NULL, &u, 0, &e) ||
         eval_stream(&mdl, &mc, &ts, &o, &r, &e);
    CHECK(rc == 0 && r.tokens == sizeof text - 1 && r.bytes == r.tokens,
          "eval: the whole file scores every byte after the first: %zu of %zu",
          rc ? 0 : r.tokens, sizeof text);
    eval_opts o3 = {.batch = 3, .tgt_len = 8, .mem_len = 8}; /* 19999 = 3 x 6666 + a tail */
    rc = eval_stream(&mdl, &mc, &ts, &o3, &r, &e);
    CHECK(rc == 0 && r.tokens == sizeof text - 1, "eval: 3 streams and a tail of 1: %zu",
          rc ? 0 : r.tokens);
    CHECK(truncate(path, 100) == 0, "eval: the file cut to 100 bytes");
    e.msg[0] = 0;
    rc = eval_stream(&mdl, &mc, &ts, &o, &r, &e);
    CHECK(rc == -1 && e.kind == ERR_INPUT && has(e.msg, path) && has(e.msg, "truncated"),
          "eval: the pass fails naming the file: %s", e.msg);
    corpus_close(&c);
    model_free(&mdl);
    unlink(path);
}

/* How far a pass in groups may be from the whole batch's: the same bits where the BLAS's
 * products give a row the same bits whatever rows surround it (OpenBLAS's SkylakeX,
 * Cooperlake, Sandybridge and Prescott kernels, measured); its Haswell and Zen kernels
 * (OPENBLAS_CORETYPE=Haswell or Zen, an AVX2 CPU) round a group's smaller products
 * otherwise, by 1e-10 relative in the loss here, as another --batch does. A group that
 * skipped a segment, reset a memory or lost a row moves the loss by 1e-3 or more. */
#define GROUP_TOL 1e-9

/* One scheme of test_grouped_eval on T threads. */
static void grouped_eval(pos_scheme pos, int T, const tok_stream *ts)
{
    model_config mc = {.vocab = 256, .n_layer = 1, .d_model = 64, .n_head = 2, .d_head = 32,
                       .d_inner = 128, .tgt_len = 32, .mem_len = 128, .pos = pos,
                       .mlp_num_freqs = 4, .mlp_max_dist = 64, .mlp_hidden = 8,
                       .hier_levels = HIER_ALL, .hier_num_freqs = 3, .fire_hidden = 6,
                       .fire_threshold = 8.0f, .t5_buckets = 8, .t5_max_dist = 10,
                       .t5_shared = 1};
    const char *name = pos_scheme_name(pos);
    txl_err e = {0};
    model mdl;
    if (model_init(&mdl, &mc, &e)) {
        CHECK(0, "groups %s: a model (%s)", name, e.msg);
        return;
    }
    tl_rng r = {31 + (uint64_t)pos};
    for (int k = 0; k < mdl.n_params; k++) {
        const param_entry *p = &mdl.table[k];
        for (size_t j = 0; j < p->numel; j++)
            mdl.w[p->offset + j] = (p->init == INIT_ONE ? 1.0f : 0.0f) + tl_normal(&r, 0.1f);
    }
    int want = pos_get(pos)->batch_tables ? 1 : 4;
    eval_opts o = {.batch = 32, .tgt_len = 32, .mem_len = 128}, w = o, s = o;
    w.whole_batch = 1;
    s.mem_len = 32;
    eval_plan ep;
    double bg = 0, bw = 0;
    int rc = eval_plan_init(&ep, &mdl, &mc, ts, &o, &e);
    int ng = rc ? 0 : ep.ng;
    eval_plan_free(&ep);
    rc = rc || eval_plan_init(&ep, &mdl, &mc, ts, &s, &e);
    int ng_short = rc ? 0 : ep.ng;
    eval_plan_free(&ep);
    rc = rc || eval_plan_bytes(&mc, ts, &o, &bg, &e) || eval_plan_bytes(&mc, ts, &w, &bw, &e);
    CHECK(rc == 0 && ng == want && ng_short == 1 && (want == 1 ? bg == bw : bg < bw),
          "groups %s, %d thread%s: %d at mem_len 128 (want %d), %d at 32; planned %.2f MiB, "
          "the whole batch %.2f", name, T, T > 1 ? "s" : "", ng, want, ng_short,
          bg / 1048576, bw / 1048576);
    eval_result rg, rw;
    rc = rc || eval_stream(&mdl, &mc, ts, &o, &rg, &e) || eval_stream(&mdl, &mc, ts, &w, &rw, &e);
    CHECK(rc == 0 && fabs(rg.loss - rw.loss) <= GROUP_TOL * fabs(rw.loss) &&
              fabs(rg.bpc - rw.bpc) <= GROUP_TOL * fabs(rw.bpc) && rg.tokens == rw.tokens &&
              rg.bytes == rw.bytes && rg.segments == rw.segments && rg.tokens == sizeof text - 1,
          "groups %s, %d thread%s: loss %.17g, the whole batch's %.17g (%zu and %zu tokens, "
          "%zu and %zu segments)%s%s", name, T, T > 1 ? "s" : "", rc ? 0 : rg.loss,
          rc ? 0 : rw.loss, rc ? 0 : rg.tokens, rc ? 0 : rw.tokens, rc ? 0 : rg.segments,
          rc ? 0 : rw.segments, rc ? ": " : "", rc ? e.msg : "");
    model_free(&mdl);
}

/* A long memory's pass runs its streams in groups (eval/evaluate.c, groups_of): 32 streams
 * of 624 tokens (19 segments of 32 rows and one of 16) at mem_len 128, on one thread in
 * four groups of 8 (G M <= B Lq), on two (a replica of 16 streams each) in four groups of 4
 * (whose last segment's products still have 4 x 16 x 64 outputs: GROUP_OUT), with less
 * memory planned, and every scheme's loss and bits per byte the whole batch's (GROUP_TOL);
 * hier, whose tables span the batch, and a memory no longer than a segment keep one
 * group. */
static void test_grouped_eval(void)
{
    const char *path = scratch(3, "groups.txt");
    write_text(path, sizeof text, 0);
    corpus c;
    tok_stream ts;
    txl_err e = {0};
    units_config u = {.anchors = 0};
    int rc = corpus_open(&c, path, &e) || tok_stream_open(&ts, corpus_all(&c), NULL, &u, 0, &e);
    CHECK(rc == 0, "groups: a corpus (%s)", rc ? e.msg : "ok");
    if (rc)
        return;
    const pos_scheme schemes[] = {POS_XL, POS_ROPE, POS_T5, POS_ALIBI, POS_FIRE, POS_MLP,
                                  POS_HIER};
    for (int T = 1; T <= 2; T++) {
        par_set_threads(T);
        for (size_t i = 0; i < sizeof schemes / sizeof *schemes; i++)
            grouped_eval(schemes[i], T, &ts);
    }
    par_set_threads(1);
    tok_stream_free(&ts);
    corpus_close(&c);
    unlink(path);
}

/* The split rule, and the two entry points agreeing on it: data_open_split (eval --split)
 * resolves every split to the same bytes as data_open_splits (training). */
static void test_splits(void)
{
    const char *tr = scratch(0, "train.txt"), *va = scratch(1, "valid.txt");
    const char *te = scratch(2, "test.txt");
    write_text(tr, 10000, 0);
    write_text(va, 3000, 0);
    write_text(te, 2000, 1); /* gzip'd: held in memory, same spans */
    const double frac[3] = {0.8, 0.15, 0.05};
    static const struct {
        int valid, test;                /* which separate files the config names */
        size_t begin[3], n[3];          /* expected spans */
        int file[3];                    /* 0 train, 1 valid, 2 test, -1 none */
    } cases[] = {
        {0, 0, {0, 8000, 9500}, {8000, 1500, 500}, {0, 0, 0}},
        {0, 1, {0, 8000, 0}, {8000, 1500, 2000}, {0, 0, 2}},
        {1, 0, {0, 0, 0}, {10000, 3000, 0}, {0, 1, -1}},
        {1, 1, {0, 0, 0}, {10000, 3000, 2000}, {0, 1, 2}},
    };
    const char *paths3[3] = {tr, va, te};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        data_paths p = {tr, cases[k].valid ? va : "", cases[k].test ? te : NULL, frac};
        corpus f[3], *files[3] = {&f[0], &f[1], &f[2]};
        memset(f, 0, sizeof f);
        token_span sp[3];
        txl_err e = {0};
        int rc = data_open_splits(&p, files, sp, &e);
        int good = rc == 0;
        for (int i = 0; good && i < 3; i++) {
            int fi = cases[k].file[i];
            good = sp[i].n == cases[k].n[i] && sp[i].begin == cases[k].begin[i] &&
                   (fi < 0 ? sp[i].c == NULL : sp[i].c == &f[fi] &&
                                                   strcmp(sp[i].path, paths3[fi]) == 0);
            good = good && (f[i].kind != CORPUS_NONE) == (i == 0 || (i == 1 && cases[k].valid) ||
                                                         (i == 2 && cases[k].test));
        }
        CHECK(good, "splits: valid %s, test %s: train/valid/test %zu/%zu/%zu bytes, each "
              "file opened once (%s)", cases[k].valid ? "file" : "-", cases[k].test ? "file" : "-",
              rc ? 0 : sp[0].n, rc ? 0 : sp[1].n, rc ? 0 : sp[2].n, rc ? e.msg : "ok");
        for (int i = 0; i < 3; i++) {
            corpus c;
            token_span one;
            txl_err e1 = {0};
            int r1 = data_open_split(&p, i, &c, &one, &e1);
            if (cases[k].file[i] < 0)
                CHECK(r1 == -1 && e1.kind == ERR_INPUT && has(e1.msg, va) &&
                          has(e1.msg, "there is no test split: data.valid is a separate file "
                                      "and data.test is empty") && c.kind == CORPUS_NONE,
                      "split %d alone: absent, an error naming data.valid: %s", i, e1.msg);
            else
                CHECK(r1 == 0 && one.n == sp[i].n && one.begin == sp[i].begin &&
                          strcmp(one.path, sp[i].path) == 0,
                      "split %d alone: the same %zu bytes at %zu of %s", i, one.n, one.begin,
                      r1 ? e1.msg : one.path);
            if (r1 == 0)
                corpus_close(&c);
        }
        for (int i = 0; i < 3; i++)
            corpus_close(&f[i]);
    }
    /* an empty fraction, and a missing file: named, with the key */
    const double tiny[3] = {1.0, 0.0, 0.0};
    data_paths p = {tr, "", "", tiny};
    corpus c;
    token_span one;
    txl_err e = {0};
    CHECK(data_open_split(&p, SPLIT_VALID, &c, &one, &e) == -1 && has(e.msg, tr) &&
              has(e.msg, "the valid split is empty (data.split 1/0/0)") &&
              c.kind == CORPUS_NONE, "empty split: %s", e.msg);
    data_paths q = {tr, "/nonexistent/v.txt", "", frac};
    corpus f[3], *files[3] = {&f[0], &f[1], &f[2]};
    memset(f, 0, sizeof f);
    token_span sp[3];
    CHECK(data_open_splits(&q, files, sp, &e) == -1 &&
              has(e.msg, "data.valid: /nonexistent/v.txt: cannot open corpus"),
          "missing valid file: %s", e.msg);
    for (int i = 0; i < 3; i++)
        corpus_close(&f[i]);
    unlink(tr);
    unlink(va);
    unlink(te);
}

int main(void)
{
    tl_rng r = {99};
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (uint8_t)(128 + 127 * tl_uniform(&r, 1.0f));
    test_truncated_batcher();
    test_memory_corpus();
    test_truncated_eval();
    test_grouped_eval();
    test_splits();
    return tl_done("test_data");
}

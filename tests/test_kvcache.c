/* test_kvcache.c: inference with the memory's keys and values kept (kv_cache, kv_cache.h),
 * its activations planned ACTS_CACHED (segment-sized window buffers; a cache out of step is
 * refilled from the memory a segment's rows at a time), computes what projecting the whole
 * window computes: the same logits and the same memory
 * for every positional scheme (rope keeps none: its keys move with the window),
 * post- and pre-LN, one stream and several, memories longer and shorter than a segment,
 * segments of varying length, through enough segments that the windows move back to the
 * front several times, and three rebuilds (the cache refilled from a whole window:
 * invalidated with the memory partly filled, and full, and after a forward without it).
 * Tolerance 1e-5 norm-relative, as test_decode's: a key row projected in a GEMM of other
 * rows may round differently in its last bit (OpenBLAS picks kernels by the shape); a wrong
 * or stale row is off by far more. Then the cache's own rules: a reset memory needs
 * nothing, a memory written behind the cache's back needs kv_cache_invalidate (without it
 * the logits go wrong, which shows the comparison can fail), and another memory never
 * matches. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../data/units.h"
#include "../model/attn_amx.h"
#include "../model/gemm.h"
#include "../model/kv_cache.h"
#include "../model/model.h"
#include "testlib.h"

enum { NSEG = 14, LQ = 5, MAXB = 3, V = 256 };

typedef struct {
    model_config c;
    model mdl;
    model_acts A, Ac; /* for the forwards without a cache, and with one (ACTS_CACHED) */
    int B, M;
    txl_tok tok[NSEG][MAXB * LQ];
    int32_t co[NSEG][MAXB * LQ][TXL_N_COORDS];
    int len[NSEG];
} fixture;

static int setup(fixture *f, pos_scheme pos, int pre, int M, int B, txl_err *e)
{
    memset(f, 0, sizeof *f);
    f->c = (model_config){.n_layer = 2, .d_model = 16, .n_head = 2, .d_head = 8, .d_inner = 24,
                          .tgt_len = LQ, .mem_len = M, .pre_lnorm = pre, .pos = pos,
                          .mlp_num_freqs = 4, .mlp_max_dist = 64, .mlp_hidden = 8,
                          .vocab = V, .hier_levels = HIER_ALL, .hier_num_freqs = 3,
                          .fire_hidden = 6, .fire_threshold = 8.0f, .t5_buckets = 8,
                          .t5_max_dist = 10, .t5_shared = 1};
    f->B = B;
    f->M = M;
    if (model_init(&f->mdl, &f->c, e) || acts_init(&f->A, &f->c, B, LQ, M, 0, e) ||
        acts_init(&f->Ac, &f->c, B, LQ, M, ACTS_CACHED, e))
        return -1;
    tl_rng r = {777 + (uint64_t)pos * 17 + (uint64_t)pre * 5 + (uint64_t)M};
    for (int i = 0; i < f->mdl.n_params; i++) {
        const param_entry *p = &f->mdl.table[i];
        for (size_t k = 0; k < p->numel; k++)
            f->mdl.w[p->offset + k] = (p->init == INIT_ONE ? 1.0f : 0.0f) + tl_normal(&r, 0.3f);
    }
    /* each stream a random text with words, sentence ends and blank lines, cut into
     * segments of 5, 5, 3, 5, 1, ... rows, with its coordinates (data/units.c) */
    static const char alphabet[] = "abcde fgh. ij!\n\n";
    uint8_t text[MAXB][NSEG * LQ];
    int32_t tco[MAXB][NSEG * LQ][TXL_N_COORDS];
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < NSEG * LQ; i++)
            text[b][i] = (uint8_t)alphabet[(int)((tl_uniform(&r, 0.5f) + 0.5f) * 17) % 17];
        units_state us;
        units_config uc = {.anchors = 0};
        units_init(&us, &uc);
        units_tokenize(&us, text[b], NSEG * LQ, NULL, &tco[b][0][0]);
    }
    for (int s = 0, at = 0; s < NSEG; s++) {
        f->len[s] = s % 4 == 2 ? 3 : s % 4 == 0 && s ? 1 : LQ;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < f->len[s]; i++) {
                f->tok[s][b * f->len[s] + i] = text[b][at + i];
                memcpy(f->co[s][b * f->len[s] + i], tco[b][at + i], sizeof f->co[s][0]);
            }
        at += f->len[s];
    }
    return 0;
}

static void teardown(fixture *f)
{
    acts_free(&f->A);
    acts_free(&f->Ac);
    model_free(&f->mdl);
}

/* segment s through model_forward with (k: activations planned ACTS_CACHED, whose
 * window-sized buffers hold a segment) or without (NULL) a cache: its logits */
static void forward(fixture *f, model_mem *mem, kv_cache *k, int s, float *logits)
{
    fwd_opts fo = {.training = 0, .coords = &f->co[s][0][0], .kv = k};
    model_acts *A = k ? &f->Ac : &f->A;
    model_forward(&f->mdl, A, mem, f->tok[s], NULL, f->len[s], &fo);
    memcpy(logits, A->logits, (size_t)f->B * f->len[s] * V * sizeof(float));
}

#define TOL 1e-5

/* norm-relative difference of b from a (n floats) */
static double rel(const float *a, const float *b, size_t n)
{
    static double ref[MAXB * LQ * V];
    for (size_t i = 0; i < n; i++)
        ref[i] = a[i];
    return tl_max_rel_err(b, ref, n, 1e-30);
}

/* the memories hold the same rows, each layer and stream within TOL */
static int mem_close(const model_mem *a, const model_mem *b)
{
    if (a->m != b->m)
        return 0;
    for (int l = 0; l < a->n_layer && a->m; l++)
        for (int s = 0; s < a->B; s++)
            if (rel(mem_layer(a, l) + (size_t)s * a->M * a->d,
                    mem_layer(b, l) + (size_t)s * b->M * b->d, (size_t)a->m * a->d) > TOL)
                return 0;
    return 1;
}

/* segment s's logits agree within TOL */
static int close(const fixture *f, int s, const float *la, const float *lb)
{
    return rel(la, lb, (size_t)f->B * f->len[s] * V) <= TOL;
}

static void run_case(const char *label, pos_scheme pos, int pre, int M, int B)
{
    fixture f;
    model_mem ma, mb;
    kv_cache k;
    txl_err e;
    if (setup(&f, pos, pre, M, B, &e) || mem_init(&ma, &f.c, B, M, &e) ||
        mem_init(&mb, &f.c, B, M, &e)) {
        CHECK(0, "%s: setup: %s", label, e.msg);
        return;
    }
    kv_cache_init(&k, &f.c, B, M, LQ);
    static float la[MAXB * LQ * V], lb[MAXB * LQ * V];
    int same = 1, moves = 0, used = 0, rebuilt = 0, prev_start = 0;
    double worst = 0;
    for (int s = 0; s < NSEG; s++) {
        /* rebuilds: from a partly filled memory (before segment 2: 10 rows of 12), from a
         * full one (7), and after a forward that left the cache behind (11) */
        if (s == 2 || s == 7)
            kv_cache_invalidate(&k);
        int m0 = mb.m;
        int on = kv_cache_on(&k);
        int valid = on && (m0 == 0 || (k.m == m0 && k.of == mb.buf && k.gen == mb.gen));
        forward(&f, &ma, NULL, s, la);
        forward(&f, &mb, s == 10 ? NULL : &k, s, lb);
        used += valid && m0 > 0 && s != 10;
        rebuilt += on && !valid && s != 10;
        moves += on && k.start < prev_start;
        prev_start = k.start;
        worst = fmax(worst, rel(la, lb, (size_t)B * f.len[s] * V));
        same &= mem_close(&ma, &mb);
    }
    int expect_cache = M > 0 && pos != POS_ROPE;
    CHECK(same && worst <= TOL && kv_cache_on(&k) == expect_cache &&
              (!expect_cache || (used == NSEG - 5 && rebuilt == 3 && moves > 0)),
          "%-10s M=%-2d B=%d: %d segments of 1-5 rows with the key cache (%s; used %d times, "
          "rebuilt %d, windows moved %d times) == without it: logits %.1e, memory within %g",
          label, M, B, NSEG, k.hbuf ? "kept in bf16" : k.buf ? "kept" : "none", used, rebuilt,
          moves, worst, TOL);
    mem_free(&ma);
    mem_free(&mb);
    kv_cache_free(&k);
    teardown(&f);
}

/* The cache's rules, on xl with M = 7, B = 3. */
static void test_rules(void)
{
    fixture f;
    model_mem ma, mb, other;
    kv_cache k;
    txl_err e;
    const int M = 7, B = 3;
    if (setup(&f, POS_XL, 0, M, B, &e) || mem_init(&ma, &f.c, B, M, &e) ||
        mem_init(&mb, &f.c, B, M, &e) || mem_init(&other, &f.c, B, M, &e)) {
        CHECK(0, "rules: setup: %s", e.msg);
        return;
    }
    kv_cache_init(&k, &f.c, B, M, LQ);
    static float la[MAXB * LQ * V], lb[MAXB * LQ * V];
    /* a reset memory: the cache starts over without being told */
    for (int s = 0; s < 4; s++) {
        forward(&f, &ma, NULL, s, la);
        forward(&f, &mb, &k, s, lb);
    }
    mem_reset(&ma);
    mem_reset(&mb);
    int ok_reset = 1;
    for (int s = 4; s < 8; s++) {
        forward(&f, &ma, NULL, s, la);
        forward(&f, &mb, &k, s, lb);
        ok_reset &= close(&f, s, la, lb);
    }
    /* other rows copied into mb (same row count): stale keys unless invalidated */
    forward(&f, &other, NULL, 0, la);
    forward(&f, &other, NULL, 1, la);
    for (int l = 0; l < f.c.n_layer; l++)
        memcpy(mem_layer(&mb, l), mem_layer(&other, l), (size_t)B * M * f.c.d_model * 4);
    memcpy(mem_layer(&ma, 0), mem_layer(&other, 0), (size_t)f.c.n_layer * B * M * f.c.d_model * 4);
    mb.m = ma.m = other.m;
    forward(&f, &ma, NULL, 8, la);
    model_mem mc = mb; /* a copy of the state, to run the same segment twice */
    kv_cache kc = k;
    forward(&f, &mb, &k, 8, lb);
    int stale = rel(la, lb, (size_t)B * f.len[8] * V) > 1e-2;
    /* the same again, told: mb's rows were only read by that forward, so put them back */
    for (int l = 0; l < f.c.n_layer; l++)
        memcpy(mem_layer(&mb, l), mem_layer(&other, l), (size_t)B * M * f.c.d_model * 4);
    mb = mc;
    k = kc;
    kv_cache_invalidate(&k);
    forward(&f, &mb, &k, 8, lb);
    int told = close(&f, 8, la, lb) && mem_close(&ma, &mb);
    /* a cache advanced with mb never serves another memory of the same row count */
    int s9 = 9;
    forward(&f, &ma, NULL, s9, la);
    for (int l = 0; l < f.c.n_layer; l++)
        memcpy(mem_layer(&other, l), mem_layer(&ma, l), (size_t)B * M * f.c.d_model * 4);
    other.m = ma.m; /* ma's state under another buffer */
    forward(&f, &mb, &k, s9, lb);
    int k_of_mb = k.of == mb.buf && k.m == mb.m && k.m == other.m;
    forward(&f, &ma, NULL, 10, la);
    forward(&f, &other, &k, 10, lb);
    int foreign = close(&f, 10, la, lb);
    CHECK(ok_reset && stale && told && k_of_mb && foreign,
          "kv_cache rules: after mem_reset it starts over (%s); rows copied in without "
          "kv_cache_invalidate give other logits (off by > 1e-2: %s), with it the window's (%s); another "
          "memory of the same row count is projected whole (%s)", ok_reset ? "yes" : "NO",
          stale ? "yes" : "NO", told ? "yes" : "NO", foreign && k_of_mb ? "yes" : "NO");
    mem_free(&ma);
    mem_free(&mb);
    mem_free(&other);
    kv_cache_free(&k);
    teardown(&f);
}

int main(void)
{
    for (int B = 1; B <= 3; B += 2) {
        run_case("xl", POS_XL, 0, 12, B);
        run_case("xl pre", POS_XL, 1, 12, B);
        run_case("xl", POS_XL, 0, 3, B);
        run_case("xl", POS_XL, 0, 0, B);
        run_case("mlp", POS_MLP, 0, 12, B);
        run_case("alibi", POS_ALIBI, 1, 12, B);
        run_case("absolute", POS_ABSOLUTE, 0, 12, B);
        run_case("none", POS_NONE, 1, 7, B);
        run_case("hier", POS_HIER, 0, 12, B);
        run_case("hier pre", POS_HIER, 1, 4, B);
        run_case("rope", POS_ROPE, 1, 12, B);
        run_case("fire", POS_FIRE, 0, 12, B);
        run_case("t5", POS_T5, 1, 12, B);
    }
    test_rules();
    /* bf16 with the AMX attention: the cache holds the keys and values in bf16, which the
     * attention rounds them to anyway: the same logits as projecting the window (the whole
     * window's fp32 keys, rounded by the attention), to the same tolerance */
    if (amx_attn_available() && gemm_set_precision(GEMM_BF16) == 0) {
        for (int B = 1; B <= 3; B += 2) {
            run_case("xl bf16", POS_XL, 0, 12, B);
            run_case("xl pre bf16", POS_XL, 1, 4, B);
            run_case("mlp bf16", POS_MLP, 0, 12, B);
            run_case("hier bf16", POS_HIER, 0, 12, B);
        }
        gemm_set_precision(GEMM_FP32);
    } else {
        printf("  skip the bf16 key cache: no AMX-BF16 here\n");
    }
    return tl_done("test_kvcache");
}

/* test_decode.c: cached one-token decoding (model/decode.c) computes what model_forward
 * computes for 1-token segments: same logits and same memory, for every positional scheme,
 * post- and pre-LN, one stream and several, through the phase where the memory fills and
 * beyond (it then slides, and the windows move back to the front every ~M tokens), and a
 * prompt that leaves a memory of 70 rows (decode_prime projects it in blocks of 64).
 * Tolerance 1e-5 norm-relative: the two paths sum the same terms in different orders.
 * A quantized model (quant.h: q8 or bf16) decodes with its stored matrices (qgemm.h) what
 * model_forward computes with their dequantization, to the same 1e-5. A bf16 cache rounds
 * the cached keys, values and xl's position rows: it decodes what an fp32 cache of those
 * rounded values decodes (DECODE_CACHE_ROUNDED), and differs from model_forward (the
 * rounding happened: 3e-3 to 9e-2 here). Tolerance 2e-3: the two paths' attention sums in
 * other orders (1e-7), so a later layer's key or value that lies that close to a bf16
 * rounding boundary rounds the other way in one of them, a step of 2^-8 in one cached
 * value (up to 4e-4 of the logits measured over 5 streams and 40 tokens; 6e-7 where none
 * does); a key of another row or stream, or a value not rounded, differs by far more. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../data/units.h"
#include "../model/decode.h"
#include "../model/gemm.h"
#include "../model/model.h"
#include "../model/quant.h"
#include "testlib.h"

/* ad: 0 the full softmax; 1 the adaptive softmax of official's wt103 (one table, no
 * projection); 2 a table and a projection per cluster (div_val 2), the tails' tied. The
 * text's bytes fall in every cluster of the cutoffs 30, 45, 100. */
static void run_case_q(const char *label, pos_scheme pos, int pre, int M, int clamp, int B,
                       int P, int ad, qtype qt, decode_cache cache)
{
    int wide = qt != QT_F32; /* q8 blocks: rows that are multiples of 32 */
    model_config c = {.n_layer = 2, .d_model = wide ? 32 : 16, .n_head = 2,
                      .d_head = wide ? 16 : 8, .d_inner = wide ? 64 : 24,
                      .tgt_len = 5, .mem_len = M, .pre_lnorm = pre, .pos = pos,
                      .clamp_len = clamp > 0 ? clamp : 0, .xl_off = clamp < 0 ? -clamp : 0,
                      .mlp_num_freqs = 4, .mlp_max_dist = 64,
                      .mlp_hidden = 8, .vocab = 256, .hier_levels = HIER_ALL,
                      .hier_num_freqs = 3, .fire_hidden = 6, .fire_threshold = 6.0f,
                      .t5_buckets = 8, .t5_max_dist = 10, .t5_shared = 1};
    if (ad)
        c.cutoffs = (cutoff_list){3, {30, 45, 100}};
    if (ad == 2)
        c.div_val = 2, c.d_embed = 12, c.tie_projs = 1;
    enum { T = 40, PMAX = 80, MAXB = 5 };
    model mdl;
    model_acts A;
    model_mem mem_a, mem_b;
    decode_state ds, dr = {0};
    txl_err e;
    if (model_init(&mdl, &c, &e) || acts_init(&A, &c, B, c.tgt_len, M, 0, &e) ||
        mem_init(&mem_a, &c, B, M, &e) || mem_init(&mem_b, &c, B, M, &e) ||
        decode_init(&ds, &mdl, B, M, cache, &e)) {
        CHECK(0, "%s: setup: %s", label, e.msg);
        return;
    }
    tl_rng r = {12345 + (uint64_t)pos * 31 + (uint64_t)pre};
    for (int i = 0; i < mdl.n_params; i++) {
        const param_entry *p = &mdl.table[i];
        for (size_t k = 0; k < p->numel; k++)
            mdl.w[p->offset + k] = (p->init == INIT_ONE ? 1.0f : 0.0f) + tl_normal(&r, 0.3f);
    }
    if (qt != QT_F32 && quant_model(&mdl, qt, &e))
        CHECK(0, "%s: quantize: %s", label, e.msg);
    /* again with the weights set and quantized: decode_init takes quant_model's views, and
     * under bf16 precision the matrix units' bf16 copies of the weights (decode.h) */
    decode_free(&ds);
    if (decode_init(&ds, &mdl, B, M, cache, &e))
        CHECK(0, "%s: setup: %s", label, e.msg);
    int rounds = cache == DECODE_CACHE_BF16 || cache == DECODE_CACHE_Q8;
    decode_cache ref_cache = cache == DECODE_CACHE_Q8 ? DECODE_CACHE_Q8R : DECODE_CACHE_ROUNDED;
    if (rounds && decode_init(&dr, &mdl, B, M, ref_cache, &e))
        CHECK(0, "%s: setup: %s", label, e.msg);
    /* streams are rows: prompt [B, P], then T tokens per stream: random text with words,
     * sentence ends and blank lines, and its coordinates (data/units.c) */
    static const char alphabet[] = "abcde fgh. ij!\n\n";
    uint8_t stream[MAXB][PMAX + T];
    int32_t co[MAXB][PMAX + T][TXL_N_COORDS];
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < P + T; i++)
            stream[b][i] = (uint8_t)alphabet[(int)((tl_uniform(&r, 0.5f) + 0.5f) * 17) % 17];
        units_state us;
        units_config uc = {.anchors = 0};
        units_init(&us, &uc);
        units_tokenize(&us, stream[b], P + T, NULL, &co[b][0][0]);
    }
    txl_tok toks[T][MAXB];
    int32_t tco[T][MAXB][TXL_N_COORDS];
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++) {
            toks[t][b] = stream[b][P + t];
            memcpy(tco[t][b], co[b][P + t], sizeof tco[t][b]);
        }
    fwd_opts fo = {.training = 0};
    /* the prompt: segments of 5 (the last one shorter), through the ordinary forward */
    txl_tok seg[MAXB * 5];
    int32_t sco[MAXB * 5][TXL_N_COORDS];
    for (int at = 0, len = P < 5 ? P : 5; at < P; at += len, len = P - at < 5 ? P - at : 5) {
        for (int b = 0; b < B; b++) {
            for (int i = 0; i < len; i++)
                seg[b * len + i] = stream[b][at + i];
            memcpy(sco[b * len], co[b][at], (size_t)len * sizeof sco[0]);
        }
        fo.coords = &sco[0][0];
        model_forward(&mdl, &A, &mem_a, seg, NULL, len, &fo);
    }
    memcpy(mem_b.buf, mem_a.buf, (size_t)c.n_layer * B * M * c.d_model * sizeof(float));
    if (mem_a.coords)
        memcpy(mem_b.coords, mem_a.coords, (size_t)B * M * TXL_N_COORDS * sizeof(int32_t));
    mem_b.m = mem_a.m;
    decode_prime(&ds, &mdl, &mem_b, P);
    if (dr.buf)
        decode_prime(&dr, &mdl, &mem_b, P);
    double worst = 0, worst_mem = 0, worst_r = 0;
    for (int t = 0; t < T; t++) {
        fo.coords = &tco[t][0][0];
        model_forward(&mdl, &A, &mem_a, toks[t], NULL, 1, &fo);
        decode_step(&ds, &mdl, toks[t], &tco[t][0][0]);
        static double ref[MAXB * 256];
        static float lp[MAXB * 256];
        if (dr.buf) { /* the bf16 (q8) cache against the fp32 one of its rounded values */
            decode_step(&dr, &mdl, toks[t], &tco[t][0][0]);
            for (int v = 0; v < B * 256; v++)
                ref[v] = decode_logits(&dr)[v];
            worst_r = fmax(worst_r, tl_max_rel_err(decode_logits(&ds), ref, (size_t)B * 256, 1e-30));
            model_mem mr = mem_b;
            mr.buf = NULL;
            if (mem_init(&mr, &c, B, M, &e) == 0) {
                decode_sync_mem(&dr, &mr);
                decode_sync_mem(&ds, &mem_b);
                size_t n = (size_t)c.n_layer * B * M * c.d_model;
                static double refm2[2 * MAXB * 80 * 32];
                for (size_t k = 0; k < n; k++)
                    refm2[k] = mr.buf[k];
                worst_r = fmax(worst_r, tl_max_rel_err(mem_b.buf, refm2, n, 1e-30));
                mem_free(&mr);
            }
        }
        model_row_logprobs(&mdl, &A, 0, B, lp); /* the full softmax: A.logits itself */
        for (int v = 0; v < B * 256; v++)
            ref[v] = lp[v];
        worst = fmax(worst, tl_max_rel_err(decode_logits(&ds), ref, (size_t)B * 256, 1e-30));
        decode_sync_mem(&ds, &mem_b);
        if (mem_a.m != mem_b.m) {
            CHECK(0, "%s: memory rows %d vs %d at token %d", label, mem_a.m, mem_b.m, t);
            break;
        }
        for (int l = 0; l < c.n_layer; l++)
            for (int b = 0; b < B; b++) {
                size_t n = (size_t)mem_a.m * c.d_model, off = (size_t)b * M * c.d_model;
                static double refm[80 * 32];
                for (size_t k = 0; k < n; k++)
                    refm[k] = mem_layer(&mem_a, l)[off + k];
                if (n)
                    worst_mem = fmax(worst_mem,
                                     tl_max_rel_err(mem_layer(&mem_b, l) + off, refm, n, 1e-30));
            }
    }
    int q8 = qt == QT_Q8 && quant_model_type(&mdl) == QT_Q8;
    if (rounds)
        CHECK(worst_r < 2e-3 && worst > 1e-3 && worst_mem > 1e-3 && (qt != QT_Q8 || q8),
              "%-14s B=%d %s weights, %s cache == fp32 cache of the rounded values over %d "
              "tokens (logits, memory): %.2e (tol 2e-3); vs the 1-token forward: logits %.2e, "
              "memory %.2e (the rounding)", label, B, qtype_name(quant_model_type(&mdl)),
              cache == DECODE_CACHE_Q8 ? "q8" : "bf16", T, worst_r, worst, worst_mem);
    else
        CHECK(worst < 1e-5 && worst_mem < 1e-5 && (qt != QT_Q8 || q8),
              "%-14s B=%d %s weights: cached decoding == 1-token forward over %d tokens: logits "
              "%.2e, memory %.2e", label, B, qtype_name(quant_model_type(&mdl)), T, worst,
              worst_mem);
    decode_free(&dr);
    decode_free(&ds);
    mem_free(&mem_a);
    mem_free(&mem_b);
    acts_free(&A);
    model_free(&mdl);
}

static void run_case_ad(const char *label, pos_scheme pos, int pre, int M, int clamp, int B,
                        int P, int ad)
{
    run_case_q(label, pos, pre, M, clamp, B, P, ad, QT_F32, DECODE_CACHE_FP32);
}

static void run_case(const char *label, pos_scheme pos, int pre, int M, int clamp, int B, int P)
{
    run_case_ad(label, pos, pre, M, clamp, B, P, 0);
}

int main(void)
{
    for (int B = 1; B <= 3; B += 2) {
        run_case_ad("adaptive div1", POS_XL, 0, 12, 0, B, 7, 1);
        run_case_ad("adaptive div2", POS_HIER, 1, 12, 0, B, 7, 2);
        run_case_ad("adaptive long", POS_XL, 0, 70, 0, B, 75, 2);
        run_case("xl", POS_XL, 0, 12, 0, B, 7);
        run_case("xl pre", POS_XL, 1, 12, 0, B, 7);
        run_case("xl clamp", POS_XL, 0, 12, 4, B, 7);
        run_case("xl nomem", POS_XL, 0, 0, 0, B, 7);
        run_case("xl terms bd", POS_XL, 0, 12, -(XL_TERM_A | XL_TERM_C), B, 7); /* (clamp < 0: off) */
        run_case("mlp", POS_MLP, 0, 12, 0, B, 7);
        run_case("rope", POS_ROPE, 1, 12, 0, B, 7);
        run_case("alibi", POS_ALIBI, 0, 12, 0, B, 7);
        run_case("absolute", POS_ABSOLUTE, 0, 12, 0, B, 7);
        run_case("none", POS_NONE, 1, 12, 0, B, 7);
        run_case("hier", POS_HIER, 0, 12, 0, B, 7);
        run_case("hier pre", POS_HIER, 1, 12, 0, B, 7);
        run_case("fire", POS_FIRE, 0, 12, 0, B, 7); /* L near 6: rows on both sides */
        run_case("t5", POS_T5, 1, 12, 0, B, 7);
        /* a memory of 70 rows from the prompt: decode_prime projects it in two blocks */
        run_case("xl long", POS_XL, 0, 70, 0, B, 75);
        run_case("rope long", POS_ROPE, 0, 70, 0, B, 75);
        run_case("hier long", POS_HIER, 1, 70, 0, B, 75);
        run_case("fire long", POS_FIRE, 1, 70, 0, B, 75);
        /* quantized weights, the bf16 cache, both; 5 streams: qgemm's groups of 4 */
        int Bq = B == 1 ? 1 : 5;
        run_case_q("q8 xl", POS_XL, 0, 12, 0, Bq, 7, 0, QT_Q8, DECODE_CACHE_FP32);
        run_case_q("bf16 xl pre", POS_XL, 1, 12, 0, Bq, 7, 0, QT_BF16, DECODE_CACHE_FP32);
        run_case_q("q8 xl long", POS_XL, 0, 70, 0, Bq, 75, 0, QT_Q8, DECODE_CACHE_BF16);
        run_case_q("q8 adaptive", POS_XL, 0, 12, 0, Bq, 7, 1, QT_Q8, DECODE_CACHE_FP32);
        run_case_q("fp32 rope", POS_ROPE, 1, 12, 0, Bq, 7, 0, QT_F32, DECODE_CACHE_BF16);
        run_case_q("q8 mlp", POS_MLP, 0, 12, 0, Bq, 7, 0, QT_Q8, DECODE_CACHE_BF16);
        run_case_q("bf16 hier", POS_HIER, 0, 12, 0, Bq, 7, 0, QT_BF16, DECODE_CACHE_BF16);
        /* the q8 cache: xl's bf16 position rows, rope's rotated keys, a distance bias, fire's
         * per-step row; the long memory moves its windows (and scales) back to the front */
        run_case_q("q8c xl", POS_XL, 0, 12, 0, Bq, 7, 0, QT_F32, DECODE_CACHE_Q8);
        run_case_q("q8c xl long", POS_XL, 0, 70, 0, Bq, 75, 0, QT_Q8, DECODE_CACHE_Q8);
        run_case_q("q8c rope pre", POS_ROPE, 1, 12, 0, Bq, 7, 0, QT_F32, DECODE_CACHE_Q8);
        run_case_q("q8c alibi", POS_ALIBI, 0, 12, 0, Bq, 7, 0, QT_BF16, DECODE_CACHE_Q8);
        run_case_q("q8c fire", POS_FIRE, 0, 12, 0, Bq, 7, 0, QT_F32, DECODE_CACHE_Q8);
        run_case_q("q8c adaptive", POS_XL, 0, 12, 0, Bq, 7, 2, QT_F32, DECODE_CACHE_Q8);
    }
    /* bf16 precision, 5 streams: the products on the matrix units where the CPU has them,
     * and xl's bf16 position rows transposed (decode.c: rkT16), against the fp32 cache of the
     * rounded values (its fp32 rows transposed: the same chains; measured 0 apart). Each
     * product rounds its inputs to bf16 here, so two paths whose sums differ by float
     * rounding (a q8 cache's scale applied after the sum, against q s summed) can round an
     * activation a step of 2^-9 apart (4e-3 of the logits once, q8 cache, xl, 12 rows): the
     * cases kept are those whose paths agree below that. */
    if (gemm_set_precision(GEMM_BF16) == 0) {
        run_case_q("bf16p bf16c xl", POS_XL, 0, 12, 0, 5, 7, 0, QT_F32, DECODE_CACHE_BF16);
        run_case_q("bf16p bf16c long", POS_XL, 0, 70, 0, 5, 75, 0, QT_BF16, DECODE_CACHE_BF16);
        run_case_q("bf16p q8c long", POS_XL, 0, 70, 0, 5, 75, 0, QT_BF16, DECODE_CACHE_Q8);
        run_case_q("bf16p q8c rope", POS_ROPE, 0, 12, 0, 5, 7, 0, QT_F32, DECODE_CACHE_Q8);
        gemm_set_precision(GEMM_FP32);
    }
    return tl_done("test_decode");
}

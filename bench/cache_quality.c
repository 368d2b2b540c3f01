/* cache_quality.c (bench/quant.sh, make bench-quant): what the decoding cache's rounding
 * (txl sample --cache, model/decode.h) costs in bits per byte. A byte model's checkpoint
 * decodes held-out text one byte at a time through decode.h's cached steps, as sampling
 * does, but fed the text's own next byte instead of a drawn one: STREAMS streams, each a
 * consecutive piece of the text, from an empty memory that fills to MEM_LEN rows and then
 * slides. The bits per byte of every byte after the first of each stream are summed in
 * double for an fp32 cache, then a bf16 and a q8 cache over the same bytes; the products
 * are fp32 (txl's default precision), so the cache is the only difference.
 *
 * usage: cache_quality CKPT CORPUS FROM BYTES STREAMS MEM_LEN [MEM_LEN ...]
 *   FROM: where the text starts, as a fraction of the corpus (0.95: the test split of
 *   split [0.9, 0.05, 0.05]); BYTES: the bytes decoded in all. One thread.
 * Prints one JSON line per mem_len: {"mem_len", "streams", "bytes", "fp32_bpc", "bf16_bpc",
 * "q8_bpc"}. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../api/api.h"
#include "../common/par.h"
#include "../data/corpus.h"
#include "../data/units.h"
#include "../model/decode.h"

static void die(const char *what, const txl_err *e)
{
    fprintf(stderr, "cache_quality: %s%s%s\n", what, e ? ": " : "", e ? e->msg : "");
    exit(2);
}

/* The bits of text[b][t + 1] after text[b][0 .. t], summed over the streams and t < T - 1,
 * through a cache of type `cache` and mem_len M. */
static double decode_bits(const model *mdl, const uint8_t *text, const int32_t *co, int B,
                          int T, int M, decode_cache cache)
{
    const model_config *c = &mdl->cfg;
    decode_state ds;
    model_mem mem;
    txl_err e;
    if (mem_init(&mem, c, B, M, &e) || decode_init(&ds, mdl, B, M, cache, &e))
        die("setup", &e);
    mem.m = 0;
    decode_prime(&ds, mdl, &mem, 0);
    txl_tok *tok = malloc(sizeof *tok * (size_t)B);
    int32_t *tco = malloc(sizeof *tco * (size_t)B * TXL_N_COORDS);
    double bits = 0;
    for (int t = 0; t + 1 < T; t++) {
        for (int b = 0; b < B; b++) {
            tok[b] = text[(size_t)b * T + t];
            memcpy(tco + (size_t)b * TXL_N_COORDS, co + ((size_t)b * T + t) * TXL_N_COORDS,
                   sizeof *tco * TXL_N_COORDS);
        }
        decode_step(&ds, mdl, tok, tco);
        const float *lg = decode_logits(&ds);
        for (int b = 0; b < B; b++) { /* log-softmax of the full softmax's logits */
            const float *l = lg + (size_t)b * c->vocab;
            double mx = -INFINITY, s = 0;
            for (int v = 0; v < c->vocab; v++)
                mx = fmax(mx, l[v]);
            for (int v = 0; v < c->vocab; v++)
                s += exp(l[v] - mx);
            bits += (mx + log(s) - l[text[(size_t)b * T + t + 1]]) / log(2.0);
        }
    }
    free(tok);
    free(tco);
    decode_free(&ds);
    mem_free(&mem);
    return bits;
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: cache_quality CKPT CORPUS FROM BYTES STREAMS MEM_LEN [MEM_LEN ...]\n");
        return 2;
    }
    txl_err e;
    par_set_threads(1);
    txl_model *m = txl_model_load(argv[1], &e);
    if (!m)
        die(argv[1], &e);
    const model *mdl = &m->mdl;
    if (m->vocab || mdl->cfg.vocab != 256 || adapt_in_use(&mdl->cfg))
        die("a byte model with the full softmax is needed", NULL);
    double from = atof(argv[3]);
    long bytes = atol(argv[4]);
    int B = atoi(argv[5]);
    corpus cor;
    if (corpus_open(&cor, argv[2], &e))
        die(argv[2], &e);
    if (!(from >= 0 && from < 1) || B < 1 || bytes < 2L * B)
        die("FROM in [0, 1), STREAMS >= 1 and BYTES >= 2 STREAMS expected", NULL);
    size_t off = (size_t)(from * (double)cor.len);
    int T = (int)(bytes / B);
    if (off + (size_t)B * T > cor.len)
        die("the corpus is shorter than FROM + BYTES", NULL);
    uint8_t *text = malloc((size_t)B * T);
    int32_t *co = malloc(sizeof *co * (size_t)B * T * TXL_N_COORDS);
    if (!text || !co)
        die("out of memory", NULL);
    if (corpus_read(&cor, off, text, (size_t)B * T, &e))
        die(argv[2], &e);
    for (int b = 0; b < B; b++) { /* each stream's text coordinates from its own start */
        units_state us;
        units_config uc = {.anchors = 0};
        units_init(&us, &uc);
        units_tokenize(&us, text + (size_t)b * T, (size_t)T, NULL, co + (size_t)b * T * TXL_N_COORDS);
    }
    for (int i = 6; i < argc; i++) {
        int M = atoi(argv[i]);
        double n = (double)B * (T - 1), b32 = decode_bits(mdl, text, co, B, T, M, DECODE_CACHE_FP32);
        double b16 = decode_bits(mdl, text, co, B, T, M, DECODE_CACHE_BF16);
        double b8 = decode_bits(mdl, text, co, B, T, M, DECODE_CACHE_Q8);
        printf("{\"mem_len\":%d,\"streams\":%d,\"bytes\":%.0f,\"fp32_bpc\":%.6f,\"bf16_bpc\":%.6f,"
               "\"q8_bpc\":%.6f}\n", M, B, n, b32 / n, b16 / n, b8 / n);
        fflush(stdout);
    }
    free(text);
    free(co);
    corpus_close(&cor);
    txl_model_free(m);
    return 0;
}

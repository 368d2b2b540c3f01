/* vocab_encode.c: GPT-2's encoding speed of txl's bpe encoder (data/vocab.h) on a text held
 * in memory, one thread, the vocabulary imported beforehand (not timed): the best of REPS
 * encodings, each with a fresh encoder (its piece cache cold, as a text's first encoding).
 * usage: vocab_encode ENCODER.json VOCAB.bpe TEXT REPS  -> "tokens seconds" */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../data/vocab.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: vocab_encode ENCODER.json VOCAB.bpe TEXT REPS\n");
        return 2;
    }
    txl_err e = {0};
    vocab *v = vocab_import_gpt2(argv[1], argv[2], &e);
    FILE *f = v ? fopen(argv[3], "rb") : NULL;
    if (!f) {
        fprintf(stderr, "vocab_encode: %s\n", v ? argv[3] : e.msg);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *text = malloc((size_t)n + 1);
    if (!text || fread(text, 1, (size_t)n, f) != (size_t)n)
        return 1;
    fclose(f);
    double best = 1e30;
    size_t tokens = 0;
    for (int r = 0; r < atoi(argv[4]); r++) {
        txl_tok *t;
        double t0 = now();
        if (vocab_encode(v, text, (size_t)n, &t, &tokens, &e)) {
            fprintf(stderr, "vocab_encode: %s\n", e.msg);
            return 1;
        }
        double dt = now() - t0;
        best = dt < best ? dt : best;
        free(t);
    }
    printf("%zu %.6f\n", tokens, best);
    free(text);
    vocab_free(v);
    return 0;
}

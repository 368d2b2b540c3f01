/* stream_sample.c: a streaming sampler on libtxl: each byte is printed the moment it is
 * drawn, until a number of bytes or a stop string, for every prompt line read from stdin,
 * the model's memory going on from one line to the next (a dialogue).
 *
 *   stream_sample CKPT [BYTES [STOP]] < prompts.txt
 *
 * CKPT is a checkpoint or a run directory; BYTES (100) bounds each answer; STOP (a newline
 * by default) ends an answer early. Greedy decoding: the same prompts give the same text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <txl.h>

typedef struct {
    const char *stop;      /* the answer ends once its text ends with this */
    char tail[64];         /* the last bytes printed, to see the stop string */
    size_t n_tail;
    long printed, max;
} answer;

static int put_token(void *ctx, int stream, int token, const char *text, size_t len)
{
    answer *a = ctx;
    (void)stream, (void)token; /* an anchor (sentence, paragraph) has no text */
    if ((len && fwrite(text, 1, len, stdout) != len) || fflush(stdout) != 0)
        return -1; /* stdout went away */
    size_t k = strlen(a->stop);
    for (size_t i = 0; i < len; i++) {
        if (a->n_tail == sizeof a->tail) {
            memmove(a->tail, a->tail + 1, sizeof a->tail - 1);
            a->n_tail--;
        }
        a->tail[a->n_tail++] = text[i];
    }
    a->printed += (long)len;
    if (k && a->n_tail >= k && memcmp(a->tail + a->n_tail - k, a->stop, k) == 0)
        return 1;
    return a->printed >= a->max;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: stream_sample CKPT [BYTES [STOP]] < prompts\n");
        return 2;
    }
    long max = argc > 2 ? atol(argv[2]) : 100;
    const char *stop = argc > 3 ? argv[3] : "\n";
    txl_err e = {0};
    txl_model *m = txl_model_load(argv[1], &e);
    txl_decode_opts o = {.streams = 1, .mem_len = -1, .temperature = 0, .top_p = 1};
    txl_decoder *d = m ? txl_decoder_new(m, &o, &e) : NULL;
    if (!d) {
        fprintf(stderr, "stream_sample: %s\n", e.msg);
        txl_model_free(m);
        return e.kind == TXL_ERR_INPUT ? 2 : 1;
    }
    char line[4096];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, stdin)) {
        answer a = {.stop = stop, .max = max};
        printf("> %s", line);
        /* the prompt, then its answer; an answer that stopped early ends its line */
        if (txl_decoder_feed(d, line, strlen(line), &e) ||
            txl_decoder_generate(d, 2 * max + 16, put_token, &a, &e) < 0)
            rc = 1;
        else if (a.n_tail == 0 || a.tail[a.n_tail - 1] != '\n')
            putchar('\n');
    }
    if (rc)
        fprintf(stderr, "stream_sample: %s\n", e.msg);
    txl_decoder_free(d);
    txl_model_free(m);
    return rc;
}

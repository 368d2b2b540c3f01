/* sample.h: where `txl sample`'s text goes (sample_sink.c): one sample streamed to stdout as
 * it is drawn, or every sample kept and printed at the end (several samples, --json); --stop
 * strings ending a sample (held back while they may be starting, never printed); the
 * trailing newline of a text that ends without one. */
#ifndef TXL_SAMPLE_H
#define TXL_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "../include/txl.h"

#define SAMPLE_MAX_STOPS 8
#define SAMPLE_STOP_MAX 64     /* bytes of a --stop string */

/* Why a sample ended: its -n tokens, a --stop string, the end of -i's answer line. */
enum { SINK_GOING = 0, SINK_LENGTH = 1, SINK_NEWLINE = 2, SINK_STOP = 3 };

typedef struct {
    const txl_model *m;        /* names the anchors */
    int N;                     /* samples */
    int live;                  /* stream 0 goes to stdout as it comes */
    int stop_at_newline;       /* -i: an answer ends its line */
    int show_anchors;
    const char *const *stops;  /* --stop strings, n_stops of them */
    int n_stops;
    long calls;                /* tokens put so far */
    uint8_t *buf;              /* [N][cap] kept text (not live) */
    long cap;
    long *len;                 /* [N] bytes kept */
    int *done;                 /* [N] SINK_* */
    long *bytes;               /* [N] bytes generated (anchors are not bytes) */
    long *tokens;              /* [N] tokens drawn and used (anchors included) */
    long *counted;             /* [N] of those, the tokens -n counts (all but anchors) */
    double *seconds;           /* [N] from the start of generating to the sample's end */
    char (*pend)[SAMPLE_STOP_MAX]; /* [N] text held back: it may begin a stop string */
    int *npend;
    int last;                  /* live: the last byte written (-1: none) */
    long max_tokens;           /* -n: tokens of the vocabulary (anchors come on top) */
    double t0;                 /* when generating started */
    const char *precision;     /* the products' ("fp32", "bf16"): --stats says it */
} sink;

/* A sink for N samples of up to max_tokens tokens of the model's vocabulary, the anchors
 * a model inserts on top (live: stream 0 to stdout; else kept, their most bytes,
 * txl_model_token_text_max a token, checked against the machine before allocating); 0, or
 * -1 with e. */
int sink_init(sink *k, const txl_model *m, int N, long max_tokens, int live, int show_anchors,
              const char *const *stops, int n_stops, txl_err *e);
/* Every stream going again, nothing kept (the next prompt of -i or --prompts). */
void sink_reset(sink *k, double t0);
/* txl_token_fn: stores or prints stream b's next token's text (an anchor: a marker with
 * --show-anchors, else nothing); 0 goes on, 1 when the stream is done (its -n tokens, a
 * stop string, a newline in interactive mode), -1 when stdout went away. */
int sink_put(void *ctx, int stream, int token, const char *text, size_t len);
/* The end of a generate: what each stream still holds back (no stop string came) written,
 * the end time of those still going. Live: a newline after a text that ends without one.
 * 0, or -1 when stdout failed. */
int sink_end(sink *k, double now);
/* The kept samples, each followed by a line of dashes (its text first ended by a newline);
 * or with json one object per line: sample, prompt (its index, or null), text, tokens,
 * bytes, seconds, finish ("length", "stop", "newline"). 0, or -1 when stdout failed. */
int sink_print(const sink *k, int json, long prompt_index);
void sink_free(sink *k);

#endif

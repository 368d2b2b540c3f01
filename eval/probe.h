/* probe.h: what the probes share (eval/probe.c; probe_*.c: one probe each; api/probe.c:
 * include/txl.h's txl_probe over them): the model, the text they draw from, the settings,
 * the rows they report, statistics. A probe prints nothing but progress lines: its results
 * are rows, each its JSON and its table line, handed to the caller's function. */
#ifndef TXL_PROBE_H
#define TXL_PROBE_H

#include <stdint.h>
#include <stdio.h>

#include "../common/rng.h"
#include "../data/corpus.h"
#include "../data/units.h"
#include "../config/config.h"
#include "streams.h"

typedef enum { MODE_MEMORY, MODE_WINDOW, MODE_BOTH } probe_mode;

/* The most values of a list setting. */
#define PROBE_MAX_LIST TXL_PROBE_MAX_LIST

typedef struct {
    int v[PROBE_MAX_LIST];
    int n;                  /* 0: the probe's default */
} probe_list;

/* A probe's settings, defaults resolved (api/probe.c fills them from txl_probe_opts). */
typedef struct {
    const char *kind;       /* "needle", "recall", "shift" */
    const char *ckpt;       /* the checkpoint, for messages */
    int trials, string_len;
    long max_tokens;
    unsigned long long seed;
    probe_list lengths, depths, distances, offsets;
    probe_mode mode;
} probe_opts;

/* A row as a probe writes it: its JSON (the line txl probe --json prints) and its table
 * line, each into a memory stream, without their newlines (probe_row_begin), handed to
 * the caller's function by probe_row_end. */
typedef struct {
    FILE *json, *text;
    char *jbuf, *tbuf;
    size_t jlen, tlen;
} probe_row;

/* What a probe runs on, and where its rows go. */
typedef struct {
    const probe_opts *a;
    const run_config *cfg;  /* the model's */
    model *mdl;
    const vocab *v;         /* the model's vocabulary (NULL: bytes) */
    units_config units;     /* the model's anchors (data/units.h) */
    int coords;             /* its scheme reads coordinates */
    corpus c;
    token_span span;
    const char *label;      /* the split's name, or "file" */
    int T, M;               /* the trained (or the options') lengths */
    long step;
    int progress;           /* progress lines on stderr */
    int (*fn)(void *ctx, const txl_probe_row *row); /* the rows' destination */
    void *ctx;
    char head[128];         /* the table's heading (the probe sets it before its first row) */
    int rows;               /* table rows handed over so far */
} probe_ctx;

/* Opens a row's two streams: 0, or -1 with e (out of memory). */
int probe_row_begin(probe_row *r, txl_err *e);
/* Closes the row's streams and hands it to p->fn as a row of p's table (mode: "memory",
 * "window" or NULL; the heading goes with the table's first row); frees it either way.
 * Returns fn's value, or -1 with e (out of memory). */
int probe_row_end(probe_ctx *p, probe_row *r, const char *mode, int summary, txl_err *e);
/* A remark for people (a row with only its note set): fn's value. */
int probe_note(probe_ctx *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Draws n bytes of the span's text from a random offset into buf. */
int probe_text(const probe_ctx *p, rng_t *r, uint8_t *buf, size_t n, txl_err *e);
/* B texts of nbytes bytes as the model's tokens: its anchors inserted (the same rules as
 * training), coordinates when its scheme reads them. Anchors make the streams' token counts
 * differ; the streams are aligned at their end by padding the shorter ones on the left with
 * spaces (PROBE_PAD), never by cutting a text: every byte of every text is in its stream
 * (doc/design.md, "Probes", on why the pad biases nothing). map[b][i] is the token index of
 * byte i of text b (its last token, the byte itself; an anchor before it sits just before);
 * without anchors there is no pad and the map is the identity. */
#define PROBE_PAD ' '
typedef struct {
    int B, n, nbytes;       /* texts, tokens per stream, bytes per text */
    txl_tok *tok;           /* [B][n] */
    int32_t *co;            /* [B][n][TXL_N_COORDS], or NULL */
    int *map;               /* [B][nbytes] */
    int *pad;               /* [B] pad tokens before text b: its first token is pad[b] */
    int pad_max;            /* the largest */
} probe_tokens;

int probe_tokenize(const probe_ctx *p, const uint8_t *bytes, int B, int nbytes,
                   probe_tokens *pt, txl_err *e);
void probe_tokens_free(probe_tokens *pt);
/* Bits of the tokens that make bytes [a, b_end) of stream b (with any anchor inserted
 * among them), from the per-target losses of a feed of the whole stream (loss [B][n-1]:
 * loss[j] is that of token j+1). */
double probe_bits(const probe_tokens *pt, const float *loss, int b, int a, int b_end);
/* 1 when a token of text b (its anchors included) is not in its stream: the probe would
 * score a context it did not feed. The alignment above never cuts, so the cells' JSON
 * count of such trials (cut_trials) is 0; it is there to be checked. */
int probe_cut(const probe_tokens *pt, int b);
/* Plans stream_eval for the lengths of a mode: memory = the trained segments and memory,
 * window = one window of `len` without memory. */
int probe_streams(const probe_ctx *p, probe_mode mode, int B, int len, stream_eval *s,
                  txl_err *e);

/* A mean and its 95% interval (Student's t) over n values. */
typedef struct {
    double mean, lo, hi;
} stat_ci;

stat_ci stat_mean(const double *v, int n);
/* A proportion k/n and its 95% Wilson interval. */
stat_ci stat_proportion(int k, int n);
/* ,"name":x,"name_ci":[lo,hi] (JSON; non-finite values as null), to f */
void print_ci(FILE *f, const char *name, stat_ci s);
/* A finite number, or null (JSON has no NaN or Infinity), to f. */
void print_num(FILE *f, double x);

/* Sorts v[0..n) ascending and drops repeats; returns the new count. */
int probe_sort_unique(int *v, int n);

/* The probes: each hands its rows to p->fn as it computes them; 0, fn's non-zero value
 * (the probe stopped there), or -1 with e. */
int probe_needle(probe_ctx *p, txl_err *e);
int probe_recall(probe_ctx *p, txl_err *e);
int probe_shift(probe_ctx *p, txl_err *e);

/* Exact match of a greedy continuation: every one of n targets was the most likely token
 * (a greedy decoder then reproduces them all; else it leaves them at the first miss). */
int probe_exact(const uint8_t *hit, int n);

#endif

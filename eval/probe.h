/* probe.h: what the probes of `txl probe` share (eval/probe.c; probe_*.c: one probe each;
 * cmd/probe.c: the command): the loaded model, the text they draw from, the settings,
 * statistics. */
#ifndef TXL_PROBE_H
#define TXL_PROBE_H

#include <stdint.h>

#include "../common/rng.h"
#include "../data/corpus.h"
#include "../data/units.h"
#include "../cmd/cli.h"
#include "streams.h"

typedef enum { MODE_MEMORY, MODE_WINDOW, MODE_BOTH } probe_mode;

typedef struct {
    const char *kind, *ckpt, *data;
    int split;
    long trials, tgt_len, mem_len, threads, string_len, max_tokens;
    unsigned long long seed;
    cli_list lengths, depths, distances, offsets;
    int mode, json, quiet;
} probe_args;

/* What a probe runs on. */
typedef struct {
    const probe_args *a;
    run_config cfg;
    model mdl;
    units_config units;     /* the model's anchors (data/units.h) */
    int coords;             /* its scheme reads coordinates */
    corpus c;
    token_span span;
    const char *label;      /* the split's name, or "file" */
    int T, M;               /* the trained (or --tgt-len/--mem-len) lengths */
    long step;
    int progress;
} probe_ctx;

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
/* ,"name":x,"name_ci":[lo,hi] (JSON; non-finite values as null) */
void print_ci(const char *name, stat_ci s);
/* A finite number, or null (JSON has no NaN or Infinity). */
void print_num(double x);

/* Sorts v[0..n) ascending and drops repeats; returns the new count. */
int probe_sort_unique(int *v, int n);

int probe_needle(probe_ctx *p, txl_err *e);
int probe_recall(probe_ctx *p, txl_err *e);
int probe_shift(probe_ctx *p, txl_err *e);

/* Exact match of a greedy continuation: every one of n targets was the most likely token
 * (a greedy decoder then reproduces them all; else it leaves them at the first miss). */
int probe_exact(const uint8_t *hit, int n);

#endif

/* train_state.h: the training state a checkpoint carries so that --resume continues a run
 * exactly (doc/design.md, "Checkpoints" metadata: step, tokens, best_valid_loss, data position,
 * ...).
 *
 * One table (train_state.c) lists every metadata key with its type, its field and its
 * range; the same table writes the strings and reads them back. Reading is strict: a
 * missing key, a sign, an exponent, hex, garbage or a value out of range is ERR_INPUT
 * naming the file and the key, never a default. */
#ifndef TXL_TRAIN_STATE_H
#define TXL_TRAIN_STATE_H

#include <stddef.h>

#include "../common/err.h"
#include "safetensors.h"

typedef struct {
    long step;                /* steps completed */
    long long tokens;         /* training tokens consumed (B * segment length, summed) */
    double best_valid;        /* best validation loss so far (nats), INFINITY if none */
    long epoch;               /* completed passes over the train split */
    size_t data_pos;          /* batcher position within the streams */
    double log_sum;           /* loss sum of the current log interval (nats) */
    long log_n;               /* steps in it */
    double elapsed;           /* training seconds: of earlier invocations while training;
                               * up to this step in a checkpoint */
    double norm_mean;         /* running mean of the applied steps' gradient norms
                               * (skip_outlier) */
    long norm_count;          /* applied steps in it */
    long skipped;             /* steps skipped as gradient-norm outliers */
    size_t train_tokens;      /* tokens of the train split (a resume must see the same) */
    unsigned long long seed;  /* train.seed of the run that wrote it */
    size_t params;            /* parameter count (Adam moments not counted) */
    double valid_loss;        /* validation loss at this step, NaN if none; written only */
    double best_valid_bpc;    /* the bits per byte of the best validation, INFINITY if none
                               * (absent before txl 0.3: best_valid / ln 2, a byte model's) */
    double valid_bpc;         /* the bits per byte at this step, NaN if none; written only */
} train_state;

#define TRAIN_STATE_KEYS 17

/* The metadata strings of s: kv holds key, value, key, value, ..., NULL for ckpt_save;
 * the values live in buf. */
typedef struct {
    const char *kv[2 * TRAIN_STATE_KEYS + 1];
    char buf[TRAIN_STATE_KEYS][40];
} train_state_meta;

void train_state_format(const train_state *s, train_state_meta *m);

/* Reads every key of the table (but valid_loss) from f's metadata into *s; on error *s is
 * unchanged and e names f->path and the key. */
int train_state_read(train_state *s, const st_file *f, txl_err *e);

/* What a checkpoint's state must agree with: its model's parameter count, and the streams
 * (train.batch_size x grad_accum) and segment length (model.tgt_len) it was trained with. */
typedef struct {
    size_t params;
    int streams, tgt_len;
} train_run;

/* Every key of the table present in f's metadata (exports and imports hold some of them)
 * valid as train_state_read reads it (valid_loss too: a number >= 0, inf or nan), and the
 * keys agreeing with each other and with r: params is r's, step = grad_norm_count +
 * skipped_steps (a step is applied or skipped), epoch <= step, log_steps <= step, and
 * step x streams <= tokens <= step x streams x tgt_len (a step feeds every stream one
 * segment). What every reader of a checkpoint checks (cmd/cli.c, --resume); ERR_INPUT
 * naming the file and the key. */
int train_state_check(const st_file *f, const train_run *r, txl_err *e);

#endif

/* evaluate.h: one deterministic pass of the stream batching over a token span, with memory
 * carried across segments (DESIGN.md §6). Shared by `txl eval` and training's validation. */
#ifndef TXL_EVALUATE_H
#define TXL_EVALUATE_H

#include <stddef.h>

#include "../data/corpus.h"
#include "../model/model.h"

typedef struct {
    int batch, tgt_len, mem_len;
    int warmup;           /* score only segments whose memory is already full */
    size_t max_tokens;    /* use only the first max_tokens of the span (0 = all) */
    int progress;         /* redraw a progress line on stderr (TTY) */
    const char *label;    /* for the progress line */
    size_t max_segments;  /* stop after this many segments (0 = the whole pass) */
    term_stats *stats;    /* [n_layer] score-term statistics to accumulate, or NULL */
    int distributed;      /* split the streams over the MPI ranks (common/dist.h); every rank
                             gets the global result */
    long pos_offset;      /* added to every absolute position (txl probe shift) */
} eval_opts;

typedef struct {
    double loss;          /* mean nats per scored token */
    size_t tokens;        /* scored tokens */
    size_t segments;      /* segments run (scored or not) */
    double seconds;
} eval_result;

/* Plans its own activations and memory (inference mode) for the options' lengths, runs the
 * pass and frees them. mdl->cfg.clamp_len etc. are taken from `cfg` (a copy whose
 * clamp_len may be overridden). */
int eval_span(model *mdl, const model_config *cfg, token_span s, const eval_opts *o,
              eval_result *r, txl_err *e);

#endif

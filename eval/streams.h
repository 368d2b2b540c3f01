/* streams.h: B token streams of the caller's making (the probes' contexts) fed through the
 * model segment by segment with memory carried, the loss and the greedy hit of every
 * target kept, and the memory saved and restored between feeds, so streams that share a
 * prefix compute it once (doc/design.md, "Probes"). */
#ifndef TXL_STREAMS_H
#define TXL_STREAMS_H

#include <stddef.h>
#include <stdint.h>

#include "../model/kv_cache.h"
#include "../model/model.h"

/* Rows of the next-token distribution formed at a time for the greedy hits: an adaptive
 * softmax reads all its weights once per group (model_row_logprobs). */
#define STREAM_LP_ROWS 32

typedef struct {
    model *mdl;
    model_config cfg;
    int B, T, M;          /* streams, segment length, memory length */
    long pos_offset;      /* added to absolute positions (fwd_opts.pos_offset) */
    model_acts A;
    model_mem mem;
    kv_cache kv;          /* the memory's keys and values (model.h) */
    txl_tok *x, *y;       /* [B, T] one segment */
    int32_t *co;          /* [B, T, TXL_N_COORDS] its coordinates (schemes that read them) */
    float *lp;            /* [STREAM_LP_ROWS, V] rows of the distribution (the greedy hits) */
    double tokens;        /* tokens fed so far, all streams (for tokens/s) */
} stream_eval;

/* Plans activations and memory for B streams, segments of T, memory M. */
int streams_init(stream_eval *s, model *mdl, const model_config *cfg, int B, int T, int M,
                 txl_err *e);
/* The bytes streams_init allocates for the same arguments (without allocating them). */
int streams_plan_bytes(const model_config *cfg, int B, int T, int M, double *bytes,
                       txl_err *e);
void streams_free(stream_eval *s);
/* Forgets the memory: the next feed starts the streams. */
void streams_reset(stream_eval *s);

/* Feeds n positions of every stream: inputs x and targets y (row b at b * ld; y may be
 * NULL: nothing scored), coordinates co ([B][ld][TXL_N_COORDS] rows at the same indices;
 * NULL when the scheme needs none), in segments of at most T continuing the memory. For
 * each position i < n, loss[b * ld + i] gets the target's loss in nats and hit[...] 1 when
 * the most likely token is the target (either may be NULL). */
void streams_feed(stream_eval *s, const txl_tok *x, const txl_tok *y, const int32_t *co,
                  int n, size_t ld, float *loss, uint8_t *hit);

/* The memory as it stands, into *snap (allocated by streams_snapshot_init), and back. */
int streams_snapshot_init(const stream_eval *s, model_mem *snap, txl_err *e);
void streams_save(stream_eval *s, model_mem *snap);
void streams_restore(stream_eval *s, const model_mem *snap);

#endif

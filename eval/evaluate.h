/* evaluate.h: one deterministic pass of the stream batching over a split's tokens, with
 * memory carried across segments (doc/design.md, "Evaluation"). Shared by `txl eval`, the
 * training's validation and `txl probe shift`. Every token after the first is scored once
 * (data/tokens.h: the streams, then the tail on the last stream). */
#ifndef TXL_EVALUATE_H
#define TXL_EVALUATE_H

#include <stddef.h>

#include "../data/tokens.h"
#include "../model/kv_cache.h"
#include "../model/model.h"

typedef struct {
    int batch, tgt_len, mem_len;
    int warmup;           /* score only segments whose memory is already full */
    size_t max_tokens;    /* use only the first max_tokens tokens (0 = all) */
    int progress;         /* redraw a progress line on stderr (TTY) */
    const char *label;    /* for the progress line ("valid", "test 4x", ...) */
    size_t max_segments;  /* stop after this many segments (0 = the whole pass) */
    term_stats *stats;    /* [n_layer] score-term statistics to accumulate, or NULL */
    int distributed;      /* split the streams over the MPI ranks (common/dist.h); every rank
                             gets the global result */
    long pos_offset;      /* added to every absolute position (txl probe shift) */
    txl_tok anchor_base;  /* the first anchor's id (the tokenizer's V; 0: 256, bytes) */
    int same_length;      /* every query sees mem_len keys, its own included (fewer only
                             while the memory fills): txl eval --same-length; mem_len > 0 */
    int whole_batch;      /* run every stream at once, never in groups (eval_plan.ng): what
                             the tests hold the groups to */
} eval_opts;

typedef struct {
    double loss;          /* nats per scored token (anchors included) */
    double bpc;           /* bits per byte of text: the bits of every scored token (anchors
                             included) over the bytes of text those targets cover
                             (doc/design.md, "Vocabularies": Metrics) */
    size_t tokens;        /* scored tokens (anchors included) */
    size_t bytes;         /* the bytes of text they cover */
    size_t anchor_tokens; /* of the tokens, anchors */
    double anchor_bits;   /* bits spent on the anchors, in all */
    size_t segments;      /* segments run (scored or not) */
    double seconds;
    double cpu_seconds;   /* the process's CPU time over the pass (all threads) */
    double gemm_share;    /* of the threads' time (this rank's), the part spent in GEMMs */
} eval_result;

/* Plans its own activations and memory (inference mode) for the options' lengths, runs the
 * pass and frees them. `cfg` is the model's config (a copy whose clamp_len may be
 * overridden). */
int eval_stream(model *mdl, const model_config *cfg, const tok_stream *ts, const eval_opts *o,
                eval_result *r, txl_err *e);

/* This rank's streams of a pass, their buffers and sums (evaluate.c). */
typedef struct eval_pass {
    model *mdl;
    const eval_opts *o;
    model_acts A;
    model_mem mem;
    kv_cache kv;          /* the memory's keys and values (buf NULL: none) */
    int nb;               /* streams it runs at once (of a group, when the plan has groups) */
    size_t b0;            /* its first stream in the batch (a replica's: in the rank's) */
    txl_tok *x, *y;       /* [batch, tgt_len] */
    uint32_t *yb;         /* [batch, tgt_len] the bytes of text of each target */
    int32_t *co;          /* their coordinates, or NULL */
    double nats, anchor_nats;
    size_t tokens, anchors, bytes;
    double *seg_nats;     /* groups: per segment, its nats and its anchors' nats summed so */
    double *seg_anchor;   /* far, in the order of its rows (NULL without groups) */
} eval_pass;

/* A pass planned once and run again and again over the same tokens with the weights of the
 * moment (training's term statistics): eval_plan_init allocates everything the pass needs,
 * the tail's one-stream pass too when the pass will reach the tail, and checks that the
 * tokens hold the streams; eval_plan_run starts from an empty memory each time and
 * allocates nothing. `cfg`, `ts` and `o` (by value) must outlive the plan; the plan must not
 * be moved once initialised. */
typedef struct {
    const model_config *cfg;
    tok_stream ts;        /* a view: the first max_tokens tokens */
    eval_opts o, o_tail;  /* o_tail: the tail's, batch 1 */
    int nr, rank;         /* ranks the streams are split over, and this one */
    eval_pass p, tail;    /* tail: batch 1, planned only when the pass reaches it */
    int has_tail;
    int R;                /* replicas: threads each running p.nb / R of this rank's streams
                             whole (rep[r], its own activations and memory; p holds the
                             batch buffers and, after the pass, the sums), or 1 (p runs all
                             streams, the threads split each op) */
    eval_pass *rep;       /* [R] when R > 1 */
    int ng;               /* groups: a long memory's pass runs its streams (a replica's)
                             ng at a time, each group over every segment, so that it holds
                             the memory of fewer streams (evaluate.c, groups_of); 1: none */
    size_t nseg;          /* segments of a pass (max_segments at most) */
} eval_plan;

int eval_plan_init(eval_plan *ep, model *mdl, const model_config *cfg, const tok_stream *ts,
                   const eval_opts *o, txl_err *e);
/* The bytes eval_plan_init (so eval_stream) would allocate for the same arguments, without
 * allocating them: this rank's pass (activations, memory, the memory's keys, the batch's
 * buffers), its replicas, the tail's one-stream pass when it reaches the tail. What a
 * command checks against the machine (sys_check_memory) before the pass. */
int eval_plan_bytes(const model_config *cfg, const tok_stream *ts, const eval_opts *o,
                    double *bytes, txl_err *e);
int eval_plan_run(eval_plan *ep, eval_result *r, txl_err *e);
/* Safe on a zeroed or half-built plan. */
void eval_plan_free(eval_plan *ep);

#endif

/* terms.h: the score-term diagnostics (doc/design.md, "The model": Diagnostics). Per layer,
 * the mean and standard deviation of each of the scheme's score terms over the visible
 * entries of the first segments of an evaluation pass, and a verdict. `txl eval
 * --term-stats` prints them; training logs them as `terms` events every
 * train.term_stats_interval steps. Both run the pass and format the layers here. */
#ifndef TXL_TERMS_H
#define TXL_TERMS_H

#include <stdio.h>

#include "evaluate.h"

/* Segments a term pass runs: eval --term-stats without N, and training's terms events. */
#define TERM_STATS_SEGMENTS TXL_TERM_SEGMENTS

/* A term pass planned once (eval_plan) and run with the weights of the moment; running it
 * allocates nothing. */
typedef struct {
    eval_plan plan;
    term_stats *st;       /* [n_layer] of the last run */
    int n_layer;
    size_t segments;      /* of the last run */
} terms_pass;

/* B streams of tgt_len T with memory M over ts, the first `segments` segments (the tail
 * too when the streams have fewer). cfg and ts must outlive the pass, which must not be
 * moved once initialised. */
int terms_init(terms_pass *tp, model *mdl, const model_config *cfg, const tok_stream *ts,
               int B, int T, int M, size_t segments, txl_err *e);
/* Runs the pass from an empty memory: fresh statistics in tp->st. */
int terms_run(terms_pass *tp, txl_err *e);
/* Safe on a zeroed or half-built pass. */
void terms_free(terms_pass *tp);

/* Layer l's terms: as one JSON object (no newline) {"layer","pos_scheme","entries", one
 * {"mean","std"[,"flag"]} per term name, "verdict": "ok" or "flagged"}, or as table rows
 * (terms_table_head prints their heading). */
void terms_print_layer(FILE *f, const model_config *mc, const term_stats *st, int l, int json);
void terms_table_head(FILE *f);

#endif

/* model_impl.h: what the model's own files share (params.c, plan.c, kv_cache.c, forward.c,
 * backward.c); not for the rest of txl, which includes model.h. It stands below them all
 * (kv_cache.c's functions for the forward are kv_cache.h's). */
#ifndef TXL_MODEL_IMPL_H
#define TXL_MODEL_IMPL_H

#include <math.h>

#include "attention.h"
#include "model.h"

#define ALIGN_FLOATS 16 /* 64-byte alignment of every tensor and buffer */

static inline size_t align_up(size_t n)
{
    return (n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
}

/* The segment as the scheme's hooks see it. */
static inline pos_seg segment_of(const model_acts *A, int Lq, int m, const fwd_opts *o)
{
    return (pos_seg){.c = &A->cfg, .B = A->B, .Lq = Lq, .m = m, .training = o->training,
                     .dropout = o->training ? A->cfg.dropout : 0.0f, .drop_key = o->drop_key,
                     .b_offset = A->b_offset, .pos_offset = o->pos_offset,
                     .coords = A->cat_coords, .acts = (pos_acts *)&A->pos_acts};
}

static inline pos_ctx layer_ctx(model *mdl, model_acts *A, const pos_seg *s, int l, layer_cache *lc)
{
    return (pos_ctx){.s = s, .layer = l, .W = &mdl->W.layer[l], .MW = &mdl->W,
                     .G = mdl->g ? &mdl->G.layer[l] : NULL, .MG = mdl->g ? &mdl->G : NULL,
                     .lc = &lc->pos, .bw = &A->pos_bw, .q = lc->q, .kv = lc->kv};
}

static inline attn_args attn_base(const model_acts *A, const pos_seg *s, int l)
{
    const model_config *c = &A->cfg;
    return (attn_args){.B = s->B, .H = c->n_head, .dh = c->d_head, .Lq = s->Lq, .m = s->m,
                       .scale = (float)(1.0 / sqrt((double)c->d_head)),
                       .dropatt = s->training ? c->dropatt : 0.0f,
                       .drop_key = pos_site_key(s->drop_key, l, SITE_DROPATT),
                       .b_offset = s->b_offset, .threads = A->threads,
                       .row_block = A->attn_row_block, .fused = !A->attn_blas,
                       .amx = !A->attn_blas && A->attn_amx};
}

#endif

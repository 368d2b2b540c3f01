/* streams.c: see streams.h. */
#include "streams.h"

#include <stdlib.h>
#include <string.h>

int streams_init(stream_eval *s, model *mdl, const model_config *cfg, int B, int T, int M,
                 txl_err *e)
{
    memset(s, 0, sizeof *s);
    s->mdl = mdl;
    s->cfg = *cfg;
    s->B = B;
    s->T = T;
    s->M = M;
    /* the key cache first: with one, the activations hold a segment (ACTS_CACHED) */
    kv_cache_init(&s->kv, cfg, B, M, T);
    if (acts_init(&s->A, cfg, B, T, M, kv_cache_on(&s->kv) ? ACTS_CACHED : 0, e)) {
        kv_cache_free(&s->kv);
        return -1;
    }
    if (mem_init(&s->mem, cfg, B, M, e)) {
        acts_free(&s->A);
        kv_cache_free(&s->kv);
        return -1;
    }
    size_t BT = (size_t)B * T;
    s->x = malloc(BT * sizeof *s->x);
    s->y = malloc(BT * sizeof *s->y);
    s->co = malloc(BT * TXL_N_COORDS * sizeof *s->co);
    s->lp = malloc((size_t)STREAM_LP_ROWS * cfg->vocab * sizeof *s->lp);
    if (!s->x || !s->y || !s->co || !s->lp) {
        streams_free(s);
        return err_set(e, ERR_RUNTIME, "out of memory");
    }
    return 0;
}

int streams_plan_bytes(const model_config *cfg, int B, int T, int M, double *bytes,
                       txl_err *e)
{
    double act;
    if (acts_plan_floats(cfg, B, T, M, ACTS_CACHED, &act, e))
        return -1;
    *bytes = 4.0 * act + mem_plan_bytes(cfg, B, M) +
             4.0 * kv_cache_plan_floats(cfg, B, M, T) +
             (double)B * T * (2 * sizeof(txl_tok) + TXL_N_COORDS * sizeof(int32_t)) +
             4.0 * STREAM_LP_ROWS * cfg->vocab;
    return 0;
}

void streams_free(stream_eval *s)
{
    free(s->x);
    free(s->y);
    free(s->co);
    free(s->lp);
    mem_free(&s->mem);
    kv_cache_free(&s->kv);
    acts_free(&s->A);
    memset(s, 0, sizeof *s);
}

void streams_reset(stream_eval *s) { mem_reset(&s->mem); }

/* The target's loss and whether it is the argmax of the distribution (model_row_logprobs,
 * STREAM_LP_ROWS rows at a time), for every row of the segment (row r = b * len + i). */
static void score(stream_eval *s, const txl_tok *y, int len, size_t at, size_t ld,
                  float *loss, uint8_t *hit)
{
    int V = s->cfg.vocab;
    size_t rows = (size_t)s->B * len;
    for (size_t r0 = 0; r0 < rows; r0 += STREAM_LP_ROWS) {
        int n = rows - r0 < STREAM_LP_ROWS ? (int)(rows - r0) : STREAM_LP_ROWS;
        if (hit)
            model_row_logprobs(s->mdl, &s->A, r0, n, s->lp);
        for (int k = 0; k < n; k++) {
            size_t r = r0 + (size_t)k, b = r / (size_t)len, i = r % (size_t)len;
            size_t o = b * ld + at + i;
            if (loss)
                loss[o] = s->A.row_loss[r];
            if (hit) {
                const float *lg = s->lp + (size_t)k * V;
                int best = 0;
                for (int v = 1; v < V; v++)
                    if (lg[v] > lg[best])
                        best = v;
                hit[o] = (txl_tok)best == y[r];
            }
        }
    }
}

void streams_feed(stream_eval *s, const txl_tok *x, const txl_tok *y, const int32_t *co,
                  int n, size_t ld, float *loss, uint8_t *hit)
{
    for (int at = 0; at < n; at += s->T) {
        int len = n - at < s->T ? n - at : s->T;
        for (int b = 0; b < s->B; b++) {
            memcpy(s->x + (size_t)b * len, x + (size_t)b * ld + at, (size_t)len * sizeof *x);
            if (y)
                memcpy(s->y + (size_t)b * len, y + (size_t)b * ld + at, (size_t)len * sizeof *y);
            if (co)
                memcpy(s->co + (size_t)b * len * TXL_N_COORDS,
                       co + ((size_t)b * ld + at) * TXL_N_COORDS,
                       (size_t)len * TXL_N_COORDS * sizeof *co);
        }
        fwd_opts fo = {.training = 0, .pos_offset = s->pos_offset, .coords = co ? s->co : NULL,
                       .kv = &s->kv};
        model_forward(s->mdl, &s->A, &s->mem, s->x, y ? s->y : NULL, len, &fo);
        if (y)
            score(s, s->y, len, (size_t)at, ld, loss, hit);
        s->tokens += (double)s->B * len;
    }
}

int streams_snapshot_init(const stream_eval *s, model_mem *snap, txl_err *e)
{
    return mem_init(snap, &s->cfg, s->B, s->M, e);
}

static void copy_mem(model_mem *dst, const model_mem *src)
{
    size_t n = (size_t)src->n_layer * src->B * src->M * src->d;
    memcpy(dst->buf, src->buf, n * sizeof(float));
    if (src->coords && dst->coords)
        memcpy(dst->coords, src->coords,
               (size_t)src->B * src->M * TXL_N_COORDS * sizeof(int32_t));
    dst->m = src->m;
}

/* Both drop the kept keys (the next feed projects its whole window): a feed that goes on
 * from the saved memory then computes what one from the restored memory does, bit for bit
 * (the needle probe compares the two). */
void streams_save(stream_eval *s, model_mem *snap)
{
    copy_mem(snap, &s->mem);
    kv_cache_invalidate(&s->kv);
}

void streams_restore(stream_eval *s, const model_mem *snap)
{
    copy_mem(&s->mem, snap);
    kv_cache_invalidate(&s->kv);
}

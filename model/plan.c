/* plan.c: the activation plan and the memory (doc/design.md, "The model"): every buffer of a
 * segment's forward and backward planned once for (B, max Lq, M) in one arena, before the
 * first step, so the step allocates nothing; and the per-layer memory model_mem, state
 * without a gradient. */
#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../common/par.h"
#include "../common/sys.h"
#include "gemm.h"
#include "attn_amx.h"
#include "model_impl.h"

/* ---- memory */

double mem_plan_bytes(const model_config *cfg, int B, int M)
{
    double rows = (double)B * M;
    return rows * cfg->n_layer * cfg->d_model * sizeof(float) +
           (pos_get(cfg->pos)->needs_coords ? rows * TXL_N_COORDS * sizeof(int32_t) : 0);
}

int mem_init(model_mem *mem, const model_config *cfg, int B, int M, txl_err *e)
{
    memset(mem, 0, sizeof *mem);
    mem->n_layer = cfg->n_layer;
    mem->B = B;
    mem->M = M;
    mem->d = cfg->d_model;
    mem->layer_stride = (size_t)B * M * cfg->d_model;
    size_t n = (size_t)cfg->n_layer * B * M * cfg->d_model;
    mem->buf = calloc(n ? n : 1, sizeof(float));
    if (pos_get(cfg->pos)->needs_coords)
        mem->coords = calloc((size_t)B * M * TXL_N_COORDS + 1, sizeof(int32_t));
    if (!mem->buf || (pos_get(cfg->pos)->needs_coords && !mem->coords)) {
        mem_free(mem);
        return err_set(e, ERR_RUNTIME, "out of memory allocating the memory (%zu floats)", n);
    }
    return 0;
}

void mem_reset(model_mem *mem) { mem->m = 0; }

model_mem mem_slice(const model_mem *whole, int b0, int B)
{
    assert(b0 >= 0 && B >= 0 && b0 + B <= whole->B);
    model_mem v = *whole;
    v.B = B;
    v.buf = whole->buf + (size_t)b0 * whole->M * whole->d;
    v.coords = whole->coords ? whole->coords + (size_t)b0 * whole->M * TXL_N_COORDS : NULL;
    return v;
}

void mem_free(model_mem *mem)
{
    free(mem->buf);
    free(mem->coords);
    memset(mem, 0, sizeof *mem);
}

/* ---- activations */


/* Two passes over the same layout: the first counts (in doubles, so that a config far too
 * large is counted, then refused, rather than overflowing), the second hands out pointers
 * into one allocation. */
typedef struct {
    float *base;
    size_t used;   /* the second pass */
    double count;  /* the first */
} arena;

static float *take(arena *a, double n)
{
    if (!a->base) {
        a->count += n > 1 ? ceil(n / ALIGN_FLOATS) * ALIGN_FLOATS : ALIGN_FLOATS;
        return NULL;
    }
    float *p = a->base + a->used;
    a->used += align_up(n > 1 ? (size_t)n : 1);
    return p;
}

static float *take_cb(void *a, double n) { return take(a, n); }

/* n bf16 values in float-sized slots (NULL when off) */
static uint16_t *take16(arena *a, double n, int on)
{
    return on ? (uint16_t *)take(a, (n + 1) / 2) : NULL;
}

static void plan_layer(model_acts *A, arena *ar, layer_cache *lc, pos_alloc *pa,
                       const pos_dims *pd)
{
    const model_config *c = &A->cfg;
    int B = A->B, Lq = A->Lq_max, klen = Lq + A->M, d = c->d_model;
    int H = c->n_head, hd = H * c->d_head, di = c->d_inner, tr = A->training;
    double BL = (double)B * Lq, BK = (double)B * klen; /* doubles: see arena */
    if (A->cached) /* the window's rows are projected a segment at a time */
        BK = BL;
    lc->cat = take(ar, BK * d);
    if (c->pre_lnorm) {
        lc->catn = take(ar, BK * d);
        lc->ln0_xhat = tr ? take(ar, BK * d) : NULL;
        lc->ln0_rstd = tr ? take(ar, BK) : NULL;
        lc->ffin = take(ar, BL * d);
        lc->xq = take(ar, BL * d);
    }
    lc->q = take(ar, BL * hd);
    lc->kv = take(ar, BK * 2 * hd);
    lc->prob = tr ? take(ar, BL * H * klen) : NULL;
    lc->vec = take(ar, BL * hd);
    lc->h1 = take(ar, BL * d);
    lc->ln1_xhat = tr ? take(ar, BL * d) : NULL;
    lc->ln1_rstd = tr ? take(ar, BL) : NULL;
    lc->a = take(ar, BL * di);
    lc->ln2_xhat = tr && !c->pre_lnorm ? take(ar, BL * d) : NULL;
    lc->ln2_rstd = tr && !c->pre_lnorm ? take(ar, BL) : NULL;
    lc->catb = take16(ar, BK * d, A->bf16);
    lc->xqb = take16(ar, BL * d, A->bf16);
    lc->vecb = take16(ar, BL * hd, A->bf16);
    lc->ffinb = take16(ar, BL * d, A->bf16);
    lc->ab = take16(ar, BL * di, A->bf16);
    memset(&lc->pos, 0, sizeof lc->pos);
    if (A->pos->plan_layer)
        A->pos->plan_layer(c, pd, pa, &lc->pos);
}

static void plan(model_acts *A, arena *ar)
{
    const model_config *c = &A->cfg;
    int B = A->B, Lq = A->Lq_max, M = A->M, klen = Lq + M, d = c->d_model;
    int H = c->n_head, hd = H * c->d_head, di = c->d_inner, N = c->n_layer, V = c->vocab;
    int tr = A->training;
    double BL = (double)B * Lq, BK = (double)B * klen; /* doubles: see arena */
    pos_dims pd = {.B = B, .Lq = Lq, .M = M, .training = tr};
    pos_alloc pa = {take_cb, ar};
    int nc = tr ? N : 1;
    if (!ar->base) { /* counting: every layer's cache has the same size */
        double before = ar->count;
        plan_layer(A, ar, &A->lc[0], &pa, &pd);
        ar->count = before + (ar->count - before) * nc;
    } else {
        for (int l = 0; l < nc; l++)
            plan_layer(A, ar, &A->lc[l], &pa, &pd);
    }
    A->hs = take(ar, ((double)N + 1) * BL * d);
    A->hfin = take(ar, BL * d);
    if (adapt_in_use(c)) { /* its buffers, of a block's size: none of [B*Lq, V] */
        adapt_shape as;
        adapt_shape_of(c, &as);
        int rows = BL < INT_MAX ? (int)BL : INT_MAX;
        float *base = take(ar, adapt_ws_floats(&as, rows, tr));
        if (base)
            adapt_ws_place(&A->ad, &as, rows, tr, base);
    } else {
        A->logits = take(ar, BL * V);
        A->lse = take(ar, BL);
    }
    A->row_loss = take(ar, BL);
    A->tmp = take(ar, BL * d);
    A->attn_scratch = take(ar, attn_scratch_floats(Lq, klen, c->d_head, H, A->threads));
    /* int32 coordinates in float-sized slots of the arena (only ever accessed as int32) */
    A->cat_coords = A->pos->needs_coords ? (int32_t *)take(ar, BK * TXL_N_COORDS) : NULL;
    memset(&A->pos_acts, 0, sizeof A->pos_acts);
    memset(&A->pos_bw, 0, sizeof A->pos_bw);
    if (A->pos->plan)
        A->pos->plan(c, &pd, &pa, &A->pos_acts, &A->pos_bw);
    if (tr) {
        A->d_out = take(ar, BL * d);
        A->d_in = take(ar, BL * d);
        A->d_h1 = take(ar, BL * d);
        A->d_tmp = take(ar, BL * d);
        A->d_a = take(ar, BL * di);
        A->d_vec = take(ar, BL * hd);
        A->d_q = take(ar, BL * hd);
        A->d_kv = take(ar, BK * 2 * hd);
        A->d_cat = c->pre_lnorm ? take(ar, BK * d) : NULL; /* post-LN needs no d(memory) */
        A->d_h1b = take16(ar, BL * d, A->bf16);
        A->d_tmpb = take16(ar, BL * d, A->bf16);
        A->d_ab = take16(ar, BL * di, A->bf16);
        A->d_kvb = take16(ar, BK * 2 * hd, A->bf16 && !c->pre_lnorm);
    }
}

/* The sizes of A and its layer caches, before plan() lays out the buffers. */
static int acts_begin(model_acts *A, const model_config *cfg, int B, int Lq_max, int M,
                      int training, int counting, txl_err *e)
{
    memset(A, 0, sizeof *A);
    A->cfg = *cfg;
    A->pos = pos_get(cfg->pos);
    A->B = B;
    A->Lq_max = Lq_max;
    A->M = M;
    A->training = training == 1;
    A->cached = training == ACTS_CACHED && M > 0 && !pos_get(cfg->pos)->window_keys;
    A->threads = par_max_threads();
    /* (gemm_get_precision: the callers set the precision before they plan.) fp32 is the
     * exact path of txl before 0.3, bit for bit: attention's products on
     * OpenBLAS (the fused kernel rounds its sums in another order, and gained only 1-2% of
     * an S step). The fused attention serves bf16 runs in AVX-512 builds, where it measured
     * faster (bench/attn_kernel, doc/performance.md: 1.06-1.30x alone; AVX2's smaller
     * tiles lost on S); -DTXL_ATTN_FUSED makes it the default of fp32 too, to compare. */
#if defined(__AVX512F__) && defined(TXL_ATTN_FUSED)
    A->attn_blas = 0;
#elif defined(__AVX512F__)
    A->attn_blas = gemm_get_precision() == GEMM_FP32;
#else
    A->attn_blas = 1;
#endif
    A->bf16 = gemm_get_precision() == GEMM_BF16;
    A->attn_amx = A->bf16 && amx_attn_available();
    if (A->attn_amx)
        A->attn_blas = 0;
    A->lc = calloc(A->training && !counting ? (size_t)cfg->n_layer : 1, sizeof(layer_cache));
    if (!A->lc)
        return err_set(e, ERR_RUNTIME, "out of memory planning activations");
    return 0;
}

int acts_plan_floats(const model_config *cfg, int B, int Lq_max, int M, int training,
                     double *floats, txl_err *e)
{
    model_acts A;
    if (acts_begin(&A, cfg, B, Lq_max, M, training, 1, e))
        return -1;
    arena ar = {0}; /* no base: plan() only counts */
    plan(&A, &ar);
    *floats = ar.count;
    free(A.lc);
    return 0;
}

int acts_init(model_acts *A, const model_config *cfg, int B, int Lq_max, int M, int training,
              txl_err *e)
{
    if (acts_begin(A, cfg, B, Lq_max, M, training, 0, e))
        return -1;
    arena ar = {0};
    plan(A, &ar);
    if (ar.count > 0x1p60) { /* no machine holds it; the size would not fit a size_t */
        acts_free(A);
        return err_set(e, ERR_RUNTIME, "out of memory: activations need %.3g floats", ar.count);
    }
    size_t total = (size_t)ar.count;
    ar.base = sys_alloc(total * sizeof(float));
    if (!ar.base) {
        acts_free(A);
        return err_set(e, ERR_RUNTIME, "out of memory: activations need %.1f MiB",
                       total * 4.0 / 1048576.0);
    }
    memset(ar.base, 0, total * sizeof(float));
    ar.used = 0;
    plan(A, &ar);
    A->arena_base = ar.base;
    A->arena_floats = total;
    return 0;
}

void acts_free(model_acts *A)
{
    free(A->arena_base);
    free(A->lc);
    memset(A, 0, sizeof *A);
}

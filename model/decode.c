/* decode.c: see decode.h. The layer is forward.c's: the same projection, attention kernel
 * and layer tail, for B rows of one token each (Lq = 1, i = 0). */
#include "decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/par.h"
#include "../common/sys.h"
#include "attn_decode.h"
#include "gemm.h"
#include "gemm_bf16.h"
#include "gemm_bf16w.h"
#include "layernorm.h"
#include "qgemm.h"

/* Memory rows projected at a time by decode_prime. */
#define PRIME_ROWS 64

static size_t hd_of(const decode_state *s) { return (size_t)s->H * s->dh; }

/* Elements from the windows' start to those of layer l, stream b: each is [H][2][cap][dh],
 * each head's keys then its values (kv or kv16). */
static size_t kv_off(const decode_state *s, int l, int b)
{
    return ((size_t)l * s->B + b) * s->cap * 2 * hd_of(s);
}

static float *kv_at(const decode_state *s, int l, int b) { return s->kv + kv_off(s, l, b); }

/* The same for a q8 cache's scales: [H][2][cap] a stream and layer */
static size_t kvs_off(const decode_state *s, int l, int b)
{
    return ((size_t)l * s->B + b) * s->cap * 2 * (size_t)s->H;
}

/* Whether a step's products run on the matrix units (bf16w_plan): 4 or more streams under
 * bf16 precision. A stream's bits then depend on the group already (the activations'
 * rounding), and xl's bf16 position rows are read transposed (rkT16: each score a chain over
 * the head's dimensions, a row of the table loaded once for 4 streams; 1.05-1.12x for 32
 * streams at mem_len 512 against one qgemm of the rows, which stays for fewer streams, as
 * fast as the chains for one and giving a stream the same bits whatever the streams beside
 * it). */
static int many_bf16(int B) { return B >= DECODE_BF16W_ROWS && gemm_get_precision() == GEMM_BF16; }

/* xl's position rows read as bf16 (tables16), as floats of bf16 values (tables_r) */
static int tables_bf16(decode_cache c) { return c == DECODE_CACHE_BF16 || c == DECODE_CACHE_Q8; }
static int tables_rounded(decode_cache c)
{
    return c == DECODE_CACHE_ROUNDED || c == DECODE_CACHE_Q8R;
}

/* The scale of x [n] and its integers (decode.h: a q8 cache) into q [n], or, q NULL, into
 * deq [n] as floats times the scale */
static float q8_row(int8_t *q, float *deq, const float *x, size_t n)
{
    uint32_t top = 0; /* the largest magnitude's bits: their order is the floats' (a
                       * max over integers vectorises; past 0x7f800000 inf or NaN) */
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        u &= 0x7fffffffu;
        top = u > top ? u : top;
    }
    float amax;
    memcpy(&amax, &top, sizeof amax);
    int finite = top < 0x7f800000u;
    float sc = finite ? amax / 127.0f : NAN, inv = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
    for (size_t i = 0; i < n; i++) { /* to nearest, ties to even; within +-127 */
        float v = rintf(x[i] * inv);
        v = v > 127.0f ? 127.0f : v;
        v = v < -127.0f ? -127.0f : v;
        if (q)
            q[i] = (int8_t)(int)v;
        else
            deq[i] = v * sc;
    }
    return sc;
}

/* A cached row of n values at element o of the window (and, q8, scale slot so) */
static void put_row(const decode_state *s, size_t o, size_t so, const float *x, size_t n)
{
    switch (s->cache) {
    case DECODE_CACHE_BF16: quant_bf16(s->kv16 + o, x, n); break;
    case DECODE_CACHE_Q8: s->kv8s[so] = q8_row(s->kv8 + o, NULL, x, n); break;
    case DECODE_CACHE_ROUNDED:
        for (size_t i = 0; i < n; i++)
            s->kv[o + i] = bf16_to_f32(bf16_from_f32(x[i]));
        break;
    case DECODE_CACHE_Q8R: q8_row(NULL, s->kv + o, x, n); break;
    default: memcpy(s->kv + o, x, n * sizeof(float)); break;
    }
}

/* Stores rows of [k | v] (stride ld, heads as column blocks) into the window of layer l,
 * stream b at row `row` (a bf16 or q8 cache: rounded). */
static void store_rows(const decode_state *s, int l, int b, int row, const float *src, int rows,
                       size_t ld)
{
    size_t hd = hd_of(s), dh = (size_t)s->dh, cap = (size_t)s->cap, vo = cap * dh;
    for (int h = 0; h < s->H; h++) {
        size_t k = kv_off(s, l, b) + (size_t)h * 2 * cap * dh + (size_t)row * dh;
        size_t ks = kvs_off(s, l, b) + (size_t)h * 2 * cap + (size_t)row;
        for (int r = 0; r < rows; r++) {
            const float *x = src + (size_t)r * ld + (size_t)h * dh;
            size_t o = k + (size_t)r * dh;
            put_row(s, o, ks + (size_t)r, x, dh);
            put_row(s, o + vo, ks + cap + (size_t)r, x + hd, dh);
        }
    }
}

static float *xin_at(const decode_state *s, int l, int b)
{
    return s->xin + ((size_t)l * s->B + b) * s->cap * s->d;
}

static int32_t *coords_at(const decode_state *s, int b)
{
    return s->coords + (size_t)b * s->cap * TXL_N_COORDS;
}

typedef struct {
    float *base;
    size_t used;
} bump;

static float *bump_take(void *a, double n)
{
    bump *b = a;
    float *p = b->base ? b->base + b->used : NULL;
    b->used += ((n > 0 ? (size_t)n : 0) + 15) / 16 * 16;
    return p;
}

/* Lays out every buffer (count when b->base is NULL). */
static void layout(decode_state *s, const model_config *c, bump *b)
{
    size_t B = (size_t)s->B, hd = hd_of(s), K = (size_t)s->M + 1, d = (size_t)s->d;
    size_t kvn = (size_t)s->n_layer * B * s->cap * 2 * hd;
    if (s->cache == DECODE_CACHE_BF16) {
        s->kv16 = (uint16_t *)bump_take(b, (double)((kvn + 1) / 2));
    } else if (s->cache == DECODE_CACHE_Q8) {
        s->kv8 = (int8_t *)bump_take(b, (double)((kvn + 3) / 4));
        s->kv8s = bump_take(b, (double)s->n_layer * B * s->cap * 2 * s->H);
    } else {
        s->kv = bump_take(b, (double)kvn);
    }
    s->xin = bump_take(b, (size_t)s->n_layer * B * s->cap * d);
    /* int32 coordinates in float-sized slots (only ever accessed as int32) */
    s->coords = s->pos->needs_coords ? (int32_t *)bump_take(b, B * s->cap * TXL_N_COORDS) : NULL;
    s->tables = bump_take(b, (size_t)s->n_layer * s->tab_floats);
    if (tables_bf16(s->cache))
        s->tables16 = (uint16_t *)bump_take(b, (double)(((size_t)s->n_layer * s->tab_floats + 1) / 2));
    if (tables_rounded(s->cache))
        s->tables_r = bump_take(b, (double)s->n_layer * s->tab_floats);
    if (s->tab_floats > 0) {
        if (!tables_bf16(s->cache))
            s->rkT = bump_take(b, (double)s->n_layer * s->tab_floats);
        else if (many_bf16(s->B)) /* + 16 read past the last key (attn_args.rkT16) */
            s->rkT16 = (uint16_t *)bump_take(b, (double)(((size_t)s->n_layer * s->tab_floats + 1) / 2 + 16));
        s->rkT_ok = (int *)bump_take(b, s->n_layer); /* int flags in float-sized slots */
    }
    s->x = bump_take(b, B * d);
    s->xn = bump_take(b, B * d);
    s->qkv = bump_take(b, B * 3 * hd);
    s->q = bump_take(b, B * hd);
    s->vec = bump_take(b, B * hd);
    s->logits = bump_take(b, B * (size_t)s->V);
    { /* the bf16 products' rounded rows: B of the widest input */
        size_t k = d > hd ? d : hd;
        k = k > (size_t)c->d_inner ? k : (size_t)c->d_inner;
        s->xh = (uint16_t *)bump_take(b, (double)((B * k + 1) / 2));
    }
    if (adapt_in_use(c)) { /* the adaptive input and distribution of B rows */
        adapt_shape as;
        adapt_shape_of(c, &as);
        float *base = bump_take(b, adapt_ws_floats(&as, s->B, 0));
        if (base)
            adapt_ws_place(&s->ad, &as, s->B, 0, base);
    }
    s->attn_scratch = bump_take(b, attn_decode_scratch_floats(s->B, (int)K, s->dh,
                                                              s->attn_threads));
    size_t scr = s->pos->decode_scratch ? s->pos->decode_scratch(c, s->M) : 0;
    s->scratch = bump_take(b, scr);
    s->prime_x = bump_take(b, PRIME_ROWS * d);
    s->prime_kv = bump_take(b, PRIME_ROWS * 2 * hd);
    s->lq = (layer_qmats *)bump_take(b, (double)s->n_layer * sizeof(layer_qmats) / sizeof(float));
    s->tail = (layer_tail_bufs){.h1 = bump_take(b, B * d), .ffin = bump_take(b, B * d),
                                .a = bump_take(b, B * (size_t)c->d_inner),
                                .tmp = bump_take(b, B * d), .few_rows = 1};
    pos_dims pd = {.B = s->B, .Lq = 1, .M = s->M, .training = 0};
    pos_alloc pa = {bump_take, b};
    pos_layer unused;
    memset(&s->pos_acts, 0, sizeof s->pos_acts);
    if (s->pos->plan)
        s->pos->plan(c, &pd, &pa, &s->pos_acts, &unused);
}

/* The sizes of s for B streams and memory M, before layout() places the buffers. */
static void decode_begin(decode_state *s, const model_config *c, int B, int M,
                         decode_cache cache)
{
    memset(s, 0, sizeof *s);
    s->cache = cache;
    s->pos = pos_get(c->pos);
    s->n_layer = c->n_layer;
    s->B = B;
    s->M = M;
    s->d = c->d_model;
    s->H = c->n_head;
    s->dh = c->d_head;
    s->V = c->vocab;
    s->cap = 2 * (M + 1);
    s->tab_floats = s->pos->decode_floats ? s->pos->decode_floats(c, M) : 0;
    s->attn_threads = par_max_threads();
}

double decode_cache_floats(const model_config *c, int B, int M, decode_cache cache)
{
    double cap = 2.0 * ((double)M + 1); /* decode_begin's s->cap */
    double kv = cache == DECODE_CACHE_BF16 ? 1.0 * c->n_head * c->d_head  /* bf16: half */
                : cache == DECODE_CACHE_Q8 ? 0.5 * c->n_head * (c->d_head + 4.0) /* + scales */
                                           : 2.0 * c->n_head * c->d_head;
    return (double)B * c->n_layer * cap * (kv + c->d_model);
}

size_t decode_plan_floats(const model_config *c, int B, int M, decode_cache cache)
{
    decode_state s;
    decode_begin(&s, c, B, M, cache);
    bump b = {NULL, 0};
    layout(&s, c, &b);
    return b.used + 16;
}

/* y [rows, out] = x W^T + bias for layer l's matrix `which` (model.h, LIN_*): a quantized
 * model's stored matrix through qgemm (for any rows: it measured as fast as sgemm at 32 and
 * faster below, and a stream's results then do not depend on how many run beside it),
 * else the fp32 weights through gemm_few. */
static void dec_linear(void *ctx, int l, int which, float *y, const float *x, const float *bias,
                       int rows)
{
    decode_state *s = ctx;
    const layer_tensors *L = &s->mdl->W.layer[l];
    const model_config *c = &s->mdl->cfg;
    const qmat *q = s->lq[l].m[which];
    bf16w *w = s->w16 ? s->w16[l * LIN_N + which] : NULL;
    if (w && rows == s->B && bf16w_run(w, y, x, s->xh) == 0)
        return;
    if (q) {
        qlinear(y, x, q, bias, rows);
        return;
    }
    int d = c->d_model, hd = c->n_head * c->d_head, di = c->d_inner;
    switch (which) {
    case LIN_QKV: linear_forward_few(y, x, L->qkv_w, bias, rows, 3 * hd, d); break;
    case LIN_O: linear_forward_few(y, x, L->o_w, bias, rows, d, hd); break;
    case LIN_FF0: linear_forward_few(y, x, L->ff0_w, bias, rows, di, d); break;
    default: linear_forward_few(y, x, L->ff3_w, bias, rows, d, di); break;
    }
}

/* The bf16 products of every layer matrix and the output layer (full softmax), where
 * oneDNN makes them; a matrix it does not stays on dec_linear's other paths. */
static void bf16w_plan(decode_state *s, const model *mdl)
{
    const model_config *c = &mdl->cfg;
    int d = c->d_model, hd = c->n_head * c->d_head, di = c->d_inner;
    s->w16 = calloc((size_t)s->n_layer * LIN_N, sizeof *s->w16);
    for (int l = 0; s->w16 && l < s->n_layer; l++) {
        const layer_tensors *L = &mdl->W.layer[l];
        bf16w **w = s->w16 + (size_t)l * LIN_N;
        w[LIN_QKV] = bf16w_new(L->qkv_w, NULL, 3 * hd, d, s->B);
        w[LIN_O] = bf16w_new(L->o_w, NULL, d, hd, s->B);
        w[LIN_FF0] = bf16w_new(L->ff0_w, L->ff0_b, di, d, s->B);
        w[LIN_FF3] = bf16w_new(L->ff3_w, L->ff3_b, d, di, s->B);
    }
    if (!adapt_in_use(c))
        s->out16 = bf16w_new(mdl->W.word_emb, mdl->W.out_bias, c->vocab, d, s->B);
}

int decode_init(decode_state *s, const model *mdl, int B, int M, decode_cache cache,
                txl_err *e)
{
    const model_config *c = &mdl->cfg;
    decode_begin(s, c, B, M, cache);
    bump b = {NULL, 0};
    layout(s, c, &b);
    s->buf = sys_alloc((b.used + 16) * sizeof(float));
    if (!s->buf)
        return err_set(e, ERR_RUNTIME, "out of memory for the decoding caches (%d streams, "
                       "mem_len %d)", B, M);
    memset(s->buf, 0, (b.used + 16) * sizeof(float));
    b = (bump){s->buf, 0};
    layout(s, c, &b);
    s->mdl = mdl;
    quant_views(mdl, s->lq, &s->out_q);
    s->tail.lin = dec_linear;
    s->tail.lin_ctx = s;
    if (many_bf16(B))
        bf16w_plan(s, mdl);
    return 0;
}

void decode_free(decode_state *s)
{
    for (int i = 0; s->w16 && i < s->n_layer * LIN_N; i++)
        bf16w_free(s->w16[i]);
    free(s->w16);
    bf16w_free(s->out16);
    free(s->buf);
    memset(s, 0, sizeof *s);
}

/* k and v of `rows` layer inputs h [rows, d] of layer l into the window of stream b, from
 * its row 0 (rope: keys rotated at positions pos, pos+1, ...), PRIME_ROWS at a time. */
static void cache_rows(decode_state *s, const model *mdl, int l, const float *h, int rows,
                       int b, long pos)
{
    const model_config *c = &mdl->cfg;
    const layer_tensors *L = &mdl->W.layer[l];
    size_t hd = hd_of(s);
    for (int r0 = 0; r0 < rows; r0 += PRIME_ROWS) {
        int n = rows - r0 < PRIME_ROWS ? rows - r0 : PRIME_ROWS;
        const float *X = h + (size_t)r0 * s->d;
        if (c->pre_lnorm) {
            layernorm_forward(s->prime_x, NULL, NULL, X, L->attn_ln_w, L->attn_ln_b, n, s->d);
            X = s->prime_x;
        }
        linear_forward(s->prime_kv, X, L->qkv_w + hd * s->d, NULL, n, 2 * (int)hd, s->d, 0);
        if (s->pos->decode_qk)
            s->pos->decode_qk(c, NULL, s->prime_kv, n, 2 * (int)hd, pos + r0 + s->pos_offset, 1,
                              s->scratch);
        store_rows(s, l, b, r0, s->prime_kv, n, 2 * hd);
    }
}

void decode_prime(decode_state *s, const model *mdl, const model_mem *mem, long pos)
{
    const model_config *c = &mdl->cfg;
    s->next_pos = pos;
    s->m = mem->m < s->M ? mem->m : s->M;
    s->start = 0;
    for (int l = 0; l < s->n_layer; l++)
        if (s->pos->decode_tables)
            s->pos->decode_tables(c, &mdl->W.layer[l], &mdl->W, s->M,
                                  s->tables + (size_t)l * s->tab_floats, s->scratch);
    size_t nt = (size_t)s->n_layer * s->tab_floats;
    for (int l = 0; s->rkT_ok && l < s->n_layer; l++)
        s->rkT_ok[l] = 0;
    if (s->tables16)
        quant_bf16(s->tables16, s->tables, nt);
    for (size_t i = 0; s->tables_r && i < nt; i++)
        s->tables_r[i] = bf16_to_f32(bf16_from_f32(s->tables[i]));
    if (s->m == 0)
        return;
    for (int l = 0; l < s->n_layer; l++)
        for (int b = 0; b < s->B; b++) {
            const float *rows = mem_layer(mem, l) + (size_t)b * mem->M * s->d;
            memcpy(xin_at(s, l, b), rows, (size_t)s->m * s->d * sizeof(float));
            cache_rows(s, mdl, l, rows, s->m, b, pos - s->m);
        }
    for (int b = 0; s->coords && b < s->B; b++)
        memcpy(coords_at(s, b), mem->coords + (size_t)b * mem->M * TXL_N_COORDS,
               (size_t)s->m * TXL_N_COORDS * sizeof(int32_t));
}

/* xl's position rows of layer l (aa->rk, in the tables: [H][M + 1][dh]) transposed into
 * rkT, fp32, or rkT16, bf16 ([H][dh][M + 1]) at the layer's first step after decode_prime,
 * and aa's rkT or rkT16 at the window's first row; another layout keeps rk. */
static void rk_transposed(decode_state *s, int l, attn_args *aa)
{
    const size_t K = (size_t)s->M + 1, dh = (size_t)s->dh, t0 = (size_t)l * s->tab_floats;
    if ((!s->rkT && !s->rkT16) || aa->rk_row != s->dh || aa->rk_hstride != K * dh ||
        (size_t)s->H * K * dh > s->tab_floats)
        return;
    size_t row = (size_t)(aa->rk - (s->tables + t0)) / dh; /* row M - m of each head */
    if (!s->rkT_ok[l]) {
        for (int h = 0; h < s->H; h++)
            for (size_t p = 0; p < K; p++)
                for (size_t c = 0; c < dh; c++) {
                    size_t to = t0 + (size_t)h * K * dh + c * K + p;
                    size_t from = t0 + (size_t)h * K * dh + p * dh + c;
                    if (s->rkT16)
                        s->rkT16[to] = s->tables16[from];
                    else
                        s->rkT[to] = (s->tables_r ? s->tables_r : s->tables)[from];
                }
        s->rkT_ok[l] = 1;
    }
    if (s->rkT16) {
        aa->rkT16 = s->rkT16 + t0 + row;
        aa->rk16 = NULL;
    } else {
        aa->rkT = s->rkT + t0 + row;
    }
    aa->rkT_hstride = K * dh;
    aa->rkT_ld = (int)K;
}

/* One layer for the B new rows in s->x (overwritten with the layer's output). */
static void layer_step(decode_state *s, const model *mdl, int l)
{
    const model_config *c = &mdl->cfg;
    const layer_tensors *L = &mdl->W.layer[l];
    int B = s->B, d = s->d, hd = (int)hd_of(s), row = s->start + s->m;
    const float *X = s->x;
    if (c->pre_lnorm) {
        layernorm_forward(s->xn, NULL, NULL, s->x, L->attn_ln_w, L->attn_ln_b, B, d);
        X = s->xn;
    }
    dec_linear(s, l, LIN_QKV, s->qkv, X, NULL, B);
    for (int b = 0; b < B; b++) {
        float *qkv = s->qkv + (size_t)b * 3 * hd;
        if (s->pos->decode_qk)
            s->pos->decode_qk(c, qkv, qkv + hd, 1, 3 * hd, s->next_pos + s->pos_offset, 0,
                              s->scratch);
        memcpy(s->q + (size_t)b * hd, qkv, (size_t)hd * sizeof(float));
        store_rows(s, l, b, row, qkv + hd, 1, 3 * (size_t)hd);
        memcpy(xin_at(s, l, b) + (size_t)row * d, s->x + (size_t)b * d, (size_t)d * sizeof(float));
    }
    size_t cd = (size_t)s->cap * s->dh;
    attn_args aa = {.B = B, .H = s->H, .dh = s->dh, .Lq = 1, .m = s->m,
                    .scale = (float)(1.0 / sqrt((double)s->dh)),
                    .kv_bstride = (size_t)s->cap * 2 * hd, .kv_hstride = 2 * cd,
                    .v_offset = cd, .kv_row = s->dh, .threads = s->attn_threads};
    pos_decode pd = {.c = c, .W = L, .MW = &mdl->W, .M = s->M, .m = s->m,
                     .tables = s->tables + (size_t)l * s->tab_floats,
                     .coords = s->coords ? coords_at(s, 0) + (size_t)s->start * TXL_N_COORDS : NULL,
                     .coords_bstride = (size_t)s->cap * TXL_N_COORDS,
                     .bias_state = s->bias_state};
    if (s->pos->decode_args)
        s->pos->decode_args(&pd, &aa);
    const float *kv = NULL;
    size_t t0 = (size_t)l * s->tab_floats; /* xl's position rows: from the tables' copy */
    int rk_in_tables = aa.rk && aa.rk >= s->tables + t0 && aa.rk < s->tables + t0 + s->tab_floats;
    if (s->kv16 || s->kv8) { /* the same rows in bf16 or int8 */
        if (s->kv16)
            aa.kv16 = s->kv16 + kv_off(s, l, 0) + (size_t)s->start * s->dh;
        if (s->kv8) {
            aa.kv8 = s->kv8 + kv_off(s, l, 0) + (size_t)s->start * s->dh;
            aa.kv8s = s->kv8s + kvs_off(s, l, 0) + (size_t)s->start;
            aa.kv8s_bstride = (size_t)s->cap * 2 * s->H;
            aa.kv8s_hstride = 2 * (size_t)s->cap;
            aa.kv8s_voff = (size_t)s->cap;
        }
        if (rk_in_tables) {
            aa.rk16 = s->tables16 + (aa.rk - s->tables);
            rk_transposed(s, l, &aa);
        }
    } else {
        kv = kv_at(s, l, 0) + (size_t)s->start * s->dh;
        if (rk_in_tables)
            rk_transposed(s, l, &aa);
        if (rk_in_tables && s->tables_r)
            aa.rk = s->tables_r + (aa.rk - s->tables);
    }
    attn_decode(s->vec, s->q, kv, &aa, s->attn_scratch);
    layer_tail_forward(c, L, l, B, s->x, s->vec, s->x, &s->tail, 0.0f, 0, 0);
}

/* After a step: keep the last M rows; move them to the front when the window is full. */
static void advance(decode_state *s)
{
    if (s->M == 0)
        return;
    if (s->m < s->M) {
        s->m++;
        return;
    }
    s->start++;
    if (s->start + s->M < s->cap)
        return;
    size_t dh = (size_t)s->dh;
    for (int l = 0; l < s->n_layer; l++)
        for (int b = 0; b < s->B; b++) {
            float *xi = xin_at(s, l, b);
            for (int h = 0; h < 2 * s->H; h++) { /* each head's keys, then its values */
                size_t o = kv_off(s, l, b) + (size_t)h * s->cap * dh;
                size_t so = kvs_off(s, l, b) + (size_t)h * s->cap;
                if (s->kv16) {
                    memmove(s->kv16 + o, s->kv16 + o + (size_t)s->start * dh,
                            (size_t)s->m * dh * sizeof(uint16_t));
                } else if (s->kv8) {
                    memmove(s->kv8 + o, s->kv8 + o + (size_t)s->start * dh, (size_t)s->m * dh);
                    memmove(s->kv8s + so, s->kv8s + so + s->start,
                            (size_t)s->m * sizeof(float));
                } else
                    memmove(s->kv + o, s->kv + o + (size_t)s->start * dh,
                            (size_t)s->m * dh * sizeof(float));
            }
            memmove(xi, xi + (size_t)s->start * s->d, (size_t)s->m * s->d * sizeof(float));
        }
    for (int b = 0; s->coords && b < s->B; b++) {
        int32_t *co = coords_at(s, b);
        memmove(co, co + (size_t)s->start * TXL_N_COORDS,
                (size_t)s->m * TXL_N_COORDS * sizeof(int32_t));
    }
    s->start = 0;
}

void decode_step(decode_state *s, const model *mdl, const txl_tok *tok, const int32_t *coords)
{
    for (int b = 0; s->coords && b < s->B; b++) { /* the new row's coordinates, monotone */
        int32_t *row = coords_at(s, b) + (size_t)(s->start + s->m) * TXL_N_COORDS;
        for (int k = 0; k < TXL_N_COORDS; k++) {
            int32_t v = coords ? coords[(size_t)b * TXL_N_COORDS + k] : 0;
            int32_t prev = s->m > 0 ? row[k - TXL_N_COORDS] : v;
            row[k] = v < prev ? prev : v;
        }
    }
    model_embed(mdl, s->pos, &s->pos_acts, s->x, tok, s->B, 1, s->m, s->pos_offset, &s->ad);
    for (int l = 0; l < s->n_layer; l++)
        layer_step(s, mdl, l);
    advance(s);
    s->next_pos++;
    if (s->out16 && bf16w_run(s->out16, s->logits, s->x, s->xh) == 0)
        ; /* the matrix units' */
    else if (s->out_q && !adapt_in_use(&mdl->cfg))
        qlinear(s->logits, s->x, s->out_q, mdl->W.out_bias, s->B);
    else
        model_logprobs(mdl, s->x, s->B, s->logits, &s->ad, 1);
}

void decode_sync_mem(const decode_state *s, model_mem *mem)
{
    int rows = s->m < mem->M ? s->m : mem->M;
    for (int l = 0; l < s->n_layer; l++)
        for (int b = 0; b < s->B && b < mem->B; b++)
            memcpy(mem_layer(mem, l) + (size_t)b * mem->M * s->d,
                   xin_at(s, l, b) + (size_t)(s->start + s->m - rows) * s->d,
                   (size_t)rows * s->d * sizeof(float));
    for (int b = 0; s->coords && mem->coords && b < s->B && b < mem->B; b++)
        memcpy(mem->coords + (size_t)b * mem->M * TXL_N_COORDS,
               coords_at(s, b) + (size_t)(s->start + s->m - rows) * TXL_N_COORDS,
               (size_t)rows * TXL_N_COORDS * sizeof(int32_t));
    mem->m = rows;
    mem->gen++;
}

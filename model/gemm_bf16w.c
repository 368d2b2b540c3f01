/* gemm_bf16w.c: see gemm_bf16w.h. One oneDNN matmul primitive per weight matrix: src x
 * [M, K] bf16 row-major (this module's buffer, rounded at each call), weights [K, N] bf16 in
 * the layout the primitive picks (format any; reordered once from W^T), bias [1, N] f32,
 * dst [M, N] f32 row-major. oneDNN runs on txl's OpenMP threads of the moment. */
#include "gemm_bf16w.h"

#include <dnnl.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_bf16.h"
#include "quant.h"

struct bf16w {
    int M, N, K;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, bias, dst;
    dnnl_stream_t stream;
    uint16_t *xbuf;  /* [M, K] */
    float *bbuf;     /* [N] */
};

static dnnl_engine_t engine;
static const char *impl = "";

static int md2(dnnl_memory_desc_t *md, int r, int c, dnnl_dim_t s0, dnnl_dim_t s1,
               dnnl_data_type_t dt)
{
    dnnl_dims_t dims = {r, c}, strides = {s0, s1};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides) == dnnl_success ? 0 : -1;
}

/* W [N, K] rounded to bf16 and reordered into the primitive's weights memory */
static int load_weights(bf16w *w, const float *W, const dnnl_memory_desc_t *wmd)
{
    size_t n = (size_t)w->N * w->K;
    uint16_t *tmp = malloc(n * sizeof *tmp);
    dnnl_memory_desc_t umd;
    dnnl_memory_t user = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    int ok = tmp != NULL;
    if (ok) {
        for (size_t i = 0; i < n; i++)
            tmp[i] = bf16_from_f32(W[i]);
        /* [K, N] as the matmul sees it: W^T, element (k, n) at n K + k */
        ok = md2(&umd, w->K, w->N, 1, w->K, dnnl_bf16) == 0 &&
             dnnl_memory_create(&user, &umd, engine, tmp) == dnnl_success &&
             dnnl_reorder_primitive_desc_create(&rpd, &umd, engine, wmd, engine, NULL) ==
                 dnnl_success &&
             dnnl_primitive_create(&reorder, rpd) == dnnl_success;
    }
    if (ok) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, w->wei}};
        ok = dnnl_primitive_execute(reorder, w->stream, 2, args) == dnnl_success &&
             dnnl_stream_wait(w->stream) == dnnl_success;
    }
    if (reorder)
        dnnl_primitive_destroy(reorder);
    if (rpd)
        dnnl_primitive_desc_destroy(rpd);
    if (user)
        dnnl_memory_destroy(user);
    free(tmp);
    return ok ? 0 : -1;
}

bf16w *bf16w_new(const float *W, const float *bias, int N, int K, int M)
{
    if (!engine && dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
        return NULL;
    bf16w *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->M = M, w->N = N, w->K = K;
    w->xbuf = malloc((size_t)M * K * sizeof *w->xbuf);
    w->bbuf = calloc((size_t)N, sizeof *w->bbuf);
    dnnl_memory_desc_t src, wei, bmd, dst;
    dnnl_dims_t wdims = {K, N};
    dnnl_matmul_desc_t mm;
    dnnl_primitive_desc_t pd = NULL;
    int ok = w->xbuf && w->bbuf && md2(&src, M, K, K, 1, dnnl_bf16) == 0 &&
             dnnl_memory_desc_init_by_tag(&wei, 2, wdims, dnnl_bf16, dnnl_format_tag_any) ==
                 dnnl_success &&
             md2(&bmd, 1, N, N, 1, dnnl_f32) == 0 && md2(&dst, M, N, N, 1, dnnl_f32) == 0 &&
             dnnl_matmul_desc_init(&mm, &src, &wei, &bmd, &dst) == dnnl_success &&
             dnnl_primitive_desc_create(&pd, &mm, NULL, engine, NULL) == dnnl_success &&
             dnnl_primitive_create(&w->prim, pd) == dnnl_success &&
             dnnl_stream_create(&w->stream, engine, dnnl_stream_default_flags) == dnnl_success;
    const dnnl_memory_desc_t *wmd = ok ? dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0)
                                       : NULL;
    ok = ok && wmd && dnnl_memory_create(&w->wei, wmd, engine, DNNL_MEMORY_ALLOCATE) ==
                          dnnl_success &&
         dnnl_memory_create(&w->src, &src, engine, w->xbuf) == dnnl_success &&
         dnnl_memory_create(&w->bias, &bmd, engine, w->bbuf) == dnnl_success &&
         dnnl_memory_create(&w->dst, &dst, engine, DNNL_MEMORY_NONE) == dnnl_success &&
         load_weights(w, W, wmd) == 0;
    if (ok) {
        const char *s = NULL;
        if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s) == dnnl_success && s)
            impl = s; /* a string of the library's, which outlives the descriptor */
        if (bias)
            memcpy(w->bbuf, bias, (size_t)N * sizeof *bias);
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (!ok) {
        bf16w_free(w);
        return NULL;
    }
    return w;
}

int bf16w_run(bf16w *w, float *y, const float *x, uint16_t *xh)
{
    xh = xh ? xh : w->xbuf;
    quant_bf16(xh, x, (size_t)w->M * w->K);
    dnnl_memory_set_data_handle(w->src, xh);
    dnnl_memory_set_data_handle(w->dst, y);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, w->src},
                               {DNNL_ARG_WEIGHTS, w->wei},
                               {DNNL_ARG_BIAS, w->bias},
                               {DNNL_ARG_DST, w->dst}};
    if (dnnl_primitive_execute(w->prim, w->stream, 4, args) != dnnl_success)
        return -1;
    return dnnl_stream_wait(w->stream) == dnnl_success ? 0 : -1;
}

void bf16w_free(bf16w *w)
{
    if (!w)
        return;
    if (w->prim)
        dnnl_primitive_destroy(w->prim);
    if (w->src)
        dnnl_memory_destroy(w->src);
    if (w->wei)
        dnnl_memory_destroy(w->wei);
    if (w->bias)
        dnnl_memory_destroy(w->bias);
    if (w->dst)
        dnnl_memory_destroy(w->dst);
    if (w->stream)
        dnnl_stream_destroy(w->stream);
    free(w->xbuf);
    free(w->bbuf);
    free(w);
}

const char *bf16w_impl(void) { return impl; }

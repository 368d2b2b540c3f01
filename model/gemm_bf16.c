/* gemm_bf16.c: see gemm_bf16.h.
 *
 * Each call rounds op(A) and op(B)'s stored matrices into this thread's bf16 buffers
 * (contiguous, the transposition kept as strides) and runs a oneDNN matmul primitive with
 * an fp32 destination: alpha as its output scale, beta = 1 as a sum post-op. The primitives
 * are kept per thread (a slot each) and shape (created at a shape's first call: the first training
 * step or evaluation segment; none after), with their memory objects, whose data handles
 * each call points at its operands. oneDNN runs on txl's OpenMP pool: a call outside a
 * parallel region uses every thread, one inside a region (linear_backward's two sections,
 * attention's pairs) its own thread. */
#include "gemm_bf16.h"

#include <dnnl.h>
#include <stdlib.h>
#include <string.h>

#include "../common/par.h"

enum { SLOTS = 64, SHAPES = 48 };

typedef struct {
    int M, N, K, ta, tb, ldc;
    float alpha, beta;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;
} mm_entry;

typedef struct {
    dnnl_stream_t stream;
    mm_entry e[SHAPES];
    int n;
    uint16_t *abuf, *bbuf;
    size_t acap, bcap;
    const char *impl;
} mm_slot;

static dnnl_engine_t engine;
static mm_slot slots[SLOTS];

/* This thread's slot, taken at its first bf16 product: not omp_get_thread_num(), which is 0
 * for both replicas' threads inside their (inactive, nested) parallel sections */
static int my_slot(void)
{
    static _Atomic int next;
    static _Thread_local int slot = -1;
    if (slot < 0)
        slot = next++;
    return slot;
}

int gemm_bf16_init(void)
{
    if (engine)
        return 0;
    return dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success ? 0 : -1;
}

const char *gemm_bf16_impl(void)
{
    int t = my_slot();
    return t < SLOTS && slots[t].impl ? slots[t].impl : "";
}

/* the rows x cols matrix at x (row stride ld) rounded into dst, contiguous */
static void round_into(uint16_t *dst, const float *x, int rows, int cols, int ld)
{
    int nt = (size_t)rows * cols > (1u << 16) ? par_threads() : 1;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int r = 0; r < rows; r++) {
        const float *s = x + (size_t)r * ld;
        uint16_t *d = dst + (size_t)r * cols;
        for (int c = 0; c < cols; c++)
            d[c] = bf16_from_f32(s[c]);
    }
}

static int grow(uint16_t **buf, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    uint16_t *p = realloc(*buf, n * sizeof **buf);
    if (!p)
        return -1;
    *buf = p, *cap = n;
    return 0;
}

static int md2(dnnl_memory_desc_t *md, int r, int c, dnnl_dim_t s0, dnnl_dim_t s1,
               dnnl_data_type_t dt)
{
    dnnl_dims_t dims = {r, c}, strides = {s0, s1};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides) == dnnl_success ? 0 : -1;
}

/* the primitive of one shape: op(A) [M,K] and op(B) [K,N] contiguous bf16 as stored, C
 * [M,N] fp32 with row stride ldc */
static int create(mm_entry *e, mm_slot *s)
{
    dnnl_memory_desc_t a, b, c;
    if (md2(&a, e->M, e->K, e->ta ? 1 : e->K, e->ta ? e->M : 1, dnnl_bf16) ||
        md2(&b, e->K, e->N, e->tb ? 1 : e->N, e->tb ? e->K : 1, dnnl_bf16) ||
        md2(&c, e->M, e->N, e->ldc, 1, dnnl_f32))
        return -1;
    dnnl_matmul_desc_t mm;
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_matmul_desc_init(&mm, &a, &b, NULL, &c) != dnnl_success ||
        dnnl_primitive_attr_create(&attr) != dnnl_success)
        return -1;
    int ok = e->alpha == 1.0f ||
             dnnl_primitive_attr_set_output_scales(attr, 1, 0, &e->alpha) == dnnl_success;
    if (ok && e->beta != 0.0f)
        ok = dnnl_post_ops_create(&po) == dnnl_success &&
             dnnl_post_ops_append_sum(po, e->beta) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &mm, attr, engine, NULL) == dnnl_success &&
         dnnl_primitive_create(&e->prim, pd) == dnnl_success &&
         dnnl_memory_create(&e->a, &a, engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&e->b, &b, engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&e->c, &c, engine, DNNL_MEMORY_NONE) == dnnl_success;
    if (ok)
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s->impl);
    if (po)
        dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return ok ? 0 : -1;
}

static mm_entry *lookup(mm_slot *s, int M, int N, int K, int ta, int tb, int ldc, float alpha,
                        float beta)
{
    for (int i = 0; i < s->n; i++) {
        mm_entry *e = &s->e[i];
        if (e->M == M && e->N == N && e->K == K && e->ta == ta && e->tb == tb &&
            e->ldc == ldc && e->alpha == alpha && e->beta == beta)
            return e->prim ? e : NULL;
    }
    if (s->n == SHAPES)
        return NULL;
    mm_entry *e = &s->e[s->n++];
    *e = (mm_entry){.M = M, .N = N, .K = K, .ta = ta, .tb = tb, .ldc = ldc, .alpha = alpha,
                    .beta = beta};
    if (create(e, s)) {
        e->prim = NULL; /* remembered as refused: fp32 from now on for this shape */
        return NULL;
    }
    return e;
}

int gemm_bf16(float *C, const float *A, const float *B, int M, int N, int K, int trans_a,
              int trans_b, float alpha, float beta, int lda, int ldb, int ldc)
{
    int t = my_slot();
    if (!engine || t >= SLOTS)
        return -1;
    mm_slot *s = &slots[t];
    if (!s->stream && dnnl_stream_create(&s->stream, engine, dnnl_stream_default_flags))
        return -1;
    mm_entry *e = lookup(s, M, N, K, trans_a, trans_b, ldc, alpha, beta);
    if (!e || grow(&s->abuf, &s->acap, (size_t)M * K) || grow(&s->bbuf, &s->bcap, (size_t)K * N))
        return -1;
    round_into(s->abuf, A, trans_a ? K : M, trans_a ? M : K, lda);
    round_into(s->bbuf, B, trans_b ? N : K, trans_b ? K : N, ldb);
    dnnl_memory_set_data_handle(e->a, s->abuf);
    dnnl_memory_set_data_handle(e->b, s->bbuf);
    dnnl_memory_set_data_handle(e->c, C);
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, e->b}, {DNNL_ARG_DST, e->c}};
    if (dnnl_primitive_execute(e->prim, s->stream, 3, args) != dnnl_success)
        return -1;
    dnnl_stream_wait(s->stream);
    return 0;
}

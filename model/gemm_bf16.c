/* gemm_bf16.c: see gemm_bf16.h.
 *
 * Each call takes each operand in bf16: from a shadow (the array's copy, same leading
 * dimension) or rounded into this thread's buffers (contiguous, the transposition kept as
 * strides), and runs a oneDNN matmul primitive with an fp32 destination: alpha as its output
 * scale, beta = 1 as a sum post-op. The primitives are kept per thread (a slot each) and
 * shape (created at a shape's first call: the first training step or evaluation segment;
 * none after in a run of at most SHAPES shapes a thread; past that each new shape takes the
 * place of the least recently used), with their memory objects, whose data handles each
 * call points at its operands. oneDNN runs on txl's OpenMP pool: a call outside a parallel
 * region uses every thread, one inside a region (linear_backward's two sections,
 * attention's pairs) its own thread. */
#include "gemm_bf16.h"

#include <dnnl.h>
#include <stdlib.h>
#include <string.h>

#include "../common/par.h"

enum { SLOTS = 64, SHAPES = 128 };

typedef struct {
    int M, N, K, ta, tb, lda, ldb, ldc, bias, relu; /* relu: C = bf16(relu(...)) */
    float alpha, beta;
    unsigned long used; /* the slot's tick at its last call */
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, bias_mem;
} mm_entry;

typedef struct {
    dnnl_stream_t stream;
    mm_entry e[SHAPES];
    int n;              /* shapes held */
    unsigned long tick; /* calls looked up */
    long created;       /* primitives created, evicted ones' again included */
    uint16_t *abuf, *bbuf;
    size_t acap, bcap;
    const char *impl;
} mm_slot;

static dnnl_engine_t engine;
static mm_slot slots[SLOTS];

static struct {
    const float *base;
    size_t n;
    const uint16_t *copy;
} shadows[GEMM_BF16_SHADOWS];
static int use_shadows = 1, refuse_all;

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

void gemm_bf16_round(uint16_t *dst, const float *x, int rows, int cols, int ld)
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

/* the primitive of one shape: op(A) [M,K] and op(B) [K,N] bf16 as stored (leading
 * dimensions lda, ldb), C [M,N] fp32 with row stride ldc */
static int create(mm_entry *e, mm_slot *s)
{
    dnnl_memory_desc_t a, b, c, bias;
    if (md2(&a, e->M, e->K, e->ta ? 1 : e->lda, e->ta ? e->lda : 1, dnnl_bf16) ||
        md2(&b, e->K, e->N, e->tb ? 1 : e->ldb, e->tb ? e->ldb : 1, dnnl_bf16) ||
        md2(&c, e->M, e->N, e->ldc, 1, e->relu ? dnnl_bf16 : dnnl_f32) ||
        md2(&bias, 1, e->N, e->N, 1, dnnl_f32))
        return -1;
    dnnl_matmul_desc_t mm;
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_matmul_desc_init(&mm, &a, &b, e->bias ? &bias : NULL, &c) != dnnl_success ||
        dnnl_primitive_attr_create(&attr) != dnnl_success)
        return -1;
    int ok = e->alpha == 1.0f ||
             dnnl_primitive_attr_set_output_scales(attr, 1, 0, &e->alpha) == dnnl_success;
    if (ok && (e->beta != 0.0f || e->relu))
        ok = dnnl_post_ops_create(&po) == dnnl_success &&
             (e->beta == 0.0f || dnnl_post_ops_append_sum(po, e->beta) == dnnl_success) &&
             (!e->relu || dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f,
                                                       0.0f) == dnnl_success) &&
             dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &mm, attr, engine, NULL) == dnnl_success &&
         dnnl_primitive_create(&e->prim, pd) == dnnl_success &&
         dnnl_memory_create(&e->a, &a, engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&e->b, &b, engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&e->c, &c, engine, DNNL_MEMORY_NONE) == dnnl_success &&
         (!e->bias ||
          dnnl_memory_create(&e->bias_mem, &bias, engine, DNNL_MEMORY_NONE) == dnnl_success);
    if (ok)
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s->impl);
    if (po)
        dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return ok ? 0 : -1;
}

/* e's oneDNN objects destroyed (those it has) */
static void release(mm_entry *e)
{
    if (e->prim)
        dnnl_primitive_destroy(e->prim);
    dnnl_memory_t *m[] = {&e->a, &e->b, &e->c, &e->bias_mem};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        if (*m[i])
            dnnl_memory_destroy(*m[i]);
    e->prim = NULL, e->a = e->b = e->c = e->bias_mem = NULL;
}

/* key's entry: found, or created in a free place, or, all SHAPES held (a workload of many
 * shapes, e.g. a probe's lengths and trials), in the place of the least recently used (a
 * run's hot shapes stay); NULL when oneDNN refuses the shape */
static mm_entry *lookup(mm_slot *s, const mm_entry *key)
{
    s->tick++;
    for (int i = 0; i < s->n; i++) {
        mm_entry *e = &s->e[i];
        if (e->M == key->M && e->N == key->N && e->K == key->K && e->ta == key->ta &&
            e->tb == key->tb && e->lda == key->lda && e->ldb == key->ldb &&
            e->ldc == key->ldc && e->bias == key->bias && e->relu == key->relu &&
            e->alpha == key->alpha &&
            e->beta == key->beta) {
            e->used = s->tick;
            return e->prim ? e : NULL;
        }
    }
    mm_entry *e = &s->e[0];
    if (s->n < SHAPES) {
        e = &s->e[s->n++];
    } else {
        for (int i = 1; i < SHAPES; i++)
            if (s->e[i].used < e->used)
                e = &s->e[i];
        release(e);
    }
    *e = *key;
    e->used = s->tick;
    s->created++;
    if (create(e, s)) {
        release(e); /* remembered as refused: fp32 for this shape while it is held */
        return NULL;
    }
    return e;
}

void gemm_bf16_stats(int *held, long *created)
{
    int t = my_slot();
    *held = t < SLOTS ? slots[t].n : 0;
    *created = t < SLOTS ? slots[t].created : 0;
}

int gemm_bf16_shadow(const float *base, size_t n, const uint16_t *copy)
{
    gemm_bf16_unshadow(base);
    for (int i = 0; i < GEMM_BF16_SHADOWS; i++)
        if (!shadows[i].base) {
            shadows[i].base = base, shadows[i].n = n, shadows[i].copy = copy;
            return 0;
        }
    return -1;
}

void gemm_bf16_unshadow(const float *base)
{
    for (int i = 0; i < GEMM_BF16_SHADOWS; i++)
        if (shadows[i].base == base)
            shadows[i].base = NULL;
}

void gemm_bf16_use_shadows(int on) { use_shadows = on; }
void gemm_bf16_refuse(int on) { refuse_all = on; }

/* The copy of the rows x cols operand at x (row stride ld) when a shadow holds all of it */
static const uint16_t *shadow_of(const float *x, int rows, int cols, int ld)
{
    if (!use_shadows)
        return NULL;
    uintptr_t p = (uintptr_t)x, end = p + ((size_t)(rows - 1) * ld + cols) * sizeof *x;
    for (int i = 0; i < GEMM_BF16_SHADOWS; i++) {
        uintptr_t b = (uintptr_t)shadows[i].base;
        if (b && p >= b && end <= b + shadows[i].n * sizeof(float))
            return shadows[i].copy + (p - b) / sizeof(float);
    }
    return NULL;
}

static mm_slot *my_stream(void)
{
    int t = my_slot();
    if (!engine || t >= SLOTS)
        return NULL;
    mm_slot *s = &slots[t];
    if (!s->stream && dnnl_stream_create(&s->stream, engine, dnnl_stream_default_flags))
        return NULL;
    return s;
}

static int run(mm_slot *s, void *C, const uint16_t *A, const uint16_t *B, const float *bias,
               const mm_entry *key)
{
    mm_entry *e = lookup(s, key);
    if (!e)
        return -1;
    dnnl_memory_set_data_handle(e->a, (void *)A);
    dnnl_memory_set_data_handle(e->b, (void *)B);
    dnnl_memory_set_data_handle(e->c, C);
    dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, e->b}, {DNNL_ARG_DST, e->c}, {DNNL_ARG_BIAS, NULL}};
    if (bias) {
        dnnl_memory_set_data_handle(e->bias_mem, (void *)bias);
        args[3].memory = e->bias_mem;
    }
    if (dnnl_primitive_execute(e->prim, s->stream, bias ? 4 : 3, args) != dnnl_success)
        return -1;
    dnnl_stream_wait(s->stream);
    return 0;
}

/* gemm_bf16_x into C (fp32), or Ch = bf16(relu(...)) (relu) */
static int product(void *C, int relu, const float *A, const uint16_t *Ah, const float *B,
                   const uint16_t *Bh, const float *bias, int M, int N, int K, int trans_a,
                   int trans_b, float alpha, float beta, int lda, int ldb, int ldc)
{
    mm_slot *s = refuse_all ? NULL : my_stream();
    if (!s)
        return -1;
    /* the operands as stored: op(A) [M, K] is A [K, M] when transposed */
    int ar = trans_a ? K : M, ac = trans_a ? M : K, br = trans_b ? N : K, bc = trans_b ? K : N;
    const uint16_t *a = Ah ? Ah : shadow_of(A, ar, ac, lda);
    const uint16_t *b = Bh ? Bh : shadow_of(B, br, bc, ldb);
    if ((!a && grow(&s->abuf, &s->acap, (size_t)ar * ac)) ||
        (!b && grow(&s->bbuf, &s->bcap, (size_t)br * bc)))
        return -1;
    if (!a)
        gemm_bf16_round(s->abuf, A, ar, ac, lda), a = s->abuf, lda = ac;
    if (!b)
        gemm_bf16_round(s->bbuf, B, br, bc, ldb), b = s->bbuf, ldb = bc;
    mm_entry key = {.M = M, .N = N, .K = K, .ta = trans_a, .tb = trans_b, .lda = lda,
                    .ldb = ldb, .ldc = ldc, .bias = bias != NULL, .relu = relu, .alpha = alpha,
                    .beta = beta};
    return run(s, C, a, b, bias, &key);
}

int gemm_bf16_x(float *C, const float *A, const uint16_t *Ah, const float *B,
                const uint16_t *Bh, const float *bias, int M, int N, int K, int trans_a,
                int trans_b, float alpha, float beta, int lda, int ldb, int ldc)
{
    return product(C, 0, A, Ah, B, Bh, bias, M, N, K, trans_a, trans_b, alpha, beta, lda, ldb,
                   ldc);
}

int gemm_bf16_relu_h(uint16_t *Ch, const float *A, const uint16_t *Ah, const float *B,
                     const uint16_t *Bh, const float *bias, int M, int N, int K, int trans_a,
                     int trans_b, int lda, int ldb, int ldc)
{
    return product(Ch, 1, A, Ah, B, Bh, bias, M, N, K, trans_a, trans_b, 1.0f, 0.0f, lda, ldb,
                   ldc);
}

/* test_quant.c: quantized weights (model/quant.h) and their products (model/qgemm.h).
 * - The quantizer round-trips its own format bit for bit: quantizing a dequantized q8 or
 *   bf16 matrix gives back the same int8 values and scales (the same bf16 values), for
 *   ordinary, zero, tiny, huge and outlier blocks; each weight is within half a step of
 *   its block's grid.
 * - The products equal an fp32 product of the dequantized weights to float rounding: against
 *   the double product of the dequantized weights, |C - ref| <= (K + 2) 2^-24 sum |w x| per
 *   element; every kernel the CPU can run (avx512, avx2, the C twin) gives the same bits;
 *   strided rows, alpha, beta, bias, tiles past the edges (rows of W not a multiple of the
 *   tile, more rows of A than QG_ROWS), bf16 rows with a tail (K mod 32), or all tail.
 * - quant_model: the stored types by tensor, w the exact dequantization of the stored
 *   copies, and quantizing again changes nothing. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cpu.h"
#include "../model/gemm_bf16.h"
#include "../model/gemm_bf16w.h"
#include "../model/qgemm.h"
#include "../model/quant.h"
#include "testlib.h"

static tl_rng rng = {0x5eed1234};

/* A matrix whose blocks span the cases: normal weights, a zero block, a block of tiny
 * values (below the bf16 scale's normal range), a huge block, one outlier per row. */
static void fill_matrix(float *w, int rows, int cols)
{
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < cols; k++) {
            float v = tl_normal(&rng, 0.05f);
            int b = k / QK;
            if (r == 1 && b == 0)
                v = 0;
            if (r == 2 && b == 0)
                v *= 1e-37f;
            if (r == 3 && b == 0)
                v *= 1e30f;
            if (k == cols - 1 - r % QK)
                v = 3.0f; /* an outlier (in the last block): its block's other weights get a
                           * coarse grid */
            w[(size_t)r * cols + k] = v;
        }
}

static void test_roundtrip(void)
{
    enum { R = 9, K = 128 };
    float *w = malloc(sizeof(float) * R * K), *d = malloc(sizeof(float) * R * K);
    int8_t q[R * K], q2[R * K];
    uint16_t s[R * K / QK], s2[R * K / QK], b[R * K], b2[R * K];
    fill_matrix(w, R, K);
    for (int r = 0; r < R; r++)
        quant_q8_row(q + r * K, s + r * (K / QK), w + (size_t)r * K, K);
    qmat m = {.type = QT_Q8, .rows = R, .cols = K, .q = q, .scale = s};
    quant_dequant(d, &m);
    int grid_ok = 1, range_ok = 1;
    for (int i = 0; i < R * K; i++) {
        float sc = bf16_to_f32(s[i / QK]);
        grid_ok &= fabsf(d[i] - w[i]) <= 0.5f * sc * (1 + 1e-6f) ||
                   (sc == 0 && fabsf(w[i]) < 127 * FLT_MIN);
        range_ok &= q[i] != -128;
    }
    for (int r = 0; r < R; r++)
        quant_q8_row(q2 + r * K, s2 + r * (K / QK), d + (size_t)r * K, K);
    CHECK(memcmp(q, q2, sizeof q) == 0 && memcmp(s, s2, sizeof s) == 0,
          "q8: quantizing the dequantized matrix gives the same int8 values and scales");
    CHECK(grid_ok && range_ok, "q8: every weight within half a step of its block's grid, "
          "values in [-127, 127]");
    int zero_ok = s[(1 * K) / QK] == 0 && s[(2 * K) / QK] == 0 && d[K] == 0 && d[2 * K] == 0;
    CHECK(zero_ok, "q8: a zero block and a block below the scale's range are stored as zeros");
    int top_ok = 1; /* each block with a non-zero scale holds +-127 */
    for (int i = 0; i < R * K / QK; i++) {
        int mx = 0;
        for (int k = 0; k < QK; k++)
            mx = abs(q[i * QK + k]) > mx ? abs(q[i * QK + k]) : mx;
        top_ok &= s[i] == 0 || mx == 127;
    }
    CHECK(top_ok, "q8: the largest weight of each block is +-127");
    quant_bf16(b, w, R * K);
    qmat mb = {.type = QT_BF16, .rows = R, .cols = K, .bf16 = b};
    quant_dequant(d, &mb);
    quant_bf16(b2, d, R * K);
    CHECK(memcmp(b, b2, sizeof b) == 0, "bf16: rounding the dequantized matrix gives the same "
          "bf16 values");
    free(w), free(d);
}

/* C [M, N] (ldc) against the double product of the dequantized weights, to float rounding;
 * the padding past N untouched. */
static int check_product(const float *C, const float *C0, const float *A, const float *Wd,
                         const float *bias, int M, int N, int K, float alpha, float beta, int lda,
                         int ldc, double *worst)
{
    int ok = 1;
    for (int b = 0; b < M; b++) {
        for (int o = 0; o < N; o++) {
            double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double t = (double)Wd[(size_t)o * K + k] * A[(size_t)b * lda + k];
                s += t;
                mag += fabs(t);
            }
            double c0 = bias ? bias[o] : beta * C0[(size_t)b * ldc + o];
            s = alpha * s + c0;
            mag = fabs(alpha) * mag;
            mag += fabs(c0);
            double err = fabs(C[(size_t)b * ldc + o] - s), tol = (K + 2) * 0x1p-24 * mag;
            if (err > tol)
                ok = 0;
            if (mag > 0 && err / mag > *worst)
                *worst = err / mag;
        }
        for (int o = N; o < ldc; o++)
            ok &= C[(size_t)b * ldc + o] == 777.0f;
    }
    return ok;
}

static void test_product(qtype t, int M, int N, int K, float alpha, float beta, int with_bias)
{
    int lda = K + 3, ldc = N + 2;
    float *w = malloc(sizeof(float) * N * K), *Wd = malloc(sizeof(float) * N * K);
    float *A = malloc(sizeof(float) * M * lda), *C0 = malloc(sizeof(float) * M * ldc);
    float *C = malloc(sizeof(float) * M * ldc), *Cc = malloc(sizeof(float) * M * ldc);
    float *bias = malloc(sizeof(float) * N);
    int8_t *q = malloc((size_t)N * K);
    uint16_t *s = malloc(sizeof(uint16_t) * N * (K / QK + 1)), *bb = malloc(2 * (size_t)N * K);
    tl_fill(&rng, w, (size_t)N * K, 0.1f);
    tl_fill(&rng, A, (size_t)M * lda, 1.0f);
    tl_fill(&rng, bias, (size_t)N, 1.0f);
    for (int i = 0; i < M * ldc; i++)
        C0[i] = i % ldc >= N ? 777.0f : tl_normal(&rng, 1.0f);
    qmat m = {.type = t, .rows = N, .cols = K};
    unsigned char *buf = NULL;
    if (t == QT_Q8) { /* placed as a checkpoint's (quant.h), panels and all */
        buf = aligned_alloc(64, quant_place(NULL, t, N, K, NULL));
        quant_place(&m, t, N, K, buf);
        for (int r = 0; r < N; r++)
            quant_q8_row((int8_t *)m.q + (size_t)r * K, (uint16_t *)m.scale + (size_t)r * (K / QK),
                         w + (size_t)r * K, K);
        quant_finish(&m);
    } else {
        quant_bf16(bb, w, (size_t)N * K);
        m.bf16 = bb;
    }
    quant_dequant(Wd, &m);
    static const char *const kernels[] = {"c", "avx2", "avx512"};
    int same = 1, all_ok = 1, ran = 0;
    double worst = 0;
    char names[64] = "";
    for (int k = 0; k < 3; k++) {
        if (qgemm_use(kernels[k]))
            continue;
        memcpy(C, C0, sizeof(float) * M * ldc);
        if (with_bias) { /* qlinear: contiguous rows */
            float *Ac = malloc(sizeof(float) * M * K), *y = malloc(sizeof(float) * M * ldc);
            for (int b = 0; b < M; b++) {
                memcpy(Ac + (size_t)b * K, A + (size_t)b * lda, sizeof(float) * K);
                for (int o = N; o < ldc; o++)
                    y[(size_t)b * ldc + o] = 777.0f;
            }
            float *y2 = malloc(sizeof(float) * M * N);
            qlinear(y2, Ac, &m, bias, M);
            for (int b = 0; b < M; b++)
                memcpy(C + (size_t)b * ldc, y2 + (size_t)b * N, sizeof(float) * N);
            free(Ac), free(y), free(y2);
        } else {
            qgemm(C, A, &m, M, alpha, beta, lda, ldc);
        }
        all_ok &= check_product(C, C0, A, Wd, with_bias ? bias : NULL, M, N, K, alpha, beta, lda,
                                ldc, &worst);
        if (ran++ == 0)
            memcpy(Cc, C, sizeof(float) * M * ldc);
        else
            same &= memcmp(Cc, C, sizeof(float) * M * ldc) == 0;
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", ran > 1 ? " " : "",
                 kernels[k]);
    }
    if (qgemm_use(kernels[2]) && qgemm_use(kernels[1])) /* back to the best */
        qgemm_use(kernels[0]);
    CHECK(all_ok && same, "%s product M %d N %d K %d alpha %g beta %g%s: within (K+2) 2^-24 sum|wx| of "
          "the double product of the dequantized weights (worst %.1e of sum|wx|); kernels %s "
          "give the same bits: %s", qtype_name(t), M, N, K, alpha, beta, with_bias ? " + bias" : "",
          worst, names, same ? "yes" : "NO");
    free(w), free(Wd), free(A), free(C0), free(C), free(Cc), free(bias), free(q), free(s),
        free(bb), free(buf);
}

/* qgemv_t (attention's weighted values over a bf16 cache): y = a W for W bf16 [K, N],
 * columns in blocks of 64 and 16 and a rest, strided rows; every kernel the same bits, each
 * element within (K + 2) 2^-24 sum |a w| of the double sum. */
static void test_gemv_t(int K, int N)
{
    int ldw = N + 5;
    uint16_t *W = malloc(sizeof(uint16_t) * K * ldw);
    float *a = malloc(sizeof(float) * K), *y = malloc(sizeof(float) * N), *y0 = malloc(sizeof(float) * N);
    for (int i = 0; i < K * ldw; i++)
        W[i] = bf16_from_f32(tl_normal(&rng, 1.0f));
    tl_fill(&rng, a, (size_t)K, 1.0f);
    static const char *const kernels[] = {"c", "avx2", "avx512"};
    int ok = 1, same = 1, ran = 0;
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        if (qgemm_use(kernels[k]))
            continue;
        qgemv_t(y, a, W, K, N, ldw);
        for (int n = 0; n < N; n++) {
            double s = 0, mag = 0;
            for (int j = 0; j < K; j++) {
                double t = (double)a[j] * bf16_to_f32(W[(size_t)j * ldw + n]);
                s += t, mag += fabs(t);
            }
            double err = fabs(y[n] - s);
            ok &= err <= (K + 2) * 0x1p-24 * mag;
            worst = mag > 0 && err / mag > worst ? err / mag : worst;
        }
        if (ran++ == 0)
            memcpy(y0, y, sizeof(float) * N);
        else
            same &= memcmp(y0, y, sizeof(float) * N) == 0;
    }
    if (qgemm_use(kernels[2]) && qgemm_use(kernels[1]))
        qgemm_use(kernels[0]);
    CHECK(ok && same, "qgemv_t K %d N %d: within (K+2) 2^-24 sum|aw| of the double sum (worst "
          "%.1e); every kernel the same bits: %s", K, N, worst, same ? "yes" : "NO");
    free(W), free(a), free(y), free(y0);
}

/* bf16w (decoding's products on the matrix units): y = x W^T + bias against the double
 * product of the bf16-rounded x and W (the roundings bf16 precision makes), sums in fp32:
 * 1e-5 of the largest |y|, as test_ops's bf16 gemm; where the CPU has bf16. */
static void test_bf16w(int M, int N, int K, int with_bias)
{
    char missing[160];
    if (!cpu_bf16_kernel(missing, sizeof missing)) {
        printf("  skip bf16w: %s\n", missing);
        return;
    }
    float *W = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * M * K);
    float *b = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * M * N);
    double *ref = malloc(sizeof(double) * M * N);
    tl_fill(&rng, W, (size_t)N * K, 1.0f);
    tl_fill(&rng, x, (size_t)M * K, 1.0f);
    tl_fill(&rng, b, (size_t)N, 1.0f);
    bf16w *w = bf16w_new(W, with_bias ? b : NULL, N, K, M);
    if (!w) {
        CHECK(0, "bf16w %dx%dx%d: oneDNN made no product", M, N, K);
        free(W), free(x), free(b), free(y), free(ref);
        return;
    }
    int rc = bf16w_run(w, y, x, NULL);
    for (int i = 0; i < M; i++)
        for (int o = 0; o < N; o++) {
            double s = with_bias ? b[o] : 0;
            for (int k = 0; k < K; k++)
                s += (double)bf16_to_f32(bf16_from_f32(x[(size_t)i * K + k])) *
                     bf16_to_f32(bf16_from_f32(W[(size_t)o * K + k]));
            ref[(size_t)i * N + o] = s;
        }
    double e = tl_max_rel_err(y, ref, (size_t)M * N, 1e-30);
    CHECK(rc == 0 && e <= 1e-5, "bf16w %dx%dx%d%s (%s): vs the double product of the bf16-rounded "
          "operands %.1e (tol 1e-5)", M, N, K, with_bias ? " + bias" : "", bf16w_impl(), e);
    bf16w_free(w);
    free(W), free(x), free(b), free(y), free(ref);
}

static void test_model(void)
{
    model_config c = {0};
    c.n_layer = 2, c.d_model = 64, c.n_head = 2, c.d_head = 16, c.d_inner = 96;
    c.tgt_len = 8, c.mem_len = 8, c.vocab = 40, c.pos = POS_XL;
    model m;
    txl_err e = {0};
    CHECK(model_init(&m, &c, &e) == 0, "a small model: %s", e.msg);
    model_init_weights(&m, 7);
    CHECK(quant_model(&m, QT_Q8, &e) == 0 && quant_model_type(&m) == QT_Q8, "quant_model q8");
    int types_ok = 1, deq_ok = 1;
    float *d = malloc(sizeof(float) * m.n_floats);
    for (int i = 0; i < m.n_params; i++) {
        const param_entry *p = &m.table[i];
        const qmat *q = quant_of(&m, i);
        int linear = strstr(p->name, "qkv.weight") || strstr(p->name, ".o.weight") ||
                     strstr(p->name, "ff.0.weight") || strstr(p->name, "ff.3.weight");
        int bf = strcmp(p->name, "word_emb.weight") == 0 || strstr(p->name, ".attn.r.weight");
        qtype want = linear ? QT_Q8 : bf ? QT_BF16 : QT_F32;
        types_ok &= (q ? q->type : QT_F32) == want;
        if (q) {
            quant_dequant(d, q);
            deq_ok &= memcmp(d, m.w + p->offset, p->numel * sizeof(float)) == 0;
        }
    }
    CHECK(types_ok, "q8: the layers' qkv, o, ff.0, ff.3 in q8, word_emb and xl's attn.r in "
          "bf16, the rest f32");
    CHECK(deq_ok, "w is the exact dequantization of the stored copies");
    float *w1 = malloc(sizeof(float) * m.n_floats);
    memcpy(w1, m.w, sizeof(float) * m.n_floats);
    quant_model(&m, QT_Q8, &e);
    CHECK(memcmp(w1, m.w, sizeof(float) * m.n_floats) == 0, "quantizing a q8 model again "
          "changes no weight");
    layer_qmats lq[2];
    const qmat *emb;
    quant_views(&m, lq, &emb);
    const qmat *ff3 = lq[1].m[LIN_FF3];
    CHECK(ff3 && ff3->type == QT_Q8 && ff3->rows == 64 && ff3->cols == 96 && emb &&
          emb->type == QT_BF16, "quant_views: layer 1's ff.3 "
          "q8 [64, 96], the output layer bf16");
    quant_model(&m, QT_F32, &e);
    CHECK(!m.qm && quant_model_type(&m) == QT_F32, "QT_F32 drops the stored copies");
    free(d), free(w1);
    model_free(&m);
}

int main(void)
{
    printf("qgemm kernel: %s\n", qgemm_kernel());
    test_roundtrip();
    int Ms[] = {1, 2, 3, 4, 5, 8, 9, 17};
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++) {
        test_product(QT_Q8, Ms[i], 7, 96, 1.0f, 0.0f, 0);
        /* 7 panels of 16 rows (the last of 4): passes of 4, 2 or 1 panels and the rest */
        test_product(QT_Q8, Ms[i], 100, 64, 1.0f, 0.0f, 0);
        test_product(QT_Q8, Ms[i], 128, 32, 0.5f, 1.0f, 0);
        test_product(QT_BF16, Ms[i], 5, 37, 1.0f, 1.0f, 0);
        test_product(QT_BF16, Ms[i], 9, 64, 0.125f, 1.0f, 0);
    }
    test_product(QT_Q8, 3, 33, 256, 1.0f, 0.5f, 0);
    test_product(QT_Q8, 4, 12, 64, 0.3f, 2.0f, 0);
    test_product(QT_Q8, 6, 10, 64, 1.0f, 0.0f, 1);
    test_product(QT_BF16, 1, 9, 70, 1.0f, 0.0f, 1);
    test_product(QT_BF16, 2, 6, 20, 1.0f, 0.0f, 0);
    test_gemv_t(37, 85);
    test_gemv_t(129, 64);
    test_bf16w(4, 33, 64, 0);
    test_bf16w(32, 768, 256, 1);
    test_model();
    return tl_done("test_quant");
}

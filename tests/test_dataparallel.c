/* test_dataparallel.c: what data parallelism relies on. Splitting B streams into two
 * groups of B/2 (acts.b_offset 0 and B/2) and adding their gradients (each scaled by the
 * global token count) gives the gradient of the whole batch, dropout and dropatt on: the
 * masks are drawn by global stream. Also the summed losses and the memories agree. Over 2
 * segments with memory. Tolerance 1e-5 norm-relative (summation order differs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/model.h"
#include "testlib.h"

static void case_scheme(pos_scheme pos, int pre)
{
    model_config c = {.n_layer = 2, .d_model = 16, .n_head = 2, .d_head = 8, .d_inner = 32,
                      .tgt_len = 4, .mem_len = 5, .pre_lnorm = pre, .dropout = 0.2f,
                      .dropatt = 0.15f, .pos = pos, .mlp_num_freqs = 4, .mlp_max_dist = 64,
                      .mlp_hidden = 8, .vocab = 256};
    const int B = 4, Lq = 4, half = 2;
    model full, part;
    model_acts A, A0, A1;
    model_mem m, m0, m1;
    txl_err e;
    if (model_init(&full, &c, &e) || model_alloc_grads(&full, &e) ||
        model_init(&part, &c, &e) || model_alloc_grads(&part, &e) ||
        acts_init(&A, &c, B, Lq, c.mem_len, 1, &e) || acts_init(&A0, &c, half, Lq, c.mem_len, 1, &e) ||
        acts_init(&A1, &c, half, Lq, c.mem_len, 1, &e) || mem_init(&m, &c, B, c.mem_len, &e) ||
        mem_init(&m0, &c, half, c.mem_len, &e) || mem_init(&m1, &c, half, c.mem_len, &e)) {
        CHECK(0, "setup: %s", e.msg);
        return;
    }
    A0.b_offset = 0;
    A1.b_offset = half;
    model_init_weights(&full, 11);
    tl_rng r = {99};
    for (size_t i = 0; i < full.n_floats; i++)
        full.w[i] += tl_normal(&r, 0.1f);
    memcpy(part.w, full.w, full.n_floats * sizeof(float));
    txl_tok x[2][16], y[2][16];
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < B * Lq; i++) {
            x[s][i] = (txl_tok)(tl_uniform(&r, 0.5f) * 200 + 100);
            y[s][i] = (txl_tok)(tl_uniform(&r, 0.5f) * 200 + 100);
        }
    double worst_mem = 0, dl = 0;
    model_zero_grads(&full);
    model_zero_grads(&part);
    for (int s = 0; s < 2; s++) {
        fwd_opts o = {.training = 1, .drop_key = 777 + (uint64_t)s};
        float scale = 1.0f / (B * Lq);
        double lf = model_forward(&full, &A, &m, x[s], y[s], Lq, &o);
        model_backward(&full, &A, &m, scale);
        model_mem_update(&A, &m);
        double l0 = model_forward(&part, &A0, &m0, x[s], y[s], Lq, &o);
        model_backward(&part, &A0, &m0, scale);
        model_mem_update(&A0, &m0);
        double l1 = model_forward(&part, &A1, &m1, x[s] + half * Lq, y[s] + half * Lq, Lq, &o);
        model_backward(&part, &A1, &m1, scale);
        model_mem_update(&A1, &m1);
        dl = fmax(dl, fabs(lf - (l0 + l1)) / fabs(lf));
        for (int l = 0; l < c.n_layer; l++) {
            size_t per = (size_t)c.mem_len * c.d_model;
            double *ref = malloc(B * per * sizeof(double));
            float *mine = malloc(B * per * sizeof(float));
            for (size_t k = 0; k < B * per; k++)
                ref[k] = mem_layer(&m, l)[k];
            memcpy(mine, mem_layer(&m0, l), half * per * sizeof(float));
            memcpy(mine + half * per, mem_layer(&m1, l), half * per * sizeof(float));
            worst_mem = fmax(worst_mem, tl_max_rel_err(mine, ref, B * per, 1e-30));
            free(ref);
            free(mine);
        }
    }
    double *g = malloc(full.n_floats * sizeof(double));
    for (size_t i = 0; i < full.n_floats; i++)
        g[i] = full.g[i];
    double worst = tl_max_rel_err(part.g, g, full.n_floats, 1e-30);
    free(g);
    CHECK(worst < 1e-5 && worst_mem < 1e-6 && dl < 1e-6,
          "%s%s: 2 x %d streams (b_offset 0, %d) == %d streams, dropout on: grads %.1e, "
          "memory %.1e, loss %.1e", pos_scheme_name(pos), pre ? " pre-LN" : "", half, half, B,
          worst, worst_mem, dl);
    mem_free(&m);
    mem_free(&m0);
    mem_free(&m1);
    acts_free(&A);
    acts_free(&A0);
    acts_free(&A1);
    model_free(&full);
    model_free(&part);
}

int main(void)
{
    case_scheme(POS_XL, 0);
    case_scheme(POS_XL, 1);
    case_scheme(POS_MLP, 0);
    case_scheme(POS_ROPE, 0);
    case_scheme(POS_ALIBI, 1);
    case_scheme(POS_ABSOLUTE, 0);
    case_scheme(POS_NONE, 0);
    return tl_done("test_dataparallel");
}

/* test_model_grad.c: the whole model's gradient against central finite differences, for
 * every positional scheme, post- and pre-LN, over 2 segments with memory (the second sees
 * the first through mem), with dropout on (counter-based masks are fixed per key, so the
 * loss is a deterministic function of the weights).
 *
 * Tolerance: the forward runs in float32, so a central difference with step 2e-3 on
 * weights of scale 0.3 has rounding noise of about 2e-7 / 2e-3 = 1e-4 absolute; we compare
 * per tensor, |fd - analytic| <= 3e-2 * max|analytic of that tensor| + 3e-4. Exactness to
 * 1e-5 is the job of the float64 reference fixtures (test_fixtures.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../model/model.h"
#include "testlib.h"

typedef struct {
    model mdl;
    model_acts A;
    model_mem mem;
    float *mem1; /* memory after segment 0 at the unperturbed weights */
    int m1;
    txl_tok x[2][64], y[2][64];
    int32_t co[2][64 * TXL_N_COORDS]; /* text coordinates (hier) */
    int B, Lq;
    float dropout;
} setup;

/* L0 + L1 (segment means). The memory is a constant of the gradient (stop-gradient), so
 * finite differences must hold it fixed too: segment 1 always starts from the memory the
 * unperturbed weights produced (saved by the backward pass). */
static double total_loss(setup *s, int backward)
{
    mem_reset(&s->mem);
    double tot = 0;
    size_t memsz = (size_t)s->mem.n_layer * s->mem.B * s->mem.M * s->mem.d * sizeof(float);
    for (int seg = 0; seg < 2; seg++) {
        if (seg == 1 && !backward) {
            memcpy(s->mem.buf, s->mem1, memsz);
            s->mem.m = s->m1;
        }
        fwd_opts o = {.training = 1, .drop_key = 1234 + seg, .coords = s->co[seg]};
        double l = model_forward(&s->mdl, &s->A, &s->mem, s->x[seg], s->y[seg], s->Lq, &o);
        tot += l / (s->B * s->Lq);
        if (backward)
            model_backward(&s->mdl, &s->A, &s->mem, 1.0f / (s->B * s->Lq));
        model_mem_update(&s->A, &s->mem);
        if (seg == 0 && backward) {
            memcpy(s->mem1, s->mem.buf, memsz);
            s->m1 = s->mem.m;
        }
    }
    return tot;
}

/* Coordinates that grow along each stream by 0 or 1 per token and level (word, sentence,
 * paragraph counts), continuing from segment 0 into segment 1. */
static void make_coords(setup *s, tl_rng *r)
{
    for (int b = 0; b < s->B; b++) {
        int32_t c[TXL_N_COORDS] = {0, 0, 0};
        for (int seg = 0; seg < 2; seg++)
            for (int i = 0; i < s->Lq; i++)
                for (int k = 0; k < TXL_N_COORDS; k++) {
                    c[k] += tl_uniform(r, 1.0f) > (k == 0 ? -0.3f : 0.2f);
                    s->co[seg][((size_t)b * s->Lq + i) * TXL_N_COORDS + k] = c[k];
                }
    }
}

/* The adaptive softmax of a case (model/adaptive.h): cutoffs, d_embed, div_val, tie_projs. */
typedef struct {
    int n, cut[3], d_embed, div, tie;
} adaptive_opts;

/* A probe of tensor p that carries gradient: the embedding's rows of the input tokens (a
 * tied adaptive table's rows of the targets' clusters carry the softmax's too); any entry of
 * the others. */
static size_t probe_index(const setup *s, const param_entry *p, int t, tl_rng *r)
{
    const model_config *c = &s->mdl.cfg;
    int lo = 0, hi = c->vocab, table = -1;
    if (strcmp(p->name, "word_emb.weight") == 0)
        table = 0;
    else if (sscanf(p->name, "word_emb.emb_layers.%d.weight", &table) == 1 && p->shape[0] != c->vocab) {
        lo = table ? c->cutoffs.v[table - 1] : 0;
        hi = table < c->cutoffs.n ? c->cutoffs.v[table] : c->vocab;
    }
    if (table >= 0)
        for (int k = 0; k < 2 * s->B * s->Lq; k++) {
            txl_tok x = s->x[(t + k) % 2][(t + k) % (s->B * s->Lq)];
            if ((int)x >= lo && (int)x < hi)
                return ((size_t)x - (size_t)lo) * (size_t)p->shape[1] + (size_t)t % p->shape[1];
        }
    return (size_t)((tl_uniform(r, 0.5f) + 0.5f) * p->numel) % p->numel;
}

static void run_case_ad(const char *label, pos_scheme pos, int pre, float dropout,
                        float dropatt, int M, int untie, int clamp, const adaptive_opts *ad)
{
    model_config c = {.n_layer = 2, .d_model = 8, .n_head = 2, .d_head = 4, .d_inner = 12,
                      .tgt_len = 3, .mem_len = M, .pre_lnorm = pre, .dropout = dropout,
                      .dropatt = dropatt, .pos = pos, .clamp_len = clamp > 0 ? clamp : 0,
                      .xl_off = clamp < 0 ? -clamp : 0, .untie_r = untie,
                      .mlp_num_freqs = 3, .mlp_max_dist = 32, .mlp_hidden = 5, .vocab = 256,
                      .hier_levels = untie ? HIER_WORD | HIER_PARA : HIER_ALL,
                      .hier_num_freqs = 3, .fire_hidden = 6, .fire_threshold = 4.0f,
                      .t5_buckets = 6, .t5_max_dist = 5, .t5_shared = !untie};
    if (ad) {
        c.cutoffs.n = ad->n;
        memcpy(c.cutoffs.v, ad->cut, sizeof ad->cut);
        c.d_embed = ad->d_embed;
        c.div_val = ad->div;
        c.tie_projs = ad->tie;
    }
    setup s = {.B = 2, .Lq = 3};
    txl_err e;
    if (model_init(&s.mdl, &c, &e) || model_alloc_grads(&s.mdl, &e) ||
        acts_init(&s.A, &c, s.B, s.Lq, M, 1, &e) || mem_init(&s.mem, &c, s.B, M, &e)) {
        CHECK(0, "%s: setup: %s", label, e.msg);
        return;
    }
    float membuf[2 * 2 * 8 * 8];
    s.mem1 = membuf;
    s.A.attn_row_block = 2; /* Lq = 3: two blocks, the masked-skipping path */
    tl_rng r = {0x9e3779b97f4a7c15ULL ^ (uint64_t)pos * 77 ^ (uint64_t)pre * 5};
    for (int i = 0; i < s.mdl.n_params; i++) {
        const param_entry *p = &s.mdl.table[i];
        float *w = s.mdl.w + p->offset;
        /* fire's MLP at the scale of its init (U(-1, 1) for the first layer: its units' kinks
         * among the inputs, its bias large enough to matter) */
        float sd = p->init == INIT_UNIFORM ? p->init_arg : 0.3f;
        for (size_t k = 0; k < p->numel; k++)
            w[k] = (p->init == INIT_ONE ? 1.0f : 0.0f) + tl_normal(&r, sd);
    }
    /* tokens 0..39 (adaptive: 0..127, so that the targets reach every cluster) */
    float span = ad ? 64.0f : 20.0f;
    for (int seg = 0; seg < 2; seg++)
        for (int i = 0; i < s.B * s.Lq; i++) {
            s.x[seg][i] = (txl_tok)((tl_uniform(&r, 1.0f) + 1.0f) * span);
            s.y[seg][i] = (txl_tok)((tl_uniform(&r, 1.0f) + 1.0f) * span);
        }
    make_coords(&s, &r);
    model_zero_grads(&s.mdl);
    total_loss(&s, 1);

    int bad = 0, kinks = 0;
    double worst = 0;
    for (int i = 0; i < s.mdl.n_params; i++) {
        const param_entry *p = &s.mdl.table[i];
        float *w = s.mdl.w + p->offset, *g = s.mdl.g + p->offset;
        double gmax = 0;
        for (size_t k = 0; k < p->numel; k++)
            gmax = fmax(gmax, fabs(g[k]));
        /* the embedding: only rows of tokens in use carry gradient; probe those */
        int probes = 6;
        for (int t = 0; t < probes; t++) {
            size_t k = probe_index(&s, p, t, &r);
            float save = w[k];
            double l0 = total_loss(&s, 0);
            const float h = 2e-3f;
            w[k] = save + h;
            double lp = total_loss(&s, 0);
            w[k] = save - h;
            double lm = total_loss(&s, 0);
            w[k] = save;
            double fd = (lp - lm) / (2 * h);
            double err = fabs(fd - g[k]);
            double tol = 3e-2 * gmax + 3e-4;
            /* A ReLU kink inside [w-h, w+h] makes the loss non-differentiable there; the two
             * one-sided differences then disagree by far more than h*|f''|. Skip such probes
             * (counted) instead of loosening the tolerance. */
            if (fabs((lp - l0) / h - (l0 - lm) / h) > tol) {
                kinks++;
                continue;
            }
            if (gmax > 1e-6 && err / gmax > worst)
                worst = err / gmax;
            if (err > tol) {
                if (bad < 8)
                    printf("    %s %s[%zu]: analytic %.6g fd %.6g\n", label, p->name, k, g[k], fd);
                bad++;
            }
        }
    }
    CHECK(bad == 0, "%s: whole-model gradient vs finite differences (%d params, worst %.2e of "
          "tensor max, %d probes at kinks skipped)", label, s.mdl.n_params, worst, kinks);
    mem_free(&s.mem);
    acts_free(&s.A);
    model_free(&s.mdl);
}

static void run_case(const char *label, pos_scheme pos, int pre, float dropout, float dropatt,
                     int M, int untie, int clamp)
{
    run_case_ad(label, pos, pre, dropout, dropatt, M, untie, clamp, NULL);
}

int main(void)
{
    /* the adaptive softmax and input: official's wt103 shape (one table, no projection), a
     * table and a projection per cluster (widths 8, 4, 2, 1) with the tails' tied, and one
     * projected table with the tail's output projection its own */
    const adaptive_opts wt103 = {3, {30, 45, 100}, 0, 1, 1};
    const adaptive_opts div2 = {3, {30, 45, 100}, 8, 2, 1};
    const adaptive_opts proj = {1, {40, 0, 0}, 6, 1, 0};
    run_case_ad("adaptive div1", POS_XL, 0, 0.0f, 0.0f, 4, 0, 0, &wt103);
    run_case_ad("adaptive div2 pre dropout", POS_XL, 1, 0.2f, 0.15f, 4, 0, 0, &div2);
    run_case_ad("adaptive proj rope", POS_ROPE, 0, 0.1f, 0.0f, 2, 0, 0, &proj);
    run_case("xl post", POS_XL, 0, 0.0f, 0.0f, 4, 0, 0);
    run_case("xl pre M<Lq", POS_XL, 1, 0.0f, 0.0f, 2, 0, 0);
    run_case("xl untie clamp", POS_XL, 0, 0.0f, 0.0f, 4, 1, 2);
    run_case("xl dropout", POS_XL, 0, 0.2f, 0.15f, 4, 0, 0);
    run_case("xl pre dropout", POS_XL, 1, 0.2f, 0.15f, 4, 0, 0);
    run_case("xl nomem", POS_XL, 0, 0.0f, 0.0f, 0, 0, 0);
    run_case("mlp", POS_MLP, 0, 0.0f, 0.0f, 4, 0, 0);
    run_case("mlp pre dropout", POS_MLP, 1, 0.1f, 0.1f, 4, 0, 0);
    run_case("rope", POS_ROPE, 0, 0.0f, 0.0f, 4, 0, 0);
    run_case("alibi", POS_ALIBI, 1, 0.0f, 0.0f, 4, 0, 0);
    run_case("absolute", POS_ABSOLUTE, 0, 0.1f, 0.0f, 4, 0, 0);
    run_case("none", POS_NONE, 0, 0.0f, 0.0f, 4, 0, 0);
    run_case("xl terms ab", POS_XL, 0, 0.0f, 0.0f, 4, 0, -(XL_TERM_C | XL_TERM_D));
    run_case("xl terms acd", POS_XL, 1, 0.1f, 0.0f, 4, 1, -XL_TERM_B);
    run_case("hier", POS_HIER, 0, 0.0f, 0.0f, 4, 0, 0);
    run_case("hier pre dropout", POS_HIER, 1, 0.1f, 0.1f, 4, 0, 0);
    run_case("hier word+para", POS_HIER, 0, 0.0f, 0.0f, 2, 1, 0); /* untie: levels subset */
    /* L = 4 |L_mult| (L_mult near 1): the second segment's queries (window rows 4..6) on
     * both sides of it */
    run_case("fire", POS_FIRE, 0, 0.0f, 0.0f, 4, 0, 0);
    run_case("fire pre dropout", POS_FIRE, 1, 0.1f, 0.1f, 4, 0, 0);
    run_case("t5 shared", POS_T5, 0, 0.0f, 0.0f, 4, 0, 0);
    run_case("t5 per layer pre dropout", POS_T5, 1, 0.1f, 0.1f, 4, 1, 0); /* untie: per layer */
    return tl_done("test_model_grad");
}

/* test_streams.c: the probes' scoring (eval/streams.c, eval/probe.c) on hand-made cases.
 *
 * - A model whose logits are its output bias alone (every other weight zero, so every
 *   hidden state is 0 after the LayerNorms): the most likely token is the bias's argmax at
 *   every position, so the greedy hits are exactly the targets equal to it, and each loss
 *   is logsumexp(b) - b[target], known in double.
 * - Exact match of a greedy continuation: all hits, or a miss anywhere.
 * - Saving the memory after a shared prefix and going on gives, bit for bit, what
 *   restoring it and going on gives (the needle probe compares the two), for a scheme
 *   that keeps the memory's keys (xl) and one that does not (rope); and what feeding the
 *   prefix again gives: bit for bit for rope, within 1e-5 for xl (kept keys may round their
 *   last bit differently from a whole window's projection).
 * - The 95% intervals: Student's t for a mean, Wilson for a proportion. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../eval/probe.h"
#include "../eval/streams.h"
#include "testlib.h"

static void test_bias_model(void)
{
    model_config c = {.n_layer = 2, .d_model = 8, .n_head = 2, .d_head = 4, .d_inner = 8,
                      .tgt_len = 4, .mem_len = 4, .pos = POS_XL, .vocab = 256};
    model mdl;
    txl_err e;
    stream_eval s;
    if (model_init(&mdl, &c, &e) || streams_init(&s, &mdl, &c, 2, 4, 4, &e)) {
        CHECK(0, "setup: %s", e.msg);
        return;
    }
    float *b = mdl.W.out_bias;
    for (int v = 0; v < 256; v++)
        b[v] = (float)((v * 37) % 11) * 0.1f;
    b['x'] = 3.0f; /* the argmax */
    double lse = 0;
    for (int v = 0; v < 256; v++)
        lse += exp((double)b[v]);
    lse = log(lse);
    const char *rows[2] = {"abxxcxdxxyxx", "xxxxxxxxxaxq"};
    txl_tok x[2][12], y[2][12];
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 11; i++) {
            x[r][i] = (txl_tok)rows[r][i];
            y[r][i] = (txl_tok)rows[r][i + 1];
        }
    float loss[2][12];
    uint8_t hit[2][12];
    streams_feed(&s, &x[0][0], &y[0][0], NULL, 11, 12, &loss[0][0], &hit[0][0]);
    int hits_ok = 1;
    double worst = 0;
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 11; i++) {
            hits_ok &= hit[r][i] == (y[r][i] == 'x');
            worst = fmax(worst, fabs(loss[r][i] - (lse - b[y[r][i]])));
        }
    CHECK(hits_ok, "greedy hits are exactly the targets equal to the bias's argmax");
    CHECK(worst < 1e-5, "per-target losses = logsumexp(b) - b[target] (max err %.1e)", worst);
    CHECK(probe_exact(&hit[1][0], 8) && !probe_exact(&hit[1][0], 9) &&
              !probe_exact(&hit[0][1], 3) && probe_exact(&hit[0][2], 1),
          "exact match: every target hit, or not");
    streams_free(&s);
    model_free(&mdl);
}

static void test_snapshot(pos_scheme pos)
{
    model_config c = {.n_layer = 2, .d_model = 16, .n_head = 2, .d_head = 8, .d_inner = 24,
                      .tgt_len = 5, .mem_len = 7, .pos = pos, .vocab = 256};
    model mdl;
    txl_err e;
    stream_eval s;
    model_mem snap;
    if (model_init(&mdl, &c, &e) || streams_init(&s, &mdl, &c, 3, 5, 7, &e) ||
        streams_snapshot_init(&s, &snap, &e)) {
        CHECK(0, "setup: %s", e.msg);
        return;
    }
    tl_rng r = {99};
    for (size_t i = 0; i < mdl.n_floats; i++)
        mdl.w[i] = tl_normal(&r, 0.3f);
    txl_tok t[3][40];
    for (int b = 0; b < 3; b++)
        for (int i = 0; i < 40; i++)
            t[b][i] = (txl_tok)(97 + (int)((tl_uniform(&r, 0.5f) + 0.5f) * 20));
    float l1[3][40], l2[3][40];
    streams_feed(&s, &t[0][0], NULL, NULL, 13, 40, NULL, NULL); /* a shared prefix */
    streams_save(&s, &snap);
    streams_feed(&s, &t[0][13], &t[0][14], NULL, 20, 40, &l1[0][13], NULL);
    streams_restore(&s, &snap);
    streams_feed(&s, &t[0][13], &t[0][14], NULL, 20, 40, &l2[0][13], NULL);
    int same = 1;
    for (int b = 0; b < 3; b++)
        same &= memcmp(&l1[b][13], &l2[b][13], 20 * sizeof(float)) == 0;
    streams_reset(&s);
    streams_feed(&s, &t[0][0], NULL, NULL, 13, 40, NULL, NULL);
    streams_feed(&s, &t[0][13], &t[0][14], NULL, 20, 40, &l2[0][13], NULL);
    double worst = 0;
    for (int b = 0; b < 3; b++)
        for (int i = 13; i < 33; i++)
            worst = fmax(worst, fabs((double)l1[b][i] - l2[b][i]) / fmax(fabs((double)l1[b][i]), 1e-30));
    int kept = s.kv.buf != NULL;
    CHECK(same && kept == (pos != POS_ROPE) && (kept ? worst <= 1e-5 : worst == 0),
          "%s (memory's keys %s): going on from a saved memory == from it restored, bit for "
          "bit; == feeding the prefix again, rel diff %.1e", pos == POS_ROPE ? "rope" : "xl",
          kept ? "kept" : "not kept", worst);
    mem_free(&snap);
    streams_free(&s);
    model_free(&mdl);
}

static void test_intervals(void)
{
    double v[5] = {1, 2, 3, 4, 5};
    stat_ci m = stat_mean(v, 5);
    /* mean 3, sd sqrt(2.5), t(4) = 2.776: half width 2.776 * sqrt(2.5 / 5) = 1.9630 */
    CHECK(fabs(m.mean - 3) < 1e-12 && fabs(m.hi - 3 - 1.9630) < 1e-3 &&
              fabs(3 - m.lo - 1.9630) < 1e-3,
          "mean 3 and t interval [%.4f, %.4f] of 1..5", m.lo, m.hi);
    stat_ci p = stat_proportion(8, 10);
    /* Wilson, z = 1.96: [0.4902, 0.9433] */
    CHECK(fabs(p.mean - 0.8) < 1e-12 && fabs(p.lo - 0.4902) < 1e-3 && fabs(p.hi - 0.9433) < 1e-3,
          "Wilson interval of 8/10: [%.4f, %.4f]", p.lo, p.hi);
    stat_ci z = stat_proportion(0, 20);
    CHECK(z.lo == 0 && z.hi > 0.1 && z.hi < 0.2, "0/20: [0, %.4f]", z.hi);
}

int main(void)
{
    test_bias_model();
    test_snapshot(POS_ROPE);
    test_snapshot(POS_XL);
    test_intervals();
    return tl_done("test_streams");
}

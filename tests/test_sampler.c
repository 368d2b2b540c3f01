/* test_sampler.c: sampler_pick (model/sampler.c) against a plain reference of its rule:
 * candidates by probability (descending, ties by token id, found by repeated selection),
 * cut to top-k and top-p, and the first one whose cumulative mass exceeds u times the mass
 * kept. The probabilities and sums are formed in the same order as the sampler's, so the
 * token must be the same for every draw, not just close. Logits with many ties (small
 * integers), peaked and flat, and probabilities distinct in double but equal in float (the
 * sampler sorts by the float first), V = 256 and odd V. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../model/sampler.h"
#include "testlib.h"

static int ref_pick(const float *logits, int V, const sampler_opts *o, double u)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best])
            best = v;
    if (o->temperature <= 0)
        return best;
    double p[512], mx = logits[best], sum = 0;
    int idx[512], used[512] = {0};
    for (int v = 0; v < V; v++) {
        p[v] = exp((logits[v] - mx) / o->temperature);
        sum += p[v];
    }
    for (int v = 0; v < V; v++)
        p[v] /= sum;
    for (int i = 0; i < V; i++) { /* selection: the highest p not yet taken, lowest id */
        int k = -1;
        for (int v = 0; v < V; v++)
            if (!used[v] && (k < 0 || p[v] > p[k]))
                k = v;
        used[k] = 1;
        idx[i] = k;
    }
    int n = o->top_k > 0 && o->top_k < V ? o->top_k : V;
    if (o->top_p < 1.0) {
        double c = 0;
        for (int i = 0; i < n; i++) {
            c += p[idx[i]];
            if (c >= o->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    double tot = 0, c = 0;
    for (int i = 0; i < n; i++)
        tot += p[idx[i]];
    for (int i = 0; i < n; i++) {
        c += p[idx[i]];
        if (u * tot < c)
            return idx[i];
    }
    return idx[n - 1];
}

int main(void)
{
    tl_rng r = {77};
    static const sampler_opts opts[] = {
        {1.0, 0, 1.0}, {0.7, 0, 1.0}, {1.0, 40, 1.0}, {1.0, 0, 0.9}, {0.8, 10, 0.5},
        {0.0, 0, 1.0}, {64.0, 0, 1.0}, {64.0, 30, 0.5},
    };
    for (int V = 255; V <= 256; V++) {
        int mismatches = 0, draws = 0;
        for (int trial = 0; trial < 60; trial++) {
            float logits[256];
            for (int v = 0; v < V; v++) /* ties: integers; peaked or flat by the trial */
                logits[v] = trial % 4 == 0 ? (float)(int)(tl_uniform(&r, 4.0f))
                                           : tl_normal(&r, trial % 4 == 1 ? 0.3f : 4.0f);
            if (trial % 4 == 3) /* 1 + a few ulps: at temperature 64, probabilities that
                                 * differ in double and round to the same float, and ties */
                for (int v = 0; v < V; v++)
                    logits[v] = 1.0f + (float)(int)tl_uniform(&r, 8.0f) * 0x1p-23f;
            double scratch[3 * 256];
            int idx[256];
            for (size_t k = 0; k < sizeof opts / sizeof *opts; k++)
                for (int d = 0; d < 20; d++) {
                    double u = (tl_uniform(&r, 0.5f) + 0.5f) * 0.999999;
                    int a = sampler_pick(logits, V, &opts[k], u, scratch, idx);
                    mismatches += a != ref_pick(logits, V, &opts[k], u);
                    draws++;
                }
        }
        CHECK(mismatches == 0, "sampler_pick == the reference rule, V=%d: %d of %d draws differ "
              "(temperature, top-k, top-p; tied, peaked, flat and near-equal logits)", V, mismatches, draws);
    }
    return tl_done("test_sampler");
}

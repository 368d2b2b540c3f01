/* sampler.c: see sampler.h. Candidates are sorted by probability (descending, ties by
 * token id) so top-k and top-p cut the same set on every machine. */
#include "sampler.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Token a comes before token b: higher probability first, ties by the lower id (a strict
 * total order for finite p, so any correct sort gives the same permutation). */
static int before(const double *p, int a, int b)
{
    return p[a] > p[b] || (p[a] == p[b] && a < b);
}

/* Token ids by p descending, ties by id: a stable LSD radix sort (8-bit digits) of the ids,
 * from id order, by the float each p rounds to (its bits, complemented, order the floats
 * descending: p >= 0), then each run of equal floats, in id order already, put in the exact
 * order by insertion (rounding to float is monotone, so only such runs can be out of order;
 * they are rare unless the p are tied, and then already in order). The same permutation as
 * any sort by `before` for p without NaN (NaN logits make every p NaN; the order of NaNs by
 * their bits then differs from the merge sort this replaced). 2.4x faster than a merge
 * sort by `before` at V = 256 (5.4 vs 12.8 us, AVX-512; whose mispredicted compares were 8%
 * of a 32-stream decoding step). key: 2 V uint32, tmp: V ints. */
static void sort_by_prob(int *idx, const double *p, int V, uint32_t *key, int *tmp)
{
    uint32_t *ka = key, *kt = key + V;
    unsigned cnt[4][256] = {{0}};
    for (int v = 0; v < V; v++) {
        float f = (float)p[v];
        uint32_t k;
        memcpy(&k, &f, sizeof k);
        k = ~k;
        ka[v] = k;
        idx[v] = v;
        for (int d = 0; d < 4; d++)
            cnt[d][(k >> (8 * d)) & 255]++;
    }
    int *src = idx, *dst = tmp;
    for (int d = 0; d < 4; d++) {
        unsigned *c = cnt[d], s = 0;
        if (c[(ka[0] >> (8 * d)) & 255] == (unsigned)V)
            continue; /* one digit for all: the pass would not move anything */
        for (int b = 0; b < 256; b++) {
            unsigned t = c[b];
            c[b] = s;
            s += t;
        }
        for (int v = 0; v < V; v++) {
            unsigned at = c[(ka[v] >> (8 * d)) & 255]++;
            kt[at] = ka[v];
            dst[at] = src[v];
        }
        uint32_t *t = ka;
        ka = kt;
        kt = t;
        int *ti = src;
        src = dst;
        dst = ti;
    }
    if (src != idx)
        memcpy(idx, src, (size_t)V * sizeof *idx);
    for (int i = 1; i < V; i++) {
        if (ka[i] != ka[i - 1])
            continue;
        int x = idx[i], j = i;
        for (; j > 0 && ka[j - 1] == ka[i] && before(p, x, idx[j - 1]); j--)
            idx[j] = idx[j - 1];
        idx[j] = x;
    }
}

int sampler_pick(const float *logits, int V, const sampler_opts *o, double u, double *scratch,
                 int *idx)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best])
            best = v;
    if (o->temperature <= 0)
        return best;
    double *p = scratch;
    double mx = logits[best], sum = 0;
    for (int v = 0; v < V; v++) {
        p[v] = exp((logits[v] - mx) / o->temperature);
        sum += p[v];
        idx[v] = v;
    }
    for (int v = 0; v < V; v++)
        p[v] /= sum;
    sort_by_prob(idx, p, V, (uint32_t *)(scratch + V), (int *)(scratch + 2 * (size_t)V));
    int n = V;
    if (o->top_k > 0 && o->top_k < n)
        n = o->top_k;
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
    double tot = 0;
    for (int i = 0; i < n; i++)
        tot += p[idx[i]];
    double r = u * tot, c = 0;
    for (int i = 0; i < n; i++) {
        c += p[idx[i]];
        if (r < c)
            return idx[i];
    }
    return idx[n - 1];
}

/* sampler.c: see sampler.h. Candidates are sorted by probability (descending, ties by
 * token id) so top-k and top-p cut the same set on every machine. */
#include "sampler.h"

#include <math.h>

/* Insertion sort of token ids by p descending (V is 256 bytes + at most 3 anchors: cheaper
 * than it looks, and no comparator state to share). */
static void sort_by_prob(int *idx, const double *p, int V)
{
    for (int i = 1; i < V; i++) {
        int t = idx[i], j = i;
        while (j > 0 && (p[idx[j - 1]] < p[t] || (p[idx[j - 1]] == p[t] && idx[j - 1] > t))) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = t;
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
    sort_by_prob(idx, p, V);
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

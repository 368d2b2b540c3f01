/* adaptive.c: make bench-adaptive's program: training steps of the adaptive softmax against
 * the full softmax over the same vocabulary, side by side in one process (bench/adaptive.sh
 * runs it), through the library: a model built from a model_config (V past what any
 * tokenizer of the test data gives), forward, backward, the clip and Adam as run/step.c
 * does them, the memory carried, on token streams drawn from a Zipf law (p(rank k) ~ k^-s,
 * s = 1.1: the 20,000 most frequent of 267,735 ids take 89% of the tokens, as a word
 * vocabulary's head does in real text).
 *
 * usage: adaptive_bench [V] [N_LAYER] [B] [ROUNDS] [STEPS] [THREADS]
 *   defaults 267735 4 8 3 2 1: WikiText-103's word vocabulary, official's base shape (d 410,
 *   10 heads x 41, d_inner 2100, tgt_len = mem_len = 150) with 4 of its 16 layers, 8 streams
 *   (1,200 tokens a step), 3 rounds of 2 timed steps per mode (after one untimed step each),
 *   1 thread (0: all cores). Cutoffs 20000, 40000, 200000 (official's), div_val 1, tie_projs.
 * Prints one JSON line per round and mode, then a summary line: tokens per second of each
 * mode, wall and CPU (the process's CPU time, all threads: on a shared machine the wall
 * clock of a step counts what else ran meanwhile; with 1 thread its CPU time is an idle
 * machine's step), each the median over rounds; each round runs both modes back to back, so
 * the ratio (of CPU tokens/s) is taken within a round. Then the planned activation bytes
 * (acts_plan_floats) and parameter bytes (weights, gradient, Adam's two moments) of both
 * modes at V, 2V and 4V. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../common/par.h"
#include "../common/rng.h"
#include "../model/model.h"
#include "../optim/optim.h"

char *openblas_get_corename(void);

static double clock_s(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct {
    model mdl;
    model_acts A;
    model_mem mem;
    float *m, *v;
    long t;
} run;

static model_config shape(int V, int n_layer, int adaptive)
{
    model_config c = {.n_layer = n_layer, .d_model = 410, .n_head = 10, .d_head = 41,
                      .d_inner = 2100, .tgt_len = 150, .mem_len = 150, .dropout = 0.1f,
                      .pos = POS_XL, .mlp_num_freqs = 16, .mlp_max_dist = 4096,
                      .mlp_hidden = 64, .hier_levels = HIER_ALL, .hier_num_freqs = 8,
                      .div_val = 1, .tie_projs = 1, .vocab = V};
    if (adaptive)
        c.cutoffs = (cutoff_list){3, {20000, 40000, 200000}};
    return c;
}

static int run_init(run *r, const model_config *c, int B, txl_err *e)
{
    memset(r, 0, sizeof *r);
    if (model_init(&r->mdl, c, e) || model_alloc_grads(&r->mdl, e) ||
        acts_init(&r->A, c, B, c->tgt_len, c->mem_len, 1, e) ||
        mem_init(&r->mem, c, B, c->mem_len, e))
        return -1;
    model_init_weights(&r->mdl, 1);
    r->m = calloc(r->mdl.n_floats, sizeof(float));
    r->v = calloc(r->mdl.n_floats, sizeof(float));
    if (!r->m || !r->v)
        return err_set(e, ERR_RUNTIME, "out of memory for Adam's moments");
    return 0;
}

/* One training step on segment x, y [B, Lq]: returns the mean loss (nats). */
static double step(run *r, const txl_tok *x, const txl_tok *y)
{
    const model_config *c = &r->mdl.cfg;
    size_t ntok = (size_t)r->A.B * c->tgt_len;
    adam_hparams ah = {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    fwd_opts o = {.training = 1, .drop_key = rng_key(1, (uint64_t)r->t),
                  .loss_scale = 1.0f / (float)ntok};
    model_zero_grads(&r->mdl);
    double loss = model_forward(&r->mdl, &r->A, &r->mem, x, y, c->tgt_len, &o);
    model_backward(&r->mdl, &r->A, &r->mem, o.loss_scale);
    model_mem_update(&r->A, &r->mem);
    float cc = clip_coef(grad_norm(r->mdl.g, r->mdl.n_floats), 0.25);
    adam_step_scaled(r->mdl.w, r->mdl.g, cc, r->m, r->v, r->mdl.n_floats, ++r->t, 2.5e-4, &ah);
    return loss / (double)ntok;
}

static void run_free(run *r)
{
    free(r->m);
    free(r->v);
    mem_free(&r->mem);
    acts_free(&r->A);
    model_free(&r->mdl);
}

/* ids by a Zipf law over V (rank = id: a word vocabulary numbers its words by count) */
static void draw_zipf(txl_tok *out, size_t n, int V, double s, uint64_t seed)
{
    double *cdf = malloc((size_t)V * sizeof *cdf), tot = 0;
    for (int k = 0; k < V; k++)
        cdf[k] = tot += pow(k + 1.0, -s);
    rng_t r = {rng_key(seed, 7)};
    for (size_t i = 0; i < n; i++) {
        double u = rng_uniform(&r) * tot;
        int lo = 0, hi = V - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        out[i] = (txl_tok)lo;
    }
    free(cdf);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* activation and parameter bytes of both modes at V */
static void plans(int V, int n_layer, int B)
{
    for (int ad = 1; ad >= 0; ad--) {
        model_config c = shape(V, n_layer, ad);
        model_count mc;
        double acts = 0;
        txl_err e;
        if (model_counts(&c, &mc, &e) || acts_plan_floats(&c, B, c.tgt_len, c.mem_len, 1,
                                                          &acts, &e)) {
            printf("{\"plan\":\"%s\",\"V\":%d,\"error\":\"%s\"}\n", ad ? "adaptive" : "full",
                   V, e.msg);
            continue;
        }
        printf("{\"plan\":\"%s\",\"V\":%d,\"activation_mib\":%.1f,\"params\":%.0f,"
               "\"param_grad_adam_mib\":%.1f}\n", ad ? "adaptive" : "full", V,
               4 * acts / 1048576.0, mc.weights, 16 * mc.floats / 1048576.0);
    }
}

int main(int argc, char **argv)
{
    int V = argc > 1 ? atoi(argv[1]) : 267735, N = argc > 2 ? atoi(argv[2]) : 4;
    int B = argc > 3 ? atoi(argv[3]) : 8, rounds = argc > 4 ? atoi(argv[4]) : 3;
    int steps = argc > 5 ? atoi(argv[5]) : 2;
    int th = par_set_threads(argc > 6 ? atoi(argv[6]) : 1);
    run r[2]; /* 0 full, 1 adaptive */
    txl_err e;
    for (int k = 0; k < 2; k++) {
        model_config c = shape(V, N, k);
        if (run_init(&r[k], &c, B, &e)) {
            fprintf(stderr, "adaptive_bench: %s\n", e.msg);
            return 1;
        }
    }
    const int Lq = 150, segs = rounds * steps + 1;
    size_t per = (size_t)segs * Lq + 1;
    txl_tok *tok = malloc((size_t)B * per * sizeof *tok), *x = malloc((size_t)B * Lq * sizeof *x),
            *y = malloc((size_t)B * Lq * sizeof *y);
    draw_zipf(tok, (size_t)B * per, V, 1.1, 42);
    long head = 0;
    for (size_t i = 0; i < (size_t)B * per; i++)
        head += tok[i] < 20000;
    printf("{\"V\":%d,\"n_layer\":%d,\"d_model\":410,\"batch\":%d,\"tgt_len\":%d,\"threads\":%d,"
           "\"core\":\"%s\",\"zipf_s\":1.1,\"head_share\":%.3f}\n", V, N, B, Lq, th,
           openblas_get_corename(), (double)head / (double)(B * per));
    if (rounds < 1 || rounds > 64 || steps < 1) {
        fprintf(stderr, "adaptive_bench: 1..64 rounds of >= 1 steps\n");
        return 2;
    }
    double tps[2][64], cps[2][64], ratio[64];
    for (int seg = 0, rd = -1; rd < rounds; rd++) { /* round -1: one untimed step each */
        int n = rd < 0 ? 1 : steps;
        double sec[2] = {0, 0}, cpu[2] = {0, 0}, loss[2] = {0, 0};
        for (int k = 0; k < 2; k++)
            for (int s = 0; s < n; s++) {
                int at = seg + s;
                for (int b = 0; b < B; b++) {
                    memcpy(x + (size_t)b * Lq, tok + b * per + (size_t)at * Lq, Lq * sizeof *x);
                    memcpy(y + (size_t)b * Lq, tok + b * per + (size_t)at * Lq + 1, Lq * sizeof *y);
                }
                double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
                loss[k] = step(&r[k], x, y);
                sec[k] += clock_s(CLOCK_MONOTONIC) - t0;
                cpu[k] += clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
            }
        seg += n;
        if (rd < 0)
            continue;
        for (int k = 0; k < 2; k++) {
            tps[k][rd] = (double)B * Lq * n / sec[k];
            cps[k][rd] = (double)B * Lq * n / cpu[k];
            printf("{\"round\":%d,\"mode\":\"%s\",\"tok_per_s\":%.1f,\"tok_per_cpu_s\":%.1f,"
                   "\"step_s\":%.3f,\"loss\":%.4f}\n", rd, k ? "adaptive" : "full", tps[k][rd],
                   cps[k][rd], sec[k] / n, loss[k]);
        }
        ratio[rd] = cps[1][rd] / cps[0][rd];
        fflush(stdout);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rt = median(ratio, rounds);
    printf("{\"summary\":true,\"full_tok_per_s\":%.1f,\"adaptive_tok_per_s\":%.1f,"
           "\"full_tok_per_cpu_s\":%.1f,\"adaptive_tok_per_cpu_s\":%.1f,\"ratio\":%.2f,"
           "\"peak_rss_mib\":%.0f}\n", median(tps[0], rounds), median(tps[1], rounds),
           median(cps[0], rounds), median(cps[1], rounds), rt, ru.ru_maxrss / 1024.0);
    for (int k = 0; k < 2; k++)
        run_free(&r[k]);
    free(tok), free(x), free(y);
    for (int m = 1; m <= 4; m *= 2)
        plans(V * m, N, B);
    return 0;
}

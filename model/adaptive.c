/* adaptive.c: see adaptive.h. Log-sum-exps in double (a row's running maximum in float, its
 * sum of exps rescaled in double); exps through vmath's vm_expf_neg. */
#include "adaptive.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../common/vmath.h"
#include "embedding.h"
#include "gemm.h"

int adapt_in_use(const model_config *c)
{
    return c->cutoffs.n > 0 || (c->d_embed > 0 && c->d_embed != c->d_model) || c->div_val > 1;
}

void adapt_shape_of(const model_config *c, adapt_shape *s)
{
    int T = c->cutoffs.n, div = c->div_val > 1 ? c->div_val : 1;
    int w = c->d_embed > 0 ? c->d_embed : c->d_model;
    memset(s, 0, sizeof *s);
    s->n = T + 1;
    s->d = c->d_model;
    s->V = c->vocab;
    s->one_table = div == 1;
    for (int i = 0; i <= T; i++, w /= div) { /* floor(floor(a / b) / b) = floor(a / b^2) */
        s->lo[i] = i ? c->cutoffs.v[i - 1] : 0;
        s->hi[i] = i < T ? c->cutoffs.v[i] : c->vocab;
        s->dim[i] = w;
    }
}

/* "[20000, 40000, 200000]" */
static void list_text(char *buf, size_t cap, const cutoff_list *k)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < k->n && i < MODEL_MAX_CUTOFFS && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%d", i ? ", " : "", k->v[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

int adapt_validate(const model_config *c, char *why, size_t cap)
{
    const cutoff_list *k = &c->cutoffs;
    char list[160];
    if (k->n < 0 || k->n > MODEL_MAX_CUTOFFS) {
        snprintf(why, cap, "model.cutoffs: at most %d cutoffs, found %d", MODEL_MAX_CUTOFFS,
                 k->n);
        return -1;
    }
    list_text(list, sizeof list, k);
    for (int i = 0; i < k->n; i++) {
        if (k->v[i] < 1 || (i > 0 && k->v[i] <= k->v[i - 1])) {
            snprintf(why, cap, "model.cutoffs must be increasing token ids >= 1 (each cluster "
                     "holds at least one token), found %s", list);
            return -1;
        }
        if (k->v[i] >= c->vocab) {
            snprintf(why, cap, "model.cutoffs: %d is not below the vocabulary's size V = %d "
                     "(every cutoff must be < V: the last cluster is [cutoff, V)), found %s",
                     k->v[i], c->vocab, list);
            return -1;
        }
    }
    if (c->d_embed < 0 || c->div_val < 0) {
        snprintf(why, cap, "model.d_embed must be >= 0 and model.div_val >= 1, found %d and %d",
                 c->d_embed, c->div_val);
        return -1;
    }
    if (c->div_val > 1 && k->n == 0) {
        snprintf(why, cap, "model.div_val %d needs model.cutoffs: without them the vocabulary "
                 "is one cluster, of width d_embed (set div_val to 1)", c->div_val);
        return -1;
    }
    int w = c->d_embed > 0 ? c->d_embed : c->d_model;
    for (int i = 1; i <= k->n && c->div_val > 1; i++) {
        w /= c->div_val;
        if (w < 1) {
            snprintf(why, cap, "model.div_val %d: cluster %d's width d_embed / div_val^%d is 0 "
                     "(d_embed %d, %d cutoffs); use a smaller div_val or fewer cutoffs",
                     c->div_val, i, i, c->d_embed > 0 ? c->d_embed : c->d_model, k->n);
            return -1;
        }
    }
    return 0;
}

/* ---- buffers */

static int min_i(int a, int b) { return a < b ? a : b; }

/* The most logits one cluster has: the head's shortlist and cluster logits, or a tail. */
static int max_cols(const adapt_shape *s)
{
    int m = s->hi[0] + s->n - 1;
    for (int i = 1; i < s->n; i++)
        m = s->hi[i] - s->lo[i] > m ? s->hi[i] - s->lo[i] : m;
    return m;
}

static void ws_dims(const adapt_shape *s, int rows_cap, int *R, int *C)
{
    *R = min_i(ADAPT_ROWS, rows_cap > 0 ? rows_cap : 1);
    *C = min_i(ADAPT_COLS, max_cols(s));
}

/* 16-float (64-byte) aligned pieces of one block, counted (base NULL) or handed out. */
static float *piece(float *base, size_t *used, double n)
{
    float *p = base ? base + *used : NULL;
    *used += ((size_t)n + 15) / 16 * 16;
    return p;
}

static size_t ws_layout(adapt_ws *ws, const adapt_shape *s, int rows_cap, int training,
                        float *base)
{
    int R, C;
    size_t used = 0;
    ws_dims(s, rows_cap, &R, &C);
    double d = s->d, d0 = s->dim[0];
    ws->R = R;
    ws->C = C;
    ws->rows_cap = rows_cap;
    /* int32 ids and indices in float-sized slots (only ever accessed as such) */
    ws->order = (int *)piece(base, &used, rows_cap);
    ws->tb = (txl_tok *)piece(base, &used, R);
    ws->hb = piece(base, &used, R * d);
    ws->hp = piece(base, &used, R * d0);
    ws->z = piece(base, &used, (double)R * C);
    ws->lse_h = piece(base, &used, rows_cap);
    ws->lse_t = piece(base, &used, rows_cap);
    ws->dhb = training ? piece(base, &used, R * d) : NULL;
    ws->dhp = training ? piece(base, &used, R * d0) : NULL;
    /* a block's logits, kept for its backward in adapt_xent_train: room for a head block's
     * (heads of at most ADAPT_KEEP_COLS logits: WikiText-103's 20,003 take 19.5 MiB at
     * R = 256), which a tail block's take too where they fit */
    const double head_cols = s->hi[0] + s->n - 1;
    const int keep = training && head_cols <= ADAPT_KEEP_COLS;
    ws->zh_cap = keep ? (size_t)R * (size_t)head_cols : 0;
    ws->zh = keep ? piece(base, &used, R * head_cols) : NULL;
    return used;
}

double adapt_ws_floats(const adapt_shape *s, int rows_cap, int training)
{
    adapt_ws ws;
    return (double)ws_layout(&ws, s, rows_cap, training, NULL);
}

void adapt_ws_place(adapt_ws *ws, const adapt_shape *s, int rows_cap, int training,
                    float *base)
{
    ws_layout(ws, s, rows_cap, training, base);
}

/* ---- shared steps */

static int cluster_of(const adapt_shape *s, txl_tok t)
{
    int i = 0;
    while (i + 1 < s->n && t >= (txl_tok)s->lo[i + 1])
        i++;
    return i;
}

/* order = the rows 0..n-1 grouped by the cluster of key[r] (ascending within a cluster; all
 * in group 0 when groups is 1); start[i], cnt[i] of each group. */
static void group_rows(int *order, int *start, int *cnt, const adapt_shape *s,
                       const txl_tok *key, int n, int groups)
{
    int at[ADAPT_MAX_CLUSTERS];
    memset(cnt, 0, (size_t)groups * sizeof *cnt);
    for (int r = 0; r < n; r++)
        cnt[groups > 1 ? cluster_of(s, key[r]) : 0]++;
    for (int i = 0, o = 0; i < groups; o += cnt[i++])
        start[i] = at[i] = o;
    for (int r = 0; r < n; r++)
        order[at[groups > 1 ? cluster_of(s, key[r]) : 0]++] = r;
}

/* hp [nb, dk] = hb [nb, d] Q (Q [d, dk]), or hb itself without Q. */
static const float *project(float *hp, const float *hb, const float *Q, int nb, int d, int dk)
{
    if (!Q)
        return hb;
    gemm(hp, hb, Q, nb, dk, d, 0, 0, 1.0f, 0.0f, d, dk, dk);
    return hp;
}

/* A cluster's logits as consecutive column ranges: weight rows [n, dk] and bias [n]. */
typedef struct {
    float *w, *b;
    int n;
} colseg;

/* Cluster i's columns in t (weights or gradients): a tail's E_i, b_i; the head's
 * shortlist, then its T cluster logits. Returns the number of ranges. */
static int cluster_cols(const adapt_tensors *t, const adapt_shape *s, int i, colseg *seg)
{
    seg[0] = (colseg){t->emb[i], t->bias[i], s->hi[i] - s->lo[i]};
    if (i > 0 || s->n == 1)
        return 1;
    seg[1] = (colseg){t->cw, t->cb, s->n - 1};
    return 2;
}

/* The column of target y in cluster i's logits: a tail's own index, the head's shortlist
 * id, or for a tail target its cluster's logit, column n_0 + T - i (official's -i). */
static int target_col(const adapt_shape *s, int i, txl_tok y)
{
    if (i > 0)
        return (int)y - s->lo[i];
    int c = cluster_of(s, y);
    return c == 0 ? (int)y : s->hi[0] + (s->n - 1) - c;
}

/* Row k of a block of cluster i: a head block's rows are b0.., a tail's from order. */
static int block_row(const adapt_ws *ws, const int *start, int i, int b0, int k)
{
    return i == 0 ? b0 + k : ws->order[start[i] + b0 + k];
}

/* A block's rows of x: the head's in place, a tail's gathered into ws->hb. */
static const float *block_rows(const adapt_ws *ws, const int *start, int i, int b0, int nb,
                               const float *x, int d)
{
    if (i == 0)
        return x + (size_t)b0 * d;
    for (int k = 0; k < nb; k++)
        memcpy(ws->hb + (size_t)k * d, x + (size_t)block_row(ws, start, i, b0, k) * d,
               (size_t)d * sizeof(float));
    return ws->hb;
}

/* ---- the adaptive input */

void adapt_embed_forward(float *h, const adapt_tensors *W, const adapt_shape *s,
                         const txl_tok *tok, int n, float scale, const adapt_ws *ws)
{
    const int d = s->d, groups = s->one_table ? 1 : s->n;
    if (s->one_table && !W->pin[0]) { /* h = sqrt(d) E[t]: the embedding itself */
        embedding_forward(h, W->emb[0], tok, n, d, scale);
        return;
    }
    int start[ADAPT_MAX_CLUSTERS], cnt[ADAPT_MAX_CLUSTERS];
    group_rows(ws->order, start, cnt, s, tok, n, groups);
    for (int g = 0; g < groups; g++) {
        const int dg = s->dim[g], lo = s->one_table ? 0 : s->lo[g];
        for (int b0 = 0; b0 < cnt[g]; b0 += ws->R) {
            const int nb = min_i(ws->R, cnt[g] - b0), *rows = ws->order + start[g] + b0;
            for (int k = 0; k < nb; k++)
                memcpy(ws->hp + (size_t)k * dg, W->emb[g] + (size_t)(tok[rows[k]] - lo) * dg,
                       (size_t)dg * sizeof(float));
            linear_forward(ws->hb, ws->hp, W->pin[g], NULL, nb, d, dg, 0);
            for (int k = 0; k < nb; k++) {
                float *hr = h + (size_t)rows[k] * d;
                const float *y = ws->hb + (size_t)k * d;
                for (int c = 0; c < d; c++)
                    hr[c] = y[c] * scale;
            }
        }
    }
}

void adapt_embed_backward(const adapt_tensors *G, const adapt_tensors *W, const adapt_shape *s,
                          const float *dh, const txl_tok *tok, int n, float scale,
                          const adapt_ws *ws)
{
    const int d = s->d, groups = s->one_table ? 1 : s->n;
    if (s->one_table && !W->pin[0]) {
        embedding_backward(G->emb[0], dh, tok, n, d, scale);
        return;
    }
    int start[ADAPT_MAX_CLUSTERS], cnt[ADAPT_MAX_CLUSTERS];
    group_rows(ws->order, start, cnt, s, tok, n, groups);
    for (int g = 0; g < groups; g++) {
        const int dg = s->dim[g], lo = s->one_table ? 0 : s->lo[g];
        for (int b0 = 0; b0 < cnt[g]; b0 += ws->R) {
            const int nb = min_i(ws->R, cnt[g] - b0), *rows = ws->order + start[g] + b0;
            for (int k = 0; k < nb; k++) {
                const float *g_in = dh + (size_t)rows[k] * d;
                float *y = ws->hb + (size_t)k * d;
                for (int c = 0; c < d; c++)
                    y[c] = g_in[c] * scale;
                ws->tb[k] = tok[rows[k]] - (txl_tok)lo;
                memcpy(ws->hp + (size_t)k * dg, W->emb[g] + (size_t)ws->tb[k] * dg,
                       (size_t)dg * sizeof(float));
            }
            /* y = e P^T: d(e) = dy P into dhp, dP += dy^T e; then d(e) into its rows */
            linear_backward(ws->dhp, G->pin[g], NULL, ws->hb, ws->hp, W->pin[g], nb, d, dg, 0);
            embedding_backward(G->emb[g], ws->dhp, ws->tb, nb, dg, 1.0f);
        }
    }
}

/* ---- the adaptive log-softmax with targets */

/* The chunk of logits at column base of a block of nb rows: in ws->z, or with keep (the
 * block's logits, kept for the backward) its [nb, nc] tile at keep + nb base. */
static float *chunk_at(float *keep, int nb, int base, const adapt_ws *ws)
{
    return keep ? keep + (size_t)nb * base : ws->z;
}

/* lse[k] = log sum_j exp(z_kj) over cluster i's columns (seg) for the nb rows of hp
 * [nb, dk], online over chunks of ws->C (running maximum, sum rescaled); zt[k] = the logit of
 * column tcol[k]. keep: the chunks' logits are left there (chunk_at) for block_backward. */
static void block_lse(double *lse, float *zt, const colseg *seg, int nseg, const float *hp,
                      int nb, int dk, const int *tcol, const adapt_ws *ws, float *keep)
{
    float mx[ADAPT_ROWS];
    double sum[ADAPT_ROWS];
    for (int k = 0; k < nb; k++) {
        mx[k] = -INFINITY;
        sum[k] = 0;
        zt[k] = NAN;
    }
    for (int sg = 0, col = 0; sg < nseg; col += seg[sg++].n)
        for (int c0 = 0; c0 < seg[sg].n; c0 += ws->C) {
            const int nc = min_i(ws->C, seg[sg].n - c0), base = col + c0;
            float *zc = chunk_at(keep, nb, base, ws);
            linear_forward(zc, hp, seg[sg].w + (size_t)c0 * dk, seg[sg].b + c0, nb, nc, dk, 0);
#pragma omp parallel for schedule(static) if ((size_t)nb * nc > 65536)
            for (int k = 0; k < nb; k++) {
                const float *z = zc + (size_t)k * nc;
                if (tcol[k] >= base && tcol[k] < base + nc)
                    zt[k] = z[tcol[k] - base];
                float cm = vm_max(z, nc);
                if (cm > mx[k]) {
                    sum[k] *= exp((double)mx[k] - (double)cm);
                    mx[k] = cm;
                }
                sum[k] += vm_exp_sum_keep(z, nc, mx[k]); /* z kept */
            }
        }
    for (int k = 0; k < nb; k++)
        lse[k] = (double)mx[k] + log(sum[k]);
}

/* Backward of one block of cluster i: the logits chunk by chunk (kept by block_lse, or
 * recomputed), turned into their gradient scale (softmax - onehot(tcol)) in place, then
 * d(hp) += dl W, dW += dl^T hp, db += colsum(dl). */
static void block_backward(const colseg *seg, const colseg *gseg, int nseg, const float *hp,
                           int nb, int dk, const int *tcol, const float *lse, float scale,
                           const adapt_ws *ws, float *keep)
{
    memset(ws->dhp, 0, (size_t)nb * dk * sizeof(float));
    for (int sg = 0, col = 0; sg < nseg; col += seg[sg++].n)
        for (int c0 = 0; c0 < seg[sg].n; c0 += ws->C) {
            const int nc = min_i(ws->C, seg[sg].n - c0), base = col + c0;
            const float *w = seg[sg].w + (size_t)c0 * dk;
            float *zc = chunk_at(keep, nb, base, ws);
            if (!keep) /* the same product as block_lse's: the same logits */
                linear_forward(zc, hp, w, seg[sg].b + c0, nb, nc, dk, 0);
#pragma omp parallel for schedule(static) if ((size_t)nb * nc > 65536)
            for (int k = 0; k < nb; k++) {
                float *z = zc + (size_t)k * nc;
                const float l = lse[k];
                /* z <= lse up to rounding: vm_expf_neg's range */
                for (int j = 0; j < nc; j++)
                    z[j] = vm_expf_neg(z[j] - l) * scale;
                if (tcol[k] >= base && tcol[k] < base + nc)
                    z[tcol[k] - base] -= scale;
            }
            linear_backward(ws->dhp, gseg[sg].w + (size_t)c0 * dk, gseg[sg].b + c0, zc, hp, w,
                            nb, nc, dk, 1);
        }
}

/* The softmax's pass over the clusters, the head for every row and then each tail for its
 * rows, in blocks: with fwd the log-sum-exps (cached in ws) and row_loss, with bwd dx
 * (overwritten) and the += into G from scale (softmax - onehot), block by block right after
 * the block's forward when both. Either way each of G's sums takes its terms in the order of
 * the backward alone, so adapt_xent_train's gradient is forward then backward's, bit for
 * bit. Returns the sum of the losses (fwd) in row order: the same for any thread count. */
static double xent_pass(float *row_loss, float *dx, const adapt_tensors *G, const float *x,
                        const adapt_tensors *W, const adapt_shape *s, const txl_tok *y,
                        int rows, float scale, const adapt_ws *ws, int fwd, int bwd)
{
    const int d = s->d;
    int start[ADAPT_MAX_CLUSTERS], cnt[ADAPT_MAX_CLUSTERS], tcol[ADAPT_ROWS];
    double lse[ADAPT_ROWS];
    float zt[ADAPT_ROWS], lsef[ADAPT_ROWS];
    colseg seg[2], gseg[2];
    if (bwd)
        memset(dx, 0, (size_t)rows * d * sizeof(float));
    group_rows(ws->order, start, cnt, s, y, rows, s->n);
    for (int i = 0; i < s->n; i++) { /* the head over every row, then each tail's rows */
        const int nseg = cluster_cols(W, s, i, seg), dk = s->dim[i], n_i = i ? cnt[i] : rows;
        if (bwd)
            cluster_cols(G, s, i, gseg);
        const size_t cols = (size_t)seg[0].n + (nseg > 1 ? (size_t)seg[1].n : 0);
        for (int b0 = 0; b0 < n_i; b0 += ws->R) {
            const int nb = min_i(ws->R, n_i - b0);
            /* both passes: the block's logits kept between its forward and its backward
             * where they fit (a head block's always), else computed again */
            float *keep = fwd && bwd && (size_t)nb * cols <= ws->zh_cap ? ws->zh : NULL;
            const float *hb = block_rows(ws, start, i, b0, nb, x, d);
            const float *hp = project(ws->hp, hb, W->pout[i], nb, d, dk);
            for (int k = 0; k < nb; k++)
                tcol[k] = target_col(s, i, y[block_row(ws, start, i, b0, k)]);
            if (fwd) {
                block_lse(lse, zt, seg, nseg, hp, nb, dk, tcol, ws, keep);
                for (int k = 0; k < nb; k++) {
                    const int r = block_row(ws, start, i, b0, k);
                    const double l = lse[k] - (double)zt[k];
                    if (i == 0) {
                        ws->lse_h[r] = (float)lse[k];
                        row_loss[r] = (float)l;
                    } else {
                        ws->lse_t[r] = (float)lse[k];
                        row_loss[r] = (float)((double)row_loss[r] + l);
                    }
                }
            }
            if (!bwd)
                continue;
            for (int k = 0; k < nb; k++) {
                const int r = block_row(ws, start, i, b0, k);
                lsef[k] = i == 0 ? ws->lse_h[r] : ws->lse_t[r];
            }
            block_backward(seg, gseg, nseg, hp, nb, dk, tcol, lsef, scale, ws, keep);
            const float *dhb = ws->dhp; /* without Q, d(hp) is d(hb) */
            if (W->pout[i]) {           /* hp = hb Q: d(hb) = d(hp) Q^T, dQ += hb^T d(hp) */
                gemm(ws->dhb, ws->dhp, W->pout[i], nb, d, dk, 0, 1, 1.0f, 0.0f, dk, dk, d);
                gemm(G->pout[i], hb, ws->dhp, d, dk, nb, 1, 0, 1.0f, 1.0f, d, dk, dk);
                dhb = ws->dhb;
            }
            for (int k = 0; k < nb; k++) {
                float *o = dx + (size_t)block_row(ws, start, i, b0, k) * d;
                const float *g = dhb + (size_t)k * d;
                for (int c = 0; c < d; c++)
                    o[c] += g[c];
            }
        }
    }
    double total = 0;
    for (int r = 0; fwd && r < rows; r++)
        total += row_loss[r];
    return total;
}

double adapt_xent_forward(float *row_loss, const float *x, const adapt_tensors *W,
                          const adapt_shape *s, const txl_tok *y, int rows, const adapt_ws *ws)
{
    return xent_pass(row_loss, NULL, NULL, x, W, s, y, rows, 0.0f, ws, 1, 0);
}

void adapt_xent_backward(float *dx, const adapt_tensors *G, const float *x,
                         const adapt_tensors *W, const adapt_shape *s, const txl_tok *y,
                         int rows, float scale, const adapt_ws *ws)
{
    xent_pass(NULL, dx, G, x, W, s, y, rows, scale, ws, 0, 1);
}

double adapt_xent_train(float *row_loss, float *dx, const adapt_tensors *G, const float *x,
                        const adapt_tensors *W, const adapt_shape *s, const txl_tok *y,
                        int rows, float scale, const adapt_ws *ws)
{
    return xent_pass(row_loss, dx, G, x, W, s, y, rows, scale, ws, 1, 1);
}

/* ---- the full distribution */

/* C [nb, N] (row stride ldc) = hp [nb, dk] Wt^T + b (Wt [N, dk]) */
static void logits_into(float *C, int ldc, const float *hp, const float *Wt, const float *b,
                        int nb, int N, int dk, int few)
{
    for (int k = 0; k < nb; k++)
        memcpy(C + (size_t)k * ldc, b, (size_t)N * sizeof(float));
    if (few)
        gemm_few(C, hp, Wt, nb, N, dk, 1.0f, 1.0f, dk, dk, ldc);
    else
        gemm(C, hp, Wt, nb, N, dk, 0, 1, 1.0f, 1.0f, dk, dk, ldc);
}

/* Row by row of a block (o: the block's rows of out, cl [nb, T] the head's cluster
 * logits): the head's log-softmax over its shortlist and cluster logits; a tail's log-softmax
 * plus its cluster's log-probability. */
static void block_normalize(float *o, float *cl, const adapt_shape *s, int i, int nb)
{
    const int V = s->V, T = s->n - 1, lo = s->lo[i], ni = s->hi[i] - lo;
#pragma omp parallel for schedule(static) if ((size_t)nb * ni > 65536)
    for (int k = 0; k < nb; k++) {
        float *z = o + (size_t)k * V + lo, *c = cl + (size_t)k * T;
        float mx = vm_max(z, ni);
        if (i == 0 && T > 0) {
            float cm = vm_max(c, T);
            mx = cm > mx ? cm : mx;
        }
        double sum = vm_exp_sum_keep(z, ni, mx) + (i == 0 ? vm_exp_sum_keep(c, T, mx) : 0.0);
        float lse = (float)((double)mx + log(sum));
        float off = i == 0 ? -lse : c[T - i] - lse;
        for (int j = 0; j < ni; j++)
            z[j] += off;
        for (int j = 0; i == 0 && j < T; j++)
            c[j] -= lse;
    }
}

void adapt_logprobs(float *out, const float *x, const adapt_tensors *W, const adapt_shape *s,
                    int n, int few, const adapt_ws *ws)
{
    const int d = s->d, V = s->V, T = s->n - 1;
    for (int r0 = 0; r0 < n; r0 += ws->R) {
        const int nb = min_i(ws->R, n - r0);
        const float *hb = x + (size_t)r0 * d;
        float *o = out + (size_t)r0 * V, *cl = ws->z; /* [nb, T]: T <= ws->C */
        for (int i = 0; i < s->n; i++) { /* the head first: the tails add its cluster terms */
            const int dk = s->dim[i];
            const float *hp = project(ws->hp, hb, W->pout[i], nb, d, dk);
            logits_into(o + s->lo[i], V, hp, W->emb[i], W->bias[i], nb, s->hi[i] - s->lo[i],
                        dk, few);
            if (i == 0 && T > 0)
                logits_into(cl, T, hp, W->cw, W->cb, nb, T, dk, few);
            block_normalize(o, cl, s, i, nb);
        }
    }
}

/* adaptive.h: the adaptive input embedding and the adaptive log-softmax (doc/design.md, "The
 * model", adaptive softmax), as official Transformer-XL has them (AdaptiveEmbedding and
 * ProjectedAdaptiveLogSoftmax of kimiyoung/transformer-xl, after Grave et al. 2017 and
 * Baevski & Auli 2019).
 *
 * model.cutoffs c_1 < ... < c_T (each < V) cut the vocabulary [0, V) into n = T + 1 clusters:
 * cluster 0, the head's shortlist [0, c_1), and the tails i = 1..T, [c_i, c_{i+1}) (c_{T+1}
 * = V), of n_i tokens each; cluster i has width d_i = d_embed / div_val^i (integer
 * division, as official's d_embed // div_val ** i). The tensors (adapt_tensors):
 *   E_i [n_i, d_i]  the embedding rows of cluster i; the output weight too (tied, as official's
 *                   tie_weight). div_val 1: one table E [V, d_embed], E_i its rows.
 *   b_i [n_i]       the output bias (div_val 1: one b [V]).
 *   P_i [d, d_i]    the input projection: div_val 1, one P_0 for all (none when d_embed == d);
 *                   div_val > 1, one per cluster.
 *   Q_i [d, d_i]    the output projection of cluster i: the same rule of existence as P; with
 *                   tie_projs the tails' Q_i are P's (div_val 1: P_0, else P_i), the head's is
 *                   its own (official's tie_projs [False, True, ...]).
 *   C [T, d_0], c [T] the head's cluster logits.
 * Input (token t of cluster i):  h = sqrt(d) (E_i[t - lo_i] P_i^T)   (no P: sqrt(d) E_i[t]).
 * Output, for a top state x [d] (no Q: x itself in place of x Q):
 *   z_h = (x Q_0) [E_0; C]^T + [b_0; c]      the head: n_0 shortlist logits, then T cluster
 *                                            logits; tail i's is column n_0 + T - i (row
 *                                            T - i of C), as official's head_logprob[:, -i]
 *   z_i = (x Q_i) E_i^T + b_i                tail i's logits
 *   log p(t) = log_softmax(z_h)[t]                                  t in the shortlist
 *   log p(t) = log_softmax(z_h)[n_0 + T - i] + log_softmax(z_i)[t - lo_i]   t in tail i
 * The loss of a target is -log p (nats).
 *
 * Memory does not grow with V beyond the tensors: a cluster's rows are processed in blocks
 * of R rows (ADAPT_ROWS) and its logits in chunks of C columns (ADAPT_COLS), the log-sum-exp
 * of a row formed online over the chunks (running maximum, sum rescaled, in double). With
 * targets (training, evaluation) only the clusters the targets fall in are computed: the head
 * for every row, tail i for the rows whose target is in it; the backward recomputes each
 * chunk's logits from the cached log-sum-exps and turns them into their gradient at once.
 * Training's adapt_xent_train runs both passes block by block and keeps a head block's
 * logits for its backward (one product over the head instead of two; the same numbers), and
 * a tail block's where they fit in the same buffer. The buffers (adapt_ws) are sized by R,
 * C, d, d_embed, the head's logits and the rows of a segment, never by V or by how many
 * targets fall in a cluster. All grads are added to (+=; callers zero them); dh of
 * adapt_xent_backward is overwritten. */
#ifndef TXL_ADAPTIVE_H
#define TXL_ADAPTIVE_H

#include <stddef.h>

#include "../common/tok.h"
#include "model_config.h"

#define ADAPT_MAX_CLUSTERS (MODEL_MAX_CUTOFFS + 1)
#define ADAPT_ROWS 256  /* R: rows per block */
#define ADAPT_COLS 4096 /* C: logits per chunk */
/* adapt_xent_train keeps a head block's logits when the head has at most this many (n_0 +
 * T; a buffer of R of them: 32 MiB at most), else recomputes them as the backward does */
#define ADAPT_KEEP_COLS 32768

/* The clusters of a config (adapt_shape_of). */
typedef struct {
    int n;                         /* clusters: 1 + the cutoffs */
    int lo[ADAPT_MAX_CLUSTERS];    /* cluster i: tokens [lo, hi) */
    int hi[ADAPT_MAX_CLUSTERS];
    int dim[ADAPT_MAX_CLUSTERS];   /* d_i */
    int d;                         /* d_model */
    int V;
    int one_table;                 /* div_val 1: one E [V, d_embed], one b [V], at most one P */
} adapt_shape;

/* The adaptive input and softmax are in use: cutoffs, a d_embed other than d_model, or a
 * div_val above 1 (otherwise the model is the full softmax over one embedding). */
int adapt_in_use(const model_config *c);
/* The clusters of c (c validated by adapt_validate). */
void adapt_shape_of(const model_config *c, adapt_shape *s);
/* c's adaptive keys are consistent: 0, or -1 with the message in why (naming the key). */
int adapt_validate(const model_config *c, char *why, size_t cap);

/* The tensors of every cluster i < n (views; a tied one points at its twin; NULL where a
 * projection does not exist), for weights and for gradients alike. */
typedef struct {
    float *emb[ADAPT_MAX_CLUSTERS];  /* E_i [n_i, d_i] */
    float *bias[ADAPT_MAX_CLUSTERS]; /* b_i [n_i] */
    float *pin[ADAPT_MAX_CLUSTERS];  /* P_i [d, d_i] or NULL */
    float *pout[ADAPT_MAX_CLUSTERS]; /* Q_i [d, d_i] or NULL */
    float *cw, *cb;                  /* C [T, d_0], c [T] (NULL when T = 0) */
} adapt_tensors;

/* Scratch of the ops: a segment's rows (rows_cap) and one block. */
typedef struct {
    int R, C, rows_cap;  /* block rows, chunk columns (each at most the largest need) */
    int *order;          /* [rows_cap] rows grouped by cluster */
    txl_tok *tb;         /* [R] a block's token ids within their cluster */
    float *hb, *dhb;     /* [R, d] a block's rows, their gradient */
    float *hp, *dhp;     /* [R, d_0] projected, their gradient */
    float *z;            /* [R, C] one chunk of logits */
    float *zh;           /* [R, n_0 + T] a block's logits, as [nb, nc] tiles chunk by chunk
                            (training, heads of at most ADAPT_KEEP_COLS), or NULL */
    size_t zh_cap;       /* its floats (0 without) */
    float *lse_h, *lse_t;/* [rows_cap] cached log-sum-exps of the head, of the row's tail */
} adapt_ws;

/* The floats of adapt_ws for rows_cap rows (training: the backward's too); adapt_ws_place
 * hands them out from base (which holds adapt_ws_floats floats, 64-byte aligned). */
double adapt_ws_floats(const adapt_shape *s, int rows_cap, int training);
void adapt_ws_place(adapt_ws *ws, const adapt_shape *s, int rows_cap, int training,
                    float *base);

/* h [n, d] = the adaptive input of tok[n] (every tok < V), scaled by `scale` (sqrt(d)). */
void adapt_embed_forward(float *h, const adapt_tensors *W, const adapt_shape *s,
                         const txl_tok *tok, int n, float scale, const adapt_ws *ws);
/* Backward of adapt_embed_forward: dE_i, dP_i += from dh [n, d]. */
void adapt_embed_backward(const adapt_tensors *G, const adapt_tensors *W, const adapt_shape *s,
                          const float *dh, const txl_tok *tok, int n, float scale,
                          const adapt_ws *ws);

/* row_loss[rows] = -log p(y_r | x_r) for x [rows, d] (rows <= ws->rows_cap); the log-sum-exps
 * are cached in ws for the backward. Returns the SUM of the losses in nats (double, in row
 * order). */
double adapt_xent_forward(float *row_loss, const float *x, const adapt_tensors *W,
                          const adapt_shape *s, const txl_tok *y, int rows, const adapt_ws *ws);
/* Backward of scale * (sum of the losses) of the last adapt_xent_forward on the same x and y:
 * dx [rows, d] (overwritten), and += into G's E, b, Q, C, c. */
void adapt_xent_backward(float *dx, const adapt_tensors *G, const float *x,
                         const adapt_tensors *W, const adapt_shape *s, const txl_tok *y,
                         int rows, float scale, const adapt_ws *ws);

/* adapt_xent_forward and then adapt_xent_backward(dx, G, ..., scale) in one pass over the
 * clusters, each block's backward right after its forward, a head block's logits (and a
 * tail block's that fit) kept in ws->zh between the two rather than computed again: row_loss,
 * the returned sum, dx, G's sums and the cached log-sum-exps are those of the two calls, bit
 * for bit. */
double adapt_xent_train(float *row_loss, float *dx, const adapt_tensors *G, const float *x,
                        const adapt_tensors *W, const adapt_shape *s, const txl_tok *y,
                        int rows, float scale, const adapt_ws *ws);
/* out [n, V] = log p(. | x_r) over every token, for x [n, d] (any n; blocks of ws->R).
 * few: the products through gemm_few (decoding's few rows). */
void adapt_logprobs(float *out, const float *x, const adapt_tensors *W, const adapt_shape *s,
                    int n, int few, const adapt_ws *ws);

#endif

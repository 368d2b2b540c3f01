/* pos.h: the positional-scheme interface (doc/design.md, "Positional schemes").
 *
 * Everything one scheme needs lives in one file, model/pos_<name>.c, behind the hooks of a
 * pos_ops: its parameters (table entries and their views), its buffers in the activation
 * plan, what it does to the embeddings, to each layer's queries and keys and to the
 * attention scores, its backward, and its one-token decode step. forward.c, backward.c and decode.c call
 * the hooks and never ask which scheme runs; the registry (pos.c) maps the config's
 * pos_scheme to its pos_ops. Adding a scheme: one file, one line in POS_SCHEMES
 * (model_config.h), its tests.
 *
 * Each scheme owns a few float buffers, named by its own enum: POS_SLOTS per layer cache
 * (pos_layer.buf: e.g. xl's projected positions rk), POS_SLOTS model-wide (pos_acts.buf:
 * e.g. rope's tables) and its parameters' views (layer_tensors.pos, model_tensors.pos, in
 * the order the params hook added them). Hooks that leave a slot untouched cost nothing.
 *
 * Shapes as in model.h: B streams, Lq segment rows, m memory rows, klen = m + Lq keys,
 * d = d_model, H heads of dh, hd = H*dh. */
#ifndef TXL_POS_H
#define TXL_POS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/tok.h"
#include "attention.h"
#include "model_config.h"

#define POS_SLOTS 20

typedef struct layer_tensors layer_tensors;
typedef struct model_tensors model_tensors;
typedef struct param_table param_table;
typedef struct attn_grads attn_grads;

/* Adds one parameter tensor (shape [d0] when d1 == 0, else [d0, d1]) named by fmt to the
 * table (params.c) with the given init (N(0, 0.02) for INIT_NORMAL). Returns 0, or -1 when
 * out of memory or when the scheme has used all POS_SLOTS views of this layer.
 * param_add_init takes the argument of the inits that have one. */
typedef enum {
    INIT_NORMAL, INIT_ZERO, INIT_ONE,
    INIT_EYES, /* [r, c]: w[i][j] = 1 where j % r == i, else 0 (identity blocks side by side) */
    INIT_PROJ, /* N(0, 0.01): the adaptive softmax's projections (official's proj_init_std) */
    INIT_CONST,  /* every element = arg */
    INIT_UNIFORM /* U(-arg, arg) */
} param_init;
int param_add(param_table *t, int d0, int d1, param_init init, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int param_add_init(param_table *t, int d0, int d1, param_init init, float arg,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Sizes the activation plan works with. */
typedef struct {
    int B, Lq, M;        /* batch, longest segment, memory rows */
    int training;        /* keep what the backward needs, plan its scratch */
} pos_dims;

/* Hands out `n` floats of the activation plan (plan.c's arena): called twice with the
 * same sequence, first to count, then for real (then the pointers are valid). n is a double
 * so that the count of a config far too large (refused by the count) cannot overflow:
 * compute it in doubles. */
typedef struct {
    float *(*take)(void *arena, double n);
    void *arena;
} pos_alloc;

typedef struct {
    float *buf[POS_SLOTS]; /* model-wide buffers (per segment or per plan) */
    long tag[2];           /* what buf holds, for hooks that cache across segments */
    int valid;             /* tag is meaningful (0 after planning) */
} pos_acts;

typedef struct {
    float *buf[POS_SLOTS]; /* one layer's buffers (kept per layer when training) */
} pos_layer;

/* What the decode hooks see of one layer of a decoding step. */
typedef struct {
    const model_config *c;
    const layer_tensors *W;
    const model_tensors *MW;
    int M, m;                /* memory capacity, rows held (the query is row m) */
    float *tables;           /* this layer's decode tables (fire writes the row of a query
                                that depends on it) */
    const int32_t *coords;   /* [B][..] coordinates of rows 0..m per stream, or NULL */
    size_t coords_bstride;   /* int32s from one stream's rows to the next */
    void *bias_state;        /* storage for a score-bias context (POS_BIAS_STATE bytes) */
} pos_decode;

#define POS_BIAS_STATE 256

/* What a hook sees of the segment being run. */
typedef struct {
    const model_config *c;
    int B, Lq, m;          /* klen = m + Lq */
    int training;
    float dropout;         /* dropout probability of this pass (0 in inference) */
    uint64_t drop_key;     /* the segment's dropout key (site keys via pos_site_key) */
    size_t b_offset;       /* global index of stream 0 (data parallelism) */
    long pos_offset;       /* added to every absolute coordinate (eval's --position-offset) */
    const int32_t *coords; /* [B, klen, TXL_N_COORDS] text coordinates of the rows [mem;
                              segment] (schemes with needs_coords), else NULL */
    pos_acts *acts;
} pos_seg;

/* One layer of that segment. */
typedef struct {
    const pos_seg *s;
    int layer;
    const layer_tensors *W;  /* weights of this layer */
    const model_tensors *MW; /* model-wide weights */
    layer_tensors *G;        /* gradients of this layer (backward) */
    model_tensors *MG;       /* model-wide gradients (backward) */
    pos_layer *lc;           /* this layer's buffers */
    pos_layer *bw;           /* backward scratch buffers (shared by the layers) */
    float *q, *kv;           /* [B,Lq,hd], [B,klen,2hd]: projections, in place (kv NULL
                                when they come from a kv_cache: schemes without window_keys) */
} pos_ctx;

typedef struct pos_ops {
    const char *name;        /* config and checkpoint name: "xl", "mlp", ... */
    /* Names of the score terms attn_term_stats reports: content first, then the scheme's
     * (NULL-terminated; eval --term-stats prints these). */
    const char *const *term_names;
    /* The scheme reads the text's coordinates (pos_seg.coords): the model keeps them for
     * the memory rows and the data layer must provide them for every token. */
    int needs_coords;
    /* The keys depend on the row's place in the window (rope rotates them by it): a key
     * projected in one segment is not that row's key in the next, so inference keeps no
     * kv_cache (model.h) and projects every row of the window. */
    int window_keys;
    /* A segment's tables are sized by every stream of the batch (hier: the distances its
     * windows span, the longest stream's): a stream's scores may round their last bit
     * differently beside other streams, so evaluation runs such a scheme's streams all at
     * once, never in groups (eval/evaluate.c). */
    int batch_tables;

    /* Parameters: layer -1 adds the model-wide tensors (after out.bias), layer l those of
     * layer l (after its attn.qkv.weight). Their views fill .pos[] in that order. */
    int (*params)(param_table *t, const model_config *c, int layer);
    /* Config rules of the scheme (e.g. rope needs an even d_head); 0 or -1 with `why`. */
    int (*validate)(const model_config *c, char *why, size_t cap);
    /* Plans the scheme's buffers: model-wide ones and the backward scratch (bw, only when
     * d->training), then those of one layer cache (plan_layer, once per kept cache). */
    void (*plan)(const model_config *c, const pos_dims *d, pos_alloc *a, pos_acts *acts,
                 pos_layer *bw);
    void (*plan_layer)(const model_config *c, const pos_dims *d, pos_alloc *a, pos_layer *lc);

    /* h0 [B,Lq,d] after the scaled token embeddings: absolute positions are added here. */
    void (*embed)(const pos_seg *s, float *h0);
    /* Once per segment, before the layers (xl: the sinusoid rows R with dropout). */
    void (*segment)(const pos_seg *s);
    /* Per layer after the q/kv projections: prepare what the scores need (xl: rk; mlp: the
     * bias rows) or rotate q and k (rope); then fill the scheme's part of the attention
     * arguments (also called by the backward, with the same buffers). */
    void (*layer_forward)(pos_ctx *x);
    void (*attn_args)(const pos_ctx *x, attn_args *a);
    /* Backward: set the gradient targets of the attention kernel (zeroing them), then after
     * attn_backward turn them into parameter gradients (and, rope, rotate d_q, d_kv back). */
    void (*grad_args)(pos_ctx *x, attn_grads *g);
    void (*layer_backward)(pos_ctx *x, float *d_q, float *d_kv);

    /* Decoding (decode.c) keeps, per layer, tables valid for every memory length up to M:
     * decode_floats per layer, built by decode_tables from the weights (with
     * decode_scratch floats of scratch). decode_args points the attention at them for a
     * query with m memory rows. decode_qk rotates `rows` rows (stride ld) of q and/or k
     * (either may be NULL) at absolute positions pos + r * pos_step (rope). Any may be
     * NULL. */
    size_t (*decode_floats)(const model_config *c, int M);
    size_t (*decode_scratch)(const model_config *c, int M);
    void (*decode_tables)(const model_config *c, const layer_tensors *W,
                          const model_tensors *MW, int M, float *tables, float *scratch);
    void (*decode_args)(const pos_decode *d, attn_args *a);
    void (*decode_qk)(const model_config *c, float *q, float *k, int rows, int ld, long pos,
                      int pos_step, float *scratch);
} pos_ops;

/* decode_args of the schemes whose decode table is a distance bias [H, M+1] (mlp, alibi, t5). */
void pos_decode_dist_bias(const pos_decode *d, attn_args *a);

/* The registry: the ops of a scheme (never NULL for a valid pos_scheme). */
const pos_ops *pos_get(pos_scheme p);

/* Dropout sites of the model (forward.c, backward.c) and the schemes share one key space. */
enum { SITE_EMB, SITE_R, SITE_ATTN_OUT, SITE_DROPATT, SITE_FF_ACT, SITE_FF_OUT, SITE_FINAL };
uint64_t pos_site_key(uint64_t key, int layer, int site);

/* The registered schemes (pos_<name>.c). */
#define POS_EXTERN(u, l) extern const pos_ops pos_##l;
POS_SCHEMES(POS_EXTERN)
#undef POS_EXTERN

/* Gradient targets of attn_backward (attention.h) that belong to a scheme. */
struct attn_grads {
    float *drk;       /* [klen, hd] xl projected positions (+=) */
    float *du, *dv;   /* [H, dh] xl global biases (+=) */
    float *d_bias;    /* [H, klen] distance bias (+=) */
};

#endif

/* model.h: the Transformer-XL of doc/design.md, "The model": parameters, activations, memory, and
 * the forward/backward of one segment.
 *
 * Parameters live in ONE table (params.c): every tensor's checkpoint name,
 * shape, init and offset into a single float array. Gradients and Adam moments use the same
 * offsets, so optimisers and checkpoints are loops over flat arrays. model_tensors gives
 * named views into any such array (weights or gradients).
 *
 * Activations (model_acts) are planned once for (B, max Lq, M) before the first step; the
 * forward/backward never allocate. The memory (model_mem) is state, not a parameter: it
 * has no gradient buffer, so the stop-gradient (doc/design.md, "The model") is structural.
 *
 * Layouts are batch-major: tokens [B, Lq], hidden states [B, Lq, d], memory [N][B, M, d]. */
#ifndef TXL_MODEL_H
#define TXL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "adaptive.h"
#include "model_config.h"
#include "pos.h"

typedef struct kv_cache kv_cache; /* kv_cache.h: inference's keys and values of the memory */
typedef struct qmat qmat;         /* quant.h: a matrix stored in 16 or 8 bits */

/* Named views of one layer's tensors (every member a float *: the table fills them by
 * index). pos[] are the positional scheme's, in the order its params hook added them. */
struct layer_tensors {
    float *qkv_w, *o_w, *attn_ln_w, *attn_ln_b;
    float *ff0_w, *ff0_b, *ff3_w, *ff3_b, *ff_ln_w, *ff_ln_b;
    float *pos[POS_SLOTS];
};

struct model_tensors {
    float *word_emb, *out_bias; /* the full softmax's: E [V, d] (input and output), b [V] */
    float *pos[POS_SLOTS];      /* the scheme's model-wide tensors */
    /* the adaptive softmax's own tensors (adaptive.h), by cluster; NULL where there is none
     * (model_adapt_view resolves the ties) */
    float *ad_emb[ADAPT_MAX_CLUSTERS], *ad_pin[ADAPT_MAX_CLUSTERS];
    float *ad_bias[ADAPT_MAX_CLUSTERS], *ad_pout[ADAPT_MAX_CLUSTERS];
    float *ad_cw, *ad_cb;
    layer_tensors *layer;       /* [n_layer] */
};

typedef struct {
    char name[64];
    int ndim;
    int shape[2];
    size_t offset; /* in floats, into the flat arrays */
    size_t numel;
    param_init init;
    float init_arg;/* INIT_CONST's value, INIT_UNIFORM's bound */
    int layer;     /* -1: model-wide */
    int field;     /* index of its view among the float * of model_tensors (layer -1) or
                      layer_tensors */
} param_entry;

typedef struct {
    model_config cfg;
    int n_params;
    param_entry *table;
    size_t n_floats;     /* length of w (and g): sum of numel plus alignment padding */
    size_t n_weights;    /* sum of numel (the parameter count) */
    float *w;            /* parameters */
    float *g;            /* gradients, NULL until model_alloc_grads */
    model_tensors W, G;  /* named views of w and g */
    /* A quantized checkpoint's tensors as it stores them (quant.h), by table index: w holds
     * their exact dequantization (every product of training, evaluation and prompts reads
     * it), decoding's few-row products read these. NULL: every tensor is fp32. */
    qmat *qm;            /* [n_params] */
    void *qbuf;          /* their bytes (owned, with qm) */
    uint16_t *wb;        /* bf16 precision: w rounded to bf16 (model_bf16_sync), which the
                            products read in place of rounding a weight at every use; NULL
                            until then. A replica shares its source's. */
    int wb_fresh;        /* wb is w's rounding (model_bf16_sync; cleared by nothing else:
                            who writes w after a sync syncs again with force) */
} model;

/* Builds the table for cfg and allocates zeroed weights. cfg must be validated. */
int model_init(model *mdl, const model_config *cfg, txl_err *e);
/* model_init in two steps: the table alone (no arrays: w, W and G stay NULL; model_free
 * frees it), so a checkpoint's header can be held to the table before anything of the
 * model's size is allocated or read, then the zeroed weights and their views. */
int model_init_table(model *mdl, const model_config *cfg, txl_err *e);
int model_alloc_weights(model *mdl, txl_err *e);
/* What the table holds for cfg, counted from the table itself without building it (its
 * model-wide part, and one layer times n_layer: every layer has the same shapes), in
 * doubles so that a config far too large still counts: the parameter tensors, the
 * parameters, and the floats of a flat array laid out by it (w, g, an Adam moment; with
 * the tensors' alignment). The one source of these numbers (config validation, --dry-run,
 * a checkpoint's tensor count); -1 with e when the scheme refuses cfg. */
typedef struct {
    double tensors, weights, floats;
} model_count;
int model_counts(const model_config *cfg, model_count *out, txl_err *e);
/* Init from a seed (doc/design.md, "The model"): weights N(0, 0.02), biases 0, LN gain 1, u/v N(0,
 * 0.02). */
void model_init_weights(model *mdl, uint64_t seed);
int model_alloc_grads(model *mdl, txl_err *e);
void model_zero_grads(model *mdl);
/* A replica of src for data parallelism within a process: src's weights (shared, read
 * only) with a gradient of its own. Free with model_replica_free. */
int model_replica(model *r, const model *src, txl_err *e);
void model_replica_free(model *r);
void model_free(model *mdl);

/* In bf16 precision (gemm.h), rounds w into wb (allocated at the first call) and makes the
 * products read it (a gemm_bf16 shadow): once after every change of w, before products use
 * it: the trainer after each optimiser step (force = 1), inference before its first product
 * (force = 0: nothing to do while wb_fresh). In fp32 it drops the shadow. Outside parallel
 * regions. 0, or -1 (out of memory, or too many shadows: products then round w at each use,
 * as without; not an error for the caller to stop on, the results are the same). */
int model_bf16_sync(model *mdl, int force);
/* Table entry by checkpoint name, or NULL. */
const param_entry *model_find_param(const model *mdl, const char *name);
/* Named views of an array laid out like the table (w, g, or an Adam moment). */
void model_tensors_view(const model *mdl, float *base, model_tensors *t);
/* The adaptive softmax's tensors of every cluster in t (W or G): the one table's rows per
 * cluster (div_val 1), the tied projections pointing at their twins. */
void model_adapt_view(const model_config *c, const model_tensors *t, adapt_tensors *out);
/* The input embedding's first tensor, as a checkpoint names it, and its shape: word_emb.weight
 * [V, d], or word_emb.emb_layers.0.weight [V or cutoffs[0], d_embed] (adaptive). */
void model_embed_tensor(const model_config *c, char *name, size_t cap, int shape[2]);

/* Memory of every layer: buf [N][B][M][d], the first m rows of each (layer, stream) valid.
 * A slice (mem_slice) views some streams of a larger memory: its layers lie layer_stride
 * floats apart, not B*M*d. */
typedef struct {
    int n_layer, B, M, d;
    int m;       /* rows currently held (0 after reset) */
    float *buf;
    int32_t *coords; /* [B][M][TXL_N_COORDS] text coordinates of the rows (schemes that read
                        them), else NULL */
    size_t layer_stride; /* floats from layer l's [B][M][d] to layer l+1's */
    uint64_t gen;        /* bumped by model_forward (inference), model_mem_update and
                            decode_sync_mem: a kv_cache serves only the generation it made */
} model_mem;

int mem_init(model_mem *mem, const model_config *cfg, int B, int M, txl_err *e);
/* The bytes mem_init allocates for the same arguments (the rows and their coordinates). */
double mem_plan_bytes(const model_config *cfg, int B, int M);
void mem_reset(model_mem *mem);
void mem_free(model_mem *mem);
/* Streams [b0, b0 + B) of whole, in place (gradient accumulation: one micro-batch's
 * streams). A view: never freed; its m is its own (set whole->m when the slices moved). */
model_mem mem_slice(const model_mem *whole, int b0, int B);
static inline float *mem_layer(const model_mem *mem, int l)
{
    return mem->buf + (size_t)l * mem->layer_stride;
}

/* One layer's cache for the backward (training) or its working buffers (inference). */
typedef struct {
    float *cat;              /* [B, klen, d]: [mem; layer input] (not made when cat_h_only) */
    float *catn, *ln0_xhat, *ln0_rstd;   /* pre_lnorm: LN(cat) and its cache */
    float *xq;               /* pre_lnorm: the segment rows of catn, contiguous [B,Lq,d] */
    float *q, *kv;           /* [B,Lq,H*dh], [B,klen,2*H*dh] */
    float *prob;             /* [B,H,Lq,klen] (training only) */
    float *vec;              /* [B,Lq,H*dh] */
    float *h1;               /* [B,Lq,d]: after attention + residual (+ LN when post) */
    float *ln1_xhat, *ln1_rstd;
    float *ffin;             /* pre_lnorm: LN(h1) [B,Lq,d] */
    float *a;                /* [B,Lq,di]: dropout(relu(ff.0)) */
    float *ln2_xhat, *ln2_rstd;
    /* bf16 precision: the products' inputs rounded once in the forward (and kept for the
     * backward's weight gradients): cat (catn when pre-LN), the query rows (x, or xq), vec,
     * ffin (h1 when post-LN), a. NULL in fp32. */
    uint16_t *catb, *xqb, *vecb, *ffinb, *ab;
    int cat_h_only;          /* this segment's cat made in bf16 only (catb; layer_project) */
    pos_layer pos;           /* the positional scheme's buffers of this layer */
} layer_cache;

typedef struct {
    int B, Lq_max, M, training;
    int threads;             /* threads the scratch is planned for (par_max_threads()) */
    int attn_row_block;      /* query rows per attention GEMM block (0 = default; tests
                                set small values to exercise the blocked path) */
    int attn_blas;           /* 1: attention's products on OpenBLAS (attention.c's first
                                path), 0: the fused kernel (attn_fused.h). fp32 takes
                                OpenBLAS (bit for bit txl 0.2's); bf16 in AVX-512 builds the
                                fused kernel, where it measured faster (doc/performance.md);
                                -DTXL_ATTN_FUSED: fused in fp32 too, to measure side by side */
    int attn_amx;            /* with the fused kernel: its bf16 products on AMX tiles
                                (attn_amx.h): bf16 precision on a CPU with AMX-BF16 */
    int bf16;                /* planned in bf16 precision: the layer caches' bf16 twins */
    int cached;              /* planned as ACTS_CACHED (acts_init) */
    size_t b_offset;         /* global index of stream 0 (data parallelism: dropout masks are
                                drawn by global stream, so N ranks x B/N streams draw what one
                                process with B streams draws) */
    model_config cfg;
    const pos_ops *pos;      /* the positional scheme */
    layer_cache *lc;         /* [n_layer] when training, else one shared cache */
    float *hs;               /* [N+1][B,Lq,d]: hs[l] is layer l's input, hs[N] the top */
    float *hfin;             /* [B,Lq,d]: top after the final dropout */
    float *logits, *lse;     /* [B*Lq, V], [B*Lq] (the full softmax; NULL when adaptive:
                                model_row_logprobs gives rows of the distribution) */
    float *row_loss;         /* [B*Lq]: loss of each position (nats) */
    adapt_ws ad;             /* the adaptive softmax's buffers (adaptive.h), when in use */
    float *tmp;              /* [B,Lq,d] scratch */
    float *attn_scratch;
    int32_t *cat_coords;     /* [B, klen, TXL_N_COORDS] coordinates of [mem; segment] rows
                                (needs_coords) */
    pos_acts pos_acts;       /* the scheme's model-wide buffers */
    pos_layer pos_bw;        /* the scheme's backward scratch */
    /* backward scratch */
    float *d_out, *d_in, *d_h1, *d_tmp, *d_a, *d_vec, *d_q, *d_kv, *d_cat;
    uint16_t *d_h1b, *d_tmpb, *d_ab; /* bf16: twins of d_h1, d_tmp, d_a (the tail's dy) */
    uint16_t *d_kvb;                 /* bf16, post-LN: d_kv's twin (the kv products' dy) */
    /* the segment the caches describe */
    int cur_Lq, cur_m;
    long cur_pos_offset;
    uint64_t cur_key;
    const txl_tok *cur_x, *cur_y;
    float xent_scale;        /* nonzero: the forward did the adaptive softmax's backward with
                                this loss_scale (fwd_opts), into d_out and the gradient */
    /* called by model_backward after layer l's backward (l = N-1 .. 0), when that layer's
     * gradients are final for this pass, or NULL: the trainer starts summing them over the
     * MPI ranks while the layers below run */
    void (*layer_grads_done)(void *ctx, int layer);
    /* called between the ops of each layer's backward, or NULL: the trainer lets those sums
     * progress (MPI moves them only inside its calls) */
    void (*backward_poll)(void *ctx);
    void *layer_grads_ctx;
    float *arena_base;       /* the one allocation every pointer above points into */
    size_t arena_floats;
} model_acts;

/* Plans every buffer for batch B, segments up to Lq_max, memory up to M. training = 1
 * keeps per-layer caches for the backward and allocates gradient scratch; 0 is inference;
 * ACTS_CACHED is inference that always runs with a usable key cache (kv_cache.h: the caller
 * has one, and asks for no term statistics): the window's buffers (cat, its LN, kv and their
 * bf16 twins) hold a segment, not memory + segment, and a forward whose cache is not in
 * step with the memory refills it from the memory a segment's rows at a time: evaluation's
 * memory then grows with the memory and its cache only. */
#define ACTS_CACHED 2
int acts_init(model_acts *A, const model_config *cfg, int B, int Lq_max, int M, int training,
              txl_err *e);
void acts_free(model_acts *A);
/* The arena floats acts_init would allocate for the same arguments, counted without
 * allocating (a double: a config far too large is counted, not overflowed). */
int acts_plan_floats(const model_config *cfg, int B, int Lq_max, int M, int training,
                     double *floats, txl_err *e);

/* Per-layer score-term statistics (attn_term_stats), accumulated when fwd_opts asks. */
typedef struct {
    double acc[4][2]; /* per term: sum, sum of squares */
    double count;
} term_stats;

typedef struct {
    int training;      /* dropout on, caches kept for model_backward */
    uint64_t drop_key; /* counter-based dropout key of this step (training) */
    term_stats *stats; /* [n_layer] diagnostics, or NULL (inference only) */
    long pos_offset;   /* added to every absolute position a scheme uses (0: as trained) */
    const int32_t *coords; /* [B, Lq, TXL_N_COORDS] coordinates of the segment's tokens:
                              required by schemes with needs_coords, else ignored */
    kv_cache *kv;      /* inference: the memory's keys and values, or NULL (every row of
                          the window projected) */
    int same_len;      /* inference: each query sees at most this many keys (attn_args
                          same_len; txl eval --same-length); 0: all up to its own */
    float loss_scale;  /* training with targets: the loss_scale model_backward will be given,
                          or 0 (not known). Given, an adaptive softmax's backward runs in the
                          forward (adapt_xent_train: the head's logits once, not twice; the
                          same numbers), into the model's gradient */
} fwd_opts;

/* Forward of one segment x [B, Lq] (Lq <= A->Lq_max) with memory mem (mem->m rows).
 * y [B, Lq] targets or NULL. Returns the SUM of the B*Lq losses in nats (0 if y NULL);
 * the full softmax's logits stay in A->logits [B*Lq, V] (model_row_logprobs reads the
 * distribution of any row, adaptive or not). In inference (!training) the memory is advanced
 * here; in training call model_mem_update after model_backward. */
double model_forward(model *mdl, model_acts *A, model_mem *mem, const txl_tok *x,
                     const txl_tok *y, int Lq, const fwd_opts *o);
/* Backward of loss_scale * (sum of losses) of the last training forward; adds to mdl->g.
 * A forward given fwd_opts.loss_scale must be followed by this with the same loss_scale. */
void model_backward(model *mdl, model_acts *A, model_mem *mem, float loss_scale);
/* new mem[l] = last M rows of [mem[l]; input of layer l] (after a training forward). */
void model_mem_update(model_acts *A, model_mem *mem);

/* The next token's distribution over all V tokens as scores out [n, V], out = log p + c_r
 * with a constant c_r per row: the adaptive softmax gives the log-probabilities themselves
 * (c_r = 0), the full softmax its logits (c_r = the row's log-sum-exp: exactly the numbers
 * it gave before there was an adaptive softmax). A softmax of the scores, their argmax, a
 * temperature, top-k and top-p read only differences within a row: the distribution alone.
 * model_row_logprobs: rows r0 .. r0+n-1 of the last model_forward (stream b's position i is
 * row b * Lq + i). model_logprobs: n top states h [n, d] (after the final dropout), with an
 * adaptive model's buffers ws (planned for at least 1 row); few: the products through
 * gemm_few (decoding's few rows; the full softmax then gives decoding's logits, bit for bit). */
void model_row_logprobs(const model *mdl, model_acts *A, size_t r0, int n, float *out);
void model_logprobs(const model *mdl, const float *h, int n, float *out, const adapt_ws *ws,
                    int few);

/* The parts of a layer that decoding (decode.c) shares with model_forward. */

/* Buffers of the layer tail; the LN caches may be NULL (inference). */
typedef struct {
    float *h1, *ffin, *a, *tmp;
    float *ln1_xhat, *ln1_rstd, *ln2_xhat, *ln2_rstd;
    int few_rows; /* one token per stream (decoding): products through linear_forward_few */
    uint16_t *vecb, *ffinb, *ab; /* bf16 twins of vec, ffin, a (layer_cache), or NULL */
    int infer;    /* inference (no backward: the activations need not be kept) */
    /* decoding's own products (decode.c: a quantized model's stored matrices, bf16 weights
     * through the matrix units), or NULL: y [rows, out] = x W^T + bias of layer l's matrix
     * `which` (LIN_O, LIN_FF0, LIN_FF3) */
    void (*lin)(void *ctx, int l, int which, float *y, const float *x, const float *bias,
                int rows);
    void *lin_ctx;
} layer_tail_bufs;
enum { LIN_QKV, LIN_O, LIN_FF0, LIN_FF3, LIN_N };

/* Everything of layer l after the attention, for rows = B*Lq rows of B streams:
 *   post: h1 = LN_attn(x + drop(vec @ Wo^T));  out = LN_ff(h1 + drop(FF(h1)))
 *   pre:  h1 = x + drop(vec @ Wo^T);           out = h1 + drop(FF(LN_ff(h1)))
 * p is the dropout probability (0 in inference), key the segment's dropout key, base_row
 * the global index of the first row (b_offset * Lq) so a slice draws the whole's masks. */
void layer_tail_forward(const model_config *c, const layer_tensors *L, int l, int rows,
                        const float *x, const float *vec, float *out, const layer_tail_bufs *t,
                        float p, uint64_t key, size_t base_row);

/* h [rows, d] = E[tok] sqrt(d) (adaptive: the adaptive input, with the buffers ws), then the
 * scheme's absolute positions (absolute: segment positions 0..Lq-1 of each of B streams, plus
 * pos_offset). */
void model_embed(const model *mdl, const pos_ops *ops, pos_acts *pa, float *h,
                 const txl_tok *tok, int B, int Lq, int m, long pos_offset, const adapt_ws *ws);

#endif

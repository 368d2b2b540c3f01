/* attention.h: multi-head attention scores, causal softmax and weighted values for every
 * positional scheme (doc/design.md, "The model"), forward and backward, per (batch, head).
 *
 * Shapes (doc/design.md notation; klen = m + Lq, m = current memory length):
 *   q    [B, Lq, H*dh]     queries of the segment rows (head h = columns h*dh..h*dh+dh-1)
 *   kv   [B, klen, 2*H*dh] keys (first H*dh columns) then values, rows [mem; segment]
 *   prob [B, H, Lq, klen]  softmax probabilities (before dropatt), cached for backward;
 *                          masked entries (j > m+i) are 0. NULL in inference (dropatt must
 *                          then be 0): each (b, h) plane lives in scratch only.
 *   vec  [B, Lq, H*dh]     sum_j a_ij v_j per head, heads concatenated
 * Score of query i and key j (delta = m+i-j >= 0 visible, else masked):
 *   s_ij = scale * (q_i + u)·k_j                          content (+ global content bias)
 *        + scale * (q_i + v)·rk[Lq-1-i+j]                 xl position terms (when rk)
 *        + dist_bias[h][delta]                            mlp / alibi / t5 bias (when dist_bias)
 *        + score_bias(b, h, i, j)                         hier / fire bias (when score_bias)
 * xl computes the position term as one GEMM per (b, h), BDraw = (q+v) @ rk_h^T [Lq, klen],
 * and reads BD[i][j] = BDraw[i][j+Lq-1-i]: never a (B,H,Lq,klen,dh) tensor.
 * Rope rotates q and k before these kernels and needs nothing here.
 * Gradient rule: dq, dkv are overwritten; drk, du, dv, d_dist_bias are added to (+=). */
#ifndef TXL_ATTENTION_H
#define TXL_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

/* A bias that depends on more than the distance (the hierarchical bias: on the text's
 * coordinates): add() adds to rows i0..i1-1 of the score plane of (b, h) (S points at row
 * i0, row stride ldS) the bias of query m+i and keys 0..m+i; grad() adds the
 * contributions of dS [Lq, ldS] of (b, h) into `partial` (grad_floats floats). The
 * backward gives each thread its own zeroed partial from `partials` [threads][grad_floats]
 * and adds them, in thread order, into d_out. */
typedef struct attn_bias_fn {
    void (*add)(const struct attn_bias_fn *f, float *S, int ldS, int b, int h, int i0, int i1,
                int m);
    void (*grad)(const struct attn_bias_fn *f, const float *dS, int ldS, int b, int h, int Lq,
                 int m, float *partial);
    size_t grad_floats;
    float *partials;        /* [threads][grad_floats] scratch of the backward */
    float *d_out;           /* [grad_floats] (+=) */
} attn_bias_fn;

#define FUSED_RB_MAX 64

typedef struct {
    int B, H, dh, Lq, m;
    float scale;            /* 1/sqrt(dh) */
    float dropatt;          /* dropout on the probabilities (training only; 0 = off) */
    uint64_t drop_key;      /* counter-based mask key for dropatt */
    size_t b_offset;        /* global index of stream 0 (dropatt masks by global stream) */
    const float *u, *v;     /* [H, dh] xl biases, or NULL */
    unsigned char no_q_content, no_q_position; /* xl term ablations: drop q from the content
                               term (q+u)·k or from the position term (q+v)·rk */
    const float *rk;        /* [klen, H*dh] xl projected positions, or NULL */
    const float *dist_bias; /* [H, bias_ld] bias by distance delta = 0..klen-1, or NULL */
    int bias_ld;            /* row stride of dist_bias (0 = klen) */
    const attn_bias_fn *score_bias; /* a text-dependent bias, or NULL */
    size_t kv_bstride;      /* floats from one stream's kv rows to the next (0 = klen*2*H*dh):
                               decoding reads each stream's keys from a longer window */
    const uint16_t *kvh;    /* the AMX kernel's forward only: kv in bf16 (a bf16 key cache's
                               window, kv_cache.h; the kv argument is then NULL), or NULL */
    int threads;            /* threads the scratch was sized for (attn_scratch_floats) */
    int row_block;          /* query rows per GEMM block (0 = 64; fused: 0 = 32, at most
                               FUSED_RB_MAX): each block computes only the keys its rows see */
    unsigned char fused;    /* 1: attn_fused.h's kernel (txl's own tiles), 0: OpenBLAS */
    unsigned char amx;      /* with fused: its bf16 twin on AMX tiles (attn_amx.h) */
    int same_len;           /* inference (txl eval --same-length): query i sees at most
                               same_len keys, its own included, keys max(0, m+i+1-same_len)
                               .. m+i (Dai et al.'s evaluation mask); 0: keys 0..m+i. A
                               lower bound of each row's visible range, nothing else: the
                               forward (both kernels) and attn_term_stats only (training
                               has none) */
    /* attn_decode only: where each head's cached rows are (0 = the layout of kv and rk
     * above, heads as column blocks of a row). Decoding keeps each head's keys, values and
     * xl positions as contiguous [rows, dh] blocks, which one-row products stream through. */
    size_t kv_hstride;      /* floats from head h's keys to head h+1's (0 = dh) */
    size_t v_offset;        /* floats from a head's keys to its values (0 = H*dh) */
    int kv_row;             /* floats from key (value) j to j+1 (0 = 2*H*dh) */
    size_t rk_hstride;      /* xl: floats from head h's position rows to h+1's (0 = dh) */
    int rk_row;             /* xl: floats from position row p to p+1 (0 = H*dh) */
    /* attn_decode with a bf16 cache (decode.h): the keys and values (kv16), and xl's position
     * rows (rk16, with rk still set), are read from these bf16 arrays of the same layout
     * instead (kv_row and rk_row then dh); NULL: the fp32 ones. */
    const uint16_t *kv16, *rk16;
} attn_args;

/* Floats of scratch a call needs: the (b, h) pairs run in parallel, each thread with its
 * own working planes and partial gradient sums. */
double attn_scratch_floats(int Lq, int klen, int dh, int H, int threads);

void attn_forward(float *prob, float *vec, const float *q, const float *kv,
                  const attn_args *a, float *scratch);

/* One-token decoding: attn_forward for Lq = 1 (each of the B streams has one query, row m,
 * seeing keys 0..m), in inference, with the layout fields above. Per head, xl's position
 * term of all B streams is one product against the shared position rows; then per stream
 * the content term, the biases, the softmax and the weighted values, each a one-row
 * product (gemm() turns it into a matrix-vector product: the cached rows are read once, not
 * packed; from a bf16 cache, qgemm.h's products). Same scores as attn_forward, summed in
 * another order (a bf16 cache: of its rounded keys, values and positions). */
size_t attn_decode_scratch_floats(int B, int klen, int dh, int threads);
void attn_decode(float *vec, const float *q, const float *kv, const attn_args *a,
                 float *scratch);

void attn_backward(float *dq, float *dkv, float *drk, float *du, float *dv, float *d_dist_bias,
                   const float *dvec, const float *prob, const float *q, const float *kv,
                   const attn_args *a, float *scratch);

/* Diagnostics (doc/design.md, "The model", `txl eval --term-stats`): sums and sums of squares, over
 * every visible (b, h, i, j), of the score's terms, each including the 1/sqrt(dh) scale:
 *   [0] content q_i.k_j       [1] content-position: xl q_i.rk[p]; the scheme's bias
 *   [2] global content u.k_j  [3] global position v.rk[p]
 * acc[t][0] += x, acc[t][1] += x^2; *count += visible entries. Plain loops: for a few
 * segments of evaluation, not for training. */
void attn_term_stats(double acc[4][2], double *count, const float *q, const float *kv,
                     const attn_args *a);

#endif

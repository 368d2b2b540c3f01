/* decode.h: one-token-at-a-time decoding of B streams with cached keys and values
 * (doc/design.md, "Sampling").
 *
 * Feeding one token as a segment of length 1 through model_forward recomputes the key and
 * value projections of all M memory rows and (xl) the projected positions: O(M d^2) per
 * layer and token. The memory rows never change once written, so their k and v are
 * computed once and kept in a window per layer and stream; the scheme's position tables
 * (xl's rk, the mlp/alibi/t5 bias) are built once for every distance up to M (pos.h:
 * decode_tables; fire's row of a query past its threshold, once per step). A step then runs a layer of model_forward for a 1-token segment: the
 * same q/kv projection, attn_decode (attn_decode.h: the attention kernel's scores for one
 * query per stream, one pass over each stream's cached rows) over the cached rows, and the same layer_tail_forward (forward.c); it
 * costs O(M*H*dh + d^2) per layer and token, whatever the amount of text generated, and
 * computes what model_forward computes (up to float rounding; tested).
 *
 * One token is memory-bound: each weight and each cached row is read once per token (B
 * streams share the weight reads and xl's position rows). So each head's keys, values and
 * (xl) position rows are contiguous [rows, dh] blocks that attn_decode's dot products
 * stream through, rather than column slices of wider rows.
 *
 * The windows hold 2(M+1) rows: a step appends a row and, once M rows are held, moves the
 * window start by one; every ~M steps the rows are moved back to the front (amortised O(1)
 * per step, no shifting of the whole cache per token). The layer inputs (the model's
 * memory) are kept the same way and copied out by decode_sync_mem.
 *
 * Rope rotates each cached key by the absolute position of its token and the query by its
 * own: only the difference enters the score, as in model_forward.
 *
 * A bf16 cache (DECODE_CACHE_BF16) keeps the keys, the values and xl's position rows
 * rounded to bfloat16 (round to nearest even): half the bytes a token reads from them
 * (at mem_len 1024 they outweigh S's weights), the products over them qgemm.h's (each term
 * an exact bf16 value times an fp32 query or probability, summed in fp32). The layer inputs
 * (the memory, decode_sync_mem) stay fp32.
 *
 * A q8 cache (DECODE_CACHE_Q8) keeps each head's row of keys and of values as dh int8 values
 * and one fp32 scale: amax / 127, amax the row's largest magnitude, the values rounded to
 * nearest (a row of zeros: scale 0; a row holding a NaN or an infinity: scale NaN, so the
 * scores it enters are NaN, as in fp32). A quarter of fp32's bytes (plus 4 a row), half of
 * bf16's: at long memories many streams are bound by reading their caches (doc/
 * performance.md). A score is the sum of the query times the integers, then times the
 * key's scale; the weighted values take each probability times its row's scale. xl's
 * position rows (shared by the streams) stay bf16 as in a bf16 cache. The error is up to
 * half a step of amax / 127 in each cached value, about 16 times bf16's; its cost in bits
 * per byte is measured by bench/quant.sh (bench/cache_quality.c).
 *
 * Many streams under bf16 precision (gemm_set_precision(GEMM_BF16)): from DECODE_BF16W_ROWS
 * streams a step's products run on the CPU's matrix units (gemm_bf16w.h: the weights
 * rounded to bf16 and reordered once, at decode_init; the activations rounded at each
 * step), which for S's 16 products of 32 rows measured 0.50 ms against 2.8 ms for q8's and
 * 2.9 for fp32's own kernels, and as fast as those at 4 rows (all bound by the weight
 * reads there). */
#ifndef TXL_DECODE_H
#define TXL_DECODE_H

#include <stdint.h>

#include "../common/err.h"
#include "model.h"
#include "quant.h"

/* DECODE_CACHE_ROUNDED (tests): an fp32 cache of the bf16 cache's values, rounded to bf16
 * and kept as floats: the bf16 cache's numbers on the fp32 path, which test_decode holds
 * the bf16 cache to. */
typedef enum {
    DECODE_CACHE_FP32,
    DECODE_CACHE_BF16,
    DECODE_CACHE_ROUNDED,
    DECODE_CACHE_Q8,
    DECODE_CACHE_Q8R /* (tests) an fp32 cache of the q8 cache's values, q times the scale, and
                        the bf16 cache's position rows as floats */
} decode_cache;

#define DECODE_BF16W_ROWS 4

typedef struct bf16w bf16w;

typedef struct {
    const pos_ops *pos;
    const model *mdl; /* decode_init's */
    bf16w **w16;      /* [N][LIN_N] bf16 products on the matrix units, or NULL */
    bf16w *out16;     /* the output layer's (full softmax), or NULL */
    int n_layer, B, M, d, H, dh, V;
    int cap;          /* rows of each window: 2 (M + 1) */
    int m, start;     /* memory rows held, first row of the window */
    long next_pos;    /* absolute position of the next token (rope) */
    long pos_offset;  /* added to absolute positions (eval-style offsets; 0 as trained) */
    size_t tab_floats;/* per layer */
    decode_cache cache;
    float *kv;        /* [N][B][H][2][cap][dh] each head's keys, then its values (rope:
                         keys rotated); NULL with a bf16 or q8 cache */
    uint16_t *kv16;   /* a bf16 cache: the same in bf16, else NULL */
    int8_t *kv8;      /* a q8 cache: the same in int8, else NULL */
    float *kv8s;      /* a q8 cache: [N][B][H][2][cap] each row's scale, else NULL */
    float *xin;       /* [N][B][cap][d] layer inputs: the memory */
    int32_t *coords;  /* [B][cap][TXL_N_COORDS] text coordinates (needs_coords), or NULL */
    float *tables;    /* [N][tab_floats] the scheme's decode tables */
    uint16_t *tables16; /* a bf16 or q8 cache: the same in bf16 (xl's position rows are read from
                           it), else NULL */
    float *tables_r;  /* DECODE_CACHE_ROUNDED, _Q8R: the same rounded to bf16, else NULL */
    float *rkT;       /* fp32 (or rounded) tables: [N][tab_floats] xl's position rows of
                         each head transposed (attn_args.rkT), made at a layer's first step
                         after decode_prime; else NULL */
    uint16_t *rkT16;  /* bf16 or q8 cache: the same from tables16, bf16 (16 more at the end:
                         attn_args.rkT16), else NULL */
    int *rkT_ok;      /* [N] whether layer l's rkT (rkT16) is made */
    float *x, *xn, *qkv, *q, *vec, *logits, *attn_scratch, *scratch;
    uint16_t *xh;     /* [B][max(d, H dh, d_inner)] the bf16 products' rounded rows */
    float *prime_x, *prime_kv; /* decode_prime's rows: layer norm, then k and v */
    layer_qmats *lq;  /* [N] a quantized model's stored matrices (quant.h), read by the
                         layer products (qgemm.h); all NULL for an fp32 model */
    const qmat *out_q;/* the output layer's (full softmax), or NULL */
    layer_tail_bufs tail;
    adapt_ws ad;      /* the adaptive softmax's buffers (adaptive.h), when in use */
    pos_acts pos_acts;
    _Alignas(16) unsigned char bias_state[POS_BIAS_STATE]; /* the scheme's score bias */
    int attn_threads;
    float *buf;
} decode_state;

/* Plans the caches for B streams and memory length M, of type `cache`. */
int decode_init(decode_state *s, const model *mdl, int B, int M, decode_cache cache,
                txl_err *e);
/* The floats decode_init allocates for the same arguments (without allocating them). */
size_t decode_plan_floats(const model_config *c, int B, int M, decode_cache cache);
/* The bulk of it, the caches of layout()'s kv (or kv16) and xin (every layer's keys and
 * values and its inputs, 2 (M + 1) rows a stream), in floats' worth and in double: a size
 * to hold against the machine before it is planned in size_t, where it could overflow. */
double decode_cache_floats(const model_config *c, int B, int M, decode_cache cache);
void decode_free(decode_state *s);
/* Builds the position tables from the weights and the caches from the memory as it stands
 * (mem->B == B, e.g. after a prompt ran through model_forward); `pos` = tokens consumed so
 * far. Call again whenever the weights or the memory change from outside. (Under bf16
 * precision with DECODE_BF16W_ROWS streams or more, decode_init took the weights' bf16
 * copies: after changing the weights, decode_init again.) */
void decode_prime(decode_state *s, const model *mdl, const model_mem *mem, long pos);
/* Feeds one token per stream (tok[B]) with its text coordinates (coords [B][TXL_N_COORDS],
 * required by schemes that read them, else may be NULL); the logits of the next tokens are
 * decode_logits. */
void decode_step(decode_state *s, const model *mdl, const txl_tok *tok, const int32_t *coords);
/* [B, V]: stream b's next-token scores at b * V (model_logprobs: the full softmax's
 * logits, the adaptive softmax's log-probabilities). */
static inline const float *decode_logits(const decode_state *s) { return s->logits; }
/* Writes the memory as decoding left it into mem (B streams, M rows), e.g. to continue
 * with model_forward. */
void decode_sync_mem(const decode_state *s, model_mem *mem);

#endif

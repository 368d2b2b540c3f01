/* attn_args.h: the arguments of the attention kernels (attention.h's per-(b, h) work and its
 * two twins, attn_fused.h and attn_amx.h): below all three, so that attention.c can call the
 * kernels whose headers describe their arguments without a circle. Shapes and the score
 * formula: attention.h. */
#ifndef TXL_ATTN_ARGS_H
#define TXL_ATTN_ARGS_H

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
     * xl positions as contiguous [rows, dh] blocks, which attn_decode streams through. */
    size_t kv_hstride;      /* floats from head h's keys to head h+1's (0 = dh) */
    size_t v_offset;        /* floats from a head's keys to its values (0 = H*dh) */
    int kv_row;             /* floats from key (value) j to j+1 (0 = 2*H*dh) */
    size_t rk_hstride;      /* xl: floats from head h's position rows to h+1's (0 = dh) */
    int rk_row;             /* xl: floats from position row p to p+1 (0 = H*dh) */
    /* attn_decode with a bf16 cache (decode.h): the keys and values (kv16), and xl's position
     * rows (rk16, with rk still set), are read from these bf16 arrays of the same layout
     * instead (kv_row and rk_row then dh); NULL: the fp32 ones. */
    const uint16_t *kv16, *rk16;
    /* attn_decode with a q8 cache (decode.h): the keys and values as int8 (kv8, the same
     * layout as kv16, in elements), each row's scale at kv8s[b kv8s_bstride + h kv8s_hstride
     * + j] for the keys and kv8s_voff on for the values; NULL: kv16's or the fp32 ones. */
    const int8_t *kv8;
    const float *kv8s;
    size_t kv8s_bstride, kv8s_hstride, kv8s_voff;
    /* attn_decode, fp32 position rows: the same rows transposed, head h's element (c, j) at
     * rkT[h rkT_hstride + c rkT_ld + j] (a table's, made once: each score then a chain over
     * c, no lanes to add, and a row of it serves all the streams), or NULL: rk's */
    const float *rkT;
    /* the same in bf16 (a bf16 or q8 cache's rows), or NULL; read up to 16 elements past a
     * row's last key */
    const uint16_t *rkT16;
    size_t rkT_hstride;
    int rkT_ld;
} attn_args;

#endif

/* kv_cache.h: inference's cache of the memory rows' keys and values (kv_cache.c). model_forward
 * (forward.c) keeps it in step with the memory; evaluation, the probes and decoding own one. */
#ifndef TXL_KV_CACHE_H
#define TXL_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* Inference: the keys and values of a memory's rows, kept from the segment that projected
 * them (the same rows times the same weights; a row may round its last bit differently in a
 * GEMM of other rows), so a segment projects only its own rows. Per layer and stream a
 * window of cap rows, the memory's at [start, start + m). It mirrors one model_mem:
 * model_forward uses it only for the memory and generation it last advanced (buffer, gen
 * and row count; an empty memory always matches), else projects the whole window and
 * refills it. Rows copied into that memory by hand need kv_cache_invalidate. Schemes with
 * window_keys (rope) get no cache (buf NULL), nor does a memory of 0 rows, nor a cache that
 * could not be allocated (the forward then projects every window whole, as without one).
 * In bf16 precision with the AMX attention (attn_amx.h), which rounds the keys and values
 * to bf16 anyway, the cache holds their bf16 roundings (hbuf, half the bytes; buf NULL):
 * the same values, so the same results. */
struct kv_cache {
    float *buf;              /* [n_layer][B][cap][row], or NULL */
    uint16_t *hbuf;          /* the same in bf16 (see above), or NULL */
    int n_layer, B, M, Lq_max, cap, row; /* cap = M + 2 Lq_max, row = 2 H dh */
    int start, m;            /* the memory's rows in each window; m = -1: invalid */
    const float *of;         /* the memory buffer it mirrors */
    uint64_t gen;            /* and that memory's generation */
};

/* For a memory of M rows, B streams and segments up to Lq_max rows. Never fails: out of
 * memory, it keeps no cache. */
void kv_cache_init(kv_cache *k, const model_config *cfg, int B, int M, int Lq_max);
void kv_cache_invalidate(kv_cache *k);
void kv_cache_free(kv_cache *k);
/* The floats of the keys and values of `rows` rows of B streams in every layer: what a
 * cache holds (kv_cache_plan_floats) and what decoding reads per step (api/decode.c). */
size_t kv_rows_floats(const model_config *cfg, int B, int rows);
/* The floats kv_cache_init would allocate for the same arguments (0: no cache). */
size_t kv_cache_plan_floats(const model_config *cfg, int B, int M, int Lq_max);
/* For the forward (forward.c), not the rest of txl: row 0 of stream b's window of layer l
 * (fp32, bf16); rows [row, row + rows) of stream b's window of layer l written from src
 * (fp32 rows, rounded to bf16 in a bf16 cache); whether k holds the keys of mem's rows;
 * advancing after a segment. */
float *kv_window(const kv_cache *k, int l, int b);
uint16_t *kv_window_h(const kv_cache *k, int l, int b);
void kv_cache_put(kv_cache *k, int l, int b, int row, const float *src, int rows);
int kv_cache_valid(const kv_cache *k, const model_mem *mem, int Lq);
void kv_cache_advance(kv_cache *k, const model_mem *mem, int klen);
/* Whether it holds a buffer (fp32 or bf16) */
static inline int kv_cache_on(const kv_cache *k) { return k && (k->buf || k->hbuf); }
/* The floats' worth of bytes it holds (0 without a buffer). */
static inline size_t kv_cache_floats(const kv_cache *k)
{
    size_t n = (size_t)k->n_layer * k->B * k->cap * k->row;
    return k->buf ? n : k->hbuf ? (n + 1) / 2 : 0;
}

#endif

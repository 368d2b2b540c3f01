/* kv_cache.c: inference's keys and values of the memory rows (kv_cache.h), kept from the
 * segment that projected them so that a segment projects only its own rows. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"
#include "model_impl.h"

size_t kv_rows_floats(const model_config *cfg, int B, int rows)
{
    return (size_t)cfg->n_layer * B * rows * 2 * cfg->n_head * cfg->d_head;
}

size_t kv_cache_plan_floats(const model_config *cfg, int B, int M, int Lq_max)
{
    if (M <= 0 || pos_get(cfg->pos)->window_keys)
        return 0;
    return kv_rows_floats(cfg, B, M + 2 * Lq_max);
}

void kv_cache_init(kv_cache *k, const model_config *cfg, int B, int M, int Lq_max)
{
    memset(k, 0, sizeof *k);
    k->m = -1;
    size_t n = kv_cache_plan_floats(cfg, B, M, Lq_max);
    if (!n)
        return;
    k->n_layer = cfg->n_layer;
    k->B = B;
    k->M = M;
    k->Lq_max = Lq_max;
    k->cap = M + 2 * Lq_max;
    k->row = 2 * cfg->n_head * cfg->d_head;
    k->buf = aligned_alloc(64, align_up(n) * sizeof(float)); /* NULL: none */
}

void kv_cache_invalidate(kv_cache *k) { k->m = -1; }

void kv_cache_free(kv_cache *k)
{
    free(k->buf);
    memset(k, 0, sizeof *k);
    k->m = -1;
}

/* Row 0 of stream b's window of layer l. */
float *kv_window(const kv_cache *k, int l, int b)
{
    return k->buf + ((size_t)l * k->B + b) * k->cap * k->row;
}

/* Whether k holds the keys of mem's rows (an empty memory: nothing to hold). */
int kv_cache_valid(const kv_cache *k, const model_mem *mem, int Lq)
{
    if (!k || !k->buf)
        return 0;
    assert(k->B == mem->B && k->M == mem->M && Lq <= k->Lq_max);
    return mem->m == 0 || (k->m == mem->m && k->of == mem->buf && k->gen == mem->gen);
}

/* Refill layer l from a window projected whole (kv [B, klen, row]): its last rows that the
 * memory keeps, at the front. */
void kv_cache_fill(kv_cache *k, int l, const float *kv, int klen)
{
    int keep = klen < k->M ? klen : k->M;
#pragma omp parallel for schedule(static) if ((size_t)k->B * keep * k->row > 65536)
    for (int b = 0; b < k->B; b++)
        memcpy(kv_window(k, l, b), kv + ((size_t)b * klen + (klen - keep)) * k->row,
               (size_t)keep * k->row * sizeof(float));
}

/* After a segment of klen rows ending at start + klen: the memory is its last rows. When
 * the next segment would not fit behind them, they move to the front of every window. */
void kv_cache_advance(kv_cache *k, const model_mem *mem, int klen, int filled)
{
    int keep = klen < k->M ? klen : k->M;
    int s = filled ? 0 : k->start + klen - keep;
    if (s + keep + k->Lq_max > k->cap) {
        int n = k->n_layer * k->B;
#pragma omp parallel for schedule(static) if ((size_t)n * keep * k->row > 65536)
        for (int i = 0; i < n; i++) {
            float *w = kv_window(k, i / k->B, i % k->B);
            memmove(w, w + (size_t)s * k->row, (size_t)keep * k->row * sizeof(float));
        }
        s = 0;
    }
    k->start = s;
    k->m = keep;
    k->of = mem->buf;
    k->gen = mem->gen;
}

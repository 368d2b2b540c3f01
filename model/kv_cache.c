/* kv_cache.c: inference's keys and values of the memory rows (kv_cache.h), kept from the
 * segment that projected them so that a segment projects only its own rows. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "../common/sys.h"
#include "attn_amx.h"
#include "gemm.h"
#include "gemm_bf16.h"
#include "kv_cache.h"
#include "model_impl.h"

/* bf16 windows: the AMX attention reads the keys and values in bf16 */
static int cache_bf16(void) { return gemm_get_precision() == GEMM_BF16 && amx_attn_available(); }

size_t kv_rows_floats(const model_config *cfg, int B, int rows)
{
    return (size_t)cfg->n_layer * B * rows * 2 * cfg->n_head * cfg->d_head;
}

size_t kv_cache_plan_floats(const model_config *cfg, int B, int M, int Lq_max)
{
    if (M <= 0 || pos_get(cfg->pos)->window_keys)
        return 0;
    size_t n = kv_rows_floats(cfg, B, M + 2 * Lq_max);
    return cache_bf16() ? (n + 1) / 2 : n;
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
    if (cache_bf16()) /* NULL: none */
        k->hbuf = sys_alloc(align_up(n) * sizeof(float));
    else
        k->buf = sys_alloc(align_up(n) * sizeof(float));
}

void kv_cache_invalidate(kv_cache *k) { k->m = -1; }

void kv_cache_free(kv_cache *k)
{
    free(k->buf);
    free(k->hbuf);
    memset(k, 0, sizeof *k);
    k->m = -1;
}

/* Row 0 of stream b's window of layer l (fp32; bf16). */
float *kv_window(const kv_cache *k, int l, int b)
{
    return k->buf + ((size_t)l * k->B + b) * k->cap * k->row;
}

uint16_t *kv_window_h(const kv_cache *k, int l, int b)
{
    return k->hbuf + ((size_t)l * k->B + b) * k->cap * k->row;
}

void kv_cache_put(kv_cache *k, int l, int b, int row, const float *src, int rows)
{
    size_t n = (size_t)rows * k->row;
    if (k->hbuf)
        gemm_bf16_round(kv_window_h(k, l, b) + (size_t)row * k->row, src, 1, (int)n, (int)n);
    else
        memcpy(kv_window(k, l, b) + (size_t)row * k->row, src, n * sizeof(float));
}

/* Whether k holds the keys of mem's rows (an empty memory: nothing to hold). */
int kv_cache_valid(const kv_cache *k, const model_mem *mem, int Lq)
{
    if (!kv_cache_on(k))
        return 0;
    assert(k->B == mem->B && k->M == mem->M && Lq <= k->Lq_max);
    return mem->m == 0 || (k->m == mem->m && k->of == mem->buf && k->gen == mem->gen);
}

/* After a segment of klen rows ending at start + klen: the memory is its last rows. When
 * the next segment would not fit behind them, they move to the front of every window. */
void kv_cache_advance(kv_cache *k, const model_mem *mem, int klen)
{
    int keep = klen < k->M ? klen : k->M;
    int s = k->start + klen - keep;
    if (s + keep + k->Lq_max > k->cap) {
        int n = k->n_layer * k->B;
#pragma omp parallel for schedule(static) if ((size_t)n * keep * k->row > 65536)
        for (int i = 0; i < n; i++) {
            size_t row = (size_t)k->row;
            if (k->hbuf) {
                uint16_t *w = kv_window_h(k, i / k->B, i % k->B);
                memmove(w, w + (size_t)s * row, (size_t)keep * row * sizeof *w);
            } else {
                float *w = kv_window(k, i / k->B, i % k->B);
                memmove(w, w + (size_t)s * row, (size_t)keep * row * sizeof *w);
            }
        }
        s = 0;
    }
    k->start = s;
    k->m = keep;
    k->of = mem->buf;
    k->gen = mem->gen;
}

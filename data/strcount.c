/* strcount.c: see strcount.h (open addressing over a table at most half full). */
#include "strcount.h"

#include <stdlib.h>
#include <string.h>

#include "vocab_impl.h"

static int rehash(strcount *c)
{
    size_t sz = c->mask ? 2 * (c->mask + 1) : 1 << 16;
    uint32_t *ns = calloc(sz, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t k = 0; k < c->n; k++) {
        size_t i = (size_t)c->w[k].hash & (sz - 1);
        while (ns[i])
            i = (i + 1) & (sz - 1);
        ns[i] = (uint32_t)(k + 1);
    }
    free(c->slot);
    c->slot = ns;
    c->mask = sz - 1;
    return 0;
}

int strcount_init(strcount *c)
{
    memset(c, 0, sizeof *c);
    return rehash(c);
}

static int add_new(strcount *c, const uint8_t *p, size_t n, uint64_t h, size_t i, long k)
{
    if (c->n >= UINT32_MAX - 2)
        return -1;
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 1 << 14;
        strcount_entry *nw = realloc(c->w, nc * sizeof *nw);
        if (!nw)
            return -1;
        c->w = nw;
        c->cap = nc;
    }
    if (c->arena_n + n > c->arena_cap) {
        size_t nc = c->arena_cap ? 2 * c->arena_cap : 1 << 20;
        while (nc < c->arena_n + n)
            nc *= 2;
        uint8_t *na = realloc(c->arena, nc);
        if (!na)
            return -1;
        c->arena = na;
        c->arena_cap = nc;
    }
    memcpy(c->arena + c->arena_n, p, n);
    c->w[c->n] = (strcount_entry){h, c->arena_n, n, k};
    c->arena_n += n;
    c->slot[i] = (uint32_t)(++c->n);
    return c->n * 2 > c->mask + 1 ? rehash(c) : 0;
}

int strcount_add(strcount *c, const uint8_t *p, size_t n, long k)
{
    uint64_t h = vocab_hash(p, n);
    size_t i = (size_t)h & c->mask;
    for (;; i = (i + 1) & c->mask) {
        uint32_t s = c->slot[i];
        if (!s)
            return add_new(c, p, n, h, i, k);
        strcount_entry *w = &c->w[s - 1];
        if (w->hash == h && w->len == n && memcmp(c->arena + w->off, p, n) == 0) {
            w->count += k;
            return 0;
        }
    }
}

long strcount_find(const strcount *c, const uint8_t *p, size_t n)
{
    uint64_t h = vocab_hash(p, n);
    for (size_t i = (size_t)h & c->mask;; i = (i + 1) & c->mask) {
        uint32_t s = c->slot[i];
        if (!s)
            return -1;
        const strcount_entry *w = &c->w[s - 1];
        if (w->hash == h && w->len == n && memcmp(c->arena + w->off, p, n) == 0)
            return (long)s - 1;
    }
}

void strcount_free(strcount *c)
{
    free(c->w);
    free(c->slot);
    free(c->arena);
    memset(c, 0, sizeof *c);
}

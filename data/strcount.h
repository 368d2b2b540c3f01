/* strcount.h: counts of byte strings (the words or pieces of a corpus, for building a
 * vocabulary), kept in the order they were first seen. */
#ifndef TXL_STRCOUNT_H
#define TXL_STRCOUNT_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t hash;
    size_t off, len;       /* its bytes: arena[off .. off + len) */
    long count;
} strcount_entry;

typedef struct {
    strcount_entry *w;     /* in first-seen order */
    size_t n, cap;
    uint32_t *slot;        /* index + 1; 0: empty */
    size_t mask;
    uint8_t *arena;
    size_t arena_n, arena_cap;
} strcount;

/* 0, or -1 when out of memory (then strcount_free). */
int strcount_init(strcount *c);
/* Adds k to the count of p[0 .. n) (a new string starts at k). -1 when out of memory. */
int strcount_add(strcount *c, const uint8_t *p, size_t n, long k);
/* The index of p[0 .. n), or -1 when it was never added. */
long strcount_find(const strcount *c, const uint8_t *p, size_t n);
static inline const uint8_t *strcount_bytes(const strcount *c, size_t i)
{
    return c->arena + c->w[i].off;
}
void strcount_free(strcount *c);

#endif

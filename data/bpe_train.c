/* bpe_train.c: txl's own BPE merges learned from corpora (vocab_build(VOCAB_BPE)).
 *
 * The texts are cut into pieces as the encoder cuts them (pretok.h) and the distinct pieces
 * counted; each starts as its bytes (tokens 0..255 are the bytes in order). Then, until the
 * vocabulary has max_size tokens or no pair is left: the adjacent pair with the highest
 * count (each piece's pairs weighted by the piece's count) is merged everywhere into a new
 * token, id 256, 257, ... Ties go to the pair whose left token has the smaller id, then the
 * right. A pair whose bytes joined are already a token is never merged (so every token is
 * made by one merge, as in GPT-2's files). Pair counts are updated incrementally: each pair
 * lists the pieces it occurs in, a merge rewrites only those and adds the changes to the
 * counts, and a heap of (count, pair) entries, checked against the count when popped,
 * gives the next pair (an entry whose count fell is pushed back with the new count; a count
 * that rose was pushed when it rose). tests/ref/bpe_train.py is the naive trainer (counting
 * every pair again at each merge) that the merges are tested against. */
#include "vocab_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pretok.h"
#include "strcount.h"

typedef struct {
    uint64_t key;            /* a << 32 | b */
    long count;
    uint32_t *where;         /* pieces it occurs (or occurred) in, without repeats in a row */
    uint32_t n_where, cap_where;
    int banned;              /* its bytes joined are a token already */
} tr_pair;

typedef struct {
    long count;
    uint32_t a, b;
} tr_entry;

typedef struct {
    uint64_t key;
    long d;
} tr_delta;

typedef struct {
    /* the distinct pieces as symbols */
    txl_tok *sym;
    size_t *woff;
    uint32_t *wlen;
    long *wcount;
    size_t n_words;
    /* pairs: a hash table of indexes into p */
    tr_pair *p;
    size_t np, cap_p;
    uint32_t *slot;
    size_t mask;
    /* the heap (a max-heap by count, then smaller a, then smaller b) */
    tr_entry *h;
    size_t hn, cap_h;
    /* tokens: bytes, and the set of their byte strings */
    uint8_t *tb;
    size_t *toff, n_tok, cap_tok, tb_n, tb_cap;
    strcount tokset;
    vocab_merge *merges;
    size_t n_merges;
    tr_delta *dl;            /* scratch for one piece's changes */
    size_t cap_dl;
    int oom;
} trainer;

static void *grow_to(void *p, size_t *cap, size_t need, size_t size, int *oom)
{
    if (need <= *cap)
        return p;
    size_t nc = *cap ? *cap : 1024;
    while (nc < need)
        nc *= 2;
    void *np = realloc(p, nc * size);
    if (!np) {
        *oom = 1;
        return p;
    }
    *cap = nc;
    return np;
}

/* ---- Pairs and the heap ------------------------------------------------------------------ */

static int entry_before(const tr_entry *x, const tr_entry *y)
{
    if (x->count != y->count)
        return x->count > y->count;
    return x->a != y->a ? x->a < y->a : x->b < y->b;
}

static void heap_push(trainer *t, long count, uint64_t key)
{
    t->h = grow_to(t->h, &t->cap_h, t->hn + 1, sizeof *t->h, &t->oom);
    if (t->oom)
        return;
    tr_entry x = {count, (uint32_t)(key >> 32), (uint32_t)key};
    size_t i = t->hn++;
    while (i > 0 && entry_before(&x, &t->h[(i - 1) / 2])) {
        t->h[i] = t->h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->h[i] = x;
}

static tr_entry heap_pop(trainer *t)
{
    tr_entry top = t->h[0], x = t->h[--t->hn];
    size_t i = 0, n = t->hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && entry_before(&t->h[c + 1], &t->h[c]))
            c++;
        if (!entry_before(&t->h[c], &x))
            break;
        t->h[i] = t->h[c];
        i = c;
    }
    t->h[i] = x;
    return top;
}

static size_t pair_hash(uint64_t key)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 17);
}

static void pairs_rehash(trainer *t)
{
    size_t sz = t->mask ? 2 * (t->mask + 1) : 1 << 16;
    uint32_t *ns = calloc(sz, sizeof *ns);
    if (!ns) {
        t->oom = 1;
        return;
    }
    for (size_t k = 0; k < t->np; k++) {
        size_t i = pair_hash(t->p[k].key) & (sz - 1);
        while (ns[i])
            i = (i + 1) & (sz - 1);
        ns[i] = (uint32_t)(k + 1);
    }
    free(t->slot);
    t->slot = ns;
    t->mask = sz - 1;
}

/* The pair's index; a new pair when `create` (else -1 for an unknown one). */
static long pair_find(trainer *t, uint64_t key, int create)
{
    size_t i = pair_hash(key) & t->mask;
    for (;; i = (i + 1) & t->mask) {
        uint32_t s = t->slot[i];
        if (!s)
            break;
        if (t->p[s - 1].key == key)
            return (long)s - 1;
    }
    if (!create)
        return -1;
    t->p = grow_to(t->p, &t->cap_p, t->np + 1, sizeof *t->p, &t->oom);
    if (t->oom || t->np >= UINT32_MAX - 1)
        return t->oom = 1, -1;
    t->p[t->np] = (tr_pair){.key = key};
    t->slot[i] = (uint32_t)(++t->np);
    long k = (long)t->np - 1;
    if (t->np * 2 > t->mask + 1)
        pairs_rehash(t);
    return k;
}

static void pair_where(trainer *t, tr_pair *p, uint32_t w)
{
    if (p->n_where && p->where[p->n_where - 1] == w)
        return;
    size_t cap = p->cap_where;
    p->where = grow_to(p->where, &cap, (size_t)p->n_where + 1, sizeof *p->where, &t->oom);
    p->cap_where = (uint32_t)cap;
    if (!t->oom)
        p->where[p->n_where++] = w;
}

/* ---- Merging ------------------------------------------------------------------------------- */

static int by_key(const void *a, const void *b)
{
    uint64_t x = ((const tr_delta *)a)->key, y = ((const tr_delta *)b)->key;
    return x < y ? -1 : x > y;
}

/* Piece w with every (a, b) made `to`, its pairs' counts changed by what changed. */
static void merge_word(trainer *t, uint32_t w, txl_tok a, txl_tok b, txl_tok to)
{
    txl_tok *s = t->sym + t->woff[w];
    size_t n = t->wlen[w], j = 0, nd = 0;
    long c = t->wcount[w];
    size_t i = 0;
    while (i + 1 < n && !(s[i] == a && s[i + 1] == b))
        i++;
    if (i + 1 >= n)
        return; /* no longer there */
    t->dl = grow_to(t->dl, &t->cap_dl, 2 * n, sizeof *t->dl, &t->oom);
    if (t->oom)
        return;
    for (i = 0; i + 1 < n; i++)
        t->dl[nd++] = (tr_delta){(uint64_t)s[i] << 32 | s[i + 1], -c};
    for (i = 0; i < n; j++) {
        if (i + 1 < n && s[i] == a && s[i + 1] == b) {
            s[j] = to;
            i += 2;
        } else {
            s[j] = s[i++];
        }
    }
    t->wlen[w] = (uint32_t)j;
    for (i = 0; i + 1 < j; i++)
        t->dl[nd++] = (tr_delta){(uint64_t)s[i] << 32 | s[i + 1], c};
    qsort(t->dl, nd, sizeof *t->dl, by_key);
    for (i = 0; i < nd;) {
        uint64_t key = t->dl[i].key;
        long d = 0;
        for (; i < nd && t->dl[i].key == key; i++)
            d += t->dl[i].d;
        if (d == 0)
            continue;
        long k = pair_find(t, key, d > 0);
        if (k < 0)
            continue;
        tr_pair *p = &t->p[k];
        p->count += d;
        if (d > 0) {
            pair_where(t, p, w);
            if (!p->banned)
                heap_push(t, p->count, key);
        }
    }
}

static int add_token(trainer *t, const uint8_t *p, size_t n)
{
    t->toff = grow_to(t->toff, &t->cap_tok, t->n_tok + 2, sizeof *t->toff, &t->oom);
    t->tb = grow_to(t->tb, &t->tb_cap, t->tb_n + n, 1, &t->oom);
    if (t->oom || strcount_add(&t->tokset, p, n, 1))
        return t->oom = 1, -1;
    memcpy(t->tb + t->tb_n, p, n);
    t->toff[t->n_tok] = t->tb_n;
    t->tb_n += n;
    t->toff[++t->n_tok] = t->tb_n;
    return 0;
}

/* The best pair left: 1 with its key, 0 when none is. */
static int next_pair(trainer *t, uint64_t *key, uint8_t **joined, size_t *jn)
{
    while (t->hn && !t->oom) {
        tr_entry top = heap_pop(t);
        uint64_t k = (uint64_t)top.a << 32 | top.b;
        long i = pair_find(t, k, 0);
        tr_pair *p = i < 0 ? NULL : &t->p[i];
        if (!p || p->banned || p->count <= 0 || p->count > top.count)
            continue;
        if (p->count < top.count) {
            heap_push(t, p->count, k);
            continue;
        }
        size_t la = t->toff[top.a + 1] - t->toff[top.a], lb = t->toff[top.b + 1] - t->toff[top.b];
        *joined = malloc(la + lb);
        if (!*joined)
            return t->oom = 1, 0;
        memcpy(*joined, t->tb + t->toff[top.a], la);
        memcpy(*joined + la, t->tb + t->toff[top.b], lb);
        *jn = la + lb;
        if (strcount_find(&t->tokset, *joined, *jn) >= 0) {
            p->banned = 1;
            free(*joined);
            continue;
        }
        *key = k;
        return 1;
    }
    return 0;
}

static void train(trainer *t, size_t target, int progress)
{
    uint64_t key;
    uint8_t *joined;
    size_t jn;
    while (t->n_tok < target && !t->oom && next_pair(t, &key, &joined, &jn)) {
        txl_tok a = (txl_tok)(key >> 32), b = (txl_tok)key, to = (txl_tok)t->n_tok;
        int rc = add_token(t, joined, jn);
        free(joined);
        t->merges = rc ? t->merges : realloc(t->merges, (t->n_merges + 1) * sizeof *t->merges);
        if (rc || !t->merges) {
            t->oom = 1;
            break;
        }
        t->merges[t->n_merges++] = (vocab_merge){a, b, to};
        tr_pair *p = &t->p[pair_find(t, key, 0)];
        uint32_t *where = p->where, nw = p->n_where;
        p->where = NULL;
        p->n_where = p->cap_where = 0;
        for (uint32_t k = 0; k < nw && !t->oom; k++)
            merge_word(t, where[k], a, b, to);
        free(where);
        if (progress && t->n_merges % 1000 == 0)
            fprintf(stderr, "\rtxl: bpe: %zu merges of %zu", t->n_merges, target - 256);
    }
    if (progress)
        fprintf(stderr, "\rtxl: bpe: %zu merges%20s\n", t->n_merges, "");
}

/* ---- Counting the pieces ---------------------------------------------------------------------- */

typedef struct {
    pretok *pt;
    strcount pieces;
    uint8_t *held;
    size_t held_n, held_cap, no_cut_before;
    txl_err *e;
    const uint8_t *buf;
    int oom;
} piece_counts;

static int count_piece(void *ctx, size_t off, size_t len)
{
    piece_counts *pc = ctx;
    if (strcount_add(&pc->pieces, pc->buf + off, len, 1))
        return pc->oom = 1, -1;
    return 0;
}

static int count_chunk(void *ctx, const uint8_t *p, size_t n, int final, txl_err *e)
{
    piece_counts *pc = ctx;
    pc->held = grow_to(pc->held, &pc->held_cap, pc->held_n + n + 1, 1, &pc->oom);
    if (pc->oom)
        return err_set(e, ERR_RUNTIME, "out of memory holding %zu bytes", pc->held_n);
    if (n)
        memcpy(pc->held + pc->held_n, p, n);
    pc->held_n += n;
    size_t limit = final ? pc->held_n
                   : pretok_safe_cut(pc->pt, pc->held, pc->held_n, pc->no_cut_before);
    pc->buf = pc->held;
    if (limit && pretok_pieces(pc->pt, pc->held, pc->held_n, limit, count_piece, pc))
        return err_set(e, ERR_RUNTIME, "out of memory counting %zu distinct pieces",
                       pc->pieces.n);
    memmove(pc->held, pc->held + limit, pc->held_n - limit);
    pc->held_n -= limit;
    pc->no_cut_before = pc->held_n > 8 ? pc->held_n - 8 : 0;
    return 0;
}

/* The pieces as the trainer's words, their pairs counted and in the heap. */
static int words_of_pieces(trainer *t, const strcount *pc)
{
    size_t total = pc->arena_n;
    t->n_words = pc->n;
    t->sym = malloc((total + 1) * sizeof *t->sym);
    t->woff = malloc((pc->n + 1) * sizeof *t->woff);
    t->wlen = malloc((pc->n + 1) * sizeof *t->wlen);
    t->wcount = malloc((pc->n + 1) * sizeof *t->wcount);
    if (!t->sym || !t->woff || !t->wlen || !t->wcount)
        return -1;
    pairs_rehash(t);
    size_t at = 0;
    for (size_t w = 0; w < pc->n && !t->oom; w++) {
        const uint8_t *p = strcount_bytes(pc, w);
        size_t n = pc->w[w].len;
        t->woff[w] = at;
        t->wlen[w] = (uint32_t)n;
        t->wcount[w] = pc->w[w].count;
        for (size_t i = 0; i < n; i++)
            t->sym[at + i] = p[i];
        for (size_t i = 0; i + 1 < n && !t->oom; i++) {
            long k = pair_find(t, (uint64_t)p[i] << 32 | p[i + 1], 1);
            if (k >= 0) {
                t->p[k].count += pc->w[w].count;
                pair_where(t, &t->p[k], (uint32_t)w);
            }
        }
        at += n;
    }
    for (size_t k = 0; k < t->np && !t->oom; k++)
        heap_push(t, t->p[k].count, t->p[k].key);
    return t->oom ? -1 : 0;
}

static void trainer_free(trainer *t)
{
    for (size_t k = 0; k < t->np; k++)
        free(t->p[k].where);
    free(t->p);
    free(t->slot);
    free(t->h);
    free(t->sym);
    free(t->woff);
    free(t->wlen);
    free(t->wcount);
    free(t->tb);
    free(t->toff);
    free(t->merges);
    free(t->dl);
    strcount_free(&t->tokset);
}

static vocab *trained_vocab(const trainer *t, txl_err *e)
{
    vocab *v = vb_new(VOCAB_BPE, e);
    for (size_t k = 0; v && k < t->n_tok; k++)
        if (vb_add(v, t->tb + t->toff[k], t->toff[k + 1] - t->toff[k], SPECIAL_NONE, e)) {
            vocab_free(v);
            return NULL;
        }
    for (size_t r = 0; v && r < t->n_merges; r++)
        if (vb_merge(v, t->merges[r].a, t->merges[r].b, t->merges[r].to, e)) {
            vocab_free(v);
            return NULL;
        }
    if (v && vb_seal(v, "the bpe vocabulary built", 0, 0, e)) {
        vocab_free(v);
        return NULL;
    }
    return v;
}

vocab *bpe_build(const vocab_build_opts *o, txl_err *e)
{
    if (o->max_size < 256 || o->max_size > (1 << 20)) {
        err_set(e, ERR_INPUT, "a bpe vocabulary has 256 .. %d tokens, not %ld", 1 << 20,
                o->max_size);
        return NULL;
    }
    piece_counts pc = {.e = e};
    trainer t = {0};
    vocab *v = NULL;
    if (!(pc.pt = pretok_new(e)))
        return NULL;
    if (strcount_init(&pc.pieces) || strcount_init(&t.tokset)) {
        err_set(e, ERR_RUNTIME, "out of memory counting pieces");
        goto out;
    }
    if (vocab_read_inputs(o, count_chunk, &pc, e))
        goto out;
    for (int b = 0; b < 256 && !t.oom; b++) {
        uint8_t c = (uint8_t)b;
        add_token(&t, &c, 1);
    }
    if (t.oom || words_of_pieces(&t, &pc.pieces)) {
        err_set(e, ERR_RUNTIME, "out of memory for the pairs of %zu pieces", pc.pieces.n);
        goto out;
    }
    strcount_free(&pc.pieces);
    train(&t, (size_t)o->max_size, o->progress && isatty(STDERR_FILENO));
    if (t.oom)
        err_set(e, ERR_RUNTIME, "out of memory training bpe (%zu merges)", t.n_merges);
    else
        v = trained_vocab(&t, e);
out:
    pretok_free(pc.pt);
    strcount_free(&pc.pieces);
    free(pc.held);
    trainer_free(&t);
    return v;
}

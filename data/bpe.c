/* bpe.c: byte-level BPE encoding as GPT-2's (openai/gpt-2 src/encoder.py, bpe()): a text is
 * cut into pieces (pretok.h), each piece's bytes start as their byte tokens, and the
 * adjacent pair of lowest merge rank is merged until no pair has a merge. GPT-2 merges
 * every occurrence of that pair left to right before looking again; txl merges the
 * leftmost occurrence and looks again, which is the same because a vocabulary's merges
 * only join tokens made by earlier merges (vb_seal holds every vocabulary to it): a pair
 * made by merge r has a rank above r, so the lowest rank stays r until its occurrences are
 * gone. Short pieces merge in an array (a scan for the lowest rank per merge), long ones
 * through a heap of pairs by (rank, position); the pieces' tokens are cached. */
#include "vocab_impl.h"

#include <stdlib.h>
#include <string.h>

#include "pretok.h"

#define NO_RANK UINT32_MAX
/* Pieces up to this many bytes merge in an array; longer ones through the heap. */
#define BPE_SHORT 48
/* Pieces up to this many bytes are cached; the cache is emptied when it holds CACHE_MAX
 * pieces or CACHE_BYTES bytes. */
#define CACHE_PIECE 64
#define CACHE_MAX (1u << 17)
#define CACHE_BYTES ((size_t)32 << 20)

typedef struct {
    uint64_t *hash;          /* [CACHE_MAX * 2]: 0 = empty */
    uint32_t *at;            /* the entry's offset in the arena: the bytes, then the tokens */
    uint8_t *plen, *ntok;
    uint8_t *arena;
    size_t arena_n, n;
} bpe_cache;

typedef struct {
    pretok *pt;
    size_t no_cut_before;    /* no safe cut lies below this offset of the held bytes */
    bpe_cache cache;
    txl_tok *sym;            /* scratch: a piece's symbols */
    uint32_t *rank;          /* and their pairs' ranks, or the heap's links */
    uint64_t *heap;
    size_t cap;
} bpe_state;

/* ---- Merging one piece ------------------------------------------------------------------ */

static uint32_t rank_of(const vocab *v, txl_tok a, txl_tok b)
{
    long r = vocab_pair_rank(v, a, b);
    return r < 0 ? NO_RANK : (uint32_t)r;
}

/* Symbols sym[0 .. m) merged in place by the array scan; returns the count left. */
static size_t merge_short(const vocab *v, txl_tok *sym, uint32_t *rk, size_t m)
{
    for (size_t i = 0; i + 1 < m; i++)
        rk[i] = rank_of(v, sym[i], sym[i + 1]);
    while (m > 1) {
        uint32_t best = NO_RANK;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (rk[i] < best) {
                best = rk[i];
                bi = i;
            }
        if (best == NO_RANK)
            break;
        sym[bi] = v->merges[best].to;
        memmove(sym + bi + 1, sym + bi + 2, (m - bi - 2) * sizeof *sym);
        memmove(rk + bi + 1, rk + bi + 2, (m > bi + 3 ? m - bi - 3 : 0) * sizeof *rk);
        m--;
        rk[bi] = bi + 1 < m ? rank_of(v, sym[bi], sym[bi + 1]) : NO_RANK;
        if (bi > 0)
            rk[bi - 1] = rank_of(v, sym[bi - 1], sym[bi]);
    }
    return m;
}

static void heap_push(uint64_t *h, size_t *n, uint64_t x)
{
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], x = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= x)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
    return top;
}

/* The same merges through a heap of (rank << 32 | position) over a linked list: next[i]
 * is the symbol after i (m: none), prev[i] the one before. Pairs are checked when popped
 * (stale entries are skipped). */
static size_t merge_long(const vocab *v, txl_tok *sym, uint32_t *link, uint64_t *heap,
                         size_t m)
{
    uint32_t *next = link, *prev = link + m;
    size_t hn = 0;
    for (size_t i = 0; i < m; i++) {
        next[i] = (uint32_t)(i + 1);
        prev[i] = (uint32_t)(i ? i - 1 : m);
        uint32_t r = i + 1 < m ? rank_of(v, sym[i], sym[i + 1]) : NO_RANK;
        if (r != NO_RANK)
            heap_push(heap, &hn, (uint64_t)r << 32 | i);
    }
    while (hn) {
        uint64_t top = heap_pop(heap, &hn);
        uint32_t r = (uint32_t)(top >> 32), i = (uint32_t)top, j = next[i];
        if (sym[i] == (txl_tok)-1 || j >= m || v->merges[r].a != sym[i] ||
            v->merges[r].b != sym[j])
            continue;
        sym[i] = v->merges[r].to;
        sym[j] = (txl_tok)-1;
        next[i] = next[j];
        if (next[j] < m)
            prev[next[j]] = i;
        if (prev[i] < m && (r = rank_of(v, sym[prev[i]], sym[i])) != NO_RANK)
            heap_push(heap, &hn, (uint64_t)r << 32 | prev[i]);
        if (next[i] < m && (r = rank_of(v, sym[i], sym[next[i]])) != NO_RANK)
            heap_push(heap, &hn, (uint64_t)r << 32 | i);
    }
    size_t k = 0;
    for (size_t i = 0; i < m; i = next[i])
        sym[k++] = sym[i];
    return k;
}

static int state_room(bpe_state *st, size_t n)
{
    if (n <= st->cap)
        return 0;
    size_t nc = st->cap ? st->cap : 256;
    while (nc < n)
        nc *= 2;
    txl_tok *s = realloc(st->sym, nc * sizeof *s);
    uint32_t *r = s ? realloc(st->rank, 2 * nc * sizeof *r) : NULL;
    uint64_t *h = r ? realloc(st->heap, 3 * nc * sizeof *h) : NULL;
    if (s)
        st->sym = s;
    if (r)
        st->rank = r;
    if (!h)
        return -1;
    st->heap = h;
    st->cap = nc;
    return 0;
}

/* The tokens of piece p[0 .. n) into st->sym: their count, or -1 when out of memory.
 * `algo`: 0 by length, 1 the array, 2 the heap (tests hold the two to each other). */
static long merge_piece(const vocab *v, bpe_state *st, const uint8_t *p, size_t n, int algo)
{
    if (state_room(st, n))
        return -1;
    for (size_t i = 0; i < n; i++)
        st->sym[i] = v->byte_tok[p[i]];
    if (algo == 1 || (algo == 0 && n <= BPE_SHORT))
        return (long)merge_short(v, st->sym, st->rank, n);
    return (long)merge_long(v, st->sym, st->rank, st->heap, n);
}

/* ---- The cache ----------------------------------------------------------------------------- */

static void cache_clear(bpe_cache *c)
{
    memset(c->hash, 0, 2 * CACHE_MAX * sizeof *c->hash);
    c->n = 0;
    c->arena_n = 0;
}

static int cache_init(bpe_cache *c)
{
    c->hash = calloc(2 * CACHE_MAX, sizeof *c->hash);
    c->at = malloc(2 * CACHE_MAX * sizeof *c->at);
    c->plen = malloc(2 * CACHE_MAX);
    c->ntok = malloc(2 * CACHE_MAX);
    c->arena = malloc(CACHE_BYTES);
    return c->hash && c->at && c->plen && c->ntok && c->arena ? 0 : -1;
}

static void cache_free(bpe_cache *c)
{
    free(c->hash);
    free(c->at);
    free(c->plen);
    free(c->ntok);
    free(c->arena);
}

/* The slot of piece p (its hash h): the entry holding it, or the empty slot for it. */
static size_t cache_slot(const bpe_cache *c, const uint8_t *p, size_t n, uint64_t h)
{
    size_t mask = 2 * CACHE_MAX - 1;
    for (size_t i = (size_t)(h >> 7) & mask;; i = (i + 1) & mask) {
        if (!c->hash[i] || (c->hash[i] == h && c->plen[i] == n &&
                            memcmp(c->arena + c->at[i], p, n) == 0))
            return i;
    }
}

/* ---- The encoder ---------------------------------------------------------------------------- */

int bpe_encoder_init(vocab_encoder *en, txl_err *e)
{
    bpe_state *st = calloc(1, sizeof *st);
    if (!st)
        return err_set(e, ERR_RUNTIME, "out of memory for a bpe encoder");
    en->bpe = st;
    if (!(st->pt = pretok_new(e)))
        return bpe_encoder_free(en), -1;
    if (cache_init(&st->cache) || state_room(st, 256)) {
        bpe_encoder_free(en);
        return err_set(e, ERR_RUNTIME, "out of memory for a bpe encoder's cache");
    }
    return 0;
}

void bpe_encoder_free(vocab_encoder *en)
{
    bpe_state *st = en->bpe;
    if (!st)
        return;
    pretok_free(st->pt);
    cache_free(&st->cache);
    free(st->sym);
    free(st->rank);
    free(st->heap);
    free(st);
    en->bpe = NULL;
}

typedef struct {
    vocab_encoder *en;
    vocab_emit_fn emit;
    void *ctx;
    int oom;
} piece_ctx;

static int emit_tokens(piece_ctx *pc, const txl_tok *t, size_t k, size_t off)
{
    const vocab *v = pc->en->v;
    for (size_t i = 0; i < k; i++) {
        size_t len = v->off[t[i] + 1] - v->off[t[i]];
        int rc = pc->emit(pc->ctx, t[i], pc->en->base + off, len);
        if (rc)
            return rc;
        off += len;
    }
    return 0;
}

/* One piece of the held bytes: its tokens, from the cache or merged (and cached). */
static int on_piece(void *ctx, size_t off, size_t n)
{
    piece_ctx *pc = ctx;
    vocab_encoder *en = pc->en;
    bpe_state *st = en->bpe;
    const uint8_t *p = en->buf + off;
    if (n == 1)
        return pc->emit(pc->ctx, en->v->byte_tok[p[0]], en->base + off, 1);
    bpe_cache *c = &st->cache;
    uint64_t h = 0;
    size_t slot = 0;
    if (n <= CACHE_PIECE) {
        h = vocab_hash(p, n) | 1;
        slot = cache_slot(c, p, n, h);
        if (c->hash[slot]) {
            txl_tok t[CACHE_PIECE];
            memcpy(t, c->arena + c->at[slot] + n, c->ntok[slot] * sizeof *t);
            return emit_tokens(pc, t, c->ntok[slot], off);
        }
    }
    long k = merge_piece(en->v, st, p, n, 0);
    if (k < 0) {
        pc->oom = 1;
        return -1;
    }
    if (n <= CACHE_PIECE) {
        size_t need = n + (size_t)k * sizeof(txl_tok);
        if (c->n >= CACHE_MAX || c->arena_n + need > CACHE_BYTES) {
            cache_clear(c);
            slot = cache_slot(c, p, n, h);
        }
        c->hash[slot] = h;
        c->at[slot] = (uint32_t)c->arena_n;
        c->plen[slot] = (uint8_t)n;
        c->ntok[slot] = (uint8_t)k;
        memcpy(c->arena + c->arena_n, p, n);
        memcpy(c->arena + c->arena_n + n, st->sym, (size_t)k * sizeof(txl_tok));
        c->arena_n += need;
        c->n++;
    }
    return emit_tokens(pc, st->sym, (size_t)k, off);
}

long bpe_scan(vocab_encoder *en, int final, vocab_emit_fn emit, void *ctx, int *rc,
              txl_err *e)
{
    bpe_state *st = en->bpe;
    size_t limit = final ? en->len : pretok_safe_cut(st->pt, en->buf, en->len, st->no_cut_before);
    if (limit == 0) {
        st->no_cut_before = en->len > 8 ? en->len - 8 : 0;
        return 0;
    }
    piece_ctx pc = {en, emit, ctx, 0};
    *rc = pretok_pieces(st->pt, en->buf, en->len, limit, on_piece, &pc);
    if (*rc) {
        if (pc.oom)
            err_set(e, ERR_RUNTIME, "out of memory merging a piece of bpe");
        return -1;
    }
    st->no_cut_before = en->len - limit > 8 ? en->len - limit - 8 : 0;
    return (long)limit;
}

size_t bpe_piece_tokens(const vocab *v, const uint8_t *p, size_t n, int algo, txl_tok *out)
{
    bpe_state st = {0};
    long k = n ? merge_piece(v, &st, p, n, algo) : 0;
    if (k > 0)
        memcpy(out, st.sym, (size_t)k * sizeof *out);
    free(st.sym);
    free(st.rank);
    free(st.heap);
    return k < 0 ? 0 : (size_t)k;
}

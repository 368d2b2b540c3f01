/* vocab_impl.h: what the vocabulary's files share (vocab.c, vocab_file.c, vocab_encoder.c,
 * vocab_build.c, vocab_input.c, word.c, bpe.c, bpe_train.c, gpt2.c): the struct, the
 * builder and the lookup tables. Not for other modules: they use vocab.h.
 *
 * A vocabulary is built by adding its tokens in id order (vb_add) and, for bpe, its merges
 * by rank (vb_merge), then sealed (vb_seal): the checks of a well-formed vocabulary (the
 * same for a parsed file, an import and a build), the lookup tables and the fingerprint. */
#ifndef TXL_VOCAB_IMPL_H
#define TXL_VOCAB_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "vocab.h"

/* One merge of a bpe vocabulary: tokens a and b (adjacent, a first) become token `to`. */
typedef struct {
    txl_tok a, b, to;
} vocab_merge;

/* A hash table of token ids by their bytes (open addressing, linear probing). */
typedef struct {
    uint32_t *slot;   /* id + 1, 0: empty */
    uint32_t *tag;    /* the hash's high 32 bits, to skip most byte comparisons */
    size_t mask;
} vocab_index;

/* A hash table of merges by their pair (a << 32 | b), an entry a cache line's quarter. */
typedef struct {
    uint64_t key;     /* (a << 32 | b) + 1, 0: empty */
    uint32_t rank, to;
} vocab_pair_slot;

typedef struct {
    vocab_pair_slot *slot;
    size_t mask;
} vocab_pairs;

struct vocab {
    vocab_kind kind;
    size_t n, cap;           /* tokens, allocated */
    uint8_t *bytes;          /* every token's bytes, one after the other */
    size_t n_bytes, cap_bytes;
    size_t *off;             /* [cap + 1]: token t is bytes[off[t] .. off[t + 1]) */
    uint8_t *special;        /* [cap]: vocab_special_kind */
    long special_id[4];      /* by vocab_special_kind; -1: none */
    vocab_merge *merges;     /* bpe: by rank */
    size_t n_merges, cap_merges;
    /* sealed */
    vocab_index index;       /* ids by bytes (word: <eos> and <unk> by their names too) */
    vocab_pairs pairs;       /* bpe: merges by pair */
    txl_tok byte_tok[256];   /* bpe, byte: the token of each single byte */
    uint64_t fingerprint;
};

/* A 64-bit hash of bytes (the lookup tables'; not the fingerprint, which is FNV-1a). */
uint64_t vocab_hash(const uint8_t *p, size_t n);

/* An empty vocabulary of kind k. NULL when out of memory (e set). */
vocab *vb_new(vocab_kind k, txl_err *e);
/* Appends a token (id: the tokens so far) with its bytes and special kind. -1 only when
 * out of memory. */
int vb_add(vocab *v, const uint8_t *bytes, size_t len, vocab_special_kind sp, txl_err *e);
/* Appends a merge (rank: the merges so far) of tokens a, b into token `to`. */
int vb_merge(vocab *v, txl_tok a, txl_tok b, txl_tok to, txl_err *e);
/* The specials' checks and the index of tokens by bytes (a duplicate is an error): what a
 * parser needs before it reads merges by their tokens' bytes; vb_seal calls it too. */
int vb_index(vocab *v, const char *origin, long line_of_token, txl_err *e);
/* Checks the whole vocabulary and builds its tables: ERR_INPUT prefixed with `origin` for
 * a fault (a duplicate token, a byte missing from a bpe vocabulary, a merge whose result
 * is not the two tokens' bytes, a token no merge makes, ...). `line_of_token` and
 * `line_of_merge` (may be 0) turn an id or rank into the line it came from, for a file's
 * messages: the line of token t is line_of_token + t. */
int vb_seal(vocab *v, const char *origin, long line_of_token, long line_of_merge, txl_err *e);

/* The display name of a special ("<eos>", "<unk>", "<|endoftext|>") and its name in files
 * ("eos", "unk", "eot"). */
const char *vocab_special_text(vocab_special_kind k);
const char *vocab_special_name(vocab_special_kind k);

/* A valid UTF-8 sequence at p[0 .. n) (RFC 3629: no overlong forms, no surrogates, at most
 * U+10FFFF): its length (2 .. 4) with its code point in *cp, or 0. ASCII is the caller's. */
static inline int vocab_utf8(const uint8_t *p, size_t n, uint32_t *cp)
{
    uint8_t c = p[0];
    int len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!len || (size_t)len > n)
        return 0;
    uint32_t x = c & (0xff >> (len + 1));
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        x = x << 6 | (p[i] & 0x3f);
    }
    if ((len == 3 && (x < 0x800 || (x >= 0xd800 && x <= 0xdfff))) ||
        (len == 4 && (x < 0x10000 || x > 0x10ffff)))
        return 0;
    *cp = x;
    return len;
}

/* A whole file, plain or gzip'd, into a malloc'd buffer: at most `max` bytes (more is
 * ERR_INPUT "larger than ... : not a WHAT"). */
int vocab_read_file(const char *path, size_t max, const char *what, uint8_t **buf,
                    size_t *len, txl_err *e);

/* A pair's key (a << 32 | b) mixed for a table's index (splitmix64's finalizer: every bit
 * of a and b reaches the low bits). */
static inline uint64_t vocab_pair_hash(uint64_t key)
{
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebULL;
    return key ^ (key >> 31);
}

/* The merge of pair (a, b): its rank, or -1. */
static inline long vocab_pair_rank(const vocab *v, txl_tok a, txl_tok b)
{
    uint64_t key = ((uint64_t)a << 32 | b) + 1;
    size_t i = (size_t)vocab_pair_hash(key) & v->pairs.mask;
    for (;; i = (i + 1) & v->pairs.mask) {
        uint64_t k = v->pairs.slot[i].key;
        if (k == key)
            return v->pairs.slot[i].rank;
        if (!k)
            return -1;
    }
}

/* ---- The encoders, one per kind (word.c, bpe.c) ------------------------------------------
 * The generic encoder (vocab_encoder.c) holds the bytes not yet final in `buf`; a kind's `scan`
 * emits the tokens of buf[0 .. len) that are final (all of them when `final`: 1 at the
 * text's end, VOCAB_FLUSH when the text goes on after them, so a word-level line gets no
 * <eos> yet) and returns how many bytes it consumed (the rest is held), or -1 / emit's
 * value through *rc. */
#define VOCAB_FLUSH 2
struct vocab_encoder {
    const vocab *v;
    uint8_t *buf;
    size_t len, cap;
    size_t base;             /* the text offset of buf[0] */
    int mid_line;            /* word: bytes were consumed since the last line end */
    void *bpe;               /* bpe: the pre-tokenizer and the cache (bpe.c) */
};

/* Word (word.c): consumes what is final of buf and emits it; returns the bytes consumed or
 * -1 (*rc: emit's value or -1 with e). */
long word_scan(vocab_encoder *en, int final, vocab_emit_fn emit, void *ctx, int *rc,
               txl_err *e);
vocab *word_build(const vocab_build_opts *o, txl_err *e);

/* BPE (bpe.c) */
int bpe_encoder_init(vocab_encoder *en, txl_err *e);
void bpe_encoder_free(vocab_encoder *en);
long bpe_scan(vocab_encoder *en, int final, vocab_emit_fn emit, void *ctx, int *rc,
              txl_err *e);
vocab *bpe_build(const vocab_build_opts *o, txl_err *e);
/* The tokens of one piece p[0 .. n) into out (room for n): their count (0 when out of
 * memory). algo 0: as the encoder does (by length), 1: the array scan, 2: the heap. */
size_t bpe_piece_tokens(const vocab *v, const uint8_t *p, size_t n, int algo, txl_tok *out);

/* Reading a build's inputs (vocab_input.c): calls fn with the bytes of each input in order, in
 * chunks, then with final = 1 at each input's end (n = 0). */
typedef int (*vocab_chunk_fn)(void *ctx, const uint8_t *p, size_t n, int final, txl_err *e);
int vocab_read_inputs(const vocab_build_opts *o, vocab_chunk_fn fn, void *ctx, txl_err *e);

#endif

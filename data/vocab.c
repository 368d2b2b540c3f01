/* vocab.c: the vocabulary (vocab.h): its tokens and specials, the byte vocabulary, the
 * builder and its checks (vocab_impl.h), lookup by bytes, and its text (the file's format,
 * vocab_file.c, written; the fingerprint hashes it). What differs by kind sits above it:
 * the encoder (vocab_encoder.c over word.c's and bpe.c's scanners) and building
 * (vocab_build.c over word.c and bpe_train.c, which read their texts through
 * vocab_input.c). */
#include "vocab_impl.h"
#include "whitespace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"byte", "word", "bpe"};

const char *vocab_kind_name(vocab_kind k)
{
    return (unsigned)k < 3 ? kind_names[k] : "?";
}

int vocab_kind_parse(const char *s, vocab_kind *k)
{
    for (int i = 0; i < 3; i++)
        if (s && strcmp(s, kind_names[i]) == 0) {
            *k = (vocab_kind)i;
            return 0;
        }
    return -1;
}

const char *vocab_special_text(vocab_special_kind k)
{
    return k == SPECIAL_EOS ? "<eos>" : k == SPECIAL_UNK ? "<unk>"
           : k == SPECIAL_EOT ? "<|endoftext|>" : "";
}

const char *vocab_special_name(vocab_special_kind k)
{
    return k == SPECIAL_EOS ? "eos" : k == SPECIAL_UNK ? "unk" : k == SPECIAL_EOT ? "eot" : "";
}

/* 64-bit words mixed by multiplication (a hash for tables, not for files). */
uint64_t vocab_hash(const uint8_t *p, size_t n)
{
    const uint64_t m = 0x9fb21c651e98df25ULL;
    uint64_t h = 0x6a09e667f3bcc908ULL ^ (n * m);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * m;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * m;
        h ^= h >> 29;
    }
    h *= m;
    return h ^ (h >> 32);
}

/* ---- The builder ------------------------------------------------------------------------ */

vocab *vb_new(vocab_kind k, txl_err *e)
{
    vocab *v = calloc(1, sizeof *v);
    if (!v || !(v->off = malloc(sizeof *v->off))) {
        free(v);
        err_set(e, ERR_RUNTIME, "out of memory for a vocabulary");
        return NULL;
    }
    v->kind = k;
    v->off[0] = 0;
    for (int i = 0; i < 4; i++)
        v->special_id[i] = -1;
    return v;
}

static int grow(void **p, size_t *cap, size_t need, size_t size, size_t extra)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, (nc + extra) * size);
    if (!np)
        return -1;
    *p = np;
    *cap = nc;
    return 0;
}

int vb_add(vocab *v, const uint8_t *bytes, size_t len, vocab_special_kind sp, txl_err *e)
{
    size_t cap = v->cap;
    if (grow((void **)&v->off, &cap, v->n + 1, sizeof *v->off, 1) ||
        (cap = v->cap, grow((void **)&v->special, &cap, v->n + 1, 1, 0)) ||
        grow((void **)&v->bytes, &v->cap_bytes, v->n_bytes + len + 1, 1, 0))
        return err_set(e, ERR_RUNTIME, "out of memory for a vocabulary of %zu tokens", v->n);
    v->cap = cap;
    if (len)
        memcpy(v->bytes + v->n_bytes, bytes, len);
    v->n_bytes += len;
    v->special[v->n] = (uint8_t)sp;
    v->off[++v->n] = v->n_bytes;
    return 0;
}

int vb_merge(vocab *v, txl_tok a, txl_tok b, txl_tok to, txl_err *e)
{
    if (grow((void **)&v->merges, &v->cap_merges, v->n_merges + 1, sizeof *v->merges, 0))
        return err_set(e, ERR_RUNTIME, "out of memory for %zu merges", v->n_merges);
    v->merges[v->n_merges++] = (vocab_merge){a, b, to};
    return 0;
}

static size_t table_size(size_t n)
{
    size_t s = 16;
    while (s < 2 * n)
        s *= 2;
    return s;
}

/* What the lookup tables key each token by: its bytes, and for a word vocabulary's <eos>
 * its name (official's sym2idx has '<eos>'); 0 for a token without bytes. */
static int index_key(const vocab *v, txl_tok t, const uint8_t **p, size_t *n)
{
    *p = vocab_piece(v, t, n);
    if (v->special[t] == SPECIAL_EOS && v->kind == VOCAB_WORD) {
        *p = (const uint8_t *)"<eos>";
        *n = 5;
    }
    return *n > 0;
}

/* Inserts token t under bytes p[0..n): -1 with *dup the token already there. */
static int index_put(vocab *v, const uint8_t *p, size_t n, txl_tok t, txl_tok *dup)
{
    uint64_t h = vocab_hash(p, n);
    uint32_t tag = (uint32_t)(h >> 32);
    for (size_t i = (size_t)h & v->index.mask;; i = (i + 1) & v->index.mask) {
        uint32_t s = v->index.slot[i];
        if (!s) {
            v->index.slot[i] = t + 1;
            v->index.tag[i] = tag;
            return 0;
        }
        size_t len;
        const uint8_t *q;
        index_key(v, s - 1, &q, &len);
        if (v->index.tag[i] == tag && len == n && memcmp(q, p, n) == 0) {
            *dup = s - 1;
            return -1;
        }
    }
}

long vocab_lookup(const vocab *v, const uint8_t *bytes, size_t len)
{
    if (v->kind == VOCAB_BYTE)
        return len == 1 ? bytes[0] : -1;
    uint64_t h = vocab_hash(bytes, len);
    uint32_t tag = (uint32_t)(h >> 32);
    for (size_t i = (size_t)h & v->index.mask;; i = (i + 1) & v->index.mask) {
        uint32_t s = v->index.slot[i];
        if (!s)
            return -1;
        if (v->index.tag[i] != tag)
            continue;
        txl_tok t = s - 1;
        size_t n;
        const uint8_t *q;
        index_key(v, t, &q, &n);
        if (n == len && memcmp(q, bytes, len) == 0)
            return t;
    }
}

/* Where token (or merge) i came from: "ORIGIN:LINE" when the lines are known (base > 0:
 * the line of item 0), else "ORIGIN". */
static const char *at_line(char *buf, size_t cap, const char *origin, long base, size_t i)
{
    if (base > 0)
        snprintf(buf, cap, "%s:%ld", origin, base + (long)i);
    else
        snprintf(buf, cap, "%s", origin);
    return buf;
}
#define AT(base, i) at_line(loc, sizeof loc, origin, (base), (i))

static int seal_specials(vocab *v, const char *origin, long line, txl_err *e)
{
    char loc[1200];
    for (size_t t = 0; t < v->n; t++) {
        int sp = v->special[t];
        size_t len = v->off[t + 1] - v->off[t];
        if (!sp) {
            if (len == 0)
                return err_set(e, ERR_INPUT, "%s: token %zu is empty (only a special has "
                               "no bytes)", AT(line, t), t);
            if (v->kind == VOCAB_WORD && len == 5 && !memcmp(v->bytes + v->off[t], "<unk>", 5))
                return err_set(e, ERR_INPUT, "%s: the word <unk> is a word vocabulary's "
                               "<unk>: declare it 'special unk %zu'", AT(line, t), t);
            continue;
        }
        int ok = v->kind == VOCAB_WORD ? sp == SPECIAL_EOS || sp == SPECIAL_UNK
                 : v->kind == VOCAB_BPE ? sp == SPECIAL_EOT : 0;
        if (!ok)
            return err_set(e, ERR_INPUT, "%s: a %s vocabulary has no special %s", AT(line, t),
                           vocab_kind_name(v->kind), vocab_special_name(sp));
        if (v->special_id[sp] >= 0)
            return err_set(e, ERR_INPUT, "%s: token %zu is a second %s (token %ld is one)",
                           AT(line, t), t, vocab_special_name(sp),
                           v->special_id[sp]);
        v->special_id[sp] = (long)t;
    }
    if (v->kind == VOCAB_WORD && v->special_id[SPECIAL_EOS] < 0)
        return err_set(e, ERR_INPUT, "%s: a word vocabulary needs an <eos> token", origin);
    return 0;
}

static int seal_index(vocab *v, const char *origin, long line, txl_err *e)
{
    char loc[1200], loc2[32];
    size_t sz = table_size(v->n);
    v->index.slot = calloc(sz, sizeof *v->index.slot);
    v->index.tag = malloc(sz * sizeof *v->index.tag);
    if (!v->index.slot || !v->index.tag)
        return err_set(e, ERR_RUNTIME, "out of memory for the index of %zu tokens", v->n);
    v->index.mask = sz - 1;
    for (size_t t = 0; t < v->n; t++) {
        const uint8_t *p;
        size_t n;
        txl_tok dup;
        if (index_key(v, (txl_tok)t, &p, &n) && index_put(v, p, n, (txl_tok)t, &dup))
        {
            if (line > 0)
                snprintf(loc2, sizeof loc2, " (line %ld)", line + (long)dup);
            return err_set(e, ERR_INPUT, "%s: token %zu is a duplicate of token %u%s",
                           AT(line, t), t, dup, line > 0 ? loc2 : "");
        }
    }
    return 0;
}

/* byte: token i is byte i. word: no word holds whitespace. bpe: every byte is a token. */
static int seal_kind(vocab *v, const char *origin, long line, txl_err *e)
{
    char loc[1200];
    if (v->kind == VOCAB_BYTE) {
        if (v->n != 256)
            return err_set(e, ERR_INPUT, "%s: a byte vocabulary has 256 tokens, not %zu",
                           origin, v->n);
        for (size_t t = 0; t < 256; t++)
            if (v->off[t + 1] - v->off[t] != 1 || v->bytes[v->off[t]] != t)
                return err_set(e, ERR_INPUT, "%s: token %zu of a byte vocabulary is not "
                               "byte %zu", AT(line, t), t, t);
    }
    if (v->kind != VOCAB_BPE && v->n_merges)
        return err_set(e, ERR_INPUT, "%s: a %s vocabulary has no merges", origin,
                       vocab_kind_name(v->kind));
    if (v->kind == VOCAB_WORD)
        for (size_t t = 0; t < v->n; t++) {
            size_t len = v->off[t + 1] - v->off[t], at = whitespace_in(v->bytes + v->off[t], len);
            if (at < len)
                return err_set(e, ERR_INPUT, "%s: word %zu holds whitespace at its byte %zu "
                               "(a word never does)", AT(line, t), t, at);
        }
    if (v->kind == VOCAB_BPE || v->kind == VOCAB_BYTE) {
        for (int b = 0; b < 256; b++) {
            uint8_t c = (uint8_t)b;
            long t = vocab_lookup(v, &c, 1);
            if (t < 0)
                return err_set(e, ERR_INPUT, "%s: byte 0x%02x is not a token (a bpe vocabulary "
                               "has all 256)", origin, b);
            v->byte_tok[b] = (txl_tok)t;
        }
    }
    return 0;
}

/* Each merge's parts are tokens made before it (single bytes or earlier merges), its result
 * their bytes joined, made by no other merge; every other token of several bytes is made
 * by one. */
static int seal_merges(vocab *v, const char *origin, long line_t, long line_m, txl_err *e)
{
    char loc[1200];
    long *made = malloc(v->n * sizeof *made);
    size_t sz = table_size(v->n_merges);
    v->pairs.slot = calloc(sz, sizeof *v->pairs.slot);
    if (!made || !v->pairs.slot) {
        free(made);
        return err_set(e, ERR_RUNTIME, "out of memory for %zu merges", v->n_merges);
    }
    v->pairs.mask = sz - 1;
    for (size_t t = 0; t < v->n; t++)
        made[t] = v->off[t + 1] - v->off[t] == 1 && !v->special[t] ? -2 : -1; /* -2: a byte */
    int rc = 0;
    for (size_t r = 0; r < v->n_merges && !rc; r++) {
        vocab_merge m = v->merges[r];
        size_t la, lb, lt;
        if (m.a >= v->n || m.b >= v->n || m.to >= v->n) {
            rc = err_set(e, ERR_INPUT, "%s: merge %zu names a token past the last (%zu)",
                         AT(line_m, r), r, v->n - 1);
            break;
        }
        const uint8_t *pa = vocab_piece(v, m.a, &la), *pb = vocab_piece(v, m.b, &lb),
                      *pt = vocab_piece(v, m.to, &lt);
        if (made[m.a] == -1 || made[m.b] == -1)
            rc = err_set(e, ERR_INPUT, "%s: merge %zu joins token %u, which no earlier "
                         "merge makes", AT(line_m, r), r, made[m.a] == -1 ? m.a : m.b);
        else if (v->special[m.a] || v->special[m.b] || v->special[m.to] || lt != la + lb ||
                 memcmp(pt, pa, la) || memcmp(pt + la, pb, lb))
            rc = err_set(e, ERR_INPUT, "%s: merge %zu: token %u is not tokens %u and %u "
                         "joined", AT(line_m, r), r, m.to, m.a, m.b);
        else if (made[m.to] != -1)
            rc = err_set(e, ERR_INPUT, "%s: merge %zu makes token %u again (%s)", AT(line_m, r),
                         r, m.to, made[m.to] == -2 ? "a byte" : "an earlier merge makes it");
        else {
            made[m.to] = (long)r;
            uint64_t key = ((uint64_t)m.a << 32 | m.b) + 1;
            size_t i = (size_t)vocab_pair_hash(key) & v->pairs.mask;
            while (v->pairs.slot[i].key && v->pairs.slot[i].key != key)
                i = (i + 1) & v->pairs.mask;
            if (v->pairs.slot[i].key)
                rc = err_set(e, ERR_INPUT, "%s: merge %zu joins the pair of merge %u again",
                             AT(line_m, r), r, v->pairs.slot[i].rank);
            v->pairs.slot[i] = (vocab_pair_slot){key, (uint32_t)r, m.to};
        }
    }
    for (size_t t = 0; t < v->n && !rc; t++)
        if (made[t] == -1 && !v->special[t])
            rc = err_set(e, ERR_INPUT, "%s: token %zu is made by no merge", AT(line_t, t), t);
    free(made);
    return rc;
}

int vb_index(vocab *v, const char *origin, long line_of_token, txl_err *e)
{
    if (v->index.slot)
        return 0;
    if (v->n == 0)
        return err_set(e, ERR_INPUT, "%s: the vocabulary has no tokens", origin);
    if (v->n > UINT32_MAX - 1)
        return err_set(e, ERR_INPUT, "%s: %zu tokens, more than ids hold", origin, v->n);
    return seal_specials(v, origin, line_of_token, e) || seal_index(v, origin, line_of_token, e)
           ? -1 : 0;
}

int vb_seal(vocab *v, const char *origin, long line_of_token, long line_of_merge, txl_err *e)
{
    if (vb_index(v, origin, line_of_token, e) || seal_kind(v, origin, line_of_token, e))
        return -1;
    if (v->kind == VOCAB_BPE && seal_merges(v, origin, line_of_token, line_of_merge, e))
        return -1;
    uint8_t *buf;
    size_t len;
    if (vocab_serialize(v, &buf, &len, e))
        return -1;
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 */
    for (size_t i = 0; i < len; i++)
        h = (h ^ buf[i]) * 0x100000001b3ULL;
    free(buf);
    v->fingerprint = h;
    return 0;
}

/* ---- The public accessors ---------------------------------------------------------------- */

vocab *vocab_new_bytes(txl_err *e)
{
    vocab *v = vb_new(VOCAB_BYTE, e);
    for (int b = 0; v && b < 256; b++) {
        uint8_t c = (uint8_t)b;
        if (vb_add(v, &c, 1, SPECIAL_NONE, e)) {
            vocab_free(v);
            return NULL;
        }
    }
    if (v && vb_seal(v, "the byte vocabulary", 0, 0, e)) {
        vocab_free(v);
        return NULL;
    }
    return v;
}

void vocab_free(vocab *v)
{
    if (!v)
        return;
    free(v->bytes);
    free(v->off);
    free(v->special);
    free(v->merges);
    free(v->index.slot);
    free(v->index.tag);
    free(v->pairs.slot);
    free(v);
}

vocab_kind vocab_get_kind(const vocab *v)
{
    return v->kind;
}

size_t vocab_size(const vocab *v)
{
    return v->n;
}

const uint8_t *vocab_piece(const vocab *v, txl_tok t, size_t *len)
{
    *len = v->off[t + 1] - v->off[t];
    return v->bytes + v->off[t];
}

size_t vocab_decoded(const vocab *v, long prev, txl_tok t, uint8_t *buf, size_t cap)
{
    size_t len;
    const uint8_t *p = vocab_piece(v, t, &len);
    size_t sp = 0;
    if (v->kind == VOCAB_WORD) {
        if (v->special[t] == SPECIAL_EOS) {
            p = (const uint8_t *)"\n";
            len = 1;
        } else if (prev >= 0 && (size_t)prev < v->n && v->special[prev] != SPECIAL_EOS) {
            sp = 1;
        }
    }
    if (buf) {
        if (sp && cap)
            buf[0] = ' ';
        if (cap > sp)
            memcpy(buf + sp, p, len < cap - sp ? len : cap - sp);
    }
    return sp + len;
}

vocab_special_kind vocab_special(const vocab *v, txl_tok t)
{
    return (vocab_special_kind)v->special[t];
}

long vocab_special_id(const vocab *v, vocab_special_kind k)
{
    return (unsigned)k < 4 && k != SPECIAL_NONE ? v->special_id[k] : -1;
}

size_t vocab_merges(const vocab *v)
{
    return v->n_merges;
}

uint64_t vocab_fingerprint(const vocab *v)
{
    return v->fingerprint;
}

/* ---- The text (vocab_file.c's format) --------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
    int oom;
} obuf;

static void put(obuf *b, const void *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 1 << 16;
        while (nc < b->n + n)
            nc *= 2;
        uint8_t *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void putf(obuf *b, const char *fmt, long long x)
{
    char s[64];
    int n = snprintf(s, sizeof s, fmt, x);
    put(b, s, (size_t)n);
}

/* Characters written raw: not C1 controls, blanks, format characters or unassigned
 * specials (those are escaped, so a line shows what it holds). */
static int printable(uint32_t c)
{
    return c >= 0xa1 && c != 0xad && c != 0x34f && c != 0x61c && c != 0x1680 &&
           !(c >= 0x115f && c <= 0x1160) && !(c >= 0x180b && c <= 0x180f) &&
           !(c >= 0x2000 && c <= 0x200f) && !(c >= 0x2028 && c <= 0x202f) &&
           !(c >= 0x205f && c <= 0x206f) && c != 0x3000 && c != 0x3164 &&
           !(c >= 0xfe00 && c <= 0xfe0f) && c != 0xfeff && c != 0xffa0 &&
           !(c >= 0xfff0 && c <= 0xffff) && !(c >= 0xe0000 && c <= 0xe0fff) &&
           !(c >= 0xf0000);
}

static void put_escaped(obuf *b, const uint8_t *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n;) {
        uint8_t c = p[i];
        uint32_t cp;
        int len;
        if (c > 0x20 && c < 0x7f && c != '\\') {
            put(b, &c, 1);
            i++;
        } else if (c >= 0x80 && (len = vocab_utf8(p + i, n - i, &cp)) && printable(cp)) {
            put(b, p + i, (size_t)len);
            i += (size_t)len;
        } else {
            char s[4] = {'\\', 0, 0, 0};
            size_t k = 2;
            s[1] = c == '\\' ? '\\' : c == ' ' ? 's' : c == '\t' ? 't' : c == '\n' ? 'n'
                   : c == '\r' ? 'r' : 'x';
            if (s[1] == 'x') {
                s[2] = hex[c >> 4];
                s[3] = hex[c & 15];
                k = 4;
            }
            put(b, s, k);
            i++;
        }
    }
}

size_t vocab_escape(const uint8_t *p, size_t n, char *buf, size_t cap)
{
    obuf b = {0};
    put_escaped(&b, p, n);
    size_t len = b.oom ? 0 : b.n;
    if (buf && cap)
        memcpy(buf, b.p, len < cap ? len : cap);
    free(b.p);
    return len;
}

int vocab_serialize(const vocab *v, uint8_t **buf, size_t *len, txl_err *e)
{
    obuf b = {0};
    put(&b, "txl-vocab 1\nkind ", 17);
    put(&b, vocab_kind_name(v->kind), strlen(vocab_kind_name(v->kind)));
    putf(&b, "\nsize %lld\n", (long long)v->n);
    for (int k = SPECIAL_EOS; k <= SPECIAL_EOT; k++)
        if (v->special_id[k] >= 0) {
            put(&b, "special ", 8);
            put(&b, vocab_special_name(k), 3);
            putf(&b, " %lld\n", v->special_id[k]);
        }
    put(&b, "tokens\n", 7);
    for (size_t t = 0; t < v->n; t++) {
        putf(&b, "%lld ", (long long)t);
        const char *sp = vocab_special_text(v->special[t]);
        size_t n;
        const uint8_t *p = vocab_piece(v, (txl_tok)t, &n);
        if (v->special[t])
            put(&b, sp, strlen(sp));
        else
            put_escaped(&b, p, n);
        put(&b, "\n", 1);
    }
    if (v->kind == VOCAB_BPE) {
        putf(&b, "merges %lld\n", (long long)v->n_merges);
        for (size_t r = 0; r < v->n_merges; r++) {
            size_t n;
            const uint8_t *p = vocab_piece(v, v->merges[r].a, &n);
            put_escaped(&b, p, n);
            put(&b, " ", 1);
            p = vocab_piece(v, v->merges[r].b, &n);
            put_escaped(&b, p, n);
            put(&b, "\n", 1);
        }
    }
    put(&b, "end\n", 4);
    if (b.oom) {
        free(b.p);
        return err_set(e, ERR_RUNTIME, "out of memory writing a vocabulary of %zu tokens", v->n);
    }
    *buf = b.p;
    *len = b.n;
    return 0;
}

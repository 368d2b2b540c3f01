/* vocab_file.c: the vocabulary file (doc/design.md, "Vocabularies"): its format, its parser
 * and the files on disk (its writer, vocab_serialize, is vocab.c's: the fingerprint hashes
 * the text it writes).
 *
 *   txl-vocab 1
 *   kind bpe                   byte | word | bpe
 *   size 50257                 V: every token, specials included
 *   special eot 50256          one line per special: eos, unk (word), eot (bpe)
 *   tokens
 *   0 !                        V lines "ID TEXT" in id order; a special's TEXT is its name
 *   ...                        in brackets (<eos>, <unk>, <|endoftext|>)
 *   merges 50000               bpe: then that many lines "LEFT RIGHT", by rank
 *   \sh e
 *   end
 *
 * TEXT is the token's bytes, escaped so that any byte string round-trips and a line holds
 * no blank: \\ (a backslash), \s (a space), \t, \n, \r and \xHH (lower-case hex) for any
 * other byte below 0x21, 0x7f, or a byte of anything but a printable UTF-8 character;
 * printable ASCII and printable UTF-8 characters (not blanks, format or control
 * characters) stand as themselves. The parser takes any byte of 0x80 and above as itself. */
#include "vocab_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/instream.h"
#include "outfile.h"

/* ---- The parser --------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p, *end;
    const uint8_t *line;     /* the current line (after next_line) */
    size_t len;
    long no;                 /* its number, from 1 */
    const char *origin;
    uint8_t *tmp;            /* unescaped bytes */
    size_t tmp_cap;
} lines;

/* The next line (without its '\n'): 0, or -1 at the end of the bytes. */
static int next_line(lines *l)
{
    if (l->p >= l->end) {
        l->no++; /* the line that would have come */
        l->len = 0;
        return -1;
    }
    const uint8_t *nl = memchr(l->p, '\n', (size_t)(l->end - l->p));
    l->line = l->p;
    l->len = (size_t)((nl ? nl : l->end) - l->p);
    l->p = nl ? nl + 1 : l->end;
    l->no++;
    return 0;
}

static int line_is(const lines *l, const char *s)
{
    return l->len == strlen(s) && memcmp(l->line, s, l->len) == 0;
}

/* The line as "KEY N" with N a decimal integer in [0, max]. */
static int line_num(const lines *l, const char *key, size_t max, size_t *out, txl_err *e)
{
    size_t k = strlen(key), i = k + 1;
    unsigned long long x = 0;
    if (l->len <= i || memcmp(l->line, key, k) || l->line[k] != ' ')
        return err_set(e, ERR_INPUT, "%s:%ld: expected '%s N', found '%.*s'", l->origin, l->no,
                       key, (int)(l->len < 60 ? l->len : 60), (const char *)l->line);
    for (; i < l->len; i++) {
        if (l->line[i] < '0' || l->line[i] > '9' || x > max)
            return err_set(e, ERR_INPUT, "%s:%ld:%zu: '%s' needs a number up to %zu", l->origin,
                           l->no, i + 1, key, max);
        x = 10 * x + (unsigned)(l->line[i] - '0');
    }
    if (x > max || (l->line[k + 1] == '0' && l->len > k + 2))
        return err_set(e, ERR_INPUT, "%s:%ld: '%s' needs a number up to %zu without leading "
                       "zeros", l->origin, l->no, key, max);
    *out = (size_t)x;
    return 0;
}

static int hexval(uint8_t c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Unescapes line bytes [from, to) into l->tmp; *n its length. */
static int unescape(lines *l, size_t from, size_t to, size_t *n, txl_err *e)
{
    if (to - from > l->tmp_cap) {
        uint8_t *nt = realloc(l->tmp, to - from);
        if (!nt)
            return err_set(e, ERR_RUNTIME, "out of memory reading %s", l->origin);
        l->tmp = nt;
        l->tmp_cap = to - from;
    }
    size_t o = 0;
    for (size_t i = from; i < to; i++) {
        uint8_t c = l->line[i];
        if (c == '\\') {
            uint8_t d = i + 1 < to ? l->line[i + 1] : 0;
            int h1 = i + 2 < to ? hexval(l->line[i + 2]) : -1;
            int h2 = i + 3 < to ? hexval(l->line[i + 3]) : -1;
            if (d == '\\' || d == 's' || d == 't' || d == 'n' || d == 'r') {
                l->tmp[o++] = d == 's' ? ' ' : d == 't' ? '\t' : d == 'n' ? '\n'
                              : d == 'r' ? '\r' : '\\';
                i++;
            } else if (d == 'x' && h1 >= 0 && h2 >= 0) {
                l->tmp[o++] = (uint8_t)(h1 << 4 | h2);
                i += 3;
            } else {
                return err_set(e, ERR_INPUT, "%s:%ld:%zu: a bad escape (\\\\, \\s, \\t, \\n, "
                               "\\r or \\x with two lower-case hex digits)", l->origin, l->no,
                               i + 1);
            }
        } else if (c <= 0x20 || c == 0x7f) {
            return err_set(e, ERR_INPUT, "%s:%ld:%zu: byte 0x%02x stands unescaped in a token",
                           l->origin, l->no, i + 1, c);
        } else {
            l->tmp[o++] = c;
        }
    }
    *n = o;
    return 0;
}

/* "special NAME ID" lines, then "tokens": the specials by id into sp[V] */
static int parse_specials(lines *l, size_t V, uint8_t *sp, txl_err *e)
{
    for (;;) {
        if (next_line(l))
            return err_set(e, ERR_INPUT, "%s:%ld: the file ends before its tokens", l->origin,
                           l->no);
        if (line_is(l, "tokens"))
            return 0;
        int k = 0;
        for (int i = SPECIAL_EOS; i <= SPECIAL_EOT; i++)
            if (l->len > 12 && memcmp(l->line, "special ", 8) == 0 &&
                memcmp(l->line + 8, vocab_special_name(i), 3) == 0 && l->line[11] == ' ')
                k = i;
        if (!k)
            return err_set(e, ERR_INPUT, "%s:%ld: expected 'special eos|unk|eot ID' or "
                           "'tokens', found '%.*s'", l->origin, l->no,
                           (int)(l->len < 60 ? l->len : 60), (const char *)l->line);
        lines sub = *l;
        sub.line += 12;
        sub.len -= 12;
        size_t id = 0;
        char key[8];
        snprintf(key, sizeof key, "%s", vocab_special_name(k));
        /* "ID" alone: parse it as "x ID" */
        unsigned long long x = 0;
        size_t i = 0;
        for (; i < sub.len && sub.line[i] >= '0' && sub.line[i] <= '9' && x < V; i++)
            x = 10 * x + (unsigned)(sub.line[i] - '0');
        id = (size_t)x;
        if (i == 0 || i < sub.len || id >= V)
            return err_set(e, ERR_INPUT, "%s:%ld:13: special %s needs a token id below the "
                           "size, %zu", l->origin, l->no, key, V);
        if (sp[id])
            return err_set(e, ERR_INPUT, "%s:%ld: token %zu is already special %s", l->origin,
                           l->no, id, vocab_special_name(sp[id]));
        sp[id] = (uint8_t)k;
    }
}

/* V lines "ID TEXT" */
static int parse_tokens(lines *l, vocab *v, size_t V, const uint8_t *sp, txl_err *e)
{
    for (size_t t = 0; t < V; t++) {
        if (next_line(l) || line_is(l, "end") || (l->len > 7 && !memcmp(l->line, "merges ", 7)))
            return err_set(e, ERR_INPUT, "%s:%ld: the size is %zu but the file lists %zu tokens",
                           l->origin, l->no, V, t);
        size_t i = 0;
        unsigned long long id = 0;
        for (; i < l->len && l->line[i] >= '0' && l->line[i] <= '9' && id <= V; i++)
            id = 10 * id + (unsigned)(l->line[i] - '0');
        if (i == 0 || i >= l->len || l->line[i] != ' ' || i + 1 == l->len)
            return err_set(e, ERR_INPUT, "%s:%ld: expected 'ID TEXT' (token %zu), found '%.*s'",
                           l->origin, l->no, t, (int)(l->len < 60 ? l->len : 60),
                           (const char *)l->line);
        if (id != t)
            return err_set(e, ERR_INPUT, "%s:%ld: expected token %zu, found token %llu (tokens "
                           "are listed once each, in id order)", l->origin, l->no, t, id);
        size_t n;
        if (sp[t]) {
            const char *name = vocab_special_text(sp[t]);
            if (l->len - i - 1 != strlen(name) || memcmp(l->line + i + 1, name, strlen(name)))
                return err_set(e, ERR_INPUT, "%s:%ld:%zu: token %zu is special %s: its text is "
                               "%s", l->origin, l->no, i + 2, t, vocab_special_name(sp[t]),
                               name);
            const uint8_t *b = (const uint8_t *)(sp[t] == SPECIAL_UNK ? "<unk>" : "");
            if (vb_add(v, b, strlen((const char *)b), sp[t], e))
                return -1;
            continue;
        }
        if (unescape(l, i + 1, l->len, &n, e) || vb_add(v, l->tmp, n, SPECIAL_NONE, e))
            return -1;
    }
    return 0;
}

/* One line "LEFT RIGHT": the tokens of both parts and of the two joined (joined: room for
 * the line's length). */
static int parse_merge(lines *l, vocab *v, size_t r, uint8_t *joined, txl_err *e)
{
    const uint8_t *spc = memchr(l->line, ' ', l->len);
    size_t at = spc ? (size_t)(spc - l->line) : 0, na, nb;
    if (!spc || at == 0 || at + 1 == l->len)
        return err_set(e, ERR_INPUT, "%s:%ld: merge %zu: expected 'LEFT RIGHT', found '%.*s'",
                       l->origin, l->no, r, (int)(l->len < 60 ? l->len : 60),
                       (const char *)l->line);
    if (unescape(l, 0, at, &na, e))
        return -1;
    memcpy(joined, l->tmp, na);
    if (unescape(l, at + 1, l->len, &nb, e))
        return -1;
    memcpy(joined + na, l->tmp, nb);
    long a = vocab_lookup(v, joined, na), b = vocab_lookup(v, joined + na, nb);
    long to = vocab_lookup(v, joined, na + nb);
    if (a < 0 || b < 0 || to < 0)
        return err_set(e, ERR_INPUT, "%s:%ld:%zu: merge %zu: %s is not a token", l->origin,
                       l->no, b < 0 && a >= 0 ? at + 2 : (size_t)1, r,
                       a < 0 ? "its left part" : b < 0 ? "its right part"
                       : "the two parts joined");
    return vb_merge(v, (txl_tok)a, (txl_tok)b, (txl_tok)to, e);
}

/* "merges M" and M merge lines: the line of the first merge, or -1. */
static long parse_merges(lines *l, vocab *v, txl_err *e)
{
    size_t M;
    if (next_line(l))
        return err_set(e, ERR_INPUT, "%s:%ld: the file ends before its merges", l->origin,
                       l->no);
    if (line_num(l, "merges", (size_t)UINT32_MAX - 1, &M, e))
        return -1;
    long first = l->no + 1;
    uint8_t *joined = NULL;
    size_t cap = 0;
    int rc = 0;
    for (size_t r = 0; r < M && !rc; r++) {
        if (next_line(l) || line_is(l, "end")) {
            rc = err_set(e, ERR_INPUT, "%s:%ld: 'merges %zu' but the file lists %zu",
                         l->origin, l->no, M, r);
            break;
        }
        if (l->len > cap) {
            uint8_t *nj = realloc(joined, l->len);
            if (!nj) {
                rc = err_set(e, ERR_RUNTIME, "out of memory reading %s", l->origin);
                break;
            }
            joined = nj;
            cap = l->len;
        }
        rc = parse_merge(l, v, r, joined, e);
    }
    free(joined);
    return rc ? -1 : first;
}

vocab *vocab_parse(const uint8_t *buf, size_t len, const char *origin, txl_err *e)
{
    lines l = {.p = buf, .end = buf + len, .origin = origin};
    vocab_kind k = VOCAB_BYTE;
    size_t V = 0;
    if (next_line(&l) || !line_is(&l, "txl-vocab 1")) {
        if (l.len > 10 && memcmp(l.line, "txl-vocab ", 10) == 0)
            err_set(e, ERR_INPUT, "%s:1: '%.*s': this txl reads version 1 of the vocabulary "
                    "format", origin, (int)(l.len < 40 ? l.len : 40), (const char *)l.line);
        else
            err_set(e, ERR_INPUT, "%s:1: not a txl vocabulary (its first line is not "
                    "'txl-vocab 1')", origin);
        return NULL;
    }
    if (next_line(&l) || l.len < 5 || memcmp(l.line, "kind ", 5)) {
        err_set(e, ERR_INPUT, "%s:%ld: expected 'kind byte|word|bpe'", origin, l.no);
        return NULL;
    }
    char kn[8] = "";
    if (l.len - 5 < sizeof kn)
        memcpy(kn, l.line + 5, l.len - 5);
    if (vocab_kind_parse(kn, &k)) {
        err_set(e, ERR_INPUT, "%s:%ld:6: the kind is byte, word or bpe, not '%.*s'", origin,
                l.no, (int)(l.len - 5 < 40 ? l.len - 5 : 40), (const char *)l.line + 5);
        return NULL;
    }
    if (next_line(&l) || line_num(&l, "size", (size_t)UINT32_MAX - 1, &V, e) || V == 0) {
        if (V == 0 && l.len && !e->kind)
            err_set(e, ERR_INPUT, "%s:%ld: the size is 0", origin, l.no);
        else if (!e->kind)
            err_set(e, ERR_INPUT, "%s:%ld: expected 'size N'", origin, l.no);
        return NULL;
    }
    if (V > len) { /* each token takes a line of at least 3 bytes */
        err_set(e, ERR_INPUT, "%s:%ld: the size is %zu, more tokens than the %zu bytes hold",
                origin, l.no, V, len);
        return NULL;
    }
    uint8_t *sp = calloc(V, 1);
    vocab *v = sp ? vb_new(k, e) : NULL;
    if (!sp)
        err_set(e, ERR_RUNTIME, "out of memory reading %s", origin);
    long line_tok = 0, line_merge = 0;
    int rc = !v || parse_specials(&l, V, sp, e) ? -1 : 0;
    line_tok = l.no + 1;
    if (!rc)
        rc = parse_tokens(&l, v, V, sp, e) || vb_index(v, origin, line_tok, e) ? -1 : 0;
    if (!rc && k == VOCAB_BPE) {
        line_merge = parse_merges(&l, v, e);
        rc = line_merge < 0 ? -1 : 0;
    }
    if (!rc && (next_line(&l) || !line_is(&l, "end")))
        rc = err_set(e, ERR_INPUT, "%s:%ld: expected 'end'%s", origin, l.no,
                     k == VOCAB_BPE ? " after the merges" : " after the tokens");
    if (!rc && l.p < l.end)
        rc = err_set(e, ERR_INPUT, "%s:%ld: bytes after 'end'", origin, l.no + 1);
    if (!rc)
        rc = vb_seal(v, origin, line_tok, line_merge, e);
    free(sp);
    free(l.tmp);
    if (rc) {
        vocab_free(v);
        return NULL;
    }
    return v;
}

/* ---- Files -------------------------------------------------------------------------------- */

/* The most bytes of a vocabulary file read (a WikiText-103 word vocabulary is 3 MB). */
#define VOCAB_FILE_MAX ((size_t)1 << 30)

int vocab_read_file(const char *path, size_t max, const char *what, uint8_t **out,
                    size_t *out_len, txl_err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, ERR_INPUT, "%s: cannot open the %s: %s", path, what, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        close(fd);
        return err_set(e, ERR_INPUT, "%s: is a directory, expected a %s", path, what);
    }
    instream in;
    if (ins_open(&in, fd, path, e))
        return -1;
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = NULL;
    int rc = -1;
    for (;;) {
        uint8_t *nb = realloc(buf, cap);
        if (!nb) {
            err_set(e, ERR_RUNTIME, "%s: out of memory reading the %s", path, what);
            break;
        }
        buf = nb;
        long long got = ins_read(&in, buf + len, cap - len, e);
        if (got < 0)
            break;
        len += (size_t)got;
        if (len < cap) {
            rc = 0;
            break;
        }
        if (cap > max) {
            err_set(e, ERR_INPUT, "%s: larger than %zu MiB: not a %s", path, max >> 20, what);
            break;
        }
        cap *= 2;
    }
    ins_close(&in);
    if (rc) {
        free(buf);
        return -1;
    }
    *out = buf;
    *out_len = len;
    return 0;
}

vocab *vocab_load(const char *path, txl_err *e)
{
    uint8_t *buf;
    size_t len;
    if (vocab_read_file(path, VOCAB_FILE_MAX, "vocabulary", &buf, &len, e))
        return NULL;
    vocab *v = vocab_parse(buf, len, path, e);
    free(buf);
    return v;
}

int vocab_save(const vocab *v, const char *path, txl_err *e)
{
    uint8_t *buf;
    size_t len;
    if (vocab_serialize(v, &buf, &len, e))
        return -1;
    outfile f;
    int rc = outfile_open(&f, path, e) || outfile_write(&f, buf, len, e) ||
             outfile_commit(&f, e) ? -1 : 0;
    if (rc)
        outfile_abort(&f);
    free(buf);
    return rc;
}

/* pretok.c: GPT-2's pre-tokenization through PCRE2 (see pretok.h for the rules). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "pretok.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "vocab_impl.h"

/* GPT-2's pattern (openai/gpt-2 src/encoder.py; tiktoken's r50k_base) with \s spelled out
 * as Unicode's White_Space, which is what \s means to Python's regex module (GPT-2's) and
 * to Rust's regex (tiktoken's): PCRE2's \s under UCP also takes U+180E (Mongolian vowel
 * separator, a format character since Unicode 6.3). */
#define WS "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
static const char PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|"
                              "[" WS "]+(?![^" WS "])|[" WS "]+";
/* A character's class as the pattern sees it: whitespace, letter, number, other */
static const char CLASSES[] = "([" WS "])|(\\p{L})|(\\p{N})";

enum { CL_OTHER, CL_SPACE, CL_LETTER, CL_NUMBER };

struct pretok {
    pcre2_code *re, *cls;
    pcre2_match_data *md, *cmd;
    int jit;                 /* re was JIT-compiled */
    uint8_t ascii[128];      /* the class of each ASCII character */
};

static int char_class(pretok *p, const uint8_t *c, size_t n)
{
    if (n == 1 && c[0] < 0x80)
        return p->ascii[c[0]];
    int rc = pcre2_match(p->cls, c, n, 0, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, p->cmd, NULL);
    return rc == 2 ? CL_SPACE : rc == 3 ? CL_LETTER : rc == 4 ? CL_NUMBER : CL_OTHER;
}

pretok *pretok_new(txl_err *e)
{
    pretok *p = calloc(1, sizeof *p);
    if (!p) {
        err_set(e, ERR_RUNTIME, "out of memory for the pre-tokenizer");
        return NULL;
    }
    int er;
    PCRE2_SIZE at;
    uint32_t flags = PCRE2_UTF | PCRE2_UCP;
    p->re = pcre2_compile((PCRE2_SPTR)PATTERN, PCRE2_ZERO_TERMINATED, flags, &er, &at, NULL);
    p->cls = pcre2_compile((PCRE2_SPTR)CLASSES, PCRE2_ZERO_TERMINATED, flags | PCRE2_ANCHORED,
                           &er, &at, NULL);
    if (p->re && p->cls)
        p->md = pcre2_match_data_create_from_pattern(p->re, NULL);
    if (p->md)
        p->cmd = pcre2_match_data_create_from_pattern(p->cls, NULL);
    if (!p->cmd) {
        PCRE2_UCHAR msg[256] = "out of memory";
        if (!p->re || !p->cls)
            pcre2_get_error_message(er, msg, sizeof msg);
        err_set(e, ERR_RUNTIME, "PCRE2 cannot compile GPT-2's pattern: %s", (char *)msg);
        pretok_free(p);
        return NULL;
    }
    p->jit = pcre2_jit_compile(p->re, PCRE2_JIT_COMPLETE) == 0;
    for (int c = 0; c < 128; c++) {
        uint8_t b = (uint8_t)c;
        int rc = pcre2_match(p->cls, &b, 1, 0, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, p->cmd, NULL);
        p->ascii[c] = rc == 2 ? CL_SPACE : rc == 3 ? CL_LETTER : rc == 4 ? CL_NUMBER : CL_OTHER;
    }
    return p;
}

void pretok_free(pretok *p)
{
    if (!p)
        return;
    pcre2_match_data_free(p->md);
    pcre2_match_data_free(p->cmd);
    pcre2_code_free(p->re);
    pcre2_code_free(p->cls);
    free(p);
}

int pretok_utf8_len(const uint8_t *p, size_t n)
{
    uint32_t cp;
    return p[0] < 0x80 ? 1 : vocab_utf8(p, n, &cp);
}

/* Whether the cut between characters c (class cc, first byte c0) and d (class dc) is safe:
 * pretok.h's rules. */
static int safe(int cc, uint8_t c0, int dc)
{
    switch (cc) {
    case CL_LETTER:
        return dc != CL_LETTER;
    case CL_NUMBER:
        return dc != CL_NUMBER;
    case CL_OTHER:
        return c0 != '\'' && dc != CL_OTHER;
    default:
        return c0 != ' ' && dc != CL_SPACE;
    }
}

size_t pretok_safe_cut(pretok *p, const uint8_t *buf, size_t len, size_t from)
{
    if (from < 1)
        from = 1;
    for (size_t q = len; q-- > from;) {
        uint8_t b = buf[q];
        if ((b & 0xc0) == 0x80)
            continue; /* inside a character, or an invalid unit */
        int dl = pretok_utf8_len(buf + q, len - q);
        if (!dl)
            continue;
        size_t s = q - 1;
        while (s > 0 && q - s < 4 && (buf[s] & 0xc0) == 0x80)
            s--;
        int cl = pretok_utf8_len(buf + s, len - s);
        if (!cl || s + (size_t)cl != q)
            continue;
        if (safe(char_class(p, buf + s, (size_t)cl), buf[s], char_class(p, buf + q, (size_t)dl)))
            return q;
    }
    return 0;
}

/* The end of the run of valid characters from pos (pos: an invalid unit, or the end). */
static size_t valid_run(const uint8_t *buf, size_t pos, size_t len)
{
    while (pos < len) {
        if (buf[pos] < 0x80) {
            pos++;
            continue;
        }
        int k = pretok_utf8_len(buf + pos, len - pos);
        if (!k)
            break;
        pos += (size_t)k;
    }
    return pos;
}

int pretok_pieces(pretok *p, const uint8_t *buf, size_t len, size_t limit, pretok_fn fn,
                  void *ctx)
{
    size_t pos = 0;
    while (pos < limit) {
        size_t r = valid_run(buf, pos, len);
        int rc;
        if (r == pos) { /* an invalid unit: a piece of its own */
            if ((rc = fn(ctx, pos, 1)) != 0)
                return rc;
            pos++;
            continue;
        }
        const uint8_t *sub = buf + pos;
        size_t n = r - pos, off = 0;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(p->md);
        while (off < n && pos + off < limit) {
            int m = p->jit ? pcre2_jit_match(p->re, sub, n, off, PCRE2_NO_UTF_CHECK, p->md, NULL)
                           : pcre2_match(p->re, sub, n, off, PCRE2_NO_UTF_CHECK, p->md, NULL);
            /* every character matches an alternative, so a match starts at off; were there
             * none (or a gap), the bytes would still be a piece */
            size_t end = m > 0 && ov[0] == off && ov[1] > off ? ov[1] : n;
            if (m > 0 && ov[0] > off && ov[0] < n)
                end = ov[0];
            if ((rc = fn(ctx, pos + off, end - off)) != 0)
                return rc;
            off = end;
        }
        pos += off;
    }
    return 0;
}

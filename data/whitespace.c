/* whitespace.c: the whitespace characters of Python's str.split() (str.isspace(): U+0009..
 * U+000D, U+001C..U+001F, U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
 * U+202F, U+205F, U+3000) in UTF-8: what splits a line into words (word.c, official
 * Transformer-XL's Vocab) and what no word token holds (vocab.c's checks). */
#include "whitespace.h"

/* The whitespace character at p[0 .. n): its length; 0 when there is none; -1 when p ends
 * within what could be one (undecided until more bytes come). A multi-byte whitespace
 * character starts with a lead byte, never a continuation byte, so testing every byte
 * offset finds exactly the characters of valid UTF-8. */
int whitespace_at(const uint8_t *p, size_t n)
{
    uint8_t c = p[0];
    if (c < 0x80)
        return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20);
    if (c != 0xc2 && c != 0xe1 && c != 0xe2 && c != 0xe3)
        return 0;
    if (n < 2)
        return -1;
    uint8_t d = p[1];
    if (c == 0xc2)
        return d == 0x85 || d == 0xa0 ? 2 : 0;
    if ((c == 0xe1 && d != 0x9a) || (c == 0xe2 && d != 0x80 && d != 0x81) ||
        (c == 0xe3 && d != 0x80))
        return 0;
    if (n < 3)
        return -1;
    uint8_t f = p[2];
    if (c == 0xe2 && d == 0x80)
        return (f >= 0x80 && f <= 0x8a) || f == 0xa8 || f == 0xa9 || f == 0xaf ? 3 : 0;
    if (c == 0xe2)
        return f == 0x9f ? 3 : 0;
    return f == 0x80 ? 3 : 0; /* U+1680, U+3000 */
}

size_t whitespace_len(const uint8_t *p, size_t n)
{
    int s = n ? whitespace_at(p, n) : 0;
    return s > 0 ? (size_t)s : 0;
}

size_t whitespace_in(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (whitespace_len(p + i, n - i))
            return i;
    return n;
}

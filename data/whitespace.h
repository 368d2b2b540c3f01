/* whitespace.h: Python's whitespace characters in UTF-8 (whitespace.c). */
#ifndef TXL_WHITESPACE_H
#define TXL_WHITESPACE_H

#include <stddef.h>
#include <stdint.h>

/* The whitespace character at p[0 .. n) (n >= 1): its length; 0 when there is none; -1
 * when p ends within what could be one (undecided until more bytes come). */
int whitespace_at(const uint8_t *p, size_t n);
/* The length of the whitespace character at p (0: none there; an incomplete sequence at
 * the end counts as none), and the offset of the first one in p[0..n) (n: none). */
size_t whitespace_len(const uint8_t *p, size_t n);
size_t whitespace_in(const uint8_t *p, size_t n);

#endif

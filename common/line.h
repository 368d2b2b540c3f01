/* line.h: one line of a FILE, with a bound. getline has none (a file without newlines,
 * /dev/zero, would take all memory), and its ENOMEM looks like the end of the file. */
#ifndef TXL_LINE_H
#define TXL_LINE_H

#include <stddef.h>
#include <stdio.h>

/* One line of f into *buf (grown as needed, *cap its size; NUL-terminated, with its
 * newline): its length, 0 at the end of f, -1 past `max` bytes, -2 on a read error or out
 * of memory (errno). */
long line_read(FILE *f, size_t max, char **buf, size_t *cap);

#endif

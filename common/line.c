/* line.c: see line.h. */
#include "line.h"

#include <errno.h>
#include <stdlib.h>

long line_read(FILE *f, size_t max, char **buf, size_t *cap)
{
    size_t n = 0;
    int ch;
    errno = 0;
    while ((ch = getc_unlocked(f)) != EOF) {
        if (n == max)
            return -1;
        if (n + 2 > *cap) {
            size_t nc = *cap ? 2 * *cap : 4096;
            char *nb = realloc(*buf, nc);
            if (!nb)
                return -2;
            *buf = nb;
            *cap = nc;
        }
        (*buf)[n++] = (char)ch;
        if (ch == '\n')
            break;
    }
    if (ferror(f))
        return -2;
    if (*buf)
        (*buf)[n] = '\0';
    return (long)n;
}

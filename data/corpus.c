/* corpus.c: see corpus.h. */
#include "corpus.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static int read_gzip(corpus *c, txl_err *e)
{
    gzFile gz = gzopen(c->path, "rb");
    if (!gz)
        return err_set(e, ERR_INPUT, "%s: cannot open: %s", c->path, strerror(errno));
    gzbuffer(gz, 1 << 17);
    size_t cap = 1 << 20, len = 0;
    uint8_t *buf = malloc(cap);
    int rc = 0;
    for (; buf;) {
        if (cap - len < (1 << 16)) {
            uint8_t *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!nb) {
                rc = err_set(e, ERR_RUNTIME, "%s: out of memory decompressing (%zu bytes so far)",
                             c->path, len);
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t want = cap - len > (1u << 30) ? (1u << 30) : cap - len;
        int got = gzread(gz, buf + len, (unsigned)want);
        if (got <= 0) {
            int zerr;
            const char *msg = gzerror(gz, &zerr);
            size_t pn = strlen(c->path); /* zlib's message starts with the path */
            if (strncmp(msg, c->path, pn) == 0 && msg[pn] == ':' && msg[pn + 1] == ' ')
                msg += pn + 2;
            if (got < 0 || zerr != Z_OK)
                rc = err_set(e, ERR_INPUT, "%s: corrupt or truncated gzip data: %s after %zu "
                             "decompressed bytes", c->path,
                             zerr == Z_ERRNO ? strerror(errno) : msg, len);
            break;
        }
        len += (size_t)got;
    }
    gzclose(gz);
    if (!buf)
        return err_set(e, ERR_RUNTIME, "%s: out of memory", c->path);
    if (rc) {
        free(buf);
        return rc;
    }
    c->owned = buf;
    c->data = buf;
    c->len = len;
    return 0;
}

int corpus_open(corpus *c, const char *path, txl_err *e)
{
    memset(c, 0, sizeof *c);
    snprintf(c->path, sizeof c->path, "%s", path);
    if (!path || !*path)
        return err_set(e, ERR_INPUT, "no corpus path given");
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return err_set(e, ERR_INPUT, "%s: cannot open corpus: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int er = errno;
        close(fd);
        return err_set(e, ERR_INPUT, "%s: cannot stat corpus: %s", path, strerror(er));
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return err_set(e, ERR_INPUT, "%s: is a directory, expected a text file", path);
    }
    unsigned char magic[2] = {0, 0};
    ssize_t got = pread(fd, magic, 2, 0);
    if (got < 0) {
        int er = errno;
        close(fd);
        return err_set(e, ERR_INPUT, "%s: cannot read corpus: %s", path, strerror(er));
    }
    if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        close(fd);
        c->gzipped = 1;
        if (read_gzip(c, e))
            return -1;
    } else if (S_ISREG(sb.st_mode) && sb.st_size > 0) {
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        int er = errno;
        close(fd);
        if (m == MAP_FAILED)
            return err_set(e, ERR_INPUT, "%s: cannot map corpus: %s", path, strerror(er));
        madvise(m, (size_t)sb.st_size, MADV_SEQUENTIAL);
        c->map = m;
        c->map_len = (size_t)sb.st_size;
        c->data = m;
        c->len = (size_t)sb.st_size;
    } else if (!S_ISREG(sb.st_mode)) { /* a pipe or device: read it whole */
        close(fd);
        c->gzipped = 0;
        if (read_gzip(c, e)) /* gz* reads plain streams as-is */
            return -1;
    } else {
        close(fd);
    }
    if (c->len == 0) {
        corpus_close(c);
        return err_set(e, ERR_INPUT, "%s: corpus is empty", path);
    }
    return 0;
}

void corpus_close(corpus *c)
{
    if (c->map)
        munmap(c->map, c->map_len);
    free(c->owned);
    memset(c, 0, sizeof *c);
}

token_span corpus_all(const corpus *c)
{
    token_span s = {c->data, c->len, c->path, 0};
    return s;
}

void corpus_split(const corpus *c, const double frac[3], token_span out[3])
{
    size_t T = c->len, at = 0;
    double cum = 0;
    for (int i = 0; i < 3; i++) {
        cum += frac[i];
        size_t end = cum >= 1.0 ? T : (size_t)(cum * (double)T);
        if (end < at)
            end = at;
        if (end > T)
            end = T;
        out[i].tok = c->data + at;
        out[i].n = end - at;
        out[i].path = c->path;
        out[i].begin = at;
        at = end;
    }
}

int batcher_init(batcher *bt, token_span s, int B, int Lq, size_t min_len, const char *what,
                 txl_err *e)
{
    memset(bt, 0, sizeof *bt);
    bt->s = s;
    bt->B = B;
    bt->Lq = Lq;
    bt->n = B > 0 ? s.n / (size_t)B : 0;
    if (min_len < 2)
        min_len = 2;
    if (bt->n < min_len) {
        char why[64];
        if (min_len == (size_t)Lq + 1)
            snprintf(why, sizeof why, "tgt_len %d + 1", Lq);
        else
            snprintf(why, sizeof why, "an input and its target");
        return err_set(e, ERR_INPUT,
                       "%s: the %s split has %zu bytes: %d streams of %zu tokens each, but each "
                       "stream needs at least %zu (%s); use a larger corpus or %s", s.path,
                       what, s.n, B, bt->n, min_len, why,
                       min_len == (size_t)Lq + 1 ? "a smaller batch_size/tgt_len"
                                                 : "fewer streams (batch)");
    }
    return 0;
}

int batcher_next(batcher *bt, uint8_t *x, uint8_t *y)
{
    if (bt->pos + 1 >= bt->n)
        return 0;
    size_t len = bt->n - 1 - bt->pos;
    if (len > (size_t)bt->Lq)
        len = (size_t)bt->Lq;
    for (int b = 0; b < bt->B; b++) {
        const uint8_t *src = bt->s.tok + (size_t)b * bt->n + bt->pos;
        memcpy(x + (size_t)b * len, src, len);
        memcpy(y + (size_t)b * len, src + 1, len);
    }
    bt->pos += len;
    return (int)len;
}

size_t batcher_segments(const batcher *bt)
{
    return bt->n < 2 ? 0 : (bt->n - 1 + (size_t)bt->Lq - 1) / (size_t)bt->Lq;
}

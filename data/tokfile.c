/* tokfile.c: see tokfile.h. */
#include "tokfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOKFILE_VERSION 1
#define WRITE_BUF (1u << 20)

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t x = 0;
    for (int i = n - 1; i >= 0; i--)
        x = x << 8 | p[i];
    return x;
}

static void put_le(uint8_t *p, uint64_t x, int n)
{
    for (int i = 0; i < n; i++, x >>= 8)
        p[i] = (uint8_t)x;
}

int tokfile_sniff(const uint8_t *head, size_t n)
{
    return n >= 4 && memcmp(head, "TXLT", 4) == 0;
}

static int full_pread(int fd, uint8_t *buf, size_t n, size_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t got = pread(fd, buf + done, n - done, (off_t)(off + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got < 0 ? -1 : (int)0 - 2; /* -2: the end came first */
        done += (size_t)got;
    }
    return 0;
}

/* The header's fields, each checked; then the file's size against the count. */
static int check_header(tokfile *f, const uint8_t *h, size_t size, const vocab *v, txl_err *e)
{
    const char *p = f->path;
    if (!tokfile_sniff(h, TOKFILE_HEADER))
        return err_set(e, ERR_INPUT, "%s: not a txl token file (its first bytes are not "
                       "'TXLT')", p);
    unsigned ver = (unsigned)get_le(h + 4, 2), width = (unsigned)get_le(h + 6, 2);
    uint64_t V = get_le(h + 8, 4), n = get_le(h + 24, 8);
    if (ver != TOKFILE_VERSION)
        return err_set(e, ERR_INPUT, "%s: byte 4: token file version %u, this txl reads "
                       "version %d", p, ver, TOKFILE_VERSION);
    if (V == 0 || width != (V <= 65536 ? 2u : 4u))
        return err_set(e, ERR_INPUT, "%s: byte 6: ids of %u bytes for a vocabulary of %llu "
                       "tokens (2 up to 65,536 tokens, else 4)", p, width,
                       (unsigned long long)V);
    if (get_le(h + 12, 4) != 0)
        return err_set(e, ERR_INPUT, "%s: bytes 12..15 are not 0", p);
    f->vocab_size = (uint32_t)V;
    f->width = (int)width;
    f->fingerprint = get_le(h + 16, 8);
    uint64_t want = (uint64_t)TOKFILE_HEADER + n * width;
    if (n > (UINT64_MAX - TOKFILE_HEADER) / width || want != size)
        return err_set(e, ERR_INPUT, "%s: the header says %llu tokens (%llu bytes), the file "
                       "has %zu bytes: %s", p, (unsigned long long)n,
                       (unsigned long long)want, size,
                       want > size ? "truncated" : "bytes after the last token");
    f->n = (size_t)n;
    if (v && (vocab_size(v) != V || vocab_fingerprint(v) != f->fingerprint))
        return err_set(e, ERR_INPUT, "%s: its ids are of another vocabulary (%llu tokens, "
                       "fingerprint %016llx; this one: %zu tokens, %016llx)", p,
                       (unsigned long long)V, (unsigned long long)f->fingerprint,
                       vocab_size(v), (unsigned long long)vocab_fingerprint(v));
    return 0;
}

int tokfile_open(tokfile *f, const char *path, const vocab *v, txl_err *e)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    snprintf(f->path, sizeof f->path, "%s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, ERR_INPUT, "%s: cannot open the token file: %s", path, strerror(errno));
    struct stat sb;
    uint8_t h[TOKFILE_HEADER];
    int rc = fstat(fd, &sb) != 0 ? err_set(e, ERR_INPUT, "%s: cannot stat: %s", path,
                                           strerror(errno))
             : !S_ISREG(sb.st_mode) ? err_set(e, ERR_INPUT, "%s: not a regular file (a token "
                                              "file is read in place)", path)
             : 0;
    if (!rc && (size_t)sb.st_size < TOKFILE_HEADER)
        rc = err_set(e, ERR_INPUT, "%s: %lld bytes, shorter than a token file's %d-byte header",
                     path, (long long)sb.st_size, TOKFILE_HEADER);
    if (!rc && full_pread(fd, h, TOKFILE_HEADER, 0))
        rc = err_set(e, ERR_INPUT, "%s: cannot read the header: %s", path, strerror(errno));
    if (!rc)
        rc = check_header(f, h, (size_t)sb.st_size, v, e);
    if (rc) {
        close(fd);
        return -1;
    }
    f->fd = fd;
    return 0;
}

int tokfile_read(const tokfile *f, size_t off, size_t n, txl_tok *out, txl_err *e)
{
    if (off > f->n || n > f->n - off)
        return err_set(e, ERR_INPUT, "%s: tokens %zu .. %zu are past its %zu tokens", f->path,
                       off, off + n, f->n);
    uint8_t buf[1 << 14];
    size_t per = sizeof buf / (size_t)f->width;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < per ? n - done : per, at = TOKFILE_HEADER + (off + done) * f->width;
        int rc = full_pread(f->fd, buf, k * (size_t)f->width, at);
        if (rc)
            return err_set(e, ERR_INPUT, "%s: cannot read token %zu (byte %zu): %s", f->path,
                           off + done, at, rc == -2 ? "the file was truncated while txl read "
                           "it" : strerror(errno));
        for (size_t i = 0; i < k; i++) {
            uint64_t id = get_le(buf + i * (size_t)f->width, f->width);
            if (id >= f->vocab_size)
                return err_set(e, ERR_INPUT, "%s: token %zu (byte %zu) is id %llu, not below "
                               "the vocabulary's size %u", f->path, off + done + i,
                               at + i * (size_t)f->width, (unsigned long long)id,
                               f->vocab_size);
            out[done + i] = (txl_tok)id;
        }
        done += k;
    }
    return 0;
}

int tokfile_check(const tokfile *f, txl_err *e)
{
    txl_tok buf[1 << 13];
    size_t per = sizeof buf / sizeof *buf;
    for (size_t at = 0; at < f->n; at += per)
        if (tokfile_read(f, at, f->n - at < per ? f->n - at : per, buf, e))
            return -1;
    return 0;
}

void tokfile_close(tokfile *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
}

/* ---- Writing --------------------------------------------------------------------------- */

static void header(const tokfile_writer *w, uint8_t *h)
{
    memset(h, 0, TOKFILE_HEADER);
    memcpy(h, "TXLT", 4);
    put_le(h + 4, TOKFILE_VERSION, 2);
    put_le(h + 6, (uint64_t)w->width, 2);
    put_le(h + 8, w->vocab_size, 4);
    put_le(h + 16, w->fingerprint, 8);
    put_le(h + 24, w->n, 8);
}

int tokfile_create(tokfile_writer *w, const char *path, const vocab *v, txl_err *e)
{
    memset(w, 0, sizeof *w);
    w->out.fd = -1;
    w->vocab_size = (uint32_t)vocab_size(v);
    w->width = vocab_size(v) <= 65536 ? 2 : 4;
    w->fingerprint = vocab_fingerprint(v);
    w->buf = malloc(WRITE_BUF);
    if (!w->buf)
        return err_set(e, ERR_RUNTIME, "out of memory for a token file's buffer");
    uint8_t h[TOKFILE_HEADER];
    header(w, h);
    if (outfile_open(&w->out, path, e) || outfile_write(&w->out, h, sizeof h, e)) {
        tokfile_abort(w);
        return -1;
    }
    return 0;
}

int tokfile_write(tokfile_writer *w, const txl_tok *t, size_t n, txl_err *e)
{
    for (size_t i = 0; i < n; i++) {
        if (w->buf_n + 4 > WRITE_BUF) {
            if (outfile_write(&w->out, w->buf, w->buf_n, e))
                return -1;
            w->buf_n = 0;
        }
        put_le(w->buf + w->buf_n, t[i], w->width);
        w->buf_n += (size_t)w->width;
    }
    w->n += n;
    return 0;
}

int tokfile_commit(tokfile_writer *w, txl_err *e)
{
    uint8_t h[TOKFILE_HEADER];
    header(w, h);
    int rc = outfile_write(&w->out, w->buf, w->buf_n, e) ||
             outfile_pwrite(&w->out, h, sizeof h, 0, e) || outfile_commit(&w->out, e) ? -1 : 0;
    free(w->buf);
    w->buf = NULL;
    return rc;
}

void tokfile_abort(tokfile_writer *w)
{
    outfile_abort(&w->out);
    free(w->buf);
    w->buf = NULL;
}

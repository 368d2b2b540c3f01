/* instream.c: see instream.h. The gzip side is zlib's inflate with a gzip-only wrapper
 * (windowBits 15 + 16), one member at a time: at each member's end inflate has checked the
 * CRC-32 and the length, and the next two bytes must be another member's magic or nothing. */
#include "instream.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INS_BUF (1u << 17)

size_t ins_phys_mem(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return 0;
    return (double)pages * (double)page > (double)SIZE_MAX ? SIZE_MAX
                                                           : (size_t)pages * (size_t)page;
}

/* One read(2) of at most want bytes into buf, retried on EINTR; counts what came in raw
 * and marks the end of the file. Returns the count (0 at the end), -1 on a read error. */
static long raw_read(instream *s, uint8_t *buf, size_t want, txl_err *e)
{
    for (;;) {
        ssize_t got = read(s->fd, buf, want);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return err_set(e, ERR_INPUT, "%s: cannot read: %s", s->path, strerror(errno));
        if (got == 0)
            s->in_eof = 1;
        s->raw += (unsigned long long)got;
        return (long)got;
    }
}

/* Reads more raw bytes behind the unconsumed ones. Returns the count added (0 at the end
 * of the file), -1 on a read error. */
static long fill(instream *s, txl_err *e)
{
    if (s->in_eof)
        return 0;
    if (s->z.avail_in && s->z.next_in != s->in)
        memmove(s->in, s->z.next_in, s->z.avail_in);
    s->z.next_in = s->in;
    long got = raw_read(s, s->in + s->z.avail_in, INS_BUF - s->z.avail_in, e);
    if (got > 0)
        s->z.avail_in += (uInt)got;
    return got;
}

int ins_open(instream *s, int fd, const char *path, txl_err *e)
{
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    s->fd = fd;
    s->in = malloc(INS_BUF);
    if (!s->in) {
        close(fd);
        return err_set(e, ERR_RUNTIME, "%s: out of memory", path);
    }
    s->z.next_in = s->in;
    s->live = 1;
    while (s->z.avail_in < 2 && !s->in_eof)
        if (fill(s, e) < 0) {
            ins_close(s);
            return -1;
        }
    if (s->z.avail_in >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b) {
        s->gz = 1;
        if (inflateInit2(&s->z, 15 + 16) != Z_OK) {
            ins_close(s);
            return err_set(e, ERR_RUNTIME, "%s: out of memory", path);
        }
        s->z_live = 1;
    }
    return 0;
}

static int gz_fail(instream *s, const char *why, txl_err *e)
{
    s->corrupt = 1;
    return err_set(e, ERR_INPUT, "%s: corrupt or truncated gzip data: %s after %llu "
                   "decompressed bytes", s->path, why, s->out);
}

/* At the end of a member: another member follows (1), the data ends (0), or -1. */
static int next_member(instream *s, txl_err *e)
{
    while (s->z.avail_in < 2 && !s->in_eof)
        if (fill(s, e) < 0)
            return -1;
    if (s->z.avail_in == 0)
        return 0;
    if (s->z.avail_in >= 2 && s->z.next_in[0] == 0x1f && s->z.next_in[1] == 0x8b) {
        inflateReset(&s->z);
        return 1;
    }
    return err_set(e, ERR_INPUT, "%s: trailing garbage after the gzip data: the bytes from "
                   "offset %llu of the file are not another gzip member", s->path,
                   s->raw - s->z.avail_in);
}

static long long read_gz(instream *s, uint8_t *buf, size_t n, txl_err *e)
{
    size_t done = 0;
    while (done < n && !s->done) {
        if (s->z.avail_in == 0 && fill(s, e) < 0)
            return -1;
        size_t want = n - done > UINT_MAX ? UINT_MAX : n - done;
        s->z.next_out = buf + done;
        s->z.avail_out = (uInt)want;
        int zr = inflate(&s->z, Z_NO_FLUSH);
        size_t got = want - s->z.avail_out;
        done += got;
        s->out += got;
        if (zr == Z_STREAM_END) {
            int more = next_member(s, e);
            if (more < 0)
                return -1;
            s->done = !more;
        } else if (zr == Z_MEM_ERROR) {
            return err_set(e, ERR_RUNTIME, "%s: out of memory decompressing", s->path);
        } else if (zr == Z_BUF_ERROR || (zr == Z_OK && got == 0 && s->z.avail_in == 0)) {
            if (s->in_eof && s->z.avail_in == 0) /* inflate wants input that is not there */
                return gz_fail(s, "unexpected end of file", e);
            if (zr == Z_BUF_ERROR && s->z.avail_in) /* no progress with input and room */
                return gz_fail(s, "inflate made no progress", e);
        } else if (zr != Z_OK) {
            return gz_fail(s, s->z.msg ? s->z.msg : "invalid deflate data", e);
        }
    }
    return (long long)done;
}

static long long read_plain(instream *s, uint8_t *buf, size_t n, txl_err *e)
{
    size_t done = s->z.avail_in < n ? s->z.avail_in : n; /* what ins_open read ahead */
    memcpy(buf, s->z.next_in, done);
    s->z.next_in += done;
    s->z.avail_in -= (uInt)done;
    while (done < n && !s->in_eof) {
        long got = raw_read(s, buf + done, n - done > (1u << 30) ? (1u << 30) : n - done, e);
        if (got < 0)
            return -1;
        done += (size_t)got;
    }
    s->out += done;
    s->done = s->in_eof && s->z.avail_in == 0;
    return (long long)done;
}

long long ins_read(instream *s, void *buf, size_t n, txl_err *e)
{
    if (!s->live)
        return err_set(e, ERR_RUNTIME, "%s: read from a closed stream", s->path);
    return s->gz ? read_gz(s, buf, n, e) : read_plain(s, buf, n, e);
}

void ins_close(instream *s)
{
    if (s->z_live)
        inflateEnd(&s->z);
    if (s->live)
        close(s->fd);
    free(s->in);
    memset(s, 0, sizeof *s);
}

/* outfile.c: see outfile.h. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int outfile_open(outfile *f, const char *path, txl_err *e)
{
    f->fd = -1;
    f->tmp[0] = 0;
    if (strlen(path) >= sizeof f->path)
        return err_set(e, ERR_INPUT, "%.80s...: the path is longer than %zu bytes", path,
                       sizeof f->path - 1);
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp.XXXXXX", path);
    f->fd = mkstemp(f->tmp);
    if (f->fd < 0) {
        f->tmp[0] = 0;
        return err_set(e, ERR_RUNTIME, "%s: cannot create a temporary file next to it: %s",
                       path, strerror(errno));
    }
    mode_t m = umask(022);
    umask(m);
    fchmod(f->fd, 0666 & ~m);
    return 0;
}

static int fail(outfile *f, const char *what, int er, txl_err *e)
{
    err_set(e, ERR_RUNTIME, "%s: %s failed: %s (the previous file, if any, is untouched)",
            f->path, what, strerror(er));
    outfile_abort(f);
    return -1;
}

/* All n bytes of p, at the file's end (at_end) or at offset off, through short writes and
 * interruptions. */
static int write_all(outfile *f, const void *p, size_t n, int at_end, size_t off, txl_err *e)
{
    const char *b = p;
    while (n) {
        ssize_t w = at_end ? write(f->fd, b, n > (1u << 30) ? (1u << 30) : n)
                           : pwrite(f->fd, b, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return fail(f, "write", w < 0 ? errno : EIO, e);
        b += w;
        n -= (size_t)w;
        off += (size_t)w;
    }
    return 0;
}

int outfile_write(outfile *f, const void *p, size_t n, txl_err *e)
{
    return write_all(f, p, n, 1, 0, e);
}

int outfile_pwrite(outfile *f, const void *p, size_t n, size_t off, txl_err *e)
{
    return write_all(f, p, n, 0, off, e);
}

int outfile_commit(outfile *f, txl_err *e)
{
    if (fsync(f->fd) != 0)
        return fail(f, "fsync", errno, e);
    int rc = close(f->fd);
    f->fd = -1;
    if (rc != 0)
        return fail(f, "close", errno, e);
    if (rename(f->tmp, f->path) != 0)
        return fail(f, "rename", errno, e);
    f->tmp[0] = 0;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", f->path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        slash[slash == dir] = 0;
    int dfd = open(dir, O_RDONLY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

void outfile_abort(outfile *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    if (f->tmp[0])
        unlink(f->tmp);
    f->tmp[0] = 0;
}

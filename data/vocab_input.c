/* vocab_input.c: the texts a vocabulary is built from (vocab_build_opts: files, plain or
 * gzip'd, "-" stdin, or a caller's reader), read in chunks of 1 MiB for word.c and
 * bpe_train.c, with a progress line on a terminal. */
#include "vocab_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/instream.h"

#define READ_CHUNK (1u << 20)

/* The progress line: MiB read so far, every 16 MiB (a terminal only). */
static void progress(const vocab_build_opts *o, size_t *done, size_t n)
{
    if (o->progress && (*done + n) >> 24 != *done >> 24 && isatty(STDERR_FILENO))
        fprintf(stderr, "\rtxl: vocabulary: %zu MiB read", (*done + n) >> 20);
    *done += n;
}

static int read_file(const vocab_build_opts *o, const char *path, vocab_chunk_fn fn, void *ctx,
                     uint8_t *buf, size_t *done, txl_err *e)
{
    int std_in = strcmp(path, "-") == 0;
    const char *name = std_in ? "<stdin>" : path;
    int fd = std_in ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, ERR_INPUT, "%s: cannot open: %s", name, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        close(fd);
        return err_set(e, ERR_INPUT, "%s: is a directory, expected a text file", name);
    }
    instream in;
    if (ins_open(&in, fd, name, e))
        return -1;
    int rc = 0;
    for (;;) {
        long long got = ins_read(&in, buf, READ_CHUNK, e);
        if (got < 0 || (got > 0 && (rc = fn(ctx, buf, (size_t)got, 0, e))) != 0) {
            rc = -1;
            break;
        }
        progress(o, done, (size_t)got);
        if (got == 0) {
            rc = fn(ctx, NULL, 0, 1, e);
            break;
        }
    }
    ins_close(&in);
    return rc;
}

static int read_text(const vocab_build_opts *o, vocab_chunk_fn fn, void *ctx, uint8_t *buf,
                     size_t *done, txl_err *e)
{
    for (size_t at = 0; at < o->text_len; at += READ_CHUNK) {
        size_t n = o->text_len - at < READ_CHUNK ? o->text_len - at : READ_CHUNK;
        if (o->read(o->read_ctx, at, buf, n, e) || fn(ctx, buf, n, 0, e))
            return -1;
        progress(o, done, n);
    }
    return fn(ctx, NULL, 0, 1, e);
}

int vocab_read_inputs(const vocab_build_opts *o, vocab_chunk_fn fn, void *ctx, txl_err *e)
{
    uint8_t *buf = malloc(READ_CHUNK);
    if (!buf)
        return err_set(e, ERR_RUNTIME, "out of memory for a read buffer");
    int rc = 0;
    size_t done = 0;
    if (o->read)
        rc = read_text(o, fn, ctx, buf, &done, e);
    for (int i = 0; !rc && !o->read && i < o->n_files; i++)
        rc = read_file(o, o->files[i], fn, ctx, buf, &done, e);
    if (o->progress && done >= (1u << 24) && isatty(STDERR_FILENO))
        fprintf(stderr, "\n");
    free(buf);
    return rc;
}

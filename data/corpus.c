/* corpus.c: see corpus.h. */
#include "corpus.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/instream.h"

int corpus_mem_limit(const char *path, size_t *bytes, txl_err *e)
{
    const char *s = getenv("TXL_MAX_CORPUS_MB");
    if (!s || !*s) {
        size_t phys = ins_phys_mem();
        *bytes = phys ? phys / 2 : (size_t)4 << 30; /* unknown: 4 GiB */
        return 0;
    }
    unsigned long long mb = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9' && mb <= (SIZE_MAX >> 20); p++)
        mb = 10 * mb + (unsigned long long)(*p - '0');
    if (p == s || *p || mb < 1 || mb > (SIZE_MAX >> 20))
        return err_set(e, ERR_INPUT, "%s: TXL_MAX_CORPUS_MB is '%.40s', expected a whole number "
                       "of MiB >= 1", path, s);
    *bytes = (size_t)mb << 20;
    return 0;
}

/* A gzip'd file, a pipe or a device: decompressed (or copied) into memory through
 * instream, which takes fd. The buffer doubles as data arrives, never past limit + 1
 * bytes, so /dev/zero or a gzip bomb is refused at the limit instead of exhausting memory. */
static int read_stream(corpus *c, int fd, size_t limit, txl_err *e)
{
    instream in;
    if (ins_open(&in, fd, c->path, e))
        return -1;
    c->gzipped = in.gz;
    size_t cap = limit < (1u << 20) ? limit + 1 : (1u << 20), len = 0;
    uint8_t *buf = NULL;
    int rc = 0;
    for (;;) {
        if (len == cap) {
            if (cap > limit) {
                rc = err_set(e, ERR_INPUT, "%s: the %s corpus is larger than %zu MiB, the limit "
                             "for a corpus held in memory (gzip'd files and pipes are; plain "
                             "files are read in place): set TXL_MAX_CORPUS_MB to raise it "
                             "(default: half the physical memory), or decompress the file",
                             c->path, in.gz ? "decompressed" : "streamed", limit >> 20);
                break;
            }
            cap = cap > limit / 2 ? limit + 1 : 2 * cap;
        }
        uint8_t *nb = realloc(buf, cap);
        if (!nb) {
            rc = err_set(e, ERR_RUNTIME, "%s: out of memory reading the corpus (%zu bytes so "
                         "far)", c->path, len);
            break;
        }
        buf = nb;
        long long got = ins_read(&in, buf + len, cap - len, e);
        if (got < 0) {
            rc = -1;
            break;
        }
        len += (size_t)got;
        if (len < cap) /* the end */
            break;
    }
    ins_close(&in);
    if (rc) {
        free(buf);
        return rc;
    }
    c->kind = CORPUS_MEMORY;
    c->owned = buf;
    c->len = len;
    return 0;
}

/* A token file: the header and the size checked (tokfile_open without a vocabulary: the
 * reader of the tokens holds them to its vocabulary); len is its token count. */
static int open_tokens(corpus *c, const char *path, txl_err *e)
{
    if (tokfile_open(&c->tf, path, NULL, e)) {
        memset(c, 0, sizeof *c);
        return -1;
    }
    c->kind = CORPUS_TOKENS;
    c->len = c->tf.n;
    if (c->len == 0) {
        corpus_close(c);
        return err_set(e, ERR_INPUT, "%s: the token file holds no tokens", path);
    }
    return 0;
}

int corpus_open(corpus *c, const char *path, txl_err *e)
{
    memset(c, 0, sizeof *c);
    if (!path || !*path)
        return err_set(e, ERR_INPUT, "no corpus path given");
    int std_in = strcmp(path, "-") == 0; /* standard input, read like a pipe */
    if (std_in)
        path = "<stdin>";
    snprintf(c->path, sizeof c->path, "%s", path);
    size_t limit;
    if (corpus_mem_limit(path, &limit, e))
        return -1;
    if (std_in && isatty(STDIN_FILENO))
        return err_set(e, ERR_INPUT, "%s: is a terminal; pipe the corpus in (e.g. zcat "
                       "corpus.gz | txl eval CKPT --data -)", path);
    /* a FIFO waits for a writer, as cat does; stdin is duplicated, so closing it is ours */
    int fd = std_in ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0) : open(path, O_RDONLY | O_CLOEXEC);
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
    unsigned char magic[4] = {0, 0, 0, 0};
    ssize_t got = S_ISREG(sb.st_mode) ? pread(fd, magic, 4, 0) : 0;
    if (got < 0) {
        int er = errno;
        close(fd);
        return err_set(e, ERR_INPUT, "%s: cannot read corpus: %s", path, strerror(er));
    }
    int gz = got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (got == 4 && tokfile_sniff(magic, 4)) { /* a token file: its header, then its ids */
        close(fd);
        return open_tokens(c, path, e);
    }
    if (!S_ISREG(sb.st_mode) || gz) { /* a pipe, a device, or gzip: into memory */
        if (read_stream(c, fd, limit, e)) {
            memset(c, 0, sizeof *c);
            return -1;
        }
        if (c->len >= 4 && tokfile_sniff(c->owned, 4)) {
            corpus_close(c);
            return err_set(e, ERR_INPUT, "%s: a token file that is %s: txl reads a token "
                           "file's ids in place, from a plain file (%s it first)", path,
                           gz ? "gzip'd" : "not a plain file", gz ? "gunzip" : "write");
        }
    } else if (sb.st_size > 0) { /* read in place, segment by segment (corpus_read) */
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        c->kind = CORPUS_FILE;
        c->fd = fd;
        c->len = (size_t)sb.st_size;
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
    if (c->kind == CORPUS_FILE)
        close(c->fd);
    if (c->kind == CORPUS_TOKENS)
        tokfile_close(&c->tf);
    free(c->owned);
    memset(c, 0, sizeof *c);
}

int corpus_read(const corpus *c, size_t off, uint8_t *buf, size_t n, txl_err *e)
{
    if (c->kind == CORPUS_TOKENS)
        return err_set(e, ERR_INPUT, "%s: a token file holds ids, not text (this use needs "
                       "the text: give the text file)", c->path);
    if (c->kind == CORPUS_MEMORY) {
        memcpy(buf, c->owned + off, n);
        return 0;
    }
    for (size_t done = 0; done < n;) {
        ssize_t got = pread(c->fd, buf + done, n - done, (off_t)(off + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return err_set(e, ERR_INPUT, "%s: cannot read the corpus at byte %zu: %s", c->path,
                           off + done, strerror(errno));
        if (got == 0) {
            struct stat sb;
            long long now = fstat(c->fd, &sb) == 0 ? (long long)sb.st_size : -1;
            return err_set(e, ERR_INPUT, "%s: the corpus was truncated while txl was reading "
                           "it: byte %zu is past its end (%zu bytes when opened, %lld now)",
                           c->path, off + done, c->len, now);
        }
        done += (size_t)got;
    }
    return 0;
}

token_span corpus_all(const corpus *c)
{
    token_span s = {c, 0, c->len, c->path};
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
        out[i].c = c;
        out[i].begin = at;
        out[i].n = end - at;
        out[i].path = c->path;
        at = end;
    }
}

static const char *const split_names[3] = {"train", "valid", "test"};

const char *split_name(int which)
{
    return which >= 0 && which < 3 ? split_names[which] : NULL;
}

int split_find(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, split_names[i]) == 0)
            return i;
    return -1;
}

/* Where split `which` lives: the index of its file (SPLIT_TRAIN: data.train, ...; -1 for
 * none) and *part, the fraction of that file it is (-1: the whole file). */
static int split_source(const data_paths *p, int which, int *part)
{
    int valid = p->valid && p->valid[0], test = p->test && p->test[0];
    *part = -1;
    if (which == SPLIT_TEST && test)
        return SPLIT_TEST;
    if (valid)
        return which == SPLIT_TEST ? -1 : which;
    *part = which; /* a fraction of data.train */
    return SPLIT_TRAIN;
}

static int open_file(const data_paths *p, int file, corpus *c, txl_err *e)
{
    const char *path = file == SPLIT_TRAIN ? p->train : file == SPLIT_VALID ? p->valid : p->test;
    if (corpus_open(c, path, e))
        return err_wrap(e, "data.%s", split_names[file]);
    return 0;
}

static token_span cut(const data_paths *p, const corpus *c, int part)
{
    token_span sp[3];
    if (part < 0)
        return corpus_all(c);
    corpus_split(c, p->split, sp);
    return sp[part];
}

int data_open_splits(const data_paths *p, corpus *files[3], token_span out[3], txl_err *e)
{
    for (int i = 0; i < 3; i++) {
        int part, file = split_source(p, i, &part);
        out[i] = (token_span){NULL, 0, 0, ""};
        if (file < 0)
            continue;
        if (files[file]->kind == CORPUS_NONE && open_file(p, file, files[file], e))
            return -1;
        out[i] = cut(p, files[file], part);
    }
    return 0;
}

int data_open_split(const data_paths *p, int which, corpus *c, token_span *out, txl_err *e)
{
    int part, file = split_source(p, which, &part);
    if (file < 0)
        return err_set(e, ERR_INPUT, "%s: there is no %s split: data.valid is a separate file "
                       "and data.test is empty", p->valid, split_names[which]);
    if (open_file(p, file, c, e))
        return -1;
    *out = cut(p, c, part);
    if (out->n == 0) {
        err_set(e, ERR_INPUT, "%s: the %s split is empty (data.split %g/%g/%g)", c->path,
                split_names[which], p->split[0], p->split[1], p->split[2]);
        corpus_close(c);
        return -1;
    }
    return 0;
}

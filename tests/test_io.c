/* test_io.c: unit test of the input readers on files built here: common/instream (plain
 * and gzip'd streams, concatenated members, bytes after the gzip data, truncation, reading
 * from a pipe) and the safetensors reader (io/safetensors.c: the fixed cap on header
 * entries, lookups by name in a large header written in shuffled order). Files live in
 * $TMPDIR (default /tmp). */
#include "../common/instream.h"
#include "../io/safetensors.h"
#include "testlib.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static char tmp_path[512];

static const char *scratch(const char *name)
{
    const char *dir = getenv("TMPDIR");
    snprintf(tmp_path, sizeof tmp_path, "%s/txl-test-io-%ld-%s", dir && *dir ? dir : "/tmp",
             (long)getpid(), name);
    return tmp_path;
}

/* Writes a plain safetensors file whose header is `hdr` (padded to 8) and whose data is
 * `nd` zero bytes. */
static int write_file(const char *path, const char *hdr, size_t nd)
{
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return -1;
    size_t n = strlen(hdr), padded = (n + 7) / 8 * 8;
    uint64_t hl = padded;
    int ok = fwrite(&hl, 8, 1, fp) == 1 && fwrite(hdr, 1, n, fp) == n;
    for (size_t i = n; ok && i < padded; i++)
        ok = fputc(' ', fp) != EOF;
    for (size_t i = 0; ok && i < nd; i++)
        ok = fputc(0, fp) != EOF;
    return fclose(fp) == 0 && ok ? 0 : -1;
}

/* A header of n zero-size U8 tensors "t<i>" (in the order of `perm`, or 0..n-1). */
static char *many_header(size_t n, const size_t *perm)
{
    size_t cap = 64 + n * 64, len = 0;
    char *h = malloc(cap);
    if (!h)
        return NULL;
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(h + len, cap - len,
                                "%s\"t%zu\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}",
                                i ? "," : "", perm ? perm[i] : i);
    snprintf(h + len, cap - len, "}");
    return h;
}

static void test_entry_cap(void)
{
    const char *path = scratch("cap.safetensors");
    char *h = many_header((size_t)ST_MAX_TENSORS + 1, NULL);
    CHECK(h && write_file(path, h, 0) == 0, "cap: wrote a header of %d + 1 entries",
          ST_MAX_TENSORS);
    free(h);
    st_file f;
    txl_err e = {0};
    char want[128];
    snprintf(want, sizeof want, "the header lists %d entries, more than txl reads (%d;",
             ST_MAX_TENSORS + 1, ST_MAX_TENSORS);
    int rc = st_read(&f, path, &e);
    CHECK(rc == -1 && e.kind == ERR_INPUT && strncmp(e.msg, path, strlen(path)) == 0 &&
              strstr(e.msg, want), "cap: refused, naming the file and the count: %s", e.msg);
    unlink(path);
}

/* 50,000 names in a shuffled order: every one is found, nothing else is. */
static void test_lookup(void)
{
    enum { N = 50000 };
    size_t *perm = malloc(N * sizeof *perm);
    tl_rng r = {12345};
    for (size_t i = 0; i < N; i++)
        perm[i] = i;
    for (size_t i = N - 1; i > 0; i--) {
        size_t j = (size_t)((tl_uniform(&r, 1.0f) + 1.0f) * 0.5f * (float)(i + 1)) % (i + 1);
        size_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    const char *path = scratch("lookup.safetensors");
    char *h = many_header(N, perm);
    CHECK(h && write_file(path, h, 0) == 0, "lookup: wrote %d shuffled entries", N);
    free(h);
    st_file f;
    txl_err e = {0};
    int rc = st_read(&f, path, &e);
    CHECK(rc == 0 && f.n == N, "lookup: read %d tensors (%s)", f.n, rc ? e.msg : "ok");
    int found = 0, order = 0, strangers = 0;
    char nm[32];
    for (size_t i = 0; rc == 0 && i < N; i++) {
        snprintf(nm, sizeof nm, "t%zu", i);
        const st_tensor *t = st_find(&f, nm);
        found += t && strcmp(t->name, nm) == 0;
        snprintf(nm, sizeof nm, "t%zu", perm[i]);
        order += strcmp(f.t[i].name, nm) == 0; /* f.t stays in header order */
        snprintf(nm, sizeof nm, "t%zux", i);
        strangers += st_find(&f, nm) != NULL;
    }
    CHECK(found == N && order == N && strangers == 0 && !st_find(&f, "") &&
              !st_find(&f, "t"), "lookup: all %d found (%d), header order kept (%d), no "
          "stranger found (%d)", N, found, order, strangers);
    if (rc == 0)
        st_free(&f);
    free(perm);
    unlink(path);
}

/* gzip'd `n` bytes of `data` appended to the file at `path` as one member. */
static int gz_member(const char *path, const void *data, size_t n)
{
    gzFile gz = gzopen(path, "ab6");
    if (!gz)
        return -1;
    int ok = n == 0 || gzwrite(gz, data, (unsigned)n) == (int)n;
    return gzclose(gz) == Z_OK && ok ? 0 : -1;
}

static int append(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "ab");
    int ok = fp && fwrite(data, 1, n, fp) == n;
    return fp && fclose(fp) == 0 && ok ? 0 : -1;
}

/* Reads the file (or, with pipe_it, the same bytes through a pipe) whole with instream:
 * 0 and the bytes in out[*len], or -1 and the message in e. */
static int slurp(const char *path, int pipe_it, uint8_t *out, size_t cap, size_t *len,
                 txl_err *e)
{
    int fd = open(path, O_RDONLY);
    if (fd >= 0 && pipe_it) {
        int p[2];
        if (pipe(p) != 0)
            return -1;
        if (fork() == 0) { /* the writer: the file's bytes into the pipe */
            close(p[0]);
            char buf[4096];
            ssize_t n;
            while ((n = read(fd, buf, sizeof buf)) > 0)
                if (write(p[1], buf, (size_t)n) != n)
                    _exit(1);
            _exit(0);
        }
        close(p[1]);
        close(fd);
        fd = p[0];
    }
    instream in;
    if (fd < 0 || ins_open(&in, fd, path, e))
        return -1;
    *len = 0;
    long long got;
    while ((got = ins_read(&in, out + *len, cap - *len < 1000 ? cap - *len : 1000, e)) > 0)
        *len += (size_t)got;
    ins_close(&in);
    if (pipe_it)
        while (wait(NULL) > 0)
            ;
    return got < 0 ? -1 : 0;
}

static void test_instream(void)
{
    static uint8_t a[70000], b[5000], out[200000];
    tl_rng r = {7};
    for (size_t i = 0; i < sizeof a; i++)
        a[i] = (uint8_t)(tl_uniform(&r, 1.0f) > 0.5f ? 'a' + i % 7 : i * 31);
    for (size_t i = 0; i < sizeof b; i++)
        b[i] = (uint8_t)(i % 251);
    const char *path = scratch("stream.gz");
    char p[512];
    snprintf(p, sizeof p, "%s", path);
    size_t len = 0;
    txl_err e = {0};
    for (int pipe_it = 0; pipe_it < 2; pipe_it++) {
        const char *how = pipe_it ? "through a pipe" : "from the file";
        unlink(p);
        gz_member(p, a, sizeof a);
        gz_member(p, b, sizeof b);
        gz_member(p, "", 0);
        int rc = slurp(p, pipe_it, out, sizeof out, &len, &e);
        CHECK(rc == 0 && len == sizeof a + sizeof b && memcmp(out, a, sizeof a) == 0 &&
                  memcmp(out + sizeof a, b, sizeof b) == 0,
              "instream %s: three gzip members (one empty) read as one stream (%zu bytes)%s%s",
              how, len, rc ? ": " : "", rc ? e.msg : "");
        append(p, "\x1f", 1); /* half a gzip magic is no member */
        rc = slurp(p, pipe_it, out, sizeof out, &len, &e);
        CHECK(rc == -1 && e.kind == ERR_INPUT && strstr(e.msg, p) &&
                  strstr(e.msg, "trailing garbage after the gzip data"),
              "instream %s: a stray byte after the members is an error: %s", how, e.msg);
        unlink(p);
        gz_member(p, a, sizeof a);
        append(p, "\0\0\0\0", 4);
        rc = slurp(p, pipe_it, out, sizeof out, &len, &e);
        CHECK(rc == -1 && strstr(e.msg, "trailing garbage"), "instream %s: zeros after the "
              "gzip data are an error too: %s", how, e.msg);
    }
    /* truncation inside a member, and inside the 8-byte trailer (CRC and length) */
    unlink(p);
    gz_member(p, a, sizeof a);
    FILE *fp = fopen(p, "rb");
    static uint8_t whole[100000];
    size_t n = fp ? fread(whole, 1, sizeof whole, fp) : 0;
    if (fp)
        fclose(fp);
    size_t cuts[3] = {n / 2, n - 8, n - 1};
    for (int k = 0; k < 3; k++) {
        unlink(p);
        append(p, whole, cuts[k]);
        int rc = slurp(p, 0, out, sizeof out, &len, &e);
        CHECK(rc == -1 && strstr(e.msg, "corrupt or truncated gzip data: unexpected end of file"),
              "instream: gzip cut at byte %zu of %zu: %s", cuts[k], n, e.msg);
    }
    /* plain bytes are passed through, from a file and a pipe alike */
    for (int pipe_it = 0; pipe_it < 2; pipe_it++) {
        unlink(p);
        append(p, b, sizeof b);
        int rc = slurp(p, pipe_it, out, sizeof out, &len, &e);
        CHECK(rc == 0 && len == sizeof b && memcmp(out, b, sizeof b) == 0,
              "instream: plain bytes %s (%zu)", pipe_it ? "through a pipe" : "from a file", len);
    }
    unlink(p);
}

int main(void)
{
    test_instream();
    test_entry_cap();
    test_lookup();
    return tl_done("test_io");
}

/* test_io.c: unit test of the safetensors reader (io/safetensors.c) on files built here:
 * the fixed cap on header entries, lookups by name in a large header written in shuffled
 * order. Files live in $TMPDIR (default /tmp). */
#include "../io/safetensors.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int main(void)
{
    test_entry_cap();
    test_lookup();
    return tl_done("test_io");
}

/* replay.c: runs fuzz harnesses over saved inputs without libFuzzer (plain gcc build).
 *
 * fuzz_replay() feeds every file of a directory (or one file) to a harness function; it is
 * shared by tests/test_fuzz_replay.c (which `make test` runs over tests/fuzz/corpus/ and
 * tests/fuzz/regress/) and by the per-harness replay programs `make fuzz` builds
 * (build/fuzz/replay_<name> FILE|DIR ...: reproduces a crash under gdb or valgrind). */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "replay.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_file(const char *path, fuzz_fn fn, int verbose)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "replay: %s: out of memory\n", path);
        return -1;
    }
    if (verbose)
        fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    /* a copy of exactly n bytes, so ASan sees reads past the input's end */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    fn(exact, n);
    free(exact);
    return 0;
}

long fuzz_replay(const char *path, fuzz_fn fn, int verbose)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode))
        return replay_file(path, fn, verbose) ? -1 : 1;
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn)
                break;
            names = nn;
        }
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str); /* a fixed order: failures reproduce */
    long count = 0;
    for (size_t i = 0; i < n; i++) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, names[i]);
        if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode) && replay_file(full, fn, verbose) == 0)
            count++;
        free(names[i]);
    }
    free(names);
    return count;
}

#ifndef TXL_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR ...  (runs each input through the harness)\n",
                argv[0]);
        return 2;
    }
    long total = 0;
    for (int i = 1; i < argc; i++) {
        long n = fuzz_replay(argv[i], LLVMFuzzerTestOneInput, 1);
        if (n < 0)
            return 1;
        total += n;
    }
    fprintf(stderr, "replay: %ld inputs, no failure\n", total);
    return 0;
}
#endif

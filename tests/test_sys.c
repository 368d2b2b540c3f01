/* test_sys.c: common/sys.c's buffers for the large arrays (sys_alloc, sys_zalloc): their
 * alignment and size, and that from 2 MiB they are advised as wanting transparent huge
 * pages, which the kernel records as the `hg` flag of the mapping in /proc/self/smaps
 * (where the kernel has THP at all), unless TXL_THP=0. */
#include "../common/sys.h"
#include "testlib.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The VmFlags of the mapping of /proc/self/smaps that holds p: 1 with `hg` among them, 0
 * without, -1 when no mapping holds p or the file cannot be read. */
static int has_hg(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int in = 0, found = -1;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = a >= lo && a < hi;
            continue;
        }
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            found = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return found;
}

/* Whether this kernel takes the advice at all: it has transparent huge pages, and madvise
 * accepts MADV_HUGEPAGE for this process (a process with THP disabled by prctl, as some
 * container runtimes set, gets EINVAL). */
static int kernel_has_thp(void)
{
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", R_OK) != 0)
        return 0;
#ifdef MADV_HUGEPAGE
    size_t n = (size_t)4 << 20;
    void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 0;
    int ok = madvise(m, n, MADV_HUGEPAGE) == 0;
    munmap(m, n);
    return ok;
#else
    return 0;
#endif
}

int main(void)
{
    const size_t MiB = (size_t)1 << 20;
    unsetenv("TXL_THP");

    unsigned char *s = sys_alloc(1000);
    CHECK(s && (uintptr_t)s % 64 == 0, "a small buffer (1000 bytes) is 64-byte aligned");
    if (s)
        memset(s, 1, 1000);
    free(s);

    size_t n = 3 * MiB + 5;
    unsigned char *b = sys_alloc(n);
    CHECK(b && (uintptr_t)b % (2 * MiB) == 0, "a buffer of 3 MiB + 5 bytes is 2 MiB aligned");
    if (b) {
        memset(b, 7, n); /* every byte is ours (ASan would say otherwise) */
        if (kernel_has_thp())
            CHECK(has_hg(b) == 1, "... and its mapping is advised for huge pages (VmFlags hg)");
        else
            printf("  skip the huge-page advice: this kernel or process takes none\n");
    }
    free(b);

    setenv("TXL_THP", "0", 1);
    unsigned char *c = sys_alloc(n);
    CHECK(c && (uintptr_t)c % (2 * MiB) == 0 && has_hg(c) == 0,
          "TXL_THP=0: still 2 MiB aligned, but not advised (no hg)");
    free(c);
    unsetenv("TXL_THP");

    /* sys_zalloc: zeroed, also where a freed buffer of the same size was dirty */
    unsigned char *d = sys_alloc(n);
    if (d)
        memset(d, 0xab, n);
    free(d);
    unsigned char *z = sys_zalloc(n);
    int zero = z != NULL;
    for (size_t i = 0; z && i < n; i++)
        zero &= z[i] == 0;
    CHECK(zero, "sys_zalloc gives %zu zero bytes", n);
    free(z);

    const char *mode = sys_thp_mode();
    int known = strcmp(mode, "always") == 0 || strcmp(mode, "madvise") == 0 ||
                strcmp(mode, "never") == 0 || strcmp(mode, "unavailable") == 0;
    CHECK(known && (strcmp(mode, "unavailable") == 0) ==
                       (access("/sys/kernel/mm/transparent_hugepage/enabled", R_OK) != 0),
          "sys_thp_mode: the kernel's bracketed mode (%s)", mode);
    setenv("TXL_THP", "0", 1);
    int off = sys_thp_asked();
    unsetenv("TXL_THP");
    CHECK(!off && sys_thp_asked(), "sys_thp_asked: no with TXL_THP=0, yes without");

    unsigned char *e = sys_alloc(0);
    CHECK(e != NULL && (uintptr_t)e % 64 == 0, "0 bytes: a valid (freeable) 64-byte aligned buffer");
    free(e);
    return tl_done("test_sys");
}

/* sys.c: see sys.h. */
#include "sys.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "instream.h"

int sys_thp_asked(void)
{
    const char *env = getenv("TXL_THP");
    return !(env && strcmp(env, "0") == 0);
}

const char *sys_thp_mode(void)
{
    static char mode[16];
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128];
    int got = f && fgets(line, sizeof line, f) != NULL;
    if (f)
        fclose(f);
    const char *a = got ? strchr(line, '[') : NULL, *b = a ? strchr(a, ']') : NULL;
    if (!b || b - a - 1 <= 0 || b - a - 1 >= (long)sizeof mode)
        return "unavailable";
    memcpy(mode, a + 1, (size_t)(b - a - 1));
    mode[b - a - 1] = '\0';
    return mode;
}

void *sys_alloc(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    if (bytes < huge)
        return aligned_alloc(64, (bytes + 63) / 64 * 64 + (bytes == 0) * 64);
    size_t n = (bytes + huge - 1) / huge * huge;
    void *p = aligned_alloc(huge, n);
#ifdef MADV_HUGEPAGE
    if (p && sys_thp_asked())
        madvise(p, n, MADV_HUGEPAGE); /* advice only: a kernel without THP says no */
#endif
    return p;
}

void *sys_zalloc(size_t bytes)
{
    void *p = sys_alloc(bytes);
    if (p)
        memset(p, 0, bytes);
    return p;
}

double sys_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double sys_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void sys_fmt_duration(char *buf, size_t cap, double s)
{
    if (!(s >= 0) || s > 1e8)
        snprintf(buf, cap, "?");
    else if (s >= 3600)
        snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60)
        snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(buf, cap, "%.0fs", s);
}

/* This process's virtual size and resident set in bytes (Linux: /proc/self/statm); 0 when
 * unknown. */
static void proc_sizes(double *vm, double *rss)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0, res = 0;
    long page = sysconf(_SC_PAGESIZE);
    *vm = *rss = 0;
    if (f && fscanf(f, "%llu %llu", &pages, &res) == 2 && page > 0) {
        *vm = (double)pages * (double)page;
        *rss = (double)res * (double)page;
    }
    if (f)
        fclose(f);
}

int sys_check_memory(const char *what, double bytes, double as_reserve, txl_err *e)
{
    const double mib = 1048576.0;
    double phys = (double)ins_phys_mem(), as = 0, vm, rss;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        as = (double)rl.rlim_cur;
    proc_sizes(&vm, &rss);
    /* what will be mapped later (OpenBLAS's buffers) counts against the address space only:
     * it touches little, so the physical memory is not charged */
    double reserve = as > 0 ? as_reserve : 0;
    if ((phys <= 0 || rss + bytes <= phys) && (as <= 0 || vm + reserve + bytes <= as))
        return 0;
    char lim[200];
    if (as > 0)
        snprintf(lim, sizeof lim, "an address-space limit (ulimit -v) of %.0f MiB, %.0f MiB of "
                 "it in use%s", as / mib, (vm + reserve) / mib,
                 reserve > 0 ? " or kept for the threads' buffers (OpenBLAS's, malloc's)" : "");
    else
        snprintf(lim, sizeof lim, "no address-space limit (ulimit -v)");
    return err_set(e, ERR_INPUT, "%s needs about %.0f MiB of memory, more than this machine "
                   "allows: %.0f MiB of physical memory (txl holds %.0f MiB already), %s", what,
                   bytes / mib, phys / mib, rss / mib, lim);
}

/* OpenBLAS's own (libopenblas exports them; cblas.h of some versions does not declare
 * them) */
char *openblas_get_corename(void);
char *openblas_get_config(void);

const char *sys_blas_corename(void)
{
    return openblas_get_corename();
}

const char *sys_blas_config(void)
{
    return openblas_get_config();
}

const char *sys_blas_core(void)
{
    static char buf[160];
    const char *c = sys_blas_corename();
    const char *was = getenv("TXL_BLAS_DETECTED");
    if (was && *was)
        snprintf(buf, sizeof buf, "%s (chosen by txl; OpenBLAS detected %s)", c ? c : "?", was);
    else
        snprintf(buf, sizeof buf, "%s", c ? c : "unknown");
    return buf;
}

/* main.c: `txl` entry point: dispatches through the command table (cmds.h) to one file per
 * subcommand, and fails (exit 1) when a result did not reach stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/dist.h"
#include "../common/sys.h"
#include "cli.h"
#include "cmds.h"

static int core_is(const char *core, const char *const *names)
{
    for (; *names; names++)
        if (strcasecmp(core, *names) == 0)
            return 1;
    return 0;
}

/* Debian's OpenBLAS (DYNAMIC_ARCH) does not recognise some recent CPUs and falls back to
 * its Prescott kernels, 5-8x slower. OpenBLAS reads OPENBLAS_CORETYPE only when it loads,
 * so when the detected core is weaker than what the CPU supports, txl sets the variable
 * (and re-executes itself, below). A user's own OPENBLAS_CORETYPE is always respected. The
 * choice is reported by `txl info --system` and in the training log (TXL_BLAS_DETECTED).
 * Returns 1 when it set the variable. */
static int want_blas_core(void)
{
    if (getenv("OPENBLAS_CORETYPE") || getenv("TXL_BLAS_DETECTED"))
        return 0;
    /* TXL_TEST_BLAS_DETECTED pretends OpenBLAS detected that core: tests/e2e/blas_core.sh
     * exercises the re-exec on CPUs OpenBLAS does recognise */
    const char *core = getenv("TXL_TEST_BLAS_DETECTED");
    if (!core || !*core)
        core = sys_blas_corename();
    if (!core)
        return 0;
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
    static const char *const avx2[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake",
                                       "SapphireRapids", NULL};
    const char *want = NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
        !core_is(core, avx512))
        want = "SkylakeX";
    else if (!__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
             __builtin_cpu_supports("fma") && !core_is(core, avx2))
        want = "Haswell";
    if (!want)
        return 0;
    setenv("OPENBLAS_CORETYPE", want, 1);
    setenv("TXL_BLAS_DETECTED", core, 1);
    return 1;
}

/* libgomp's threads spin for a long while (GOMP_SPINCOUNT 300000) at every barrier before
 * they sleep. On a machine where another process takes a core, the spinning thread steals
 * the time its partner needs to reach the barrier, and every parallel region waits for a
 * time slice: 5-10x slower (measured: an eval of 0.8 s took 8.6 s with 4 busy processes on
 * 2 cores). A short spin keeps the quick hand-offs of an idle machine and sleeps soon when
 * a core is taken. libgomp reads the variable when it loads, so it is set here (and txl
 * re-executes itself, below); a user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is respected.
 * Returns 1 when it set the variable. */
#define TXL_SPINCOUNT "1000"
static int want_short_spin(void)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return 0;
    setenv("GOMP_SPINCOUNT", TXL_SPINCOUNT, 1);
    return 1;
}

/* txl runs every OpenBLAS product on one thread (par_set_threads; its own threads split the
 * work), but OpenBLAS starts its pool of nproc - 1 threads when it loads, and they spin
 * (sched_yield) for about 0.1 s before they sleep: CPU time a short command (a sample of a
 * few hundred tokens, txl info) pays for nothing, and that the CPU-second rates of the
 * sampling bench counted. OPENBLAS_NUM_THREADS=1 when it loads starts no pool; a user's
 * own setting is respected. Returns 1 when it set the variable. */
static int want_blas_one_thread(void)
{
    if (getenv("OPENBLAS_NUM_THREADS"))
        return 0;
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    return 1;
}

/* Sets what the libraries read when they load, then re-executes txl once so they see it. */
static void ensure_runtime_env(char **argv)
{
    int blas = want_blas_core();
    int spin = want_short_spin();
    int one = want_blas_one_thread();
    if (!blas && !spin && !one)
        return;
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the defaults rather than not at all */
    if (blas)
        unsetenv("OPENBLAS_CORETYPE");
    if (one)
        unsetenv("OPENBLAS_NUM_THREADS");
}

static int dispatch(int argc, char **argv);

int main(int argc, char **argv)
{
    cli_std_fds(); /* before anything opens a file */
    ensure_runtime_env(argv);
    dist_init(&argc, &argv, NULL);
    cli_keep_cmdline(argc, argv);
    /* the command's name for the message about stdout (cli_parse reorders argv) */
    const char *cmd = argc > 1 && txl_command(argv[1]) ? argv[1] : NULL;
    int rc;
    if (dist_self()->size > 1 && (argc < 2 || strcmp(argv[1], "train") != 0)) {
        if (dist_is_root())
            fprintf(stderr, "txl: only 'txl train' runs over several MPI ranks; run the other "
                    "commands without mpirun\n");
        rc = 2;
    } else {
        rc = dispatch(argc, argv);
    }
    dist_finalize();
    /* results that did not reach stdout are a failure, whatever the command returned */
    return cli_stdout_close(cmd, rc);
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        txl_usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0 ||
        strcmp(cmd, "version") == 0) {
        printf("txl %s\n", TXL_VERSION);
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)
        return cmd_help(argc - 1, argv + 1);
    const cli_cmd *c = txl_command(cmd);
    if (!c) {
        fprintf(stderr, "txl: unknown command '%s'\n\n", cmd);
        txl_usage(stderr);
        return 2;
    }
    return c->run(argc - 1, argv + 1);
}

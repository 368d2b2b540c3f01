/* test_fuzz_replay.c: every saved fuzz input, run through its harness (tests/fuzz/): the
 * minimized crashers of tests/fuzz/regress/<harness>/ and the interesting-inputs corpus of
 * tests/fuzz/corpus/<harness>/. Plain C: `make test` needs no clang. A broken invariant
 * aborts (the harnesses' FUZZ_CHECK); set TXL_FUZZ_VERBOSE=1 to see which file ran last. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fuzz/fuzz.h"
#include "fuzz/replay.h"
#include "testlib.h"

static void replay_dir(const char *kind, const char *name, fuzz_fn fn, int required)
{
    char dir[256];
    struct stat sb;
    snprintf(dir, sizeof dir, "tests/fuzz/%s/%s", kind, name);
    if (stat(dir, &sb) != 0) {
        if (required)
            CHECK(0, "%s: missing", dir);
        return;
    }
    const char *v = getenv("TXL_FUZZ_VERBOSE");
    long n = fuzz_replay(dir, fn, v && *v == '1');
    CHECK(n >= (required ? 1 : 0), "%s: %ld inputs replayed without a failure", dir, n);
}

int main(void)
{
    static const struct {
        const char *name;
        fuzz_fn fn;
    } h[] = {
        {"config", txl_fuzz_config},
        {"checkpoint", txl_fuzz_checkpoint},
        {"corpus", txl_fuzz_corpus},
        {"vocab", txl_fuzz_vocab},
        {"plotlog", txl_fuzz_plotlog},
    };
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) {
        replay_dir("regress", h[i].name, h[i].fn, 0);
        replay_dir("corpus", h[i].name, h[i].fn, 1);
    }
    return tl_done("test_fuzz_replay");
}

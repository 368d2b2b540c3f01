/* fuzz.h: what the fuzz harnesses share (tests/fuzz/fuzz_*.c).
 *
 * Each harness defines txl_fuzz_<name>(data, size): it feeds one input to a loader the way
 * txl's commands do, and traps (abort) when an invariant the loader promises is broken.
 * Built with clang's libFuzzer (`make fuzz`) it also defines LLVMFuzzerTestOneInput; the
 * replay programs (tests/fuzz/replay.c, tests/test_fuzz_replay.c) are plain C and call the
 * same functions on the committed corpora, so `make test` needs no clang.
 *
 * The loaders take paths, so inputs go through a file: one per harness and process, in
 * $TMPDIR (default /tmp), rewritten for every input and removed at exit. */
#ifndef TXL_FUZZ_H
#define TXL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int txl_fuzz_config(const uint8_t *data, size_t size);
int txl_fuzz_checkpoint(const uint8_t *data, size_t size);
int txl_fuzz_corpus(const uint8_t *data, size_t size);
int txl_fuzz_vocab(const uint8_t *data, size_t size);
int txl_fuzz_plotlog(const uint8_t *data, size_t size);

/* The libFuzzer entry point of a harness (left out of the plain replay builds, which define
 * TXL_FUZZ_NO_ENTRY). */
#ifndef TXL_FUZZ_NO_ENTRY
#define FUZZ_ENTRY(fn)                                                                     \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);                          \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fn(data, size); }
#else
#define FUZZ_ENTRY(fn)
#endif

/* Writes data to this harness's scratch file (suffix e.g. ".yaml") and returns its path,
 * or NULL when the file cannot be written (then the input is skipped). */
const char *fuzz_file(const char *tag, const char *suffix, const uint8_t *data, size_t size);

/* An invariant failed: print it and abort (libFuzzer records the input). */
#define FUZZ_CHECK(cond, ...)                                                              \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "fuzz invariant failed at %s:%d: %s: ", __FILE__, __LINE__,    \
                    #cond);                                                                \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

#endif

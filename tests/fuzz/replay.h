/* replay.h: feeding saved fuzz inputs to a harness (see replay.c). */
#ifndef TXL_FUZZ_REPLAY_H
#define TXL_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

typedef int (*fuzz_fn)(const uint8_t *data, size_t size);

/* Runs fn on the file `path`, or on every regular file of the directory `path` in name
 * order. Returns the number of inputs run, -1 when path cannot be read. A failing
 * invariant aborts inside fn. */
long fuzz_replay(const char *path, fuzz_fn fn, int verbose);

#endif

/* corpus.h: byte corpora and their splits (doc/design.md, "The model": Data). Tokens and
 * the stream batching are in tokens.h.
 *
 * A plain regular file is never read whole (corpora larger than RAM work): the batcher
 * reads each segment with pread when it needs it, so a file that shrinks under txl is an
 * error naming it, not a SIGBUS as it was with a memory map. A gzip'd file (detected by
 * its magic bytes, not its name) and anything that is not a regular file (a pipe, a
 * device) are read front to back into memory (common/instream), at most corpus_mem_limit
 * bytes. */
#ifndef TXL_CORPUS_H
#define TXL_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/tok.h"
#include "tokfile.h"

typedef enum {
    CORPUS_NONE,   /* closed (a zeroed struct) */
    CORPUS_FILE,   /* a plain regular file, read in place with pread */
    CORPUS_MEMORY, /* decompressed or streamed bytes held in `owned` */
    CORPUS_TOKENS  /* a token file (data/tokfile.h): ids, read in place; len counts tokens */
} corpus_kind;

typedef struct {
    char path[1024];
    corpus_kind kind;
    size_t len;       /* bytes, or a token file's tokens */
    int fd;           /* CORPUS_FILE */
    uint8_t *owned;   /* CORPUS_MEMORY */
    int gzipped;
    tokfile tf;       /* CORPUS_TOKENS: its header checked, the vocabulary's not yet */
} corpus;

/* Opens a corpus: missing, unreadable, directory, empty, corrupt gzip (or bytes after the
 * gzip data), larger than the memory limit -> -1, ERR_INPUT naming the file. A FIFO or a
 * device is read as a stream (opening a FIFO waits for a writer, as `cat` does). A plain
 * file that starts with a token file's magic is a token file (txl vocab encode --binary):
 * its ids are the corpus, split by token; a gzip'd or streamed one is refused (its ids are
 * read in place). */
/* path "-" reads standard input (like a pipe: into memory). */
int corpus_open(corpus *c, const char *path, txl_err *e);
/* Safe on a zeroed or closed corpus. */
void corpus_close(corpus *c);
/* Copies bytes [off, off + n) (within len) into buf. A plain file is read now: if it was
 * truncated since corpus_open, or the read fails, -1 with ERR_INPUT naming the file and
 * the offset. A token file has no text: ERR_INPUT. */
int corpus_read(const corpus *c, size_t off, uint8_t *buf, size_t n, txl_err *e);

/* The most bytes corpus_open holds in memory for one gzip'd or streamed corpus: the
 * environment variable TXL_MAX_CORPUS_MB (MiB, a whole number >= 1) when set, else half
 * the physical memory. Plain regular files do not count (they are not read whole). A
 * malformed value is ERR_INPUT naming the variable, prefixed with `path`. */
int corpus_mem_limit(const char *path, size_t *bytes, txl_err *e);

/* A contiguous token range of a corpus (a split). */
typedef struct {
    const corpus *c;   /* the file it is cut from (NULL when n = 0 and nothing is open) */
    size_t begin;      /* its first token's offset in the file */
    size_t n;
    const char *path;  /* for messages */
} token_span;

/* Cuts [0, T) into train/valid/test by fractions (floor(f0*T), floor((f0+f1)*T), ...). */
void corpus_split(const corpus *c, const double frac[3], token_span out[3]);
token_span corpus_all(const corpus *c);

/* The data section of a config, as plain values (data/ knows no config struct). */
enum { SPLIT_TRAIN, SPLIT_VALID, SPLIT_TEST };
/* A split's name ("train", "valid", "test"), and the split a name means, or -1. */
const char *split_name(int which);
int split_find(const char *name);
typedef struct {
    const char *train;        /* required */
    const char *valid, *test; /* separate files; NULL or "" = none */
    const double *split;      /* [3] train/valid/test fractions of train (valid empty) */
} data_paths;

/* The one rule for where each split lives (doc/design.md, "Configuration", data):
 *   valid empty: train is cut by `split` into train/valid/test; a test file replaces the
 *                third part (which then goes unused);
 *   valid set:   train, valid (and test, if set) are whole files; without a test file
 *                there is no test split (n = 0).
 * data_open_splits opens each file needed once into files[0..2] (data.train, data.valid,
 * data.test; closed on entry; those not needed stay closed, and on failure the caller
 * closes what was opened) and resolves all three spans. Errors are prefixed with the key:
 * "data.valid: PATH: cannot open corpus: ...". */
int data_open_splits(const data_paths *p, corpus *files[3], token_span out[3], txl_err *e);
/* One split (SPLIT_*): opens only the file it lives in, into *c (closed again on
 * failure). An empty or absent split is an error too (ERR_INPUT naming the file). */
int data_open_split(const data_paths *p, int which, corpus *c, token_span *out, txl_err *e);

#endif

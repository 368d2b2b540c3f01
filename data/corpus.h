/* corpus.h: byte corpora (the byte tokenizer: token = byte, V = 256) and the ordered
 * stream batching of DESIGN.md §3.
 *
 * A plain file is mmap'd (never read whole, so corpora larger than RAM work); a gzip'd one
 * (detected by its magic bytes, not its name) and anything that is not a regular file (a
 * pipe, a device) are read front to back into memory (common/instream), at most
 * corpus_mem_limit bytes. */
#ifndef TXL_CORPUS_H
#define TXL_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

typedef struct {
    char path[1024];
    const uint8_t *data;
    size_t len;
    void *map;        /* mmap'd region (plain files), or NULL */
    size_t map_len;
    uint8_t *owned;   /* decompressed bytes (gzip), or NULL */
    int gzipped;
} corpus;

/* Opens a corpus: missing, unreadable, directory, empty, corrupt gzip (or bytes after the
 * gzip data), larger than the memory limit -> -1, ERR_INPUT naming the file. A FIFO or a
 * device is read as a stream (opening a FIFO waits for a writer, as `cat` does). */
int corpus_open(corpus *c, const char *path, txl_err *e);
void corpus_close(corpus *c);

/* The most bytes corpus_open holds in memory for one gzip'd or streamed corpus: the
 * environment variable TXL_MAX_CORPUS_MB (MiB, a whole number >= 1) when set, else half
 * the physical memory. Plain regular files do not count (they are not read whole). A
 * malformed value is ERR_INPUT naming the variable, prefixed with `path`. */
int corpus_mem_limit(const char *path, size_t *bytes, txl_err *e);

/* A contiguous token range of a corpus (a split). */
typedef struct {
    const uint8_t *tok;
    size_t n;
    const char *path;  /* for messages */
    size_t begin;      /* offset of tok in the file, for messages */
} token_span;

/* Cuts [0, T) into train/valid/test by fractions (floor(f0*T), floor((f0+f1)*T), ...). */
void corpus_split(const corpus *c, const double frac[3], token_span out[3]);
token_span corpus_all(const corpus *c);

/* Stream batching: B streams of n = floor(T/B) tokens; segments start at 0, Lq, 2Lq, ...
 * < n-1 with length min(Lq, n-1-start), so a pass scores B*(n-1) tokens. */
typedef struct {
    token_span s;
    int B, Lq;
    size_t n;     /* tokens per stream */
    size_t pos;   /* start of the next segment within each stream */
} batcher;

/* min_len: the stream length a use needs (training: Lq + 1, eval: 2); shorter -> error
 * naming the file, the split size and what was needed. */
int batcher_init(batcher *bt, token_span s, int B, int Lq, size_t min_len, const char *what,
                 txl_err *e);
/* Fills x, y [B, len] (row b = stream b) with the next segment and returns len, or 0 when
 * the pass is over. */
int batcher_next(batcher *bt, uint8_t *x, uint8_t *y);
/* Segments in one pass: ceil((n-1)/Lq). */
size_t batcher_segments(const batcher *bt);
/* Scored tokens in one pass: B*(n-1). */
static inline size_t batcher_tokens(const batcher *bt) { return (size_t)bt->B * (bt->n - 1); }

#endif

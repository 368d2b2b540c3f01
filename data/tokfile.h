/* tokfile.h: token files, a text's token ids as nanoGPT's train.bin holds them, after a
 * header that says whose ids they are (doc/design.md, "Vocabularies"):
 *
 *   bytes  0..3   magic "TXLT"
 *          4..5   version, 1 (u16)
 *          6..7   id width in bytes: 2 when the vocabulary has at most 65,536 tokens, else 4
 *          8..11  V, the vocabulary's size (u32)
 *         12..15  0
 *         16..23  the vocabulary's fingerprint (u64, vocab_fingerprint)
 *         24..31  the token count N (u64)
 *   then N ids of `width` bytes, nothing after.
 *
 * Every number is little-endian. A reader checks the header whole and the file's size
 * against it before it reads a token, and every id it reads against V; read with a
 * vocabulary, V and the fingerprint must be that vocabulary's. Tokens are read by range
 * (pread), so a file larger than memory works. Every fault is ERR_INPUT naming the file and
 * the byte offset or token index. */
#ifndef TXL_TOKFILE_H
#define TXL_TOKFILE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/tok.h"
#include "outfile.h"
#include "vocab.h"

#define TOKFILE_HEADER 32

typedef struct {
    char path[1024];
    int fd;                  /* -1: closed */
    uint32_t vocab_size;
    int width;               /* 2 or 4 */
    uint64_t fingerprint;
    size_t n;                /* tokens */
} tokfile;

/* Whether bytes (the first n of a file) start like a token file (its magic). */
int tokfile_sniff(const uint8_t *head, size_t n);
/* Opens and checks a token file: the header, the size; with v (not NULL), that V and the
 * fingerprint are v's. */
int tokfile_open(tokfile *f, const char *path, const vocab *v, txl_err *e);
/* Tokens [off, off + n) (within f->n) into out, each checked to be below V. */
int tokfile_read(const tokfile *f, size_t off, size_t n, txl_tok *out, txl_err *e);
/* Reads every token once, checking each (a command validating a whole file). */
int tokfile_check(const tokfile *f, txl_err *e);
void tokfile_close(tokfile *f);

/* Writing: atomically (outfile.h); the header gets the count at commit. */
typedef struct {
    outfile out;
    uint32_t vocab_size;
    int width;
    uint64_t fingerprint;
    size_t n;
    uint8_t *buf;            /* ids waiting to be written */
    size_t buf_n;
} tokfile_writer;

int tokfile_create(tokfile_writer *w, const char *path, const vocab *v, txl_err *e);
int tokfile_write(tokfile_writer *w, const txl_tok *t, size_t n, txl_err *e);
int tokfile_commit(tokfile_writer *w, txl_err *e);
/* Drops what was written (the target stays as it was); safe after commit or a failure. */
void tokfile_abort(tokfile_writer *w);

#endif

/* instream.h: reading an input file front to back, plain or gzip'd, without seeking, so the
 * same code reads regular files, pipes and devices.
 *
 * A stream that starts with the gzip magic (1f 8b) is decompressed; anything else is read
 * as it is (zlib's gzread decides the same way). Concatenated gzip members are one stream
 * (what `cat a.gz b.gz` gives and gzip -d accepts). Unlike gzread, which silently drops
 * whatever follows the last member, bytes after the end of the gzip data that do not start
 * another member are an error ("trailing garbage"), and so are a truncated member, a CRC or
 * length mismatch, and any deflate error. Every message names the file.
 *
 * The reader never allocates beyond its fixed input buffer: callers decide how much to
 * read and hold, so a gzip bomb or /dev/zero costs only what the caller asks for. */
#ifndef TXL_INSTREAM_H
#define TXL_INSTREAM_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "err.h"

typedef struct {
    char path[1024];
    int fd;                  /* owned while `live` */
    int live;                /* ins_open succeeded, ins_close not yet called */
    int gz;                  /* gzip'd (by its magic) */
    int done;                /* the end was reached: every member checked, nothing after */
    int in_eof;              /* read() returned 0 */
    int corrupt;             /* the last error was damaged gzip data (not a read error) */
    z_stream z;              /* next_in/avail_in index `in` in both modes */
    int z_live;              /* inflateInit2 done */
    uint8_t *in;             /* raw input buffer */
    unsigned long long raw;  /* bytes read from the file */
    unsigned long long out;  /* bytes delivered to the caller */
} instream;

/* Starts reading fd (owned from now on, closed by ins_close, also on failure) as `path`:
 * reads the first bytes to tell gzip from plain. -1: ERR_INPUT for read errors,
 * ERR_RUNTIME for out of memory. */
int ins_open(instream *s, int fd, const char *path, txl_err *e);
/* Reads up to n bytes into buf; fewer only at the end of the data. Returns the count
 * (0 at the end: for gzip, only after the last member's CRC and length were checked and
 * nothing follows), or -1 with ERR_INPUT ("PATH: corrupt or truncated gzip data: ... after
 * N decompressed bytes", "PATH: trailing garbage ...", "PATH: cannot read: ..."). */
long long ins_read(instream *s, void *buf, size_t n, txl_err *e);
/* Releases everything; safe on a zeroed or closed stream. */
void ins_close(instream *s);

/* Physical memory of this machine in bytes (sysconf), 0 if unknown: the base of the
 * default limits on what txl reads into memory. */
size_t ins_phys_mem(void);

#endif

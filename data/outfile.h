/* outfile.h: a file written atomically (a vocabulary, a token file): the bytes go to a temp
 * file in the target's directory, which is fsync'd and renamed onto the target only when
 * everything was written, so a failure or a crash leaves whatever stood there untouched.
 * The file gets the mode a plain fopen would give it (0666 less the umask). */
#ifndef TXL_OUTFILE_H
#define TXL_OUTFILE_H

#include <stddef.h>

#include "../common/err.h"

typedef struct {
    char path[1024];
    char tmp[1100];
    int fd;                  /* -1: closed */
} outfile;

/* Creates the temp file for path (ERR_RUNTIME naming it when it cannot). */
int outfile_open(outfile *f, const char *path, txl_err *e);
/* Appends n bytes. */
int outfile_write(outfile *f, const void *p, size_t n, txl_err *e);
/* fsync, rename onto path, fsync of the directory. On failure the temp file is removed. */
int outfile_commit(outfile *f, txl_err *e);
/* Removes the temp file (after a failure); safe after commit and on a failed open. */
void outfile_abort(outfile *f);

#endif

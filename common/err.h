/* err.h: the caller-owned error record every fallible txl function fills.
 *
 * Convention: a function that can fail on input or the OS returns 0 on success and
 * -1 on failure, after writing a complete, user-facing message into the record
 * ("FILE:LINE:COL: what was expected, what was found"). Only cmd/ prints it and
 * turns `kind` into an exit code (ERR_INPUT -> 2, ERR_RUNTIME -> 1). */
#ifndef TXL_ERR_H
#define TXL_ERR_H

/* The record is the public API's (include/txl.h: txl_err {kind, msg[1024]}): the library
 * fills the same struct its callers own. */
#include "../include/txl.h"

enum { ERR_RUNTIME = TXL_ERR_RUNTIME, ERR_INPUT = TXL_ERR_INPUT };

/* Formats msg, sets kind, returns -1 so callers can `return err_set(...)`. */
int err_set(txl_err *e, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefixes an existing message with "context: " (keeps kind). Returns -1. */
int err_wrap(txl_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

/* cli.h: what the subcommands share: flag parsing with clear errors, loading a checkpoint
 * with its config, thread setup, terminal detection. Only cmd/ prints errors and picks exit
 * codes: 0 ok, 1 runtime failure, 2 usage/config/input error. */
#ifndef TXL_CLI_H
#define TXL_CLI_H

#include <stdio.h>

#include "../common/err.h"
#include "../model/model.h"
#include "../io/safetensors.h"
#include "config.h"

#define TXL_VERSION "0.1.0"

/* Prints "txl <cmd>: <msg>" to stderr and returns the exit code for the error's kind. */
int cli_fail(const char *cmd, const txl_err *e);
/* Prints a usage error (and a hint to `txl help <cmd>`) and returns 2. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Flag parsing over argv[*i]: when argv[*i] is `short_` or `long_` (either may be NULL),
 * takes its value ("--flag value" or "--flag=value"), advances *i, and returns 1; sets
 * *val NULL and returns -1 when the value is missing; returns 0 if argv[*i] is another
 * flag. */
int cli_flag(int argc, char **argv, int *i, const char *short_, const char *long_,
             const char **val);
/* argv[*i] is the boolean switch `name` (exact). */
int cli_switch(const char *arg, const char *name);

/* Numbers with range checks; messages name the flag and show the text. */
int cli_long(const char *flag, const char *s, long min, long max, long *out, txl_err *e);
int cli_double(const char *flag, const char *s, double min, double max, double *out,
               txl_err *e);
/* "1,2,4,8" -> up to cap positive integers; malformed -> error naming the flag. */
int cli_int_list(const char *flag, const char *s, int *out, int cap, int *n, txl_err *e);

/* The checkpoint's tensors agree in size with the model config taken from its metadata
 * (word_emb.weight's shape, the last layer present, enough weight bytes, no more Adam
 * moments and memory tensors than the config has): call it before
 * building a model from that config, so a damaged config cannot allocate far more than
 * the file holds. ERR_INPUT naming the file, the tensor and the keys. */
int cli_check_config_tensors(const st_file *f, const model_config *m, const char *path,
                             txl_err *e);
/* A count in the metadata ("step", "tokens", "epoch", "data_pos", "log_steps"): absent ->
 * def; else a decimal integer in [0, 2^53], or ERR_INPUT naming the file and the key. */
int cli_meta_count(const st_file *f, const char *key, long long def, long long *out,
                   txl_err *e);
/* Reads a checkpoint, its config (metadata "config"), builds the model and loads weights.
 * On success the caller owns f, cfg and mdl (st_free / model_free). */
int cli_load_checkpoint(const char *path, st_file *f, txl_config *cfg, model *mdl, txl_err *e);

/* Sets txl's threads (common/par.h: OpenMP, OpenBLAS pinned to one thread); n <= 0 means
 * all cores. Returns the count used. */
int cli_threads(int n);
/* The OpenBLAS core in use ("Cooperlake", "Haswell", ...). */
const char *cli_blas_core(void);

int cli_isatty_stderr(void);
/* Seconds since an arbitrary fixed point (monotonic). */
double cli_now(void);
/* "1h02m", "3m05s", "12s" */
void cli_fmt_duration(char *buf, size_t cap, double seconds);

#endif

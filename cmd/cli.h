/* cli.h: what the subcommands share: flag parsing with clear errors, loading a checkpoint
 * with its config, thread setup, terminal detection. Only cmd/ prints errors and picks exit
 * codes: 0 ok, 1 runtime failure, 2 usage/config/input error. */
#ifndef TXL_CLI_H
#define TXL_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "../common/err.h"
#include "../common/sys.h"

/* Prints "txl <cmd>: <msg>" to stderr and returns the exit code for the error's kind. */
int cli_fail(const char *cmd, const txl_err *e);
/* Prints a usage error (and a hint to `txl help <cmd>`) and returns 2. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- Option tables ------------------------------------------------------------------
 * Every subcommand describes its options in one table of cli_opt (value type, range,
 * default, metavar, help). cli_parse fills the command's own struct of results from argv
 * through the table (offsetof, like config.c's keys), `txl CMD --help` is printed from it
 * and `txl __complete` completes from it, so parsing, help and completion cannot drift.
 *
 * Parsing rules: `--opt v`, `--opt=v` and `-o v` (a value may start with '-', so
 * `--clamp-len -5` reaches the range check instead of being taken for an option); options
 * and positional arguments in any order; an option given
 * twice counts once, the last one winning, except CLI_REPEAT (all values collected) and
 * CLI_ONCE (an error); -h/--help prints the help and stops. Errors print
 * "txl CMD: <message>" and a hint, exit code 2: "unknown option 'X'", "X needs ...",
 * "X: expected an integer, found 'v'", "X: v is out of range [lo, hi]". */

typedef enum {
    CLI_SWITCH,  /* no value: the int field becomes 1 (0 with CLI_NEGATE) */
    CLI_INT,     /* long field: a decimal integer in [lo, hi] */
    CLI_U64,     /* unsigned long long field: a decimal integer in [0, 2^64 - 1] (train.seed's
                  * rule: an optional '+', then digits) */
    CLI_NUM,     /* double field: a decimal number in [dlo, dhi] (config.c's rule: no hex,
                  * inf or nan) */
    CLI_STR,     /* const char * field (cli_strs with CLI_REPEAT) */
    CLI_FILE,    /* const char * field naming a file; completion offers files matching glob */
    CLI_CHOICE,  /* int field: the index of the value in choices */
    CLI_LIST,    /* cli_list field: comma-separated integers in [lo, hi], at most cap */
    CLI_OPT_INT, /* long field: an optional value (--term-stats [N]), taken when the next
                  * argument starts with a digit (or after '='); without it, `implicit` */
} cli_type;

enum {
    CLI_REPEAT = 1u << 0,  /* CLI_STR: may repeat, up to cap; values in a cli_strs */
    CLI_ONCE = 1u << 1,    /* CLI_STR, CLI_FILE: giving it twice is an error (else the last
                            * one counts) */
    CLI_NEGATE = 1u << 2,  /* CLI_SWITCH: stores 0 (--no-logx) */
    CLI_CFG_KEY = 1u << 3, /* the value is key.path=value: completion offers config keys */
    CLI_CONFIG = 1u << 4,  /* CLI_FILE: a config, looked up by cli_config_path; completion
                            * also offers the installed configs' names */
};

#define CLI_MAX_REPEAT 64
#define CLI_MAX_LIST 32

typedef struct {
    const char *v[CLI_MAX_REPEAT];
    int n;
} cli_strs;

typedef struct {
    int v[CLI_MAX_LIST];
    int n;
} cli_list;

typedef struct {
    const char *short_name;      /* "-c", or NULL */
    const char *name;            /* "--config" (every option has a long name) */
    cli_type type;
    size_t off;                  /* offsetof(the command's struct, field) */
    unsigned flags;              /* CLI_REPEAT, CLI_ONCE, CLI_NEGATE, CLI_CFG_KEY */
    long lo, hi;                 /* CLI_INT, CLI_OPT_INT, CLI_LIST: range */
    double dlo, dhi;             /* CLI_NUM: range */
    long def;                    /* initial value: switch, integers, choice index */
    double ddef;                 /* CLI_NUM: initial value */
    const char *sdef;            /* CLI_STR, CLI_FILE: initial value (may be NULL) */
    long implicit;               /* CLI_OPT_INT given without a value */
    int cap;                     /* CLI_LIST, CLI_REPEAT: the most values */
    const char *const *choices;  /* CLI_CHOICE: the names, NULL-terminated */
    const char *metavar;         /* "FILE", "N" (value options) */
    const char *needs;           /* "X needs <needs>" for a missing value; NULL: by type */
    const char *excludes;        /* the long name of an option it cannot be combined with */
    const char *glob;            /* CLI_FILE: files completion offers (bash extglob) */
    const char *suggest;         /* completion: space-separated example values */
    const char *help;
    const char *def_doc;         /* the default in the help: NULL = the initial value (numbers
                                  * and choices; nothing for the rest), "" = none shown */
} cli_opt;

/* A command's options and help text. */
typedef struct {
    const cli_opt *opts;
    int n_opts;
    const char *about;           /* paragraphs after the usage line ('\n\n' between them) */
    const char *notes;           /* after the options, or NULL */
    const char *example;         /* "example: ..." (lines) */
    int pos_max;                 /* positional arguments allowed; -1: any number */
    const char *pos_extra;       /* the error for one more, with %s for the argument */
    const char *pos_as;          /* while this option is unset, a positional argument is its
                                  * value (`txl train CONFIG.yaml`) */
    const char *pos_glob;        /* completion of positional arguments: files matching this
                                  * (bash extglob) and directories; NULL: directories only */
    const char *pos_glob_if;     /* ... and when this option is on the line, */
    const char *pos_glob_alt;    /* these files instead */
} cli_spec;

/* The options most commands share, with the command's own help text, and a spec's table. */
#define CLI_OPT_QUIET(field, text)                                                         \
    {.short_name = "-q", .name = "--quiet", .type = CLI_SWITCH, .off = (field), .help = (text)}
#define CLI_OPT_JSON(field, text)                                                          \
    {.name = "--json", .type = CLI_SWITCH, .off = (field), .help = (text)}
#define CLI_OPT_THREADS(field, dflt, text)                                                 \
    {.name = "--threads", .type = CLI_INT, .off = (field), .lo = 0, .hi = 1024,             \
     .def = (dflt), .metavar = "N", .help = (text)}
/* --precision fp32|bf16|auto (an index into cli_precision_names), and setting it */
extern const char *const cli_precision_names[];
#define CLI_OPT_PRECISION(field)                                                            \
    {.name = "--precision", .type = CLI_CHOICE, .off = (field), .choices = cli_precision_names, \
     .metavar = "P",                                                                        \
     .help = "matrix products in fp32, in bf16 (AMX or AVX512_BF16; exit 2 on a CPU "       \
             "without either), or auto: bf16 where the CPU has it",                         \
     .def_doc = "fp32"}
/* txl_set_precision of choice `p`; with auto, says on stderr which it took unless quiet.
 * 0, or the exit code (the error printed). */
int cli_set_precision(const char *cmd, int p, int quiet);
#define CLI_OPTS(table) .opts = (table), .n_opts = sizeof(table) / sizeof *(table)

/* One row of the command table (cmds.c). */
typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;         /* one line for `txl help` */
    const char *synopsis;        /* what follows "txl NAME"; '\n' separates alternative forms */
    const cli_spec *spec;        /* NULL: no options of its own */
    int hidden;                  /* not listed (txl __complete) */
} cli_cmd;

/* The positional arguments of a command line. */
typedef struct {
    char **v;
    int n;
} cli_pos;

/* The positional arguments with each pattern (an argument naming no file, with * ? or [
 * in it: a glob the shell left quoted, 'runs/x/step-*') replaced by the paths it matches, in
 * natural order (step-9 before step-10). Returns 0 (a pattern matching nothing: ERR_INPUT
 * naming it); cli_globbed_free frees. */
typedef struct {
    char **v;
    int n;
} cli_globbed;
int cli_glob(const cli_pos *pos, cli_globbed *out, txl_err *e);
void cli_globbed_free(cli_globbed *g);

/* Fills *args (the command's struct) from argv[1..argc-1] following cmd's table; the
 * positional arguments are gathered, in order, at pos->v[0 .. pos->n-1] (pointers into
 * argv, whose entries are reordered). Returns -1 to go on; otherwise the exit code to
 * return: 0 after --help (printed on stdout), 2 after a usage error (printed on stderr). */
int cli_parse(const cli_cmd *cmd, int argc, char **argv, void *args, cli_pos *pos);

/* Help, from the tables: "usage: txl NAME ..." (every form), then the whole help. */
void cli_print_usage(FILE *f, const cli_cmd *cmd);
void cli_print_help(FILE *f, const cli_cmd *cmd);
/* "txl NAME SYNOPSIS" for every form of the synopsis, wrapped at 90 columns outside
 * brackets; the caller has printed `indent` columns of the first line, the other lines
 * start with `indent` spaces; the name is padded to name_w columns. */
void cli_print_synopsis(FILE *f, const cli_cmd *cmd, int indent, int name_w);
/* The option of cmd named `arg` ("-c", "--config"), or NULL. */
const cli_opt *cli_find_opt(const cli_cmd *cmd, const char *arg);

/* Values with range checks; messages name the flag and show the text. */
int cli_long(const char *flag, const char *s, long min, long max, long *out, txl_err *e);
/* Decimal only, as in config files (1e-4, .5, 3; no hex, inf, nan or blanks). */
int cli_double(const char *flag, const char *s, double min, double max, double *out,
               txl_err *e);
/* An unsigned decimal integer up to 2^64 - 1, the rule of train.seed. */
int cli_u64(const char *flag, const char *s, unsigned long long *out, txl_err *e);
/* "1,2,4,8" -> up to cap integers in [min, max]; malformed -> error naming the flag. */
int cli_int_list(const char *flag, const char *s, int min, int max, int *out, int cap,
                 int *n, txl_err *e);

/* ---- Configs ---------------------------------------------------------------------------
 * A config argument that names a file by a bare name (no '/': `-c tiny.yaml`, `-c tiny`) is
 * looked up in the working directory first, then in the installed configs: the directory
 * next to the binary (its ../share/txl/configs) and make install's PREFIX/share/txl/configs
 * (TXL_CONFIG_DIR, compiled in). A name without .yaml or .yml also matches NAME.yaml. */
#define CLI_CONFIG_DIRS 2
/* The installed configs directories that exist, without repeats (resolved paths): fills
 * dirs[0 .. n-1], each of cap bytes, and returns n (0 .. CLI_CONFIG_DIRS). */
int cli_config_dirs(char dirs[][TXL_PATH_MAX]);
/* Calls visit with the name of every *.yaml and *.yml file of dir; returns how many. */
int cli_config_list(const char *dir, void (*visit)(const char *name, void *ctx), void *ctx);
/* The file a config argument names, into buf (cap >= TXL_PATH_MAX): a path with a '/' as
 * given; a bare name as above. When it comes from an installed directory, `cmd` says on
 * stderr which file it took (unless quiet). ERR_INPUT, naming where it looked and the
 * installed configs, when a bare name is found nowhere. */
int cli_config_path(const char *arg, const char *cmd, int quiet, char *buf, size_t cap,
                    txl_err *e);

/* ---- Output files ----------------------------------------------------------------------
 * export, import and plot write their -o file through a temp file in its directory and a
 * rename onto it: the rename replaces whatever has that name, whatever it is. */

/* `out`, the file a command is about to write (`flag`: "-o"), can be written there without
 * losing anything: ERR_INPUT naming the flag when out is "" or a directory, when its
 * directory does not exist, when it exists as something other than a regular file (a
 * device, a FIFO, a socket, a symbolic link to one of those or to nothing: the rename would
 * put a regular file in its place) and when it is one of the n `inputs` (the same device
 * and inode: another spelling of the path, a symbolic or a hard link). Inputs that do not
 * exist are skipped: their readers report them. Call it before anything is written. */
int cli_check_output(const char *flag, const char *out, const char *const *inputs, int n,
                     txl_err *e);
/* The model of CKPT for a command that writes it to `out` (-o; export, quantize): a file,
 * or a run directory's best else last (said on stderr as "txl CMD: ... using ..." unless
 * quiet), with out held by cli_check_output to neither the file read nor, for a run
 * directory, another of the run's checkpoints (writing best onto last would end the run's
 * resumability). NULL with e. */
txl_model *cli_model_to_write(const char *cmd, const char *ckpt, const char *out, int quiet,
                              txl_err *e);

/* The command line as main received it (argv[0] first): main keeps a copy before a command
 * parses (cli_parse reorders the pointers), for the training log's start event. */
void cli_keep_cmdline(int argc, char **argv);
/* The kept arguments (*argv, NULL-terminated) and their count; 0 when none were kept. */
int cli_cmdline(const char *const **argv);

/* ---- Standard streams ------------------------------------------------------------------
 * Results go to stdout, and a result that did not get there (a full disk, a closed stdout,
 * an I/O error) must not pass for success: main checks stdout when the command returns
 * (cli_stdout_close), and a command that writes as it goes (sample, eval, probe) asks
 * cli_stdout_flush to stop early. A reader of a pipe that went away ends txl by SIGPIPE, as
 * it ends any program. */

/* At start: a closed standard descriptor (`>&-`, `<&-`) gets /dev/null opened the other way
 * round (stdin write-only, stdout and stderr read-only), so a file txl opens never becomes
 * fd 0, 1 or 2 (results written into a checkpoint, a log read as a prompt), and using the
 * stream still fails, with EBADF, as it would have. */
void cli_std_fds(void);
/* Flushes stdout; -1 once any write to stdout has failed (the first failure's errno is kept
 * for the message), else 0. */
int cli_stdout_flush(void);
/* At exit (main): flushes and closes stdout; when a write failed, prints "txl CMD: writing
 * the results to stdout: <why>" and returns 1 in place of rc 0 (another rc stands: a usage
 * error, 128 + a signal). `cmd` may be NULL (no command ran). */
int cli_stdout_close(const char *cmd, int rc);

int cli_isatty_stderr(void);

#endif

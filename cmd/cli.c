/* cli.c: see cli.h. */
#include "cli.h"

#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/dist.h"
#include "../common/instream.h"

/* TXL_PATHS: the header the Makefile writes with TXL_CONFIG_DIR for its PREFIX */
#ifdef TXL_PATHS
#include TXL_PATHS
#endif
#ifndef TXL_CONFIG_DIR
#define TXL_CONFIG_DIR "/usr/local/share/txl/configs"
#endif

int cli_fail(const char *cmd, const txl_err *e)
{
    if (dist_is_root()) /* under MPI every rank fails alike: say it once */
        fprintf(stderr, "txl %s: %s\n", cmd, e->msg);
    return e->kind == ERR_INPUT ? 2 : 1;
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "txl %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'txl help %s')\n", cmd);
    return 2;
}

int cli_long(const char *flag, const char *s, long min, long max, long *out, txl_err *e)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || isspace((unsigned char)*s)) /* strtol would skip blanks */
        return err_set(e, ERR_INPUT, "%s: expected an integer, found '%s'", flag, s);
    if (v < min || v > max)
        return err_set(e, ERR_INPUT, "%s: %ld is out of range [%ld, %ld]", flag, v, min, max);
    *out = v;
    return 0;
}

int cli_double(const char *flag, const char *s, double min, double max, double *out,
               txl_err *e)
{
    if (!txl_config_is_number(s)) /* the configs' rule for numbers */
        return err_set(e, ERR_INPUT, "%s: expected a number, found '%s'", flag, s);
    errno = 0;
    double v = strtod(s, NULL);
    /* overflow is an error; underflow gives 0 or a subnormal, which the range sees (as in
     * config files) */
    if (errno == ERANGE && fabs(v) > 1)
        return err_set(e, ERR_INPUT, "%s: expected a number, found '%s' (too large)", flag, s);
    if (v < min || v > max)
        return err_set(e, ERR_INPUT, "%s: %g is out of range [%g, %g]", flag, v, min, max);
    *out = v;
    return 0;
}

int cli_u64(const char *flag, const char *s, unsigned long long *out, txl_err *e)
{
    const char *t = *s == '+' || *s == '-' ? s + 1 : s;
    int digits = *t != '\0';
    for (const char *q = t; *q; q++)
        digits &= *q >= '0' && *q <= '9';
    if (!digits)
        return err_set(e, ERR_INPUT, "%s: expected an integer, found '%s'", flag, s);
    errno = 0;
    unsigned long long v = strtoull(t, NULL, 10);
    if (*s == '-' || errno == ERANGE)
        return err_set(e, ERR_INPUT, "%s: %s is out of range [0, %llu]", flag, s, ULLONG_MAX);
    *out = v;
    return 0;
}

int cli_int_list(const char *flag, const char *s, int min, int max, int *out, int cap,
                 int *n, txl_err *e)
{
    *n = 0;
    const char *p = s;
    if (!*p)
        return err_set(e, ERR_INPUT, "%s: expected a comma-separated list like 1,2,4,8, found ''",
                       flag);
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < min || v > max || (*end && *end != ','))
            return err_set(e, ERR_INPUT, "%s: expected a comma-separated list of integers in "
                           "[%d, %d] like 1,2,4,8, found '%s'", flag, min, max, s);
        if (*n == cap)
            return err_set(e, ERR_INPUT, "%s: at most %d values", flag, cap);
        out[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p)
            return err_set(e, ERR_INPUT, "%s: trailing comma in '%s'", flag, s);
    }
    return 0;
}

/* ---- Option tables ------------------------------------------------------------------- */

#define FIELD(args, o, type) ((type *)(void *)((char *)(args) + (o)->off))

const cli_opt *cli_find_opt(const cli_cmd *cmd, const char *arg)
{
    const cli_spec *sp = cmd->spec;
    for (int k = 0; sp && k < sp->n_opts; k++) {
        const cli_opt *o = &sp->opts[k];
        if ((o->short_name && strcmp(arg, o->short_name) == 0) || strcmp(arg, o->name) == 0)
            return o;
    }
    return NULL;
}

static void set_defaults(const cli_spec *sp, void *args)
{
    for (int k = 0; k < sp->n_opts; k++) {
        const cli_opt *o = &sp->opts[k];
        switch (o->type) {
        case CLI_SWITCH: case CLI_CHOICE:
            *FIELD(args, o, int) = (int)o->def;
            break;
        case CLI_INT: case CLI_OPT_INT:
            *FIELD(args, o, long) = o->def;
            break;
        case CLI_U64:
            *FIELD(args, o, unsigned long long) = (unsigned long long)o->def;
            break;
        case CLI_NUM:
            *FIELD(args, o, double) = o->ddef;
            break;
        case CLI_STR: case CLI_FILE:
            if (o->flags & CLI_REPEAT)
                FIELD(args, o, cli_strs)->n = 0;
            else
                *FIELD(args, o, const char *) = o->sdef;
            break;
        case CLI_LIST:
            FIELD(args, o, cli_list)->n = 0;
            break;
        }
    }
}

/* "valid, test or train" */
static void choices_text(char *buf, size_t cap, const char *const *c)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; c[i] && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i == 0 ? "" : c[i + 1] ? ", " : " or ",
                              c[i]);
}

/* What "X needs ..." says for a missing value. */
static const char *needs_text(const cli_opt *o, char *buf, size_t cap)
{
    if (o->needs)
        return o->needs;
    switch (o->type) {
    case CLI_INT: case CLI_U64: case CLI_NUM: case CLI_OPT_INT:
        return "a number";
    case CLI_FILE:
        return "a file";
    case CLI_CHOICE:
        choices_text(buf, cap, o->choices);
        return buf;
    case CLI_LIST:
        return "a list like 1,2,4,8";
    default:
        return "a value";
    }
}

/* Stores the value v of option o (typed as `flag`) into args. */
static int take_value(const cli_opt *o, const char *flag, const char *v, void *args,
                      txl_err *e)
{
    char buf[200];
    switch (o->type) {
    case CLI_INT: case CLI_OPT_INT:
        return cli_long(flag, v, o->lo, o->hi, FIELD(args, o, long), e);
    case CLI_U64:
        return cli_u64(flag, v, FIELD(args, o, unsigned long long), e);
    case CLI_NUM:
        return cli_double(flag, v, o->dlo, o->dhi, FIELD(args, o, double), e);
    case CLI_STR: case CLI_FILE:
        if (o->flags & CLI_REPEAT) {
            cli_strs *l = FIELD(args, o, cli_strs);
            int cap = o->cap > 0 && o->cap < CLI_MAX_REPEAT ? o->cap : CLI_MAX_REPEAT;
            if (l->n == cap)
                return err_set(e, ERR_INPUT, "at most %d %s options", cap, o->name);
            l->v[l->n++] = v;
        } else {
            *FIELD(args, o, const char *) = v;
        }
        return 0;
    case CLI_CHOICE:
        for (int i = 0; o->choices[i]; i++)
            if (strcmp(v, o->choices[i]) == 0) {
                *FIELD(args, o, int) = i;
                return 0;
            }
        choices_text(buf, sizeof buf, o->choices);
        return err_set(e, ERR_INPUT, "%s: expected %s, found '%s'", flag, buf, v);
    case CLI_LIST: {
        cli_list *l = FIELD(args, o, cli_list);
        int cap = o->cap > 0 && o->cap < CLI_MAX_LIST ? o->cap : CLI_MAX_LIST;
        return cli_int_list(flag, v, (int)o->lo, (int)o->hi, l->v, cap, &l->n, e);
    }
    case CLI_SWITCH:
        break;
    }
    return 0;
}

/* An option the table lacks: the message, with what was meant when it can tell: the
 * command's option spelt with '_' (Transformer-XL's --tgt_len: --tgt-len), or for a command
 * with --set a config key under another trainer's name or its own (--n_layer, --d_model,
 * --learning-rate: --set model.n_layer=...). */
static int unknown_option(const cli_cmd *cmd, const char *a, txl_err *e)
{
    char name[64], given[64], alt[70], key[64], why[128];
    size_t n = 0;
    const char *p = a;
    while (*p == '-')
        p++;
    for (; p[n] && p[n] != '=' && n + 1 < sizeof name; n++) {
        name[n] = p[n] == '_' ? '-' : (char)tolower((unsigned char)p[n]);
        given[n] = p[n];
    }
    name[n] = given[n] = 0;
    snprintf(alt, sizeof alt, "--%s", name);
    const cli_opt *o = n ? cli_find_opt(cmd, alt) : NULL;
    if (o && strcmp(alt, a) != 0)
        return err_set(e, ERR_INPUT, "unknown option '%s' (did you mean '%s'?)", a, o->name);
    if (n && cli_find_opt(cmd, "--set") && txl_config_suggest(given, key, sizeof key, why,
                                                              sizeof why) == 0)
        return err_set(e, ERR_INPUT, "unknown option '%s' (did you mean '--set %s=...'?%s%s)", a,
                       key, why[0] ? " " : "", why);
    return err_set(e, ERR_INPUT, "unknown option '%s'", a);
}

/* argv[*i] is an option: finds it in the table and takes its value. */
static int parse_option(const cli_cmd *cmd, int argc, char **argv, int *i, void *args,
                        unsigned char *count, txl_err *e)
{
    const cli_spec *sp = cmd->spec;
    const char *a = argv[*i], *eq = NULL;
    char flag[64];
    const cli_opt *o = cli_find_opt(cmd, a);
    if (!o && a[1] == '-' && (eq = strchr(a, '=')) != NULL && (size_t)(eq - a) < sizeof flag) {
        snprintf(flag, sizeof flag, "%.*s", (int)(eq - a), a);
        o = cli_find_opt(cmd, flag);
        if (o && (o->type == CLI_SWITCH || strcmp(flag, o->name) != 0))
            o = NULL; /* a switch takes no value; only long names take '=' */
    }
    if (!o)
        return unknown_option(cmd, a, e);
    if (!eq)
        snprintf(flag, sizeof flag, "%s", a);
    int k = (int)(o - sp->opts);
    const char *v = eq ? eq + 1 : NULL;
    if ((o->flags & CLI_ONCE) && count[k]) {
        const char *was = *FIELD(args, o, const char *);
        const char *now = v ? v : *i + 1 < argc ? argv[*i + 1] : "";
        return err_set(e, ERR_INPUT, "%s given twice ('%s' and '%s'); it takes one value", flag,
                       was ? was : "", now);
    }
    if (count[k] < 255)
        count[k]++;
    if (o->type == CLI_SWITCH) {
        *FIELD(args, o, int) = (o->flags & CLI_NEGATE) ? 0 : 1;
        return 0;
    }
    if (o->type == CLI_OPT_INT && !v) {
        *FIELD(args, o, long) = o->implicit;
        if (*i + 1 >= argc || argv[*i + 1][0] < '0' || argv[*i + 1][0] > '9')
            return 0;
    }
    if (!v) {
        char buf[200];
        if (*i + 1 >= argc)
            return err_set(e, ERR_INPUT, "%s needs %s", flag, needs_text(o, buf, sizeof buf));
        v = argv[++*i];
    }
    return take_value(o, flag, v, args, e);
}

int cli_parse(const cli_cmd *cmd, int argc, char **argv, void *args, cli_pos *pos)
{
    const cli_spec *sp = cmd->spec;
    unsigned char count[64] = {0};
    txl_err e = {0};
    assert(sp && sp->n_opts <= (int)sizeof count);
    set_defaults(sp, args);
    const cli_opt *pos_as = sp->pos_as ? cli_find_opt(cmd, sp->pos_as) : NULL;
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cli_print_help(stdout, cmd);
            return 0;
        }
        if (a[0] == '-' && a[1]) {
            if (parse_option(cmd, argc, argv, &i, args, count, &e))
                return cli_usage(cmd->name, "%s", e.msg);
        } else if (pos_as && !count[pos_as - sp->opts]) {
            *FIELD(args, pos_as, const char *) = a;
            count[pos_as - sp->opts] = 1;
        } else if (sp->pos_max >= 0 && npos >= sp->pos_max) {
            return cli_usage(cmd->name, sp->pos_extra ? sp->pos_extra : "unexpected argument '%s'",
                             a);
        } else {
            argv[1 + npos++] = argv[i]; /* 1 + npos <= i: that slot has been read */
        }
    }
    for (int k = 0; k < sp->n_opts; k++) {
        const cli_opt *x = sp->opts[k].excludes ? cli_find_opt(cmd, sp->opts[k].excludes) : NULL;
        if (x && count[k] && count[x - sp->opts])
            return cli_usage(cmd->name, "%s and %s exclude each other", sp->opts[k].name, x->name);
    }
    pos->v = argv + 1;
    pos->n = npos;
    return -1;
}

/* ---- Help from the tables ------------------------------------------------------------- */

#define HELP_WIDTH 90

/* Prints text from column `col` on, wrapped at `width` columns (with brackets, spaces
 * inside [...] do not break), continuation lines indented by `indent`; '\n' in the text
 * breaks the line. */
static void wrap(FILE *f, const char *text, int col, int indent, int width, int brackets)
{
    const char *p = text;
    int space = 0; /* a space is due before the next word */
    while (*p) {
        if (*p == '\n') { /* a line break of the text's own */
            fprintf(f, "\n%*s", indent, "");
            col = indent;
            space = 0;
            p++;
            continue;
        }
        if (*p == ' ') {
            space = 1;
            p++;
            continue;
        }
        /* the next word: up to a space outside brackets */
        const char *q = p;
        int depth = 0;
        for (; *q && *q != '\n' && (*q != ' ' || depth > 0); q++) {
            if (brackets && *q == '[')
                depth++;
            if (brackets && *q == ']' && depth > 0)
                depth--;
        }
        int n = (int)(q - p);
        if (col > indent && col + space + n > width) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (space) {
            fputc(' ', f);
            col++;
        }
        fwrite(p, 1, (size_t)n, f);
        col += n;
        space = 0;
        p = q;
    }
}

void cli_print_synopsis(FILE *f, const cli_cmd *cmd, int indent, int name_w)
{
    const char *s = cmd->synopsis ? cmd->synopsis : "";
    char form[512];
    while (1) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        snprintf(form, sizeof form, "%.*s", (int)n, s);
        int col = indent + fprintf(f, "txl %-*s ", name_w, cmd->name);
        wrap(f, form, col, col, HELP_WIDTH, 1);
        fputc('\n', f);
        if (!nl)
            break;
        s = nl + 1;
        fprintf(f, "%*s", indent, "");
    }
}

void cli_print_usage(FILE *f, const cli_cmd *cmd)
{
    fputs("usage: ", f);
    cli_print_synopsis(f, cmd, 7, 0);
}

/* "-c, --config FILE", "--term-stats [N]" */
static int opt_names(char *buf, size_t cap, const cli_opt *o)
{
    const char *mv = o->metavar ? o->metavar : "VALUE";
    int n = snprintf(buf, cap, "%s%s%s", o->short_name ? o->short_name : "",
                     o->short_name ? ", " : "", o->name);
    if (o->type == CLI_OPT_INT)
        n += snprintf(buf + n, cap - (size_t)n, " [%s]", mv);
    else if (o->type != CLI_SWITCH)
        n += snprintf(buf + n, cap - (size_t)n, " %s", mv);
    return n;
}

/* The default as the help shows it, or "" for none. */
static void default_text(char *buf, size_t cap, const cli_opt *o)
{
    buf[0] = 0;
    if (o->def_doc)
        snprintf(buf, cap, "%s", o->def_doc);
    else if (o->type == CLI_INT || o->type == CLI_U64)
        snprintf(buf, cap, "%ld", o->def);
    else if (o->type == CLI_NUM && isfinite(o->ddef))
        snprintf(buf, cap, "%g", o->ddef);
    else if (o->type == CLI_CHOICE && o->def >= 0)
        snprintf(buf, cap, "%s", o->choices[o->def]);
}

void cli_print_help(FILE *f, const cli_cmd *cmd)
{
    const cli_spec *sp = cmd->spec;
    char names[128], def[160], help[1200];
    cli_print_usage(f, cmd);
    if (cmd->summary && (!sp || !sp->about))
        fprintf(f, "\n%s\n", cmd->summary);
    if (!sp)
        return;
    if (sp->about) {
        fputc('\n', f);
        wrap(f, sp->about, 0, 0, HELP_WIDTH, 0);
        fputc('\n', f);
    }
    int w = (int)strlen("-h, --help"); /* the column of the help texts */
    for (int k = 0; k < sp->n_opts; k++) {
        int n = opt_names(names, sizeof names, &sp->opts[k]);
        if (n <= 24 && n > w)
            w = n;
    }
    fputs("\noptions:\n", f);
    for (int k = 0; k <= sp->n_opts; k++) {
        const cli_opt *o = k < sp->n_opts ? &sp->opts[k] : NULL;
        if (o) {
            opt_names(names, sizeof names, o);
            default_text(def, sizeof def, o);
            snprintf(help, sizeof help, "%s%s%s%s", o->help ? o->help : "",
                     def[0] ? " (default: " : "", def, def[0] ? ")" : "");
        } else {
            snprintf(names, sizeof names, "-h, --help");
            snprintf(help, sizeof help, "show this help");
        }
        int col = fprintf(f, "  %s", names);
        if (col > w + 2) {
            fprintf(f, "\n%*s", w + 4, "");
            col = w + 4;
        } else {
            col += fprintf(f, "%*s", w + 4 - col, "");
        }
        wrap(f, help, col, w + 4, HELP_WIDTH, 0);
        fputc('\n', f);
    }
    if (sp->notes) {
        fputc('\n', f);
        wrap(f, sp->notes, 0, 0, HELP_WIDTH, 0);
        fputc('\n', f);
    }
    if (sp->example)
        fprintf(f, "\n%s\n", sp->example);
}

/* ---- Configs --------------------------------------------------------------------------- */

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int cli_config_dirs(char dirs[][TXL_PATH_MAX])
{
    char cand[CLI_CONFIG_DIRS][PATH_MAX + 32], exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    int k = 0, out = 0;
    if (n > 0) { /* PREFIX/bin/txl -> PREFIX/share/txl/configs */
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(cand[k++], sizeof cand[0], "%s/../share/txl/configs", exe);
        }
    }
    snprintf(cand[k++], sizeof cand[0], "%s", TXL_CONFIG_DIR);
    for (int i = 0; i < k; i++) {
        char real[PATH_MAX];
        if (!is_dir(cand[i]) || !realpath(cand[i], real) || strlen(real) >= TXL_PATH_MAX)
            continue;
        int seen = 0;
        for (int j = 0; j < out; j++)
            seen |= strcmp(dirs[j], real) == 0;
        if (!seen)
            snprintf(dirs[out++], TXL_PATH_MAX, "%s", real);
    }
    return out;
}

int cli_config_list(const char *dir, void (*visit)(const char *name, void *ctx), void *ctx)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] != '.' && ((len > 5 && strcmp(de->d_name + len - 5, ".yaml") == 0) ||
                                     (len > 4 && strcmp(de->d_name + len - 4, ".yml") == 0))) {
            visit(de->d_name, ctx);
            n++;
        }
    }
    if (d)
        closedir(d);
    return n;
}

typedef struct {
    char *buf;
    size_t cap, len;
} names_buf;

static void add_name(const char *name, void *ctx)
{
    names_buf *b = ctx;
    if (b->len < b->cap)
        b->len += (size_t)snprintf(b->buf + b->len, b->cap - b->len, "%s%s",
                                   b->len ? ", " : "", name);
}

/* "tiny.yaml, tiny_mlp.yaml, ..." (directory order), or "none" */
static void names_text(const char *dir, char *buf, size_t cap)
{
    names_buf b = {buf, cap, 0};
    buf[0] = 0;
    if (cli_config_list(dir, add_name, &b) == 0)
        snprintf(buf, cap, "none");
}

/* dir/name (dir NULL: name), else dir/name.yaml when name has no YAML suffix: the first that
 * is a file, into buf. 1 if found. */
static int find_config(const char *dir, const char *name, char *buf, size_t cap)
{
    size_t n = strlen(name);
    int yaml = (n > 5 && strcmp(name + n - 5, ".yaml") == 0) ||
               (n > 4 && strcmp(name + n - 4, ".yml") == 0);
    for (int ext = 0; ext < (yaml ? 1 : 2); ext++) {
        struct stat sb;
        if ((size_t)snprintf(buf, cap, "%s%s%s%s", dir ? dir : "", dir ? "/" : "", name,
                             ext ? ".yaml" : "") < cap &&
            stat(buf, &sb) == 0 && !S_ISDIR(sb.st_mode))
            return 1;
    }
    return 0;
}

int cli_config_path(const char *arg, const char *cmd, int quiet, char *buf, size_t cap,
                    txl_err *e)
{
    char dirs[CLI_CONFIG_DIRS][TXL_PATH_MAX];
    if (strchr(arg, '/') || !*arg) { /* a path: cfg_load_yaml names what is wrong with it */
        if ((size_t)snprintf(buf, cap, "%s", arg) >= cap)
            return err_set(e, ERR_INPUT, "%s: path too long", arg);
        return 0;
    }
    if (find_config(NULL, arg, buf, cap))
        return 0;
    int n = cli_config_dirs(dirs);
    for (int i = 0; i < n; i++)
        if (find_config(dirs[i], arg, buf, cap)) {
            if (!quiet && dist_is_root())
                fprintf(stderr, "txl %s: using the installed config %s\n", cmd, buf);
            return 0;
        }
    if (n == 0)
        return err_set(e, ERR_INPUT, "%s: no such config in the working directory, and no "
                       "installed configs (none in %s)", arg, TXL_CONFIG_DIR);
    char names[400];
    names_text(dirs[0], names, sizeof names);
    return err_set(e, ERR_INPUT, "%s: no such config in the working directory or in %s%s%s "
                   "(installed: %s)", arg, dirs[0], n > 1 ? " or " : "", n > 1 ? dirs[1] : "",
                   names);
}

/* What kind of file sb is, for a message. */
static const char *file_kind(const struct stat *sb)
{
    return S_ISCHR(sb->st_mode) || S_ISBLK(sb->st_mode) ? "a device"
           : S_ISFIFO(sb->st_mode)                      ? "a FIFO"
           : S_ISSOCK(sb->st_mode)                      ? "a socket"
                                                        : "not a regular file";
}

/* -o DIR/last.safetensors.gz while DIR holds last.safetensors (or the reverse, or best):
 * the run directory's readers would take one of the two by the step it records, a tie the
 * .gz (ckpt_in_run), so the file written would stand in for the run's checkpoint (an
 * export of best, without optimiser state, for the run's last: --resume DIR then fails). */
static int shadows_run_ckpt(const char *flag, const char *out, txl_err *e)
{
    static const char *const names[] = {"last.safetensors", "best.safetensors"};
    const char *slash = strrchr(out, '/'), *base = slash ? slash + 1 : out;
    size_t dn = slash ? (size_t)(slash - out) + 1 : 0; /* the directory, with its slash */
    char other[TXL_PATH_MAX + 8];
    struct stat sb;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t k = strlen(names[i]);
        if (strncmp(base, names[i], k) != 0 || (strcmp(base + k, "") && strcmp(base + k, ".gz")))
            continue;
        int gz = base[k] != 0;
        if ((size_t)snprintf(other, sizeof other, "%.*s%s%s", (int)dn, out, names[i],
                             gz ? "" : ".gz") < sizeof other &&
            stat(other, &sb) == 0 && S_ISREG(sb.st_mode))
            return err_set(e, ERR_INPUT, "%s %s: %s is there, the run's checkpoint in the other "
                           "format: readers of the run directory would take one of the two by "
                           "its step, so this file could stand in for the run's; give another "
                           "name", flag, out, other);
    }
    return 0;
}

txl_model *cli_model_to_write(const char *cmd, const char *ckpt, const char *out, int quiet,
                              txl_err *e)
{
    txl_model *m = txl_model_load(ckpt, e);
    if (!m)
        return NULL;
    char run[4][TXL_PATH_MAX + 24];
    const char *inputs[5] = {txl_model_path(m)};
    int n_in = 1;
    if (txl_model_from_dir(m)) {
        for (int i = 0; i < 4; i++) {
            snprintf(run[i], sizeof run[i], "%s/%s.safetensors%s", ckpt, i < 2 ? "best" : "last",
                     i % 2 ? "" : ".gz");
            inputs[n_in++] = run[i];
        }
        if (!quiet)
            fprintf(stderr, "txl %s: %s is a run directory: using %s\n", cmd, ckpt,
                    txl_model_path(m));
    }
    if (cli_check_output("-o", out, inputs, n_in, e)) {
        txl_model_free(m);
        return NULL;
    }
    return m;
}

int cli_check_output(const char *flag, const char *out, const char *const *inputs, int n,
                     txl_err *e)
{
    struct stat sb, lb;
    if (!*out)
        return err_set(e, ERR_INPUT, "%s: an empty file name", flag);
    if (lstat(out, &lb) != 0) {
        if (errno != ENOENT)
            return err_set(e, ERR_INPUT, "%s %s: %s", flag, out, strerror(errno));
        /* a new file: its directory must exist (else the temp file has nowhere to go) */
        char dir[TXL_PATH_MAX];
        snprintf(dir, sizeof dir, "%s", out);
        char *slash = strrchr(dir, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else if (slash == dir)
            dir[1] = 0; /* "/x" -> "/" */
        else
            *slash = 0;
        if (!is_dir(dir))
            return err_set(e, ERR_INPUT, "%s %s: no directory '%s' to write it in", flag, out,
                           dir);
        return shadows_run_ckpt(flag, out, e);
    }
    if (stat(out, &sb) != 0) /* a symbolic link to nothing: the rename would replace it */
        return err_set(e, ERR_INPUT, "%s %s: a symbolic link to a missing file (%s); txl "
                       "would replace the link, not create its target", flag, out,
                       strerror(errno));
    const char *via = S_ISLNK(lb.st_mode) ? " through a symbolic link" : "";
    if (S_ISDIR(sb.st_mode))
        return err_set(e, ERR_INPUT, "%s %s: is a directory%s (expected the name of the file "
                       "to write)", flag, out, via);
    if (!S_ISREG(sb.st_mode))
        return err_set(e, ERR_INPUT, "%s %s: exists and is %s%s; txl writes a new file and "
                       "renames it into place, which would replace it: give a regular file's "
                       "name", flag, out, file_kind(&sb), via);
    for (int i = 0; i < n; i++) {
        struct stat ib;
        if (inputs[i] && stat(inputs[i], &ib) == 0 && ib.st_dev == sb.st_dev &&
            ib.st_ino == sb.st_ino)
            return err_set(e, ERR_INPUT, "%s %s: is %s (the same file), an input: txl will "
                           "not write over it; give another name", flag, out,
                           inputs[i]);
    }
    return shadows_run_ckpt(flag, out, e);
}



static const char **kept_argv;
static int kept_argc;

void cli_keep_cmdline(int argc, char **argv)
{
    free(kept_argv);
    kept_argc = 0;
    kept_argv = malloc(((size_t)argc + 1) * sizeof *kept_argv);
    if (!kept_argv)
        return; /* the log then lacks the command line; nothing else needs it */
    for (int i = 0; i < argc; i++)
        kept_argv[i] = argv[i];
    kept_argv[argc] = NULL;
    kept_argc = argc;
}

int cli_cmdline(const char *const **argv)
{
    *argv = kept_argv;
    return kept_argc;
}

void cli_std_fds(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        int nfd = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
        if (nfd >= 0 && nfd != fd) { /* the lower ones are open: it is fd already */
            dup2(nfd, fd);
            close(nfd);
        }
    }
}

static int stdout_errno; /* the first failed write's errno; 0: none failed, or not known */

int cli_stdout_flush(void)
{
    errno = 0;
    if (fflush(stdout) != 0 && !stdout_errno)
        stdout_errno = errno;
    /* a write that failed inside printf left only the stream's error flag */
    return ferror(stdout) ? -1 : 0;
}

int cli_stdout_close(const char *cmd, int rc)
{
    int failed = cli_stdout_flush() != 0;
    errno = 0;
    /* EBADF with nothing written: stdout was closed and no /dev/null stood in for it
     * (cli_std_fds), and a command that prints nothing has nothing to lose */
    if (fclose(stdout) != 0 && !failed && errno != EBADF) {
        failed = 1;
        stdout_errno = errno;
    }
    if (!failed)
        return rc;
    fprintf(stderr, "txl%s%s: writing the results to stdout: %s\n", cmd ? " " : "",
            cmd ? cmd : "", stdout_errno ? strerror(stdout_errno) : "a write failed");
    return rc == 0 ? 1 : rc;
}

int cli_isatty_stderr(void) { return isatty(2); }



const char *const cli_precision_names[] = {"fp32", "bf16", "auto", NULL};

int cli_set_precision(const char *cmd, int p, int quiet)
{
    txl_err e = {0};
    const char *took, *kernel;
    if (txl_set_precision(cli_precision_names[p], &took, &kernel, &e))
        return cli_fail(cmd, &e);
    if (p == 2 && !quiet)
        fprintf(stderr, "txl %s: precision auto: %s%s%s%s\n", cmd, took, *kernel ? " (" : "",
                kernel, *kernel ? ")" : " (the CPU has neither AMX-BF16 nor AVX512_BF16)");
    return 0;
}

/* ---- patterns ------------------------------------------------------------------------ */

/* Natural order: digit runs compare as numbers (step-9 < step-10), the rest bytewise. */
static int natural_cmp(const void *pa, const void *pb)
{
    const char *a = *(char *const *)pa, *b = *(char *const *)pb;
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            while (*a == '0' && isdigit((unsigned char)a[1]))
                a++;
            while (*b == '0' && isdigit((unsigned char)b[1]))
                b++;
            size_t na = strspn(a, "0123456789"), nb = strspn(b, "0123456789");
            if (na != nb)
                return na < nb ? -1 : 1;
            int c = strncmp(a, b, na);
            if (c)
                return c;
            a += na;
            b += nb;
        } else if (*a != *b) {
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        } else {
            a++, b++;
        }
    }
    return (unsigned char)*a - (unsigned char)*b;
}

static int glob_push(cli_globbed *g, const char *s)
{
    char **nv = realloc(g->v, (size_t)(g->n + 1) * sizeof *nv);
    char *d = nv ? strdup(s) : NULL;
    if (nv)
        g->v = nv;
    if (!d)
        return -1;
    g->v[g->n++] = d;
    return 0;
}

int cli_glob(const cli_pos *pos, cli_globbed *out, txl_err *e)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < pos->n; i++) {
        const char *a = pos->v[i];
        struct stat sb;
        if (stat(a, &sb) == 0 || !strpbrk(a, "*?[")) { /* a file, or an error its reader names */
            if (glob_push(out, a))
                goto oom;
            continue;
        }
        glob_t gl;
        int rc = glob(a, 0, NULL, &gl);
        if (rc == GLOB_NOMATCH || (rc == 0 && gl.gl_pathc == 0)) {
            globfree(&gl);
            cli_globbed_free(out);
            return err_set(e, ERR_INPUT, "'%s' matches no file", a);
        }
        if (rc != 0) {
            globfree(&gl);
            goto oom;
        }
        int first = out->n;
        for (size_t k = 0; k < gl.gl_pathc; k++)
            if (glob_push(out, gl.gl_pathv[k])) {
                globfree(&gl);
                goto oom;
            }
        globfree(&gl);
        qsort(out->v + first, (size_t)(out->n - first), sizeof *out->v, natural_cmp);
    }
    return 0;
oom:
    cli_globbed_free(out);
    return err_set(e, ERR_RUNTIME, "out of memory");
}

void cli_globbed_free(cli_globbed *g)
{
    for (int i = 0; i < g->n; i++)
        free(g->v[i]);
    free(g->v);
    memset(g, 0, sizeof *g);
}

/* config.c: the run configuration (doc/design.md, "Configuration"): one table of keys (`keys[]`
 * below) drives the defaults, the one reader, the one writer and validation.
 *
 * Conventions
 * - Each key has a type, an offset into txl_config, a range and a default. Every value,
 *   whatever its source (YAML file, --set, checkpoint metadata, a struct built in code), goes
 *   through the same check (key_check), so a range error reads the same everywhere; only
 *   the location prefix differs ("PATH:LINE:COL: ", "--set TEXT: ",
 *   "CKPT: metadata 'config' at LINE:COL: ", "ORIGIN: ").
 * - One reader: libyaml parses config files, --set values and the config stored in
 *   checkpoints, and the same code (load_root, value_from_node) applies them. Loading works
 *   on a copy and commits only on success: a failed load or --set leaves *c untouched.
 * - Scalar rules (every source shares them): integers are decimal literals ([+-]digits;
 *   "3.5" and "1e6" are not integers); numbers are decimal ("1e-4", ".5", "3"; no hex, inf
 *   or nan); bools are true/false, yes/no, on/off in lower, Title or UPPER case (YAML 1.1,
 *   which libyaml implements; the writer writes true/false). A quoted scalar is a string,
 *   so `n_layer: "4"` is an error, but enum names and paths may be quoted. A YAML tag must
 *   agree with the key's type: `n_layer: !!str 4` is an error too. Paths are taken verbatim
 *   (relative to the CWD).
 * - Null (`~`, `null`, or nothing after the colon) is an error except for data.valid and
 *   data.test, where it means "" (take that split from data.train). A section whose value
 *   is null (`model:` with every key commented out) is an empty section.
 * - Required paths (data.train, train.out_dir) and cross-key rules (lr_min <= lr, warmup
 *   < max_steps for cosine, a valid fraction when data.valid is empty, even d_head for rope)
 *   are cfg_validate's: an empty file loads as all defaults, then fails on data.train.
 * - Errors stop at the first problem; messages say what was expected and what was found,
 *   and unknown keys get a "did you mean" when a key is a typo (or a section) away.
 * - One writer: cfg_to_yaml emits every key through libyaml's emitter (so quoting and
 *   escapes are libyaml's, and libyaml reads them back); out_dir/config.yaml,
 *   --print-config and the checkpoint metadata "config" are its text. Numbers are formatted
 *   in the "C" locale, doubles in the shortest form that reads back to the same value
 *   (floats likewise at float precision), so the text round-trips exactly. cfg_walk hands
 *   the same value texts to other serialisations (info --json).
 * - Checkpoints of txl before the YAML metadata hold the config as JSON, which is YAML flow
 *   syntax: the same reader takes it (json_as_yaml fixes the few string characters where
 *   the two differ, and train.seed >= 2^53 was a decimal string there). */
#include "config.h"
#include "../data/units.h"
#include "../model/pos.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

/* ---------------------------------------------------------------------------------------
 * The key table */

typedef enum {
    CT_INT,    /* int field */
    CT_LONG,   /* long field, |x| <= 2^53: exact in a double (JSON readers of info) */
    CT_DOUBLE, /* double field */
    CT_FLOAT,  /* float field: parsed as a double, rounded, range-checked as stored */
    CT_BOOL,   /* int field holding 0 or 1 */
    CT_ENUM,   /* int-sized C enum, named by a function (value -> name, NULL past the end) */
    CT_U64,    /* unsigned long long (train.seed) */
    CT_PATH,   /* char[cap], a file's name verbatim */
    CT_TEXT,   /* char[cap], any text verbatim (data.doc_separator) */
    CT_NAME,   /* char[cap] restricted to a list of names (data.tokenizer) */
    CT_SPLIT,  /* double[3]: train/valid/test fractions */
    CT_SET,    /* int field: a set of names (bit i = names[i]), a YAML list: [para, sent] */
    CT_TERMS,  /* int field: xl's term letters, "abcd": the bits of the letters NOT named */
} cfg_type;

enum {
    F_MIN = 1u << 0,      /* x >= min (x > min with F_MIN_EXCL) */
    F_MAX = 1u << 1,      /* x <= max (x < max with F_MAX_EXCL) */
    F_MIN_EXCL = 1u << 2,
    F_MAX_EXCL = 1u << 3,
    F_EVEN = 1u << 4,     /* integer must be even */
    F_REQUIRED = 1u << 5, /* path must be non-empty (checked by cfg_validate only) */
    F_NULL_OK = 1u << 6,  /* null means "" */
};

typedef struct {
    const char *section;      /* "model", "data", "train" */
    const char *name;         /* key within the section */
    cfg_type type;
    size_t off;               /* offsetof(txl_config, ...) */
    size_t cap;               /* CT_PATH, CT_TEXT, CT_NAME: buffer size including the NUL */
    unsigned flags;
    double min, max;
    double def[3];            /* numeric default; CT_SPLIT uses all three */
    const char *def_str;      /* default of CT_ENUM, CT_PATH, CT_TEXT, CT_NAME */
    const char *(*en)(int v); /* CT_ENUM: the name of value v, NULL past the last */
    const char *const *names; /* CT_NAME, CT_SET: NULL-terminated */
} cfg_key;

/* Enums are stored through int-sized accesses. */
_Static_assert(sizeof(pos_scheme) == sizeof(int), "pos_scheme must be int-sized");
_Static_assert(sizeof(lr_schedule) == sizeof(int), "lr_schedule must be int-sized");
_Static_assert(sizeof(optimizer_kind) == sizeof(int), "optimizer_kind must be int-sized");
_Static_assert(sizeof(comm_overlap_kind) == sizeof(int), "comm_overlap_kind must be int-sized");

static const char *pos_name(int v) { return v < 0 ? NULL : pos_scheme_name((pos_scheme)v); }

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *sched_name(int v)
{
    static const char *const names[] = {
        [SCHED_CONSTANT] = "constant", [SCHED_COSINE] = "cosine", [SCHED_INV_SQRT] = "inv_sqrt",
    };
    return v >= 0 && (size_t)v < COUNT(names) ? names[v] : NULL;
}

static const char *overlap_name(int v)
{
    static const char *const names[] = {
        [OVERLAP_AUTO] = "auto", [OVERLAP_ON] = "on", [OVERLAP_OFF] = "off",
    };
    return v >= 0 && (size_t)v < COUNT(names) ? names[v] : NULL;
}

static const char *opt_name(int v)
{
    static const char *const names[] = { [OPT_ADAM] = "adam", [OPT_ADAMW] = "adamw" };
    return v >= 0 && (size_t)v < COUNT(names) ? names[v] : NULL;
}

static const char *const tokenizer_names[] = { "byte", NULL };
/* data/units.h ANCHOR_* and model_config.h HIER_* bits, in bit order */
static const char *const anchor_names[] = { "bos", "para", "sent", NULL };
static const char *const level_names[] = { "token", "word", "sent", "para", NULL };

#define OFF(f) offsetof(txl_config, f)
#define CAP(f) sizeof(((txl_config *)0)->f)
#define KEY(sec, nm, ty, f) .section = sec, .name = nm, .type = ty, .off = OFF(f)
#define TWO53 9007199254740992.0

/* Every key, in the order of doc/design.md, "Configuration" (also the order of the YAML the writer emits). */
static const cfg_key keys[] = {
    { KEY("model", "n_layer", CT_INT, model.n_layer), .flags = F_MIN, .min = 1, .def = {4} },
    { KEY("model", "d_model", CT_INT, model.d_model), .flags = F_MIN | F_EVEN, .min = 2,
      .def = {256} },
    { KEY("model", "n_head", CT_INT, model.n_head), .flags = F_MIN, .min = 1, .def = {4} },
    { KEY("model", "d_head", CT_INT, model.d_head), .flags = F_MIN, .min = 1, .def = {64} },
    { KEY("model", "d_inner", CT_INT, model.d_inner), .flags = F_MIN, .min = 1,
      .def = {1024} },
    { KEY("model", "tgt_len", CT_INT, model.tgt_len), .flags = F_MIN, .min = 1, .def = {128} },
    { KEY("model", "mem_len", CT_INT, model.mem_len), .flags = F_MIN, .min = 0, .def = {128} },
    { KEY("model", "pre_lnorm", CT_BOOL, model.pre_lnorm), .def = {0} },
    { KEY("model", "dropout", CT_FLOAT, model.dropout), .flags = F_MIN | F_MAX | F_MAX_EXCL,
      .min = 0, .max = 1, .def = {0.1} },
    { KEY("model", "dropatt", CT_FLOAT, model.dropatt), .flags = F_MIN | F_MAX | F_MAX_EXCL,
      .min = 0, .max = 1, .def = {0.0} },
    { KEY("model", "pos_scheme", CT_ENUM, model.pos), .en = pos_name, .def_str = "xl" },
    /* 0 turns clamping off (a negative length meant off too, silently: now an error, but
     * in a checkpoint's metadata it reads as 0: value_from_node) */
    { KEY("model", "clamp_len", CT_INT, model.clamp_len), .flags = F_MIN, .min = 0,
      .def = {0} },
    { KEY("model", "untie_r", CT_BOOL, model.untie_r), .def = {0} },
    { KEY("model", "mlp_num_freqs", CT_INT, model.mlp_num_freqs), .flags = F_MIN, .min = 1,
      .def = {16} },
    /* tau = exp(linspace(0, ln max_dist, K)) needs max_dist > 1 to spread the scales */
    { KEY("model", "mlp_max_dist", CT_FLOAT, model.mlp_max_dist), .flags = F_MIN | F_MIN_EXCL,
      .min = 1, .def = {4096} },
    { KEY("model", "mlp_hidden", CT_INT, model.mlp_hidden), .flags = F_MIN, .min = 1,
      .def = {64} },
    /* xl: the score terms in use (the field holds the bits of those switched off) */
    { KEY("model", "xl_terms", CT_TERMS, model.xl_off), .def = {0} },
    { KEY("model", "hier_levels", CT_SET, model.hier_levels), .names = level_names,
      .flags = F_REQUIRED, .def = {HIER_ALL} },
    { KEY("model", "hier_num_freqs", CT_INT, model.hier_num_freqs), .flags = F_MIN, .min = 1,
      .def = {8} },

    { KEY("data", "train", CT_PATH, data.train), .cap = CAP(data.train), .flags = F_REQUIRED,
      .def_str = "" },
    { KEY("data", "valid", CT_PATH, data.valid), .cap = CAP(data.valid), .flags = F_NULL_OK,
      .def_str = "" },
    { KEY("data", "test", CT_PATH, data.test), .cap = CAP(data.test), .flags = F_NULL_OK,
      .def_str = "" },
    { KEY("data", "split", CT_SPLIT, data.split), .def = {0.9, 0.05, 0.05} },
    { KEY("data", "tokenizer", CT_NAME, data.tokenizer), .cap = CAP(data.tokenizer),
      .names = tokenizer_names, .def_str = "byte" },
    { KEY("data", "anchors", CT_SET, data.anchors), .names = anchor_names, .def = {0} },
    /* "" (or null: `--set data.doc_separator=`) = none */
    { KEY("data", "doc_separator", CT_TEXT, data.doc_separator), .cap = CAP(data.doc_separator),
      .flags = F_NULL_OK, .def_str = "" },

    { KEY("train", "batch_size", CT_INT, train.batch_size), .flags = F_MIN, .min = 1,
      .def = {16} },
    /* the memory grows with batch_size x grad_accum streams, the activations do not */
    { KEY("train", "grad_accum", CT_INT, train.grad_accum), .flags = F_MIN | F_MAX, .min = 1,
      .max = CFG_MAX_GRAD_ACCUM, .def = {1} },
    { KEY("train", "max_steps", CT_LONG, train.max_steps), .flags = F_MIN, .min = 1,
      .def = {2000} },
    { KEY("train", "max_minutes", CT_DOUBLE, train.max_minutes), .flags = F_MIN, .min = 0,
      .def = {0} },
    { KEY("train", "lr", CT_DOUBLE, train.lr), .flags = F_MIN | F_MIN_EXCL, .min = 0,
      .def = {2.5e-4} },
    { KEY("train", "schedule", CT_ENUM, train.schedule), .en = sched_name,
      .def_str = "cosine" },
    { KEY("train", "warmup_steps", CT_LONG, train.warmup_steps), .flags = F_MIN, .min = 0,
      .def = {0} },
    { KEY("train", "lr_min", CT_DOUBLE, train.lr_min), .flags = F_MIN, .min = 0, .def = {0} },
    { KEY("train", "clip", CT_DOUBLE, train.clip), .flags = F_MIN, .min = 0, .def = {0.25} },
    { KEY("train", "skip_outlier", CT_DOUBLE, train.skip_outlier), .flags = F_MIN, .min = 0,
      .def = {0} },
    { KEY("train", "beta1", CT_DOUBLE, train.beta1), .flags = F_MIN | F_MAX | F_MAX_EXCL,
      .min = 0, .max = 1, .def = {0.9} },
    { KEY("train", "beta2", CT_DOUBLE, train.beta2), .flags = F_MIN | F_MAX | F_MAX_EXCL,
      .min = 0, .max = 1, .def = {0.999} },
    { KEY("train", "eps", CT_DOUBLE, train.eps), .flags = F_MIN | F_MIN_EXCL, .min = 0,
      .def = {1e-8} },
    { KEY("train", "weight_decay", CT_DOUBLE, train.weight_decay), .flags = F_MIN, .min = 0,
      .def = {0} },
    { KEY("train", "optimizer", CT_ENUM, train.optimizer), .en = opt_name,
      .def_str = "adam" },
    { KEY("train", "seed", CT_U64, train.seed), .def = {1} },
    { KEY("train", "log_interval", CT_LONG, train.log_interval), .flags = F_MIN, .min = 1,
      .def = {10} },
    { KEY("train", "eval_interval", CT_LONG, train.eval_interval), .flags = F_MIN, .min = 0,
      .def = {200} },
    { KEY("train", "eval_tokens", CT_LONG, train.eval_tokens), .flags = F_MIN, .min = 0,
      .def = {0} },
    { KEY("train", "term_stats_interval", CT_LONG, train.term_stats_interval), .flags = F_MIN,
      .min = 0, .def = {0} },
    { KEY("train", "ckpt_interval", CT_LONG, train.ckpt_interval), .flags = F_MIN, .min = 0,
      .def = {200} },
    { KEY("train", "ckpt_gzip", CT_BOOL, train.ckpt_gzip), .def = {1} },
    { KEY("train", "out_dir", CT_PATH, train.out_dir), .cap = CAP(train.out_dir),
      .flags = F_REQUIRED, .def_str = "runs/default" },
    /* a fixed cap (eval's and sample's --threads: 1024), not a multiple of this machine's
     * cores: a config and a checkpoint must stay valid on another machine. 100000 threads
     * overflowed libgomp's stack; thousands are only slow. */
    { KEY("train", "threads", CT_INT, train.threads), .flags = F_MIN | F_MAX, .min = 0,
      .max = CFG_MAX_THREADS, .def = {0} },
    { KEY("train", "comm_overlap", CT_ENUM, train.comm_overlap), .en = overlap_name,
      .def_str = "auto" },
};
#define NKEYS COUNT(keys)

static const char *const sections[] = { "model", "data", "train" };

/* A value in transit between a source (YAML, a struct) and the struct. */
typedef struct {
    long long i;          /* CT_INT, CT_LONG, CT_BOOL, CT_ENUM */
    unsigned long long u; /* CT_U64 */
    double x[3];          /* CT_DOUBLE, CT_FLOAT (x[0]), CT_SPLIT */
    const char *s;        /* CT_PATH, CT_TEXT, CT_NAME; not owned */
} cfg_value;

/* ---------------------------------------------------------------------------------------
 * Struct access and formatting */

static void key_get(const cfg_key *k, const txl_config *c, cfg_value *v)
{
    const char *p = (const char *)c + k->off;
    memset(v, 0, sizeof *v);
    switch (k->type) {
    case CT_INT: case CT_BOOL: case CT_ENUM: case CT_SET: case CT_TERMS: {
        int x;
        memcpy(&x, p, sizeof x);
        v->i = x;
        break;
    }
    case CT_LONG: { long x; memcpy(&x, p, sizeof x); v->i = x; break; }
    case CT_DOUBLE: memcpy(&v->x[0], p, sizeof(double)); break;
    case CT_FLOAT: { float x; memcpy(&x, p, sizeof x); v->x[0] = x; break; }
    case CT_U64: memcpy(&v->u, p, sizeof v->u); break;
    case CT_PATH: case CT_TEXT: case CT_NAME: v->s = p; break;
    case CT_SPLIT: memcpy(v->x, p, 3 * sizeof(double)); break;
    }
}

/* Stores a value that passed key_check (strings fit, integers are in the type's range). */
static void key_put(const cfg_key *k, txl_config *c, const cfg_value *v)
{
    char *p = (char *)c + k->off;
    switch (k->type) {
    case CT_INT: case CT_BOOL: case CT_ENUM: case CT_SET: case CT_TERMS: {
        int x = (int)v->i;
        memcpy(p, &x, sizeof x);
        break;
    }
    case CT_LONG: { long x = (long)v->i; memcpy(p, &x, sizeof x); break; }
    case CT_DOUBLE: memcpy(p, &v->x[0], sizeof(double)); break;
    case CT_FLOAT: { float x = (float)v->x[0]; memcpy(p, &x, sizeof x); break; }
    case CT_U64: memcpy(p, &v->u, sizeof v->u); break;
    case CT_PATH: case CT_TEXT: case CT_NAME: {
        size_t n = strnlen(v->s, k->cap - 1);
        if (v->s != p) {
            memmove(p, v->s, n);
            memset(p + n, 0, k->cap - n); /* zero the tail so equal configs compare equal */
        }
        break;
    }
    case CT_SPLIT: memcpy(p, v->x, 3 * sizeof(double)); break;
    }
    /* the vocabulary is not a key: bytes, then one token per anchor kind */
    if (k->off == OFF(data.anchors))
        c->model.vocab = TXL_BYTES + units_n_anchors((unsigned)c->data.anchors);
}

/* Shortest "%.Ng" that reads back to exactly x. */
static void fmt_double(char *buf, size_t cap, double x)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

/* Shortest form that reads back to exactly the float x (as strtod then a float cast). */
static void fmt_float(char *buf, size_t cap, float x)
{
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, cap, "%.*g", prec, (double)x);
        if ((float)strtod(buf, NULL) == x)
            return;
    }
}

/* 'text' for messages: at most 40 bytes, control bytes shown as '?'; quote 0: no quotes. */
static void show(char *buf, size_t cap, const char *s, size_t len, char quote)
{
    size_t o = 0, lim = len > 40 ? 40 : len;
    if (cap < 8) {
        if (cap)
            buf[0] = '\0';
        return;
    }
    if (quote)
        buf[o++] = quote;
    for (size_t i = 0; i < lim && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        buf[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    if (lim < len && o + 5 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    if (quote)
        buf[o++] = quote;
    buf[o] = '\0';
}

/* names[i] of a CT_SET key, or NULL past the list. */
static const char *set_name(const cfg_key *k, int i)
{
    for (int j = 0; j <= i; j++)
        if (!k->names[j])
            return NULL;
    return k->names[i];
}

/* The text of a scalar value as the writer emits it (numbers in shortest round-trip form,
 * true/false, enum names); strings as a shortened "quote" for messages; data.split as
 * "[a, b, c]" (messages and diffs). */
static void fmt_value(const cfg_key *k, const cfg_value *v, char *buf, size_t cap)
{
    switch (k->type) {
    case CT_INT: case CT_LONG: snprintf(buf, cap, "%lld", v->i); break;
    case CT_DOUBLE: fmt_double(buf, cap, v->x[0]); break;
    case CT_FLOAT: fmt_float(buf, cap, (float)v->x[0]); break;
    case CT_BOOL: snprintf(buf, cap, "%s", v->i ? "true" : "false"); break;
    case CT_ENUM: {
        const char *nm = v->i >= INT_MIN && v->i <= INT_MAX ? k->en((int)v->i) : NULL;
        if (nm)
            snprintf(buf, cap, "%s", nm);
        else
            snprintf(buf, cap, "<invalid %lld>", v->i);
        break;
    }
    case CT_U64: snprintf(buf, cap, "%llu", v->u); break;
    case CT_PATH: case CT_TEXT: case CT_NAME: show(buf, cap, v->s, strlen(v->s), '"'); break;
    case CT_SET: { /* [para, sent]; bits past the names as numbers */
        size_t o = (size_t)snprintf(buf, cap, "[");
        for (int i = 0, first = 1; i < 31 && o < cap; i++) {
            if (!(v->i >> i & 1))
                continue;
            const char *nm = set_name(k, i);
            o += nm ? (size_t)snprintf(buf + o, cap - o, "%s%s", first ? "" : ", ", nm)
                    : (size_t)snprintf(buf + o, cap - o, "%s<bit %d>", first ? "" : ", ", i);
            first = 0;
        }
        if (o < cap)
            snprintf(buf + o, cap - o, "]");
        break;
    }
    case CT_TERMS: { /* the letters of the terms in use */
        size_t o = 0;
        for (int i = 0; i < 4 && o + 1 < cap; i++)
            if (!(v->i >> i & 1))
                buf[o++] = (char)('a' + i);
        buf[o] = '\0';
        break;
    }
    case CT_SPLIT: {
        char a[32], b[32], d[32];
        fmt_double(a, sizeof a, v->x[0]);
        fmt_double(b, sizeof b, v->x[1]);
        fmt_double(d, sizeof d, v->x[2]);
        snprintf(buf, cap, "[%s, %s, %s]", a, b, d);
        break;
    }
    }
}

/* The value of the enum key k named s, or -1. */
static int enum_parse(const cfg_key *k, const char *s)
{
    const char *nm;
    for (int i = 0; (nm = k->en(i)); i++)
        if (strcmp(nm, s) == 0)
            return i;
    return -1;
}

static void key_fullname(const cfg_key *k, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s.%s", k->section, k->name);
}

/* "one of a, b, c" for enums and name lists. */
static void choices_desc(const cfg_key *k, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "one of ");
    for (int i = 0; o < cap; i++) {
        const char *nm = k->type == CT_ENUM ? k->en(i) : k->names[i];
        if (!nm)
            break;
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", nm);
    }
}

/* What a key expects, for "expected X, found Y". */
static const char *type_expect(const cfg_key *k, char *buf, size_t cap)
{
    switch (k->type) {
    case CT_INT: case CT_LONG: return "an integer";
    case CT_DOUBLE: case CT_FLOAT: return "a number";
    case CT_BOOL: return "true or false";
    case CT_U64: return "a non-negative integer";
    case CT_PATH: return "a path";
    case CT_TEXT: return "a string";
    case CT_SPLIT: return "a list of 3 numbers [train, valid, test]";
    case CT_ENUM: case CT_NAME: choices_desc(k, buf, cap); return buf;
    case CT_SET: {
        size_t o = (size_t)snprintf(buf, cap, "a list of names, each ");
        if (o < cap)
            choices_desc(k, buf + o, cap - o);
        return buf;
    }
    case CT_TERMS: return "letters of the terms a, b, c, d (\"abcd\", \"ac\")";
    }
    return "a value";
}

/* ---------------------------------------------------------------------------------------
 * Checks shared by every source: each returns 0 if v is acceptable for k, else -1 with the
 * message in why ("model.d_model must be even, found 255"), without location. */

/* Integer and number keys: the field's own range, then the key's. */
static int check_number(const cfg_key *k, const cfg_value *v, const char *full,
                        const char *found, char *why, size_t cap)
{
    char lo[32], hi[32];
    double x;
    if (k->type == CT_INT || k->type == CT_LONG) {
        /* The field's own range first: an int key cannot hold 2^31. */
        long long tmin = k->type == CT_INT ? INT_MIN : (LONG_MIN < -(long long)TWO53
                                                       ? -(long long)TWO53 : LONG_MIN);
        long long tmax = k->type == CT_INT ? INT_MAX : (LONG_MAX > (long long)TWO53
                                                       ? (long long)TWO53 : LONG_MAX);
        if (v->i < tmin || v->i > tmax) {
            snprintf(why, cap, "%s must be %s %lld (the largest the field holds), found %s",
                     full, v->i < tmin ? ">=" : "<=", v->i < tmin ? tmin : tmax, found);
            return -1;
        }
        x = (double)v->i;
    } else {
        x = v->x[0];
        if (!isfinite(x)) {
            snprintf(why, cap, "%s must be a finite number, found %s", full, found);
            return -1;
        }
    }
    int ok = 1;
    if ((k->flags & F_MIN) && ((k->flags & F_MIN_EXCL) ? !(x > k->min) : !(x >= k->min)))
        ok = 0;
    if ((k->flags & F_MAX) && ((k->flags & F_MAX_EXCL) ? !(x < k->max) : !(x <= k->max)))
        ok = 0;
    if (!ok) { /* "in [0, 1)", ">= 1", "> 0" */
        char range[80];
        fmt_double(lo, sizeof lo, k->min);
        fmt_double(hi, sizeof hi, k->max);
        int excl_lo = (k->flags & F_MIN_EXCL) != 0, excl_hi = (k->flags & F_MAX_EXCL) != 0;
        if ((k->flags & F_MIN) && (k->flags & F_MAX))
            snprintf(range, sizeof range, "in %c%s, %s%c", "[("[excl_lo], lo, hi, "])"[excl_hi]);
        else
            snprintf(range, sizeof range, "%s %s", (k->flags & F_MIN) ? (excl_lo ? ">" : ">=")
                     : (excl_hi ? "<" : "<="), (k->flags & F_MIN) ? lo : hi);
        snprintf(why, cap, "%s must be %s, found %s", full, range, found);
        return -1;
    }
    if ((k->flags & F_EVEN) && v->i % 2 != 0) {
        snprintf(why, cap, "%s must be even, found %s", full, found);
        return -1;
    }
    return 0;
}

/* Paths and names: they fit the buffer; names are one of the list. (They are UTF-8: every
 * source is read by libyaml, which refuses anything else, and the writer checks again.) */
static int check_text(const cfg_key *k, const cfg_value *v, const char *full,
                      const char *found, char *why, size_t cap)
{
    char tmp[256];
    size_t n = strnlen(v->s, k->cap);
    if (n >= k->cap) {
        snprintf(why, cap, "%s: expected a value of at most %zu bytes, found %zu+ bytes",
                 full, k->cap - 1, n);
        return -1;
    }
    if (k->type == CT_NAME) {
        for (int i = 0; k->names[i]; i++)
            if (strcmp(v->s, k->names[i]) == 0)
                return 0;
        snprintf(why, cap, "%s: expected %s, found %s", full, type_expect(k, tmp, sizeof tmp),
                 found);
        return -1;
    }
    return 0;
}

static int check_split(const cfg_value *v, const char *full, const char *found, char *why,
                       size_t cap)
{
    double sum = 0;
    for (int i = 0; i < 3; i++) {
        if (!isfinite(v->x[i]) || v->x[i] < 0) {
            snprintf(why, cap, "%s: each fraction must be a finite number >= 0, found %s",
                     full, found);
            return -1;
        }
        sum += v->x[i];
    }
    /* 1e-9 of slack: 0.8 + 0.1 + 0.1 is 1.0000000000000002 in doubles. */
    if (sum > 1 + 1e-9) {
        snprintf(why, cap, "%s: the fractions must sum to <= 1, found %s (sum %.17g)", full,
                 found, sum);
        return -1;
    }
    if (!(v->x[0] > 0)) {
        snprintf(why, cap, "%s: the train fraction must be > 0, found %s", full, found);
        return -1;
    }
    return 0;
}

/* Sets hold only named bits (a required set at least one); xl_terms keep at least one term. */
static int check_bits(const cfg_key *k, const cfg_value *v, const char *full,
                      const char *found, char *why, size_t cap)
{
    int n = 0;
    if (k->type == CT_TERMS)
        n = 4;
    else
        while (k->names[n])
            n++;
    long long all = (1LL << n) - 1;
    if (v->i < 0 || (v->i & ~all)) {
        snprintf(why, cap, "%s: unknown member in %s", full, found);
        return -1;
    }
    if (k->type == CT_TERMS && v->i == all) {
        snprintf(why, cap, "%s: at least one of the terms a, b, c, d must stay, found \"\"",
                 full);
        return -1;
    }
    if ((k->flags & F_REQUIRED) && v->i == 0) {
        snprintf(why, cap, "%s: at least one of the names must be given, found []", full);
        return -1;
    }
    return 0;
}

/* Range and per-key rules for any key. */
static int key_check(const cfg_key *k, const cfg_value *v, char *why, size_t cap)
{
    char full[64], found[128], tmp[256];
    key_fullname(k, full, sizeof full);
    fmt_value(k, v, found, sizeof found);
    switch (k->type) {
    case CT_INT: case CT_LONG: case CT_DOUBLE: case CT_FLOAT:
        return check_number(k, v, full, found, why, cap);
    case CT_BOOL:
        if (v->i != 0 && v->i != 1) {
            snprintf(why, cap, "%s: expected true or false, found %lld", full, v->i);
            return -1;
        }
        return 0;
    case CT_ENUM:
        if (v->i < INT_MIN || v->i > INT_MAX || !k->en((int)v->i)) {
            snprintf(why, cap, "%s: expected %s, found %s", full,
                     type_expect(k, tmp, sizeof tmp), found);
            return -1;
        }
        return 0;
    case CT_U64:
        return 0;
    case CT_PATH: case CT_TEXT: case CT_NAME:
        return check_text(k, v, full, found, why, cap);
    case CT_SPLIT:
        return check_split(v, full, found, why, cap);
    case CT_SET: case CT_TERMS:
        return check_bits(k, v, full, found, why, cap);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Key lookup and "did you mean" */

static int section_find(const char *s)
{
    for (size_t i = 0; i < COUNT(sections); i++)
        if (strcmp(s, sections[i]) == 0)
            return (int)i;
    return -1;
}

static int key_find(const char *section, const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].section, section) == 0 && strcmp(keys[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* Optimal string alignment distance (Levenshtein plus adjacent transpositions, so
 * "d_modle" is one edit from "d_model"). Strings longer than 63 bytes: a large number. */
static int edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63)
        return 1000;
    int d[64][64];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

/* How many edits still look like a typo of a word of this length. */
static int typo_budget(size_t len)
{
    return len <= 3 ? 1 : len <= 6 ? 2 : 3;
}

/* The key the user most likely meant by section.name (section may be NULL or unknown):
 * a close name in the same section, or the same name in another section ("model.lr" ->
 * "train.lr"), or a name it is a prefix of ("warmup" -> "warmup_steps"). NULL if none. */
static const cfg_key *key_suggest(const char *section, const char *name)
{
    const cfg_key *best = NULL;
    int best_d = 1000;
    size_t len = strlen(name);
    for (size_t i = 0; i < NKEYS; i++) {
        const cfg_key *k = &keys[i];
        int d = edit_distance(name, k->name);
        if (len >= 4 && strncmp(k->name, name, len) == 0)
            d = d < 1 ? d : 1;
        d += !section || strcmp(section, k->section) != 0;
        if (d < best_d) {
            best_d = d;
            best = k;
        }
    }
    return best_d <= typo_budget(len) ? best : NULL;
}

/* " (did you mean 'model.d_model'?)" or "". */
static void suggest_text(char *buf, size_t cap, const char *section, const char *name)
{
    const cfg_key *k = key_suggest(section, name);
    if (k)
        snprintf(buf, cap, " (did you mean '%s.%s'?)", k->section, k->name);
    else
        buf[0] = '\0';
}

/* ---------------------------------------------------------------------------------------
 * Scalar parsing (every source) */

static int is_null_text(const char *s, int plain)
{
    return plain && (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
                     !strcmp(s, "NULL"));
}

static int is_int_syntax(const char *s)
{
    if (*s == '+' || *s == '-')
        s++;
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* Decimal numbers only: [+-](digits[.digits]|.digits)([eE][+-]digits). strtod alone would
 * also take hex, inf, nan and leading blanks. (Flags follow the same rule: cli_double.) */
int cfg_is_decimal(const char *s)
{
    int digits = 0;
    if (*s == '+' || *s == '-')
        s++;
    for (; *s >= '0' && *s <= '9'; s++)
        digits++;
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++)
            digits++;
    if (!digits)
        return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (*s < '0' || *s > '9')
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

static int parse_bool_text(const char *s, int *b)
{
    static const char *const yes[] = { "true", "True", "TRUE", "yes", "Yes", "YES",
                                       "on", "On", "ON" };
    static const char *const no[] = { "false", "False", "FALSE", "no", "No", "NO",
                                      "off", "Off", "OFF" };
    for (size_t i = 0; i < COUNT(yes); i++) {
        if (strcmp(s, yes[i]) == 0)
            return *b = 1, 0;
        if (strcmp(s, no[i]) == 0)
            return *b = 0, 0;
    }
    return -1;
}

/* Unsigned decimal integer (train.seed). */
static int parse_u64_text(const char *s, unsigned long long *u)
{
    const char *t = *s == '+' ? s + 1 : s;
    if (!*t)
        return -1;
    for (const char *q = t; *q; q++)
        if (*q < '0' || *q > '9')
            return -1;
    errno = 0;
    *u = strtoull(t, NULL, 10);
    return errno == ERANGE ? -1 : 0;
}

/* A number for a double key, or one element of data.split. */
static int parse_number(const char *label, const char *text, int plain, double *x, char *why,
                        size_t cap)
{
    char f[64];
    show(f, sizeof f, text, strlen(text), plain ? '\'' : '"');
    if (!plain || !cfg_is_decimal(text)) {
        snprintf(why, cap, "%s: expected a number, found %s%s", label,
                 plain ? "" : "the string ", f);
        return -1;
    }
    errno = 0;
    *x = strtod(text, NULL);
    /* Overflow is an error; underflow gives a subnormal or 0, which the range checks see
     * (and subnormals must load back for the dump to round-trip). */
    if (errno == ERANGE && fabs(*x) > 1) {
        snprintf(why, cap, "%s: expected a number, found %s (too large for a double)", label, f);
        return -1;
    }
    return 0;
}

/* The index of name s in k->names, or -1. */
static int name_index(const cfg_key *k, const char *s)
{
    for (int i = 0; k->names[i]; i++)
        if (strcmp(k->names[i], s) == 0)
            return i;
    return -1;
}

/* xl_terms: distinct letters of a..d ("abcd", "ac") to the bits of the letters left out. */
static int parse_terms(const char *s, long long *off)
{
    int on = 0;
    for (const char *q = s; *q; q++) {
        if (*q < 'a' || *q > 'd' || (on >> (*q - 'a') & 1))
            return -1;
        on |= 1 << (*q - 'a');
    }
    *off = ~on & 15;
    return 0;
}

/* Converts one scalar's text to a value for k (types only; ranges are key_check's).
 * plain: the scalar was unquoted, so it may be null, a number or a bool. */
static int parse_scalar(const cfg_key *k, const char *text, size_t len, int plain, cfg_value *v,
                        char *why, size_t cap)
{
    char full[64], f[64], tmp[256];
    const char *expect = type_expect(k, tmp, sizeof tmp);
    key_fullname(k, full, sizeof full);
    show(f, sizeof f, text, len, plain ? '\'' : '"');
    memset(v, 0, sizeof *v);
    if (strlen(text) != len) {
        snprintf(why, cap, "%s: expected %s, found a value containing a NUL byte", full, expect);
        return -1;
    }
    if (is_null_text(text, plain)) {
        if ((k->flags & F_NULL_OK) &&
            (k->type == CT_PATH || k->type == CT_TEXT || k->type == CT_NAME)) {
            v->s = "";
            return 0;
        }
        snprintf(why, cap, "%s: expected %s, found null", full, expect);
        return -1;
    }
    /* "found 'x'" for plain text, "found the string "x"" for quoted (enum names and data.split
     * say neither) */
    const char *quoted = plain || k->type == CT_ENUM || k->type == CT_SPLIT ? "" : "the string ";
    const char *extra = "";
    int b, ok = plain;
    switch (k->type) {
    case CT_INT: case CT_LONG:
        ok = ok && is_int_syntax(text);
        errno = 0;
        v->i = ok ? strtoll(text, NULL, 10) : 0;
        if (ok && errno == ERANGE)
            ok = 0, extra = " (too large)";
        break;
    case CT_DOUBLE: case CT_FLOAT:
        if (parse_number(full, text, plain, &v->x[0], why, cap) != 0)
            return -1;
        ok = k->type == CT_DOUBLE || fabs(v->x[0]) <= FLT_MAX;
        v->x[0] = ok && k->type == CT_FLOAT ? (float)v->x[0] : v->x[0]; /* checked as stored */
        extra = " (too large for a float)";
        break;
    case CT_BOOL:
        ok = ok && parse_bool_text(text, &b) == 0;
        v->i = ok ? b : 0;
        break;
    case CT_U64:
        ok = ok && parse_u64_text(text, &v->u) == 0;
        expect = "a non-negative integer < 2^64";
        break;
    case CT_ENUM:
        ok = (v->i = enum_parse(k, text)) >= 0;
        break;
    case CT_PATH: case CT_TEXT: case CT_NAME:
        v->s = text;
        return 0;
    case CT_SET: { /* one bare name: a set of one */
        int i = name_index(k, text);
        ok = i >= 0;
        v->i = ok ? 1LL << i : 0;
        break;
    }
    case CT_TERMS:
        ok = parse_terms(text, &v->i) == 0;
        break;
    case CT_SPLIT:
        ok = 0;
        break;
    }
    if (ok)
        return 0;
    snprintf(why, cap, "%s: expected %s, found %s%s%s", full, expect, quoted, f, extra);
    return -1;
}

/* ---------------------------------------------------------------------------------------
 * The reader: YAML documents (config files, --set values, checkpoint metadata) */

/* Where an error is: a YAML file (PATH:LINE:COL), a --set flag (its text), or the config in
 * a checkpoint's metadata (CKPT: metadata 'config' at LINE:COL). */
typedef struct {
    const char *path;
    const char *flag;
    const char *meta;
} cfg_src;

/* The flag text for messages: at most 200 bytes, control bytes (a newline) as '?'. */
static void flag_text(char *buf, size_t cap, const char *flag)
{
    size_t o = 0;
    for (; flag[o] && o < 200 && o + 1 < cap; o++)
        buf[o] = (unsigned char)flag[o] < 0x20 || flag[o] == 0x7f ? '?' : flag[o];
    buf[o] = '\0';
}

/* m NULL: about the input as a whole (libyaml's reader knows a byte offset, no line:col). */
static int src_err(txl_err *e, const cfg_src *s, const yaml_mark_t *m, const char *why)
{
    char ft[208], at[48] = "";
    if (s->flag) {
        flag_text(ft, sizeof ft, s->flag);
        return err_set(e, ERR_INPUT, "--set %s: %s", ft, why);
    }
    if (m)
        snprintf(at, sizeof at, s->meta ? " at %zu:%zu" : ":%zu:%zu", m->line + 1, m->column + 1);
    if (s->meta)
        return err_set(e, ERR_INPUT, "%s: metadata 'config'%s: %s", s->meta, at, why);
    return err_set(e, ERR_INPUT, "%s%s: %s", s->path, at, why);
}

/* Not the input's fault: out of memory, a malformed document from libyaml. */
static int src_fail(txl_err *e, const cfg_src *s, const char *why)
{
    src_err(e, s, NULL, why);
    e->kind = ERR_RUNTIME;
    return -1;
}

static int parser_err(txl_err *e, const cfg_src *s, const yaml_parser_t *p)
{
    char why[512];
    const char *problem = p->problem ? p->problem : "unknown problem";
    if (p->error == YAML_MEMORY_ERROR)
        return src_fail(e, s, "out of memory while parsing YAML");
    if (p->error == YAML_READER_ERROR) {
        /* The reader has no line:col, only a byte offset (bad UTF-8, a control character). */
        if (p->problem_value != -1)
            snprintf(why, sizeof why, "invalid YAML input at byte %zu: %s (byte 0x%02X)",
                     p->problem_offset, problem, (unsigned)p->problem_value & 0xffu);
        else
            snprintf(why, sizeof why, "invalid YAML input at byte %zu: %s", p->problem_offset,
                     problem);
        return src_err(e, s, NULL, why);
    }
    if (p->context)
        snprintf(why, sizeof why, "YAML syntax error: %s (%s at %zu:%zu)", problem, p->context,
                 p->context_mark.line + 1, p->context_mark.column + 1);
    else
        snprintf(why, sizeof why, "YAML syntax error: %s", problem);
    return src_err(e, s, &p->problem_mark, why);
}

/* The first document of a text, with the nodes that carried an explicit tag. */
typedef struct {
    yaml_parser_t p;
    yaml_document_t doc;
    int parser_ok, doc_ok;
    unsigned char *tagged; /* [node index - 1] */
    size_t n_nodes;        /* of the first document, counted by scan_events */
} cfg_doc;

static void doc_free(cfg_doc *d)
{
    if (d->doc_ok)
        yaml_document_delete(&d->doc);
    if (d->parser_ok)
        yaml_parser_delete(&d->p);
    free(d->tagged);
}

/* CFG_MAX_DEPTH (config.h): a txl config nests 3 levels (the root mapping, a section, a
 * list such as data.split), so anything deeper is an error anyway; and libyaml's time
 * grows with the square of the depth (its scanner checks every open flow level's possible
 * simple key at every token): 40,000 nested '[' took 24 s, 100,000 two minutes, inside
 * libyaml, before txl saw a node. So the events are counted first and the first one past
 * that depth stops the parse: the cost stays linear. */

/* The pass over the events before yaml_parser_load builds anything (doc_load): the depth
 * of every document of the text against CFG_MAX_DEPTH, and the nodes of the first one that
 * carry an explicit tag. yaml_parser_load gives an untagged scalar the tag !!str, the same
 * as `!!str 3`, so the difference shows only in the events; the loader adds one node per
 * scalar, sequence start and mapping start (aliases add none), in event order, so the n-th
 * such event is node n. A syntax error ends this pass quietly: the loader, which reads the
 * same events up to it, reports it in its place. */
static int scan_events(cfg_doc *d, const cfg_src *s, const char *text, size_t len, txl_err *e)
{
    yaml_parser_t p;
    yaml_event_t ev;
    size_t cap = 64;
    d->tagged = calloc(cap, 1);
    if (!d->tagged || !yaml_parser_initialize(&p))
        return src_fail(e, s, "out of memory while parsing YAML");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int depth = 0, docs = 0, rc = 0;
    for (int done = 0; !done && rc == 0;) {
        if (!yaml_parser_parse(&p, &ev))
            break;
        const yaml_char_t *tag = NULL;
        int node = 1;
        switch (ev.type) {
        case YAML_SCALAR_EVENT: tag = ev.data.scalar.tag; break;
        case YAML_SEQUENCE_START_EVENT: tag = ev.data.sequence_start.tag; depth++; break;
        case YAML_MAPPING_START_EVENT: tag = ev.data.mapping_start.tag; depth++; break;
        case YAML_SEQUENCE_END_EVENT: case YAML_MAPPING_END_EVENT: depth--; node = 0; break;
        case YAML_DOCUMENT_END_EVENT: docs++; node = 0; break;
        case YAML_STREAM_END_EVENT: done = 1; node = 0; break;
        default: node = 0; break;
        }
        if (depth > CFG_MAX_DEPTH) {
            char why[160];
            snprintf(why, sizeof why, "nested deeper than %d levels (a txl config has 3: "
                     "sections, keys, lists)", CFG_MAX_DEPTH);
            rc = src_err(e, s, &ev.start_mark, why);
        } else if (node && docs == 0) {
            if (d->n_nodes == cap) {
                unsigned char *t = realloc(d->tagged, 2 * cap);
                if (!t)
                    rc = src_fail(e, s, "out of memory while parsing YAML");
                else
                    memset(t + cap, 0, cap), d->tagged = t, cap *= 2;
            }
            if (rc == 0)
                d->tagged[d->n_nodes++] = tag != NULL;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

/* Parses the first document of text into d (the caller frees d in any case). */
static int doc_load(cfg_doc *d, const cfg_src *s, const char *text, size_t len, txl_err *e)
{
    memset(d, 0, sizeof *d);
    if (scan_events(d, s, text, len, e))
        return -1;
    if (!(d->parser_ok = yaml_parser_initialize(&d->p)))
        return src_fail(e, s, "cannot initialize the YAML parser");
    yaml_parser_set_input_string(&d->p, (const unsigned char *)text, len);
    if (!yaml_parser_load(&d->p, &d->doc))
        return parser_err(e, s, &d->p); /* the loader freed the document */
    d->doc_ok = 1;
    return 0;
}

/* After the first document: anything but the end of the stream is an error. */
static int doc_expect_end(cfg_doc *d, const cfg_src *s, txl_err *e)
{
    yaml_document_t next;
    if (!yaml_parser_load(&d->p, &next))
        return parser_err(e, s, &d->p);
    yaml_node_t *root = yaml_document_get_root_node(&next);
    int rc = 0;
    if (root)
        rc = src_err(e, s, &root->start_mark,
                     "expected a single YAML document, found a second one");
    yaml_document_delete(&next);
    return rc;
}

/* The tags a value may carry: a tag written in the YAML must agree with the key's type
 * (`n_layer: !!str 3` is a string, so an error, like `n_layer: "3"`). */
static const char *const tags_num[] = { YAML_FLOAT_TAG, YAML_INT_TAG, NULL };
static const char *const tags_map[] = { YAML_MAP_TAG, NULL };

static const char *const *key_tags(const cfg_key *k)
{
    static const char *const tags_int[] = { YAML_INT_TAG, NULL };
    static const char *const tags_bool[] = { YAML_BOOL_TAG, NULL };
    static const char *const tags_str[] = { YAML_STR_TAG, NULL };
    static const char *const tags_path[] = { YAML_STR_TAG, YAML_NULL_TAG, NULL };
    static const char *const tags_seq[] = { YAML_SEQ_TAG, NULL };
    static const char *const tags_set[] = { YAML_SEQ_TAG, YAML_STR_TAG, NULL };
    switch (k->type) {
    case CT_INT: case CT_LONG: case CT_U64: return tags_int;
    case CT_DOUBLE: case CT_FLOAT: return tags_num;
    case CT_BOOL: return tags_bool;
    case CT_ENUM: case CT_NAME: return tags_str;
    case CT_PATH: case CT_TEXT: return (k->flags & F_NULL_OK) ? tags_path : tags_str;
    case CT_SPLIT: return tags_seq;
    case CT_SET: return tags_set;
    case CT_TERMS: return tags_str;
    }
    return tags_str;
}

/* 0 when n has no explicit tag or one of ok; else -1 with "LABEL: expected X, found a value
 * tagged !!str" in why. */
static int tag_check(const cfg_doc *d, const yaml_node_t *n, const char *const *ok,
                     const char *label, const char *expect, char *why, size_t cap)
{
    size_t i = (size_t)(n - d->doc.nodes.start);
    if (i >= d->n_nodes || !d->tagged[i])
        return 0;
    const char *t = (const char *)n->tag;
    for (; *ok; ok++)
        if (strcmp(t, *ok) == 0)
            return 0;
    char shown[64];
    if (strncmp(t, "tag:yaml.org,2002:", 18) == 0)
        snprintf(shown, sizeof shown, "!!%.40s", t + 18);
    else
        show(shown, sizeof shown, t, strlen(t), 0);
    snprintf(why, cap, "%s: expected %s, found a value tagged %s", label, expect, shown);
    return -1;
}

static int node_is_null(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE &&
           is_null_text((const char *)n->data.scalar.value,
                        n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE);
}

/* "a mapping", "a list", "null" or 'text', for "found ...". */
static void node_desc(const yaml_node_t *n, char *buf, size_t cap)
{
    if (n->type == YAML_MAPPING_NODE)
        snprintf(buf, cap, "a mapping");
    else if (n->type == YAML_SEQUENCE_NODE)
        snprintf(buf, cap, "a list");
    else if (node_is_null(n))
        snprintf(buf, cap, "null");
    else
        show(buf, cap, (const char *)n->data.scalar.value, n->data.scalar.length,
             n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? '\'' : '"');
}

/* data.split: a list of 3 numbers; on error *at is where it went wrong. */
static int split_from_node(const cfg_key *k, const cfg_doc *d, const yaml_node_t *n,
                           cfg_value *v, yaml_mark_t *at, char *why, size_t cap)
{
    char full[64], desc[64], tmp[256], label[80];
    key_fullname(k, full, sizeof full);
    if (n->type != YAML_SEQUENCE_NODE) {
        node_desc(n, desc, sizeof desc);
        snprintf(why, cap, "%s: expected %s, found %s", full, type_expect(k, tmp, sizeof tmp),
                 desc);
        return -1;
    }
    yaml_node_item_t *it = n->data.sequence.items.start;
    long count = (long)(n->data.sequence.items.top - it);
    if (count != 3) {
        snprintf(why, cap, "%s: expected %s, found %ld item%s", full,
                 type_expect(k, tmp, sizeof tmp), count, count == 1 ? "" : "s");
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        yaml_node_t *x = yaml_document_get_node((yaml_document_t *)&d->doc, it[i]);
        snprintf(label, sizeof label, "%s[%d]", full, i);
        if (!x) {
            snprintf(why, cap, "%s: malformed YAML document", label);
            return -1;
        }
        *at = x->start_mark;
        if (x->type != YAML_SCALAR_NODE) {
            node_desc(x, desc, sizeof desc);
            snprintf(why, cap, "%s: expected a number, found %s", label, desc);
            return -1;
        }
        if (tag_check(d, x, tags_num, label, "a number", why, cap) != 0 ||
            parse_number(label, (const char *)x->data.scalar.value,
                         x->data.scalar.style == YAML_PLAIN_SCALAR_STYLE, &v->x[i], why,
                         cap) != 0)
            return -1;
    }
    *at = n->start_mark;
    return 0;
}

/* A set of names: a list of distinct names of k->names; on error *at is where it went
 * wrong. */
static int set_from_node(const cfg_key *k, const cfg_doc *d, const yaml_node_t *n,
                         cfg_value *v, yaml_mark_t *at, char *why, size_t cap)
{
    static const char *const tags_str[] = { YAML_STR_TAG, NULL };
    char full[64], desc[64], tmp[256], label[96];
    key_fullname(k, full, sizeof full);
    const char *expect = type_expect(k, tmp, sizeof tmp);
    long count = (long)(n->data.sequence.items.top - n->data.sequence.items.start);
    v->i = 0;
    for (long i = 0; i < count; i++) {
        yaml_node_t *x = yaml_document_get_node((yaml_document_t *)&d->doc,
                                                n->data.sequence.items.start[i]);
        snprintf(label, sizeof label, "%s[%ld]", full, i);
        if (!x) {
            snprintf(why, cap, "%s: malformed YAML document", label);
            return -1;
        }
        *at = x->start_mark;
        if (tag_check(d, x, tags_str, label, "a name", why, cap) != 0)
            return -1;
        int j = x->type == YAML_SCALAR_NODE && strlen((const char *)x->data.scalar.value) ==
                x->data.scalar.length ? name_index(k, (const char *)x->data.scalar.value) : -1;
        if (j < 0) {
            node_desc(x, desc, sizeof desc);
            snprintf(why, cap, "%s: expected %s, found %s", label, strstr(expect, "one of"),
                     desc);
            return -1;
        }
        if (v->i >> j & 1) {
            snprintf(why, cap, "%s: '%s' is listed twice", label, k->names[j]);
            return -1;
        }
        v->i |= 1LL << j;
    }
    *at = n->start_mark;
    return 0;
}

/* Converts the value node of key k; on error *at is where it went wrong. */
static int value_from_node(const cfg_key *k, const cfg_src *s, const cfg_doc *d,
                           const yaml_node_t *n, cfg_value *v, yaml_mark_t *at, char *why,
                           size_t cap)
{
    char full[64], desc[64], tmp[256];
    key_fullname(k, full, sizeof full);
    *at = n->start_mark;
    memset(v, 0, sizeof *v);
    if (tag_check(d, n, key_tags(k), full, type_expect(k, tmp, sizeof tmp), why, cap) != 0)
        return -1;
    if (k->type == CT_SPLIT)
        return split_from_node(k, d, n, v, at, why, cap);
    if (k->type == CT_SET && n->type == YAML_SEQUENCE_NODE)
        return set_from_node(k, d, n, v, at, why, cap);
    if (n->type != YAML_SCALAR_NODE) {
        node_desc(n, desc, sizeof desc);
        snprintf(why, cap, "%s: expected %s, found %s", full, type_expect(k, tmp, sizeof tmp),
                 desc);
        return -1;
    }
    int plain = n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    /* the JSON form of older checkpoints stored seeds >= 2^53 as decimal strings */
    if (s->meta && k->type == CT_U64)
        plain = 1;
    int rc = parse_scalar(k, (const char *)n->data.scalar.value, n->data.scalar.length, plain,
                          v, why, cap);
    /* txl before clamp_len had a minimum documented "<= 0: off" and wrote any int: in a
     * checkpoint's config a negative value is that off, 0 (the same numerics); a config
     * file and --set must say 0 */
    if (rc == 0 && s->meta && k->off == offsetof(txl_config, model.clamp_len) && v->i < 0)
        v->i = 0;
    return rc;
}

/* Applies one section mapping; seen[] marks keys already set in this document. */
static int load_section(txl_config *w, const cfg_src *s, const cfg_doc *d, const char *sec,
                        const yaml_node_t *map, unsigned char *seen, yaml_mark_t *seen_at,
                        txl_err *e)
{
    char why[768], desc[64];
    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *kn = yaml_document_get_node((yaml_document_t *)&d->doc, pr->key);
        yaml_node_t *vn = yaml_document_get_node((yaml_document_t *)&d->doc, pr->value);
        if (!kn || !vn)
            return src_fail(e, s, "malformed YAML document");
        if (kn->type != YAML_SCALAR_NODE) {
            node_desc(kn, desc, sizeof desc);
            snprintf(why, sizeof why, "expected a key name in section '%s', found %s", sec, desc);
            return src_err(e, s, &kn->start_mark, why);
        }
        const char *name = (const char *)kn->data.scalar.value;
        int ki = strlen(name) == kn->data.scalar.length ? key_find(sec, name) : -1;
        if (ki < 0) {
            char sug[160], nm[64];
            show(nm, sizeof nm, name, kn->data.scalar.length, 0);
            suggest_text(sug, sizeof sug, sec, name);
            snprintf(why, sizeof why, "unknown key '%s.%s'%s", sec, nm, sug);
            return src_err(e, s, &kn->start_mark, why);
        }
        const cfg_key *k = &keys[ki];
        if (seen[ki]) {
            snprintf(why, sizeof why, "duplicate key '%s.%s' (first set at %zu:%zu)", sec,
                     k->name, seen_at[ki].line + 1, seen_at[ki].column + 1);
            return src_err(e, s, &kn->start_mark, why);
        }
        seen[ki] = 1;
        seen_at[ki] = kn->start_mark;
        cfg_value v;
        yaml_mark_t at;
        if (value_from_node(k, s, d, vn, &v, &at, why, sizeof why) != 0 ||
            key_check(k, &v, why, sizeof why) != 0)
            return src_err(e, s, &at, why);
        key_put(k, w, &v);
    }
    return 0;
}

/* The section named by key node kn: its index, or -1 with the error set. */
static int section_of(const cfg_src *s, const yaml_node_t *kn, txl_err *e)
{
    char why[512], desc[64];
    if (kn->type != YAML_SCALAR_NODE) {
        node_desc(kn, desc, sizeof desc);
        snprintf(why, sizeof why, "expected a section name (model, data or train), found %s",
                 desc);
        return src_err(e, s, &kn->start_mark, why);
    }
    const char *name = (const char *)kn->data.scalar.value;
    int si = strlen(name) == kn->data.scalar.length ? section_find(name) : -1;
    if (si < 0) {
        char sug[64] = "";
        for (size_t i = 0; i < COUNT(sections); i++)
            if (edit_distance(name, sections[i]) <= 2)
                snprintf(sug, sizeof sug, "; did you mean '%s'?", sections[i]);
        show(desc, sizeof desc, name, kn->data.scalar.length, '\'');
        snprintf(why, sizeof why, "unknown section %s (expected model, data or train%s)", desc,
                 sug);
        return src_err(e, s, &kn->start_mark, why);
    }
    return si;
}

/* Applies the root mapping {model: {...}, data: {...}, train: {...}}. */
static int load_root(txl_config *w, const cfg_src *s, const cfg_doc *d, unsigned char *seen,
                     txl_err *e)
{
    char why[512], desc[64];
    yaml_mark_t seen_at[NKEYS];
    yaml_mark_t sec_at[COUNT(sections)];
    int sec_seen[COUNT(sections)] = { 0 };
    const char *expect = "a mapping of sections (model, data, train)";
    yaml_node_t *root = yaml_document_get_root_node((yaml_document_t *)&d->doc);
    if (!root || node_is_null(root))
        return 0; /* empty document: all keys keep their value */
    if (tag_check(d, root, tags_map, "the document", expect, why, sizeof why) != 0)
        return src_err(e, s, &root->start_mark, why);
    if (root->type != YAML_MAPPING_NODE) {
        node_desc(root, desc, sizeof desc);
        snprintf(why, sizeof why, "expected %s, found %s", expect, desc);
        return src_err(e, s, &root->start_mark, why);
    }
    for (yaml_node_pair_t *pr = root->data.mapping.pairs.start;
         pr < root->data.mapping.pairs.top; pr++) {
        yaml_node_t *kn = yaml_document_get_node((yaml_document_t *)&d->doc, pr->key);
        yaml_node_t *vn = yaml_document_get_node((yaml_document_t *)&d->doc, pr->value);
        if (!kn || !vn)
            return src_fail(e, s, "malformed YAML document");
        int si = section_of(s, kn, e);
        if (si < 0)
            return -1;
        if (sec_seen[si]) {
            snprintf(why, sizeof why, "duplicate section '%s' (first at %zu:%zu)", sections[si],
                     sec_at[si].line + 1, sec_at[si].column + 1);
            return src_err(e, s, &kn->start_mark, why);
        }
        sec_seen[si] = 1;
        sec_at[si] = kn->start_mark;
        if (node_is_null(vn))
            continue; /* "model:" with nothing under it */
        snprintf(desc, sizeof desc, "section '%s'", sections[si]);
        if (tag_check(d, vn, tags_map, desc, "a mapping of keys", why, sizeof why) != 0)
            return src_err(e, s, &vn->start_mark, why);
        if (vn->type != YAML_MAPPING_NODE) {
            node_desc(vn, desc, sizeof desc);
            snprintf(why, sizeof why, "section '%s': expected a mapping of keys, found %s",
                     sections[si], desc);
            return src_err(e, s, &vn->start_mark, why);
        }
        if (load_section(w, s, d, sections[si], vn, seen, seen_at, e) != 0)
            return -1;
    }
    return 0;
}

/* Applies a whole config text (a file, or a checkpoint's metadata) to w. */
static int load_text(txl_config *w, const cfg_src *s, const char *text, size_t len,
                     unsigned char *seen, txl_err *e)
{
    cfg_doc d;
    int rc = doc_load(&d, s, text, len, e);
    if (rc == 0)
        rc = load_root(w, s, &d, seen, e);
    if (rc == 0)
        rc = doc_expect_end(&d, s, e);
    doc_free(&d);
    return rc;
}

/* A config file: a regular file (reading a FIFO would wait for a writer forever, a device
 * might never end) of at most CFG_FILE_MAX bytes, read whole into a malloc'd,
 * NUL-terminated buffer. */
static int read_config_file(const char *path, char **text, size_t *len, txl_err *e)
{
    struct stat st;
    *text = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO: no wait for a writer */
    if (fd < 0)
        return err_set(e, ERR_INPUT, "%s: cannot open config: %s", path, strerror(errno));
    const char *why = NULL;
    if (fstat(fd, &st) != 0)
        why = strerror(errno);
    else if (S_ISDIR(st.st_mode))
        why = "is a directory";
    else if (!S_ISREG(st.st_mode))
        why = S_ISFIFO(st.st_mode) ? "not a regular file but a FIFO (write the config to a file)"
                                   : "not a regular file";
    char *buf = why ? NULL : malloc(CFG_FILE_MAX + 1);
    size_t n = 0;
    if (!why && !buf)
        why = "out of memory";
    while (!why) {
        ssize_t r = read(fd, buf + n, CFG_FILE_MAX + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            why = strerror(errno);
        else if (r == 0)
            break;
        else if ((n += (size_t)r) > CFG_FILE_MAX)
            why = "larger than 1 MiB (not a config?)";
    }
    close(fd);
    if (why) {
        free(buf);
        return err_set(e, ERR_INPUT, "%s: cannot read config: %s", path, why);
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}

/* Checkpoints of txl before the YAML metadata hold the config as JSON (cJSON's output),
 * which is YAML flow syntax except that cJSON writes DEL, the C1 controls, U+2028, U+2029,
 * U+FEFF, U+FFFE and U+FFFF raw inside strings, where YAML refuses them or folds them (NEL,
 * LS and PS are line breaks in YAML). Returns a malloc'd copy with those as \uXXXX
 * escapes, NULL when out of memory. (Surrogate-pair escapes, which cJSON never writes,
 * stay YAML errors.) */
static char *json_as_yaml(const char *js)
{
    char *out = malloc(6 * strlen(js) + 1), *o = out;
    const unsigned char *p = (const unsigned char *)js;
    for (int in = 0; out && *p;) {
        int n = !in ? 0
                : p[0] == 0x7F ? 1
                : p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F ? 2
                : (p[0] == 0xE2 && p[1] == 0x80 && (p[2] == 0xA8 || p[2] == 0xA9)) ||
                  (p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF) ||
                  (p[0] == 0xEF && p[1] == 0xBF && p[2] >= 0xBE) ? 3 : 0;
        if (n) {
            unsigned cp = n == 1 ? p[0] : n == 2 ? (p[0] & 0x1Fu) << 6 | (p[1] & 0x3Fu)
                          : (p[0] & 0x0Fu) << 12 | (p[1] & 0x3Fu) << 6 | (p[2] & 0x3Fu);
            o += sprintf(o, "\\u%04X", cp);
            p += n;
            continue;
        }
        if (in && p[0] == '\\' && p[1])
            *o++ = (char)*p++; /* an escape: its character is not a quote */
        else if (p[0] == '"')
            in = !in;
        *o++ = (char)*p++;
    }
    if (out)
        *o = '\0';
    return out;
}

/* "runs/<basename without .yaml/.yml>". */
static void derive_out_dir(char *out, size_t cap, const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 5 && strcmp(b + n - 5, ".yaml") == 0)
        n -= 5;
    else if (n > 4 && strcmp(b + n - 4, ".yml") == 0)
        n -= 4;
    if (n == 0) {
        b = "default";
        n = 7;
    }
    snprintf(out, cap, "runs/%.*s", (int)n, b);
}

/* ---------------------------------------------------------------------------------------
 * Public API: defaults and the three sources */

void cfg_defaults(txl_config *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NKEYS; i++) {
        const cfg_key *k = &keys[i];
        cfg_value v;
        memset(&v, 0, sizeof v);
        switch (k->type) {
        case CT_INT: case CT_LONG: case CT_BOOL: v.i = (long long)k->def[0]; break;
        case CT_DOUBLE: case CT_FLOAT: v.x[0] = k->def[0]; break;
        case CT_U64: v.u = (unsigned long long)k->def[0]; break;
        case CT_ENUM:
            v.i = enum_parse(k, k->def_str);
            assert(v.i >= 0 && "enum default must be a valid name");
            break;
        case CT_PATH: case CT_TEXT: case CT_NAME: v.s = k->def_str; break;
        case CT_SPLIT: memcpy(v.x, k->def, sizeof v.x); break;
        case CT_SET: case CT_TERMS: v.i = (long long)k->def[0]; break;
        }
        key_put(k, c, &v);
    }
}

int cfg_load_yaml(txl_config *c, const char *path, txl_err *e)
{
    cfg_src s = { .path = path };
    char *text;
    size_t len;
    if (read_config_file(path, &text, &len, e) != 0)
        return -1;
    txl_config w;
    memcpy(&w, c, sizeof w);
    unsigned char seen[NKEYS] = { 0 };
    int rc = load_text(&w, &s, text, len, seen, e);
    free(text);
    if (rc == 0) {
        if (!seen[key_find("train", "out_dir")])
            derive_out_dir(w.train.out_dir, sizeof w.train.out_dir, path);
        memcpy(c, &w, sizeof w);
    }
    return rc;
}

int cfg_load_meta(txl_config *c, const char *text, const char *ckpt, txl_err *e)
{
    cfg_src s = { .meta = ckpt };
    char *json = NULL;
    size_t n = strlen(text);
    if (n > CFG_FILE_MAX) { /* what a config file may hold; txl writes a few KiB */
        char why[128];
        snprintf(why, sizeof why, "%zu bytes, more than a config may hold (%d)", n,
                 CFG_FILE_MAX);
        return src_err(e, &s, NULL, why);
    }
    if (text[strspn(text, " \t\r\n")] == '{' && !(json = json_as_yaml(text)))
        return err_set(e, ERR_RUNTIME, "%s: out of memory reading the config", ckpt);
    const char *t = json ? json : text;
    txl_config w;
    memcpy(&w, c, sizeof w);
    unsigned char seen[NKEYS] = { 0 };
    int rc = load_text(&w, &s, t, strlen(t), seen, e);
    free(json);
    if (rc == 0)
        memcpy(c, &w, sizeof w);
    return rc;
}

/* The key of a --set assignment ("section.key", blanks around it ignored): its index, or -1
 * with the error (and a suggestion) set. */
static int set_key(const cfg_src *s, const char *assignment, const char *eq, txl_err *e)
{
    char why[768], name[96];
    const char *a = assignment, *b = eq;
    while (a < b && (*a == ' ' || *a == '\t'))
        a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
        b--;
    size_t n = (size_t)(b - a);
    if (n >= sizeof name)
        n = sizeof name - 1;
    memcpy(name, a, n);
    name[n] = '\0';
    char *dot = strchr(name, '.');
    int ki = -1;
    if (dot) {
        *dot = '\0';
        ki = key_find(name, dot + 1);
    }
    if (ki < 0) {
        char sug[160];
        suggest_text(sug, sizeof sug, dot ? name : NULL, dot ? dot + 1 : name);
        if (dot)
            *dot = '.';
        snprintf(why, sizeof why, "unknown key '%s'%s", name, sug);
        return src_err(e, s, NULL, why);
    }
    return ki;
}

int cfg_set(txl_config *c, const char *assignment, txl_err *e)
{
    cfg_src s = { .flag = assignment };
    char why[768];
    const char *eq = strchr(assignment, '=');
    if (!eq)
        return src_err(e, &s, NULL, "expected section.key=value (e.g. model.d_model=512)");
    int ki = set_key(&s, assignment, eq, e);
    if (ki < 0)
        return -1;
    const cfg_key *k = &keys[ki];

    /* The value is YAML text, parsed by libyaml like a value in a file. */
    cfg_doc d;
    int rc = doc_load(&d, &s, eq + 1, strlen(eq + 1), e);
    if (rc == 0) {
        yaml_node_t *root = yaml_document_get_root_node(&d.doc);
        cfg_value v;
        yaml_mark_t at;
        if (root)
            rc = value_from_node(k, &s, &d, root, &v, &at, why, sizeof why);
        else /* nothing after '=': null */
            rc = parse_scalar(k, "", 0, 1, &v, why, sizeof why);
        if (rc == 0)
            rc = key_check(k, &v, why, sizeof why);
        if (rc != 0)
            src_err(e, &s, NULL, why);
        else if ((rc = doc_expect_end(&d, &s, e)) == 0)
            key_put(k, c, &v); /* v may point into the document: store before freeing it */
    }
    doc_free(&d);
    return rc;
}

int cfg_set_targets(const char *assignment, const char *section, const char *name)
{
    cfg_src s = { .flag = assignment };
    txl_err e = {0};
    const char *eq = strchr(assignment, '=');
    return eq && set_key(&s, assignment, eq, &e) == key_find(section, name) &&
           key_find(section, name) >= 0;
}

/* 1 when s is well-formed UTF-8 (what every config source is; see check_text). */
static int is_utf8(const unsigned char *s)
{
    while (*s) {
        int n = *s < 0x80 ? 0 : (*s & 0xE0) == 0xC0 ? 1 : (*s & 0xF0) == 0xE0 ? 2
                : (*s & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0 || (n == 1 && *s < 0xC2) || (n == 3 && *s > 0xF4))
            return 0;
        unsigned cp = n == 0 ? *s : *s & (0x3F >> n);
        for (int i = 1; i <= n; i++) {
            if ((s[i] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i] & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        s += n + 1;
    }
    return 1;
}

int cfg_set_text(txl_config *c, const char *section, const char *name, const char *value,
                 const char *origin, txl_err *e)
{
    int ki = key_find(section, name);
    assert(ki >= 0 && (keys[ki].type == CT_PATH || keys[ki].type == CT_NAME));
    const cfg_key *k = &keys[ki];
    char why[768], full[64];
    cfg_value v;
    key_fullname(k, full, sizeof full);
    if (!is_utf8((const unsigned char *)value))
        return err_set(e, ERR_INPUT, "%s: %s: not UTF-8 text", origin, full);
    if (parse_scalar(k, value, strlen(value), 0, &v, why, sizeof why) ||
        key_check(k, &v, why, sizeof why))
        return err_set(e, ERR_INPUT, "%s: %s", origin, why);
    key_put(k, c, &v);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Validation */

static int validate_fail(txl_err *e, const char *origin, const char *why)
{
    if (origin)
        return err_set(e, ERR_INPUT, "%s: %s", origin, why);
    return err_set(e, ERR_INPUT, "%s", why);
}

/* Rules between keys (each key alone is fine): 0, or -1 with the message in why. */
static int check_cross(const txl_config *c, char *why, size_t cap)
{
    char a[64], b[64];
    const model_config *m = &c->model;
    const train_config *t = &c->train;
    if (t->lr_min > t->lr) {
        fmt_double(a, sizeof a, t->lr);
        fmt_double(b, sizeof b, t->lr_min);
        snprintf(why, cap, "train.lr_min must be <= train.lr (%s), found %s", a, b);
        return -1;
    }
    if (t->skip_outlier > 0 && t->skip_outlier <= 1) {
        fmt_double(a, sizeof a, t->skip_outlier);
        snprintf(why, cap, "train.skip_outlier must be 0 (off) or > 1 (a multiple of the "
                 "mean gradient norm), found %s", a);
        return -1;
    }
    if (t->schedule == SCHED_COSINE && t->warmup_steps >= t->max_steps) {
        snprintf(why, cap, "train.warmup_steps must be < train.max_steps (%ld) with schedule "
                 "cosine, found %ld", t->max_steps, t->warmup_steps);
        return -1;
    }
    if (c->data.valid[0] == '\0' && !(c->data.split[1] > 0)) {
        fmt_double(a, sizeof a, c->data.split[1]);
        snprintf(why, cap, "data.split: the valid fraction must be > 0 when data.valid is "
                 "empty (the valid split comes from data.train), found %s", a);
        return -1;
    }
    if (m->pos != POS_XL && t->term_stats_interval > 0) {
        snprintf(why, cap, "train.term_stats_interval applies to pos_scheme xl only (the "
                 "statistics of its four score terms), found pos_scheme %s with "
                 "term_stats_interval %ld; set it to 0", pos_get(m->pos)->name,
                 t->term_stats_interval);
        return -1;
    }
    if (m->pos != POS_XL && m->xl_off) {
        snprintf(why, cap, "model.xl_terms applies to pos_scheme xl only, found pos_scheme %s "
                 "with xl_terms other than abcd", pos_get(m->pos)->name);
        return -1;
    }
    const pos_ops *ops = pos_get(m->pos);
    return ops->validate ? ops->validate(m, why, cap) : 0;
}

/* Sizes: each key may be in range while their product is absurd (and would overflow the
 * size arithmetic of the model's plan); such configs are errors, not crashes. */
static int check_sizes(const txl_config *c, char *why, size_t cap)
{
    const model_config *m = &c->model;
    const train_config *t = &c->train;
    /* Shapes are ints in the model: keep [3*H*dh, d] and klen = M + Lq representable. */
    if (3LL * m->n_head * m->d_head > INT_MAX) {
        snprintf(why, cap, "model.n_head * model.d_head must be <= %d, found %d * %d",
                 INT_MAX / 3, m->n_head, m->d_head);
        return -1;
    }
    if ((long long)m->tgt_len + m->mem_len > INT_MAX) {
        snprintf(why, cap, "model.tgt_len + model.mem_len must be <= %d, found %d + %d",
                 INT_MAX, m->tgt_len, m->mem_len);
        return -1;
    }
    double params = cfg_param_floats(m);
    if (params > CFG_MAX_PARAMS) {
        snprintf(why, cap,
                 "the model is too large: about %.3g parameters (model.n_layer %d, d_model %d, "
                 "n_head %d, d_head %d, d_inner %d%s), more than txl's limit of %.3g",
                 params, m->n_layer, m->d_model, m->n_head, m->d_head, m->d_inner,
                 m->pos == POS_MLP ? ", mlp_num_freqs, mlp_hidden" : "", CFG_MAX_PARAMS);
        return -1;
    }
    /* gradient accumulation: batch_size x grad_accum streams, each with its memory */
    double streams = (double)t->batch_size * t->grad_accum;
    if (streams > INT_MAX) {
        snprintf(why, cap, "train.batch_size x train.grad_accum (the streams of one update) "
                 "must be <= %d, found %d x %d", INT_MAX, t->batch_size, t->grad_accum);
        return -1;
    }
    double acts = cfg_plan_floats(m, t->batch_size, m->tgt_len, m->mem_len);
    if (acts > CFG_MAX_PLAN) {
        snprintf(why, cap,
                 "a training step is too large: about %.3g floats of activations (train."
                 "batch_size %d x model.tgt_len %d, model.mem_len %d, n_layer %d, d_model %d), "
                 "more than txl's limit of %.3g", acts, t->batch_size, m->tgt_len, m->mem_len,
                 m->n_layer, m->d_model, CFG_MAX_PLAN);
        return -1;
    }
    /* every stream of an update keeps its memory (with grad_accum 1 the activations
     * above bound it, so only accumulation gets here) */
    double memf = streams * m->n_layer * m->mem_len * m->d_model;
    if (memf > CFG_MAX_PLAN) {
        snprintf(why, cap,
                 "the memory is too large: about %.3g floats (train.batch_size %d x "
                 "grad_accum %d streams x model.n_layer %d x mem_len %d x d_model %d), more "
                 "than txl's limit of %.3g", memf, t->batch_size, t->grad_accum, m->n_layer,
                 m->mem_len, m->d_model, CFG_MAX_PLAN);
        return -1;
    }
    return 0;
}

int cfg_validate(const txl_config *c, const char *origin, txl_err *e)
{
    char why[768], a[64];
    for (size_t i = 0; i < NKEYS; i++) {
        const cfg_key *k = &keys[i];
        cfg_value v;
        key_get(k, c, &v);
        if (key_check(k, &v, why, sizeof why) != 0)
            return validate_fail(e, origin, why);
        /* Required paths are checked here, not per value: a file may leave data.train out
         * (or write "" as a dump of an unfinished config does) and get it from --set. */
        if (k->type == CT_PATH && (k->flags & F_REQUIRED) && v.s[0] == '\0') {
            key_fullname(k, a, sizeof a);
            snprintf(why, sizeof why, "%s is required: expected a non-empty path, found \"\"",
                     a);
            return validate_fail(e, origin, why);
        }
    }
    if (check_cross(c, why, sizeof why) != 0 || check_sizes(c, why, sizeof why) != 0)
        return validate_fail(e, origin, why);
    return 0;
}

/* Upper bounds in doubles (never overflow): they mirror model.c's parameter table and
 * activation plan with generous constants. */
double cfg_param_floats(const model_config *m)
{
    double d = m->d_model, H = m->n_head, hd = H * m->d_head, di = m->d_inner;
    double V = m->vocab > 0 ? m->vocab : TXL_BYTES, per = 5 * hd * d + 2 * di * d + di + 5 * d + 2 * hd;
    if (m->pos == POS_MLP)
        per += (double)m->mlp_hidden * (2.0 * m->mlp_num_freqs + H + 1) + H;
    if (m->pos == POS_HIER) /* one MLP per level */
        per += 4 * ((double)m->mlp_hidden * (2.0 * m->hier_num_freqs + H + 1) + H);
    return V * d + V + 2 * hd + (double)m->n_layer * per;
}

double cfg_plan_floats(const model_config *m, int B, int Lq, int M)
{
    double d = m->d_model, H = m->n_head, dh = m->d_head, hd = H * dh, di = m->d_inner;
    double V = m->vocab > 0 ? m->vocab : TXL_BYTES, klen = (double)Lq + M;
    double hid = m->pos == POS_MLP ? m->mlp_hidden : m->pos == POS_HIER ? 4.0 * m->mlp_hidden
                 : 0;
    double K2 = m->pos == POS_HIER ? 8.0 * m->hier_num_freqs : 2.0 * m->mlp_num_freqs;
    double per = (double)B * klen * (6 * d + 6 * hd + 2 * di + H * Lq) +
                 klen * (2 * hd + 2 * d + 3 * hid + K2 + 3 * H + dh);
    return ((double)m->n_layer + 3) * per + 3.0 * B * Lq * V;
}

/* ---------------------------------------------------------------------------------------
 * The writer */

int cfg_walk(const txl_config *c, int (*visit)(const cfg_item *it, void *ctx), void *ctx)
{
    char buf[3][40];
    for (size_t i = 0; i < NKEYS; i++) {
        const cfg_key *k = &keys[i];
        cfg_value v;
        cfg_item it = { .section = k->section, .name = k->name, .kind = CFG_LITERAL, .n = 1,
                        .text = { buf[0], buf[1], buf[2] } };
        key_get(k, c, &v);
        fmt_value(k, &v, buf[0], sizeof buf[0]);
        switch (k->type) {
        case CT_PATH: case CT_TEXT: case CT_NAME: it.kind = CFG_TEXT; it.text[0] = v.s; break;
        case CT_ENUM:
            if (v.i < INT_MIN || v.i > INT_MAX || !k->en((int)v.i))
                return -1; /* a struct built in code with an invalid enum */
            it.kind = CFG_WORD;
            break;
        case CT_U64: it.kind = v.u >= (1ULL << 53) ? CFG_BIG : CFG_LITERAL; break;
        case CT_SPLIT:
            it.kind = CFG_LIST;
            it.n = 3;
            for (int j = 0; j < 3; j++)
                fmt_double(buf[j], sizeof buf[j], v.x[j]);
            break;
        case CT_SET:
            it.kind = CFG_NAMES;
            it.n = 0;
            for (int j = 0; set_name(k, j); j++)
                if (v.i >> j & 1)
                    it.text[it.n++] = k->names[j];
            break;
        case CT_TERMS: it.kind = CFG_WORD; break;
        default: break;
        }
        int rc = visit(&it, ctx);
        if (rc)
            return rc;
    }
    return 0;
}

/* The emitter's output: a growing NUL-terminated string. */
typedef struct {
    char *buf;
    size_t len, cap;
} text_buf;

static int text_append(void *data, unsigned char *s, size_t n)
{
    text_buf *t = data;
    if (t->len + n + 1 > t->cap) {
        size_t cap = 2 * (t->len + n + 1);
        char *b = realloc(t->buf, cap);
        if (!b)
            return 0;
        t->buf = b;
        t->cap = cap;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
    return 1;
}

/* Emits an event that its initializer (its result is `initialised`) prepared. */
static int emit(yaml_emitter_t *em, yaml_event_t *ev, int initialised)
{
    return initialised && yaml_emitter_emit(em, ev) ? 0 : -1;
}

/* Plain scalars (names, numbers, true/false) are implicit; quoted ones are strings, double
 * quoted so that libyaml escapes what it cannot write raw. Fails on text that is not UTF-8. */
static int emit_scalar(yaml_emitter_t *em, const char *s, int quoted)
{
    yaml_event_t ev;
    return emit(em, &ev, yaml_scalar_event_initialize(
                             &ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), !quoted, quoted,
                             quoted ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE));
}

typedef struct {
    yaml_emitter_t em;
    const char *section; /* the open section mapping, NULL before the first */
} yaml_out;

/* cfg_walk's visitor: "section:" when it changes, then "  name: value". */
static int emit_item(const cfg_item *it, void *ctx)
{
    yaml_out *y = ctx;
    yaml_event_t ev;
    if (!y->section || strcmp(y->section, it->section) != 0) {
        if (y->section && emit(&y->em, &ev, yaml_mapping_end_event_initialize(&ev)))
            return -1;
        y->section = it->section;
        if (emit_scalar(&y->em, it->section, 0) ||
            emit(&y->em, &ev, yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
                                                                  YAML_BLOCK_MAPPING_STYLE)))
            return -1;
    }
    if (emit_scalar(&y->em, it->name, 0))
        return -1;
    if (it->kind != CFG_LIST && it->kind != CFG_NAMES)
        return emit_scalar(&y->em, it->text[0], it->kind == CFG_TEXT);
    if (emit(&y->em, &ev, yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                                               YAML_FLOW_SEQUENCE_STYLE)))
        return -1;
    for (int i = 0; i < it->n; i++)
        if (emit_scalar(&y->em, it->text[i], 0))
            return -1;
    return emit(&y->em, &ev, yaml_sequence_end_event_initialize(&ev));
}

char *cfg_to_yaml(const txl_config *c)
{
    static const char header[] =
        "# txl configuration, fully resolved: every key (man txl: CONFIGURATION)\n";
    text_buf t = { 0 };
    yaml_out y = { .section = NULL };
    yaml_event_t ev;
    if (!text_append(&t, (unsigned char *)header, sizeof header - 1))
        return NULL;
    if (!yaml_emitter_initialize(&y.em)) {
        free(t.buf);
        return NULL;
    }
    yaml_emitter_set_output(&y.em, text_append, &t);
    yaml_emitter_set_unicode(&y.em, 1); /* UTF-8 as it is, not \u escapes */
    yaml_emitter_set_width(&y.em, -1);  /* no folding of long paths */
    int rc = emit(&y.em, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING)) ||
             emit(&y.em, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1)) ||
             emit(&y.em, &ev, yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
                                                                  YAML_BLOCK_MAPPING_STYLE)) ||
             cfg_walk(c, emit_item, &y) ||
             emit(&y.em, &ev, yaml_mapping_end_event_initialize(&ev)) ||
             emit(&y.em, &ev, yaml_mapping_end_event_initialize(&ev)) ||
             emit(&y.em, &ev, yaml_document_end_event_initialize(&ev, 1)) ||
             emit(&y.em, &ev, yaml_stream_end_event_initialize(&ev));
    yaml_emitter_delete(&y.em);
    if (rc) {
        free(t.buf);
        return NULL;
    }
    return t.buf;
}

int cfg_write_yaml(const txl_config *c, FILE *f)
{
    char *s = cfg_to_yaml(c);
    if (!s)
        return -1;
    int rc = fputs(s, f) < 0 || ferror(f) ? -1 : 0;
    free(s);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Diffs */

/* Appends to buf (always NUL-terminated, truncating when full). */
static void append(char *buf, size_t cap, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t cap, size_t *used, const char *fmt, ...)
{
    if (!cap || *used >= cap - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, cap - *used, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used = *used + (size_t)n < cap - 1 ? *used + (size_t)n : cap - 1;
}

int cfg_diff_model(const model_config *a, const model_config *b, char *buf, size_t cap)
{
    txl_config ca, cb;
    char va[128], vb[128];
    size_t used = 0;
    int n = 0;
    memset(&ca, 0, sizeof ca);
    memset(&cb, 0, sizeof cb);
    ca.model = *a;
    cb.model = *b;
    if (cap)
        buf[0] = '\0';
    for (size_t i = 0; i < NKEYS; i++) {
        const cfg_key *k = &keys[i];
        if (strcmp(k->section, "model") != 0)
            continue;
        cfg_value x, y;
        key_get(k, &ca, &x);
        key_get(k, &cb, &y);
        /* Shortest round-trip text differs exactly when the stored values differ. */
        fmt_value(k, &x, va, sizeof va);
        fmt_value(k, &y, vb, sizeof vb);
        if (strcmp(va, vb) != 0)
            append(buf, cap, &used, "%smodel.%s: %s vs %s", n++ ? ", " : "", k->name, va, vb);
    }
    if (a->vocab != b->vocab)
        append(buf, cap, &used, "%smodel.vocab: %d vs %d", n++ ? ", " : "", a->vocab, b->vocab);
    return n;
}

/* ---------------------------------------------------------------------------------------
 * Key listing (txl __complete) */

int cfg_key_name(int i, char *buf, size_t cap)
{
    if (i < 0 || (size_t)i >= NKEYS)
        return -1;
    key_fullname(&keys[i], buf, cap);
    return 0;
}

int cfg_key_values(int i, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    if (i < 0 || (size_t)i >= NKEYS)
        return 0;
    const cfg_key *k = &keys[i];
    if (k->type == CT_BOOL)
        snprintf(buf, cap, "true false");
    for (int j = 0; (k->type == CT_ENUM || k->type == CT_NAME) && o < cap; j++) {
        const char *nm = k->type == CT_ENUM ? k->en(j) : k->names[j];
        if (!nm)
            break;
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", j ? " " : "", nm);
    }
    return k->type == CT_PATH;
}

/* keys.c: the run configuration (doc/design.md, "Configuration"): one table of keys (`cfg_keys[]`
 * below) drives the defaults, the one reader, the one writer and validation.
 *
 * Conventions
 * - Each key has a type, an offset into run_config, a range and a default. Every value,
 *   whatever its source (YAML file, --set, checkpoint metadata, a struct built in code), goes
 *   through the same check (cfg_key_check), so a range error reads the same everywhere; only
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
 *   the two differ, and train.seed >= 2^53 was a decimal string there).
 *
 * keys.c holds the table, the values' access, formatting and checks, the scalar rules and
 * the key listing; read.c, write.c and check.c the reader, the writer and validation. */
#include "config_impl.h"
#include "../data/units.h"
#include "../model/model.h"
#include "../model/pos.h"
#include "../model/precision.h"

#include <assert.h>
#include <ctype.h>
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

/* Enums are stored through int-sized accesses. */
_Static_assert(sizeof(pos_scheme) == sizeof(int), "pos_scheme must be int-sized");
_Static_assert(sizeof(lr_kind) == sizeof(int), "lr_kind must be int-sized");
_Static_assert(sizeof(optimizer_kind) == sizeof(int), "optimizer_kind must be int-sized");
_Static_assert(sizeof(lr_shape) == sizeof(int), "lr_shape must be int-sized");
_Static_assert(sizeof(comm_overlap_kind) == sizeof(int), "comm_overlap_kind must be int-sized");
_Static_assert(sizeof(schedule_by_kind) == sizeof(int), "schedule_by_kind must be int-sized");

static const char *pos_name(int v) { return v < 0 ? NULL : pos_scheme_name((pos_scheme)v); }


static const char *sched_name(int v)
{
    static const char *const names[] = {
        [LR_CONSTANT] = "constant", [LR_COSINE] = "cosine", [LR_INV_SQRT] = "inv_sqrt",
    };
    return v >= 0 && (size_t)v < COUNT(names) ? names[v] : NULL;
}

static const char *schedule_by_name(int v)
{
    static const char *const names[] = {[SCHED_BY_STEPS] = "steps", [SCHED_BY_TIME] = "time"};
    return v >= 0 && (size_t)v < COUNT(names) ? names[v] : NULL;
}

static const char *overlap_name(int v)
{
    static const char *const names[] = {
        [OVERLAP_AUTO] = "auto", [OVERLAP_ON] = "on", [OVERLAP_OFF] = "off",
    };
    return v >= 0 && (size_t)v < COUNT(names) ? names[v] : NULL;
}

static const char *resume_sched_name(int v)
{
    static const char *const names[] = {
        [LR_AS_PLANNED] = "as_planned", [LR_CONTINUE] = "continue", [LR_RESTART] = "restart",
    };
    return v >= 0 && (size_t)v < COUNT(names) ? names[v] : NULL;
}

static const char *opt_name(int v)
{
    static const char *const names[] = { [OPT_ADAM] = "adam", [OPT_ADAMW] = "adamw" };
    return v >= 0 && (size_t)v < COUNT(names) ? names[v] : NULL;
}

static const char *const tokenizer_names[] = { "byte", "word", "bpe", NULL };
/* data/units.h ANCHOR_* and model_config.h HIER_* bits, in bit order */
static const char *const anchor_names[] = { "bos", "para", "sent", NULL };
static const char *const level_names[] = { "token", "word", "sent", "para", NULL };

#define OFF(f) offsetof(run_config, f)
#define CAP(f) sizeof(((run_config *)0)->f)
#define KEY(sec, nm, ty, f) .section = sec, .name = nm, .type = ty, .off = OFF(f)
#define TWO53 9007199254740992.0

/* Every key, in the order of doc/design.md, "Configuration" (also the order of the YAML the writer emits). */
const cfg_key cfg_keys[] = { /* sized by its entries: a count off is an error */
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
    { KEY("model", "fire_hidden", CT_INT, model.fire_hidden), .flags = F_MIN, .min = 1,
      .def = {32} },
    /* 0: no threshold (every query normalises by its own row) */
    { KEY("model", "fire_threshold", CT_FLOAT, model.fire_threshold), .flags = F_MIN, .min = 0,
      .def = {512} },
    /* the exact buckets are floor(t5_buckets / 2) >= 1; t5_max_dist above them is
     * pos_t5.c's validate */
    { KEY("model", "t5_buckets", CT_INT, model.t5_buckets), .flags = F_MIN | F_MAX, .min = 2,
      .max = 1 << 20, .def = {32} },
    { KEY("model", "t5_max_dist", CT_INT, model.t5_max_dist), .flags = F_MIN, .min = 2,
      .def = {128} },
    { KEY("model", "t5_shared", CT_BOOL, model.t5_shared), .def = {1} },
    /* the adaptive softmax and input (model/adaptive.h): [] is the full softmax; the cutoffs'
     * bound V is check_cross's (it is not a key) */
    { KEY("model", "cutoffs", CT_INTS, model.cutoffs), .def = {0} },
    { KEY("model", "div_val", CT_INT, model.div_val), .flags = F_MIN, .min = 1, .def = {1} },
    /* 0: d_model */
    { KEY("model", "d_embed", CT_INT, model.d_embed), .flags = F_MIN, .min = 0, .def = {0} },
    { KEY("model", "tie_projs", CT_BOOL, model.tie_projs), .def = {0} },

    { KEY("data", "train", CT_PATH, data.train), .cap = CAP(data.train), .flags = F_REQUIRED,
      .def_str = "" },
    { KEY("data", "valid", CT_PATH, data.valid), .cap = CAP(data.valid), .flags = F_NULL_OK,
      .def_str = "" },
    { KEY("data", "test", CT_PATH, data.test), .cap = CAP(data.test), .flags = F_NULL_OK,
      .def_str = "" },
    { KEY("data", "split", CT_SPLIT, data.split), .def = {0.9, 0.05, 0.05} },
    { KEY("data", "tokenizer", CT_NAME, data.tokenizer), .cap = CAP(data.tokenizer),
      .names = tokenizer_names, .def_str = "byte" },
    /* word, bpe: "" builds the vocabulary from the train split */
    { KEY("data", "vocab", CT_PATH, data.vocab), .cap = CAP(data.vocab), .flags = F_NULL_OK,
      .def_str = "" },
    { KEY("data", "vocab_size", CT_LONG, data.vocab_size), .flags = F_MIN | F_MAX, .min = 0,
      .max = VOCAB_MAX_TOKENS, .def = {0} },
    { KEY("data", "min_freq", CT_LONG, data.min_freq), .flags = F_MIN, .min = 0, .def = {0} },
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
    { KEY("train", "schedule_by", CT_ENUM, train.schedule_by), .en = schedule_by_name,
      .def_str = "steps" },
    { KEY("train", "warmup_steps", CT_LONG, train.warmup_steps), .flags = F_MIN, .min = 0,
      .def = {0} },
    { KEY("train", "lr_min", CT_DOUBLE, train.lr_min), .flags = F_MIN, .min = 0, .def = {0} },
    /* what a resume that changes the schedule does from its step (optim.h lr_shape) */
    { KEY("train", "resume_schedule", CT_ENUM, train.resume_schedule), .en = resume_sched_name,
      .def_str = "as_planned" },
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
    { KEY("train", "keep_checkpoints", CT_LONG, train.keep_checkpoints), .flags = F_MIN | F_MAX,
      .min = 0, .max = 1000000, .def = {0} },
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
    { KEY("train", "precision", CT_ENUM, train.precision), .en = precision_name,
      .def_str = "fp32" },
};
_Static_assert(COUNT(cfg_keys) == CFG_NKEYS, "CFG_NKEYS (config_impl.h) counts cfg_keys");

const char *const cfg_sections[CFG_NSECTIONS] = { "model", "data", "train" };



/* ---------------------------------------------------------------------------------------
 * Struct access and formatting */

void cfg_key_get(const cfg_key *k, const run_config *c, cfg_value *v)
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
    case CT_INTS: {
        cutoff_list l;
        memcpy(&l, p, sizeof l);
        v->n = l.n;
        for (int i = 0; i < l.n && i < MODEL_MAX_CUTOFFS; i++)
            v->list[i] = l.v[i];
        break;
    }
    }
}

/* Stores a value that passed key_check (strings fit, integers are in the type's range). */
void cfg_key_put(const cfg_key *k, run_config *c, const cfg_value *v)
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
        /* another tokenizer: no vocabulary of its is attached yet (data.vocab_tokens is 0
         * until one is; the byte tokenizer's 256 is cfg_derive's) */
        if (k->off == OFF(data.tokenizer) && (strnlen(p, k->cap) != n || memcmp(p, v->s, n)))
            c->data.vocab_tokens = 0;
        if (v->s != p) {
            memmove(p, v->s, n);
            memset(p + n, 0, k->cap - n); /* zero the tail so equal configs compare equal */
        }
        break;
    }
    case CT_SPLIT: memcpy(p, v->x, 3 * sizeof(double)); break;
    case CT_INTS: {
        cutoff_list l = {.n = v->n};
        for (int i = 0; i < v->n; i++)
            l.v[i] = (int)v->list[i];
        memcpy(p, &l, sizeof l);
        break;
    }
    }
}

vocab_kind cfg_tokenizer(const run_config *c)
{
    vocab_kind k = VOCAB_BYTE;
    vocab_kind_parse(c->data.tokenizer, &k);
    return k;
}

void cfg_derive(run_config *c)
{
    /* the vocabulary is not a key: the tokenizer's tokens, then one per anchor kind */
    if (cfg_tokenizer(c) == VOCAB_BYTE)
        c->data.vocab_tokens = TXL_BYTES;
    c->model.vocab = (int)c->data.vocab_tokens + units_n_anchors((unsigned)c->data.anchors);
}

void cfg_attach_vocab(run_config *c, size_t tokens)
{
    c->data.vocab_tokens = (long)tokens;
    cfg_derive(c);
}

/* Shortest "%.Ng" that reads back to exactly x. */
void cfg_fmt_double(char *buf, size_t cap, double x)
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
void cfg_show(char *buf, size_t cap, const char *s, size_t len, char quote)
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
const char *cfg_set_item_name(const cfg_key *k, int i)
{
    for (int j = 0; j <= i; j++)
        if (!k->names[j])
            return NULL;
    return k->names[i];
}

/* The text of a scalar value as the writer emits it (numbers in shortest round-trip form,
 * true/false, enum names); strings as a shortened "quote" for messages; data.split as
 * "[a, b, c]" (messages and diffs). */
void cfg_fmt_value(const cfg_key *k, const cfg_value *v, char *buf, size_t cap)
{
    switch (k->type) {
    case CT_INT: case CT_LONG: snprintf(buf, cap, "%lld", v->i); break;
    case CT_DOUBLE: cfg_fmt_double(buf, cap, v->x[0]); break;
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
    case CT_PATH: case CT_TEXT: case CT_NAME: cfg_show(buf, cap, v->s, strlen(v->s), '"'); break;
    case CT_SET: { /* [para, sent]; bits past the names as numbers */
        size_t o = (size_t)snprintf(buf, cap, "[");
        for (int i = 0, first = 1; i < 31 && o < cap; i++) {
            if (!(v->i >> i & 1))
                continue;
            const char *nm = cfg_set_item_name(k, i);
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
    case CT_INTS: { /* [20000, 40000, 200000] */
        size_t o = (size_t)snprintf(buf, cap, "[");
        for (int i = 0; i < v->n && i < MODEL_MAX_CUTOFFS && o < cap; i++)
            o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", v->list[i]);
        if (o < cap)
            snprintf(buf + o, cap - o, "]");
        break;
    }
    case CT_SPLIT: {
        char a[32], b[32], d[32];
        cfg_fmt_double(a, sizeof a, v->x[0]);
        cfg_fmt_double(b, sizeof b, v->x[1]);
        cfg_fmt_double(d, sizeof d, v->x[2]);
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

void cfg_key_fullname(const cfg_key *k, char *buf, size_t cap)
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
const char *cfg_type_expect(const cfg_key *k, char *buf, size_t cap)
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
    case CT_INTS: return "a list of increasing integers (token ids), [] for none";
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
        cfg_fmt_double(lo, sizeof lo, k->min);
        cfg_fmt_double(hi, sizeof hi, k->max);
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
        snprintf(why, cap, "%s: expected %s, found %s", full, cfg_type_expect(k, tmp, sizeof tmp),
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

/* model.cutoffs: at most MODEL_MAX_CUTOFFS ids, each >= 1 and above the one before (each
 * cluster holds a token; the bound V is check_cross's). */
static int check_ints(const cfg_value *v, const char *full, const char *found, char *why,
                      size_t cap)
{
    if (v->n < 0 || v->n > MODEL_MAX_CUTOFFS) {
        snprintf(why, cap, "%s: at most %d cutoffs, found %d", full, MODEL_MAX_CUTOFFS, v->n);
        return -1;
    }
    for (int i = 0; i < v->n; i++)
        if (v->list[i] < 1 || v->list[i] > INT_MAX || (i > 0 && v->list[i] <= v->list[i - 1])) {
            snprintf(why, cap, "%s must be increasing token ids, each >= 1 and < V (every "
                     "cluster holds a token), found %s", full, found);
            return -1;
        }
    return 0;
}

/* Range and per-key rules for any key. */
int cfg_key_check(const cfg_key *k, const cfg_value *v, char *why, size_t cap)
{
    char full[64], found[128], tmp[256];
    cfg_key_fullname(k, full, sizeof full);
    cfg_fmt_value(k, v, found, sizeof found);
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
                     cfg_type_expect(k, tmp, sizeof tmp), found);
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
    case CT_INTS:
        return check_ints(v, full, found, why, cap);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Key lookup and "did you mean" */

int cfg_section_find(const char *s)
{
    for (size_t i = 0; i < CFG_NSECTIONS; i++)
        if (strcmp(s, cfg_sections[i]) == 0)
            return (int)i;
    return -1;
}

int cfg_key_find(const char *section, const char *name)
{
    for (size_t i = 0; i < CFG_NKEYS; i++)
        if (strcmp(cfg_keys[i].section, section) == 0 && strcmp(cfg_keys[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* Optimal string alignment distance (Levenshtein plus adjacent transpositions, so
 * "d_modle" is one edit from "d_model"). Strings longer than 63 bytes: a large number. */
int cfg_edit_distance(const char *a, const char *b)
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
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        const cfg_key *k = &cfg_keys[i];
        int d = cfg_edit_distance(name, k->name);
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

/* The names other trainers give txl's keys (their config files and flags, '-' read as
 * '_'), so a user who brings one gets pointed at txl's key. */
static const struct {
    const char *name, *key, *who;
} key_aliases[] = {
    /* nanoGPT (train.py's globals, its config files) */
    {"n_embd", "model.d_model", "nanoGPT"}, {"block_size", "model.tgt_len", "nanoGPT"},
    {"learning_rate", "train.lr", "nanoGPT"}, {"max_iters", "train.max_steps", "nanoGPT"},
    {"lr_decay_iters", "train.max_steps", "nanoGPT"}, {"min_lr", "train.lr_min", "nanoGPT"},
    {"warmup_iters", "train.warmup_steps", "nanoGPT"}, {"grad_clip", "train.clip", "nanoGPT"},
    {"gradient_accumulation_steps", "train.grad_accum", "nanoGPT"},
    {"decay_lr", "train.schedule", "nanoGPT"}, {"dataset", "data.train", "nanoGPT"},
    /* fairseq (transformer_lm, its --flags) */
    {"decoder_layers", "model.n_layer", "fairseq"},
    {"decoder_embed_dim", "model.d_model", "fairseq"},
    {"decoder_ffn_embed_dim", "model.d_inner", "fairseq"},
    {"decoder_attention_heads", "model.n_head", "fairseq"},
    {"tokens_per_sample", "model.tgt_len", "fairseq"},
    {"attention_dropout", "model.dropatt", "fairseq"},
    {"max_update", "train.max_steps", "fairseq"},
    {"warmup_updates", "train.warmup_steps", "fairseq"}, {"clip_norm", "train.clip", "fairseq"},
    {"update_freq", "train.grad_accum", "fairseq"}, {"max_tokens", "train.batch_size", "fairseq"},
    {"save_interval_updates", "train.ckpt_interval", "fairseq"},
    {"keep_interval_updates", "train.keep_checkpoints", "fairseq"},
    {"keep_last_epochs", "train.keep_checkpoints", "fairseq"},
    {"lr_scheduler", "train.schedule", "fairseq"}, {"adam_eps", "train.eps", "fairseq"},
    {"adam_betas", "train.beta1", "fairseq"}, {"save_dir", "train.out_dir", "fairseq"},
    {"validate_interval_updates", "train.eval_interval", "fairseq"},
    /* Transformer-XL (pytorch/train.py's flags; tgt_len, mem_len, n_layer, d_model and most
     * others are txl's names too) */
    {"d_embed", "model.d_model", "Transformer-XL"},
    {"warmup_step", "train.warmup_steps", "Transformer-XL"},
    {"max_step", "train.max_steps", "Transformer-XL"},
    {"scheduler", "train.schedule", "Transformer-XL"}, {"eta_min", "train.lr_min", "Transformer-XL"},
    {"batch_chunk", "train.grad_accum", "Transformer-XL"},
    {"work_dir", "train.out_dir", "Transformer-XL"}, {"optim", "train.optimizer", "Transformer-XL"},
    {"data", "data.train", "Transformer-XL"},
};

int cfg_key_suggest(const char *section, const char *name, char *key, size_t cap, char *why,
                    size_t why_cap)
{
    char norm[64];
    size_t n = 0;
    while (*name == '-')
        name++;
    for (; name[n] && n + 1 < sizeof norm; n++)
        norm[n] = name[n] == '-' ? '_' : (char)tolower((unsigned char)name[n]);
    norm[n] = 0;
    why[0] = 0;
    for (size_t i = 0; i < COUNT(key_aliases); i++)
        if (strcmp(norm, key_aliases[i].name) == 0) {
            snprintf(key, cap, "%s", key_aliases[i].key);
            snprintf(why, why_cap, "%s is %s's name for it", name, key_aliases[i].who);
            return 0;
        }
    const cfg_key *k = key_suggest(section, norm);
    if (!k)
        return -1;
    snprintf(key, cap, "%s.%s", k->section, k->name);
    return 0;
}

/* " (did you mean 'model.d_model'?)", " (did you mean 'train.lr'? learning_rate is
 * nanoGPT's name for it)" or "". */
void cfg_suggest(char *buf, size_t cap, const char *section, const char *name)
{
    char key[64], why[128];
    if (cfg_key_suggest(section, name, key, sizeof key, why, sizeof why) == 0)
        snprintf(buf, cap, " (did you mean '%s'?%s%s)", key, why[0] ? " " : "", why);
    else
        buf[0] = '\0';
}

/* ---------------------------------------------------------------------------------------
 * Scalar parsing (every source) */

int cfg_is_null_text(const char *s, int plain)
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
int cfg_parse_number(const char *label, const char *text, int plain, double *x, char *why,
                        size_t cap)
{
    char f[64];
    cfg_show(f, sizeof f, text, strlen(text), plain ? '\'' : '"');
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
int cfg_name_index(const cfg_key *k, const char *s)
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
int cfg_parse_scalar(const cfg_key *k, const char *text, size_t len, int plain, cfg_value *v,
                        char *why, size_t cap)
{
    char full[64], f[64], tmp[256];
    const char *expect = cfg_type_expect(k, tmp, sizeof tmp);
    cfg_key_fullname(k, full, sizeof full);
    cfg_show(f, sizeof f, text, len, plain ? '\'' : '"');
    memset(v, 0, sizeof *v);
    if (strlen(text) != len) {
        snprintf(why, cap, "%s: expected %s, found a value containing a NUL byte", full, expect);
        return -1;
    }
    if (cfg_is_null_text(text, plain)) {
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
        if (cfg_parse_number(full, text, plain, &v->x[0], why, cap) != 0)
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
        int i = cfg_name_index(k, text);
        ok = i >= 0;
        v->i = ok ? 1LL << i : 0;
        break;
    }
    case CT_TERMS:
        ok = parse_terms(text, &v->i) == 0;
        break;
    case CT_SPLIT: case CT_INTS:
        ok = 0;
        break;
    }
    if (ok)
        return 0;
    snprintf(why, cap, "%s: expected %s, found %s%s%s", full, expect, quoted, f, extra);
    return -1;
}

void cfg_defaults(run_config *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        const cfg_key *k = &cfg_keys[i];
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
        case CT_INTS: v.n = 0; break;
        }
        cfg_key_put(k, c, &v);
    }
    cfg_derive(c);
}

/* ---------------------------------------------------------------------------------------
 * Key listing (txl __complete) */

int cfg_key_name(int i, char *buf, size_t cap)
{
    if (i < 0 || (size_t)i >= CFG_NKEYS)
        return -1;
    cfg_key_fullname(&cfg_keys[i], buf, cap);
    return 0;
}

int cfg_key_values(int i, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    if (i < 0 || (size_t)i >= CFG_NKEYS)
        return 0;
    const cfg_key *k = &cfg_keys[i];
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

/* keys.c: the run configuration (doc/design.md, "Configuration"): one table of keys (`cfg_keys[]`
 * below) drives the defaults, the one reader, the one writer and validation.
 *
 * Conventions (of config/ as a whole)
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
 * The files of config/: keys.c (this one: the table, lookup by name, the defaults and the
 * key listing), value.c (a key's value in and out of the struct, its text and its checks),
 * scalar.c (the scalar rules), suggest.c ("did you mean"), derive.c (the values that are
 * not keys), read.c (the one reader), write.c (the one writer), check.c (validation and
 * diffs), corpora.c (the data a config names). */
#include "config_impl.h"
#include "../model/model.h"
#include "../model/pos.h"
#include "../model/precision.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

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
 * Lookup by name */

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

/* ---------------------------------------------------------------------------------------
 * The defaults */

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
            v.i = cfg_enum_parse(k, k->def_str);
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

/* config.h: the whole run configuration (doc/design.md, "Configuration") as a typed struct.
 *
 * One table in config.c lists every key (section, name, type, range, default); the one
 * reader (config files, `--set` values, the config stored in checkpoints), the one writer
 * (out_dir/config.yaml, --print-config and the checkpoint metadata "config": the same YAML
 * text) and validation are all driven by it, so they cannot drift apart.
 * Errors name the file and line:col (1-based) and what was expected; kind ERR_INPUT.
 * Scalar rules (every source alike; details in config.c's header): integers are decimal
 * literals (3.5 and 1e6 are not), numbers are decimal (1e-4 is fine), bools are
 * true/false/yes/no/on/off, quoted scalars are strings, a YAML tag must agree with the key's
 * type (`!!str 3` is not an integer), null is an error except for data.valid/data.test
 * (null = ""). Failed loads and sets leave *c unchanged. */
#ifndef TXL_CONFIG_H
#define TXL_CONFIG_H

#include <stdio.h>

#include "../common/err.h"
#include "../data/corpus.h"
#include "../data/tokens.h"
#include "../data/units.h"
#include "../data/vocab.h"
#include "../model/model_config.h"
#include "../optim/optim.h"

#define CFG_PATH_MAX TXL_PATH_MAX
/* train.threads: at most 1024, the cap of eval's and sample's --threads */
#define CFG_MAX_THREADS 1024
/* train.grad_accum: at most 1024 micro-batches per update */
#define CFG_MAX_GRAD_ACCUM 1024

/* train.comm_overlap: start each layer's gradient sum over the MPI ranks when its backward
 * ends (on), after the whole backward (off), or whichever its trial of the first steps
 * found faster (auto: run/overlap.c) */
typedef enum { OVERLAP_AUTO, OVERLAP_ON, OVERLAP_OFF } comm_overlap_kind;
typedef enum { OPT_ADAM, OPT_ADAMW } optimizer_kind;
/* train.schedule_by: the learning-rate schedule's progress counts steps (of max_steps) or
 * the time budget (of max_minutes, or steps if those run out first) */
typedef enum { SCHED_BY_STEPS, SCHED_BY_TIME } schedule_by_kind;

typedef struct {
    char train[CFG_PATH_MAX];  /* required */
    char valid[CFG_PATH_MAX];  /* "" = take it from `split` of train */
    char test[CFG_PATH_MAX];   /* "" = take it from `split` of train (or none) */
    double split[3];           /* train/valid/test fractions of `train` when valid is "" */
    char tokenizer[16];        /* "byte", "word" or "bpe" (data/vocab.h) */
    char vocab[CFG_PATH_MAX];  /* word, bpe: a vocabulary file or checkpoint ("" = build it
                                  from the train split) */
    long vocab_size;           /* word: the most words kept (0: all); bpe: the size built */
    long min_freq;             /* word: words seen fewer times are <unk> (0, 1: none) */
    int anchors;               /* anchor kinds inserted (ANCHOR_* bits, data/units.h) */
    char doc_separator[65];    /* a document starts after each occurrence ("" = none) */
    /* not keys (cfg_derive's): the tokens of the vocabulary in use (256 for bytes; word,
     * bpe: the attached vocabulary's, 0 until one is: cfg_attach_vocab), and the tokenizer
     * they count for (a data.tokenizer that names another since drops them to 0) */
    long vocab_tokens;
    vocab_kind vocab_tokenizer;
} data_config;

typedef struct {
    int batch_size;            /* B: streams per micro-batch (the planned activations) */
    int grad_accum;            /* k: micro-batches per update; batch_size x k streams */
    long max_steps;
    double max_minutes;        /* 0 = no time limit */
    double lr;
    lr_kind schedule;          /* optim.h: the one enum of the schedules */
    schedule_by_kind schedule_by;
    long warmup_steps;
    double lr_min;
    lr_shape resume_schedule;  /* a resume that changes the schedule: optim.h */
    double clip;               /* global grad-norm clip; 0 = off */
    double skip_outlier;       /* skip the update when grad_norm > this x its running mean;
                                * 0 = off */
    double beta1, beta2, eps;
    double weight_decay;
    optimizer_kind optimizer;  /* adam (L2 into the gradient) or adamw (decoupled) */
    unsigned long long seed;
    long log_interval;
    long eval_interval;        /* 0 = never */
    long eval_tokens;          /* 0 = whole valid split */
    long term_stats_interval;  /* steps between terms events (xl only); 0 = off */
    long ckpt_interval;        /* 0 = only at the end */
    long keep_checkpoints;     /* N > 0: the last N checkpoints of ckpt_interval are kept as
                                * out_dir/step-NNNNNNNN.safetensors[.gz]; 0 = none */
    int ckpt_gzip;             /* 1: .safetensors.gz (default), 0: plain .safetensors */
    char out_dir[CFG_PATH_MAX];
    int threads;               /* 0 = all cores; at most CFG_MAX_THREADS */
    comm_overlap_kind comm_overlap;
    int precision;             /* model/precision.h: PREC_FP32, PREC_BF16 or PREC_AUTO */
} train_config;

typedef struct {
    model_config model;
    data_config data;
    train_config train;
} run_config;

/* Fills every key with its default (doc/design.md, "Configuration"; out_dir "runs/default"). */
void cfg_defaults(run_config *c);
/* The values that are not keys, from the keys: data.vocab_tokens for bytes (256), none (0)
 * when data.tokenizer no longer names the attached vocabulary's tokenizer, and model.vocab
 * (the vocabulary's tokens + one per anchor kind of data.anchors). Every loader and setter
 * below ends with it; code that writes a key's field directly calls it after. */
void cfg_derive(run_config *c);
/* The tokenizer of data.tokenizer (byte, word, bpe). */
vocab_kind cfg_tokenizer(const run_config *c);
/* A vocabulary of `tokens` tokens (word, bpe) is the one in use: data.vocab_tokens, then
 * cfg_derive. */
void cfg_attach_vocab(run_config *c, size_t tokens);

/* Loads YAML over the current contents of *c (call cfg_defaults first). Unknown keys,
 * duplicate keys, wrong types, syntax errors: -1 with "PATH:LINE:COL: ..." in e. The file
 * must be a regular file (a FIFO would block forever) of at most CFG_FILE_MAX bytes.
 * When `model`... keys are absent they keep their value. If train.out_dir is not set,
 * it becomes "runs/<basename of path without .yaml/.yml>". Per-key ranges are checked
 * here (with line:col); required keys (data.train) and cross-key rules only in cfg_validate,
 * so an empty file loads as all defaults and then fails validation. */
#define CFG_FILE_MAX (1 << 20)
/* Every config text (a file, a --set value, a checkpoint's metadata) nests at most this
 * deep (a config has 3 levels), refused before libyaml builds anything. */
#define CFG_MAX_DEPTH 16
int cfg_load_yaml(run_config *c, const char *path, txl_err *e);

/* The key the user most likely meant by section.name (section may be NULL): another
 * trainer's name for it (nanoGPT's learning_rate, fairseq's --decoder-layers,
 * Transformer-XL's --warmup_step: `why` says whose), a close name in the section, or the
 * same name in another section. 0 with the full name in key, or -1 when none is close. */
int cfg_key_suggest(const char *section, const char *name, char *key, size_t cap, char *why,
                    size_t why_cap);

/* Applies one "section.key=value" override (value parsed as YAML scalar text).
 * Unknown key or malformed value: -1, message names the flag text. */
int cfg_set(run_config *c, const char *assignment, txl_err *e);
/* The key an override text sets, as "section.key" into key: 0, or -1 for no key. */
int cfg_assignment_key(const char *assignment, char *key, size_t cap);
/* Sets a path or name key to `value` as it is (a string, no YAML parsing), with the key's
 * checks and UTF-8; -1 with "ORIGIN: ..." in e. */
int cfg_set_text(run_config *c, const char *section, const char *name, const char *value,
                 const char *origin, txl_err *e);

/* Checks ranges and cross-key consistency (d_model even, n_head*d_head > 0, tgt_len >= 1,
 * lr > 0, split sums to <= 1 with a positive train and valid part, ...). `origin` names
 * the file for the message (e.g. the YAML path). */
int cfg_validate(const run_config *c, const char *origin, txl_err *e);
/* cfg_validate also bounds sizes, so no size computation downstream can overflow: at most
 * CFG_MAX_PARAMS parameters and CFG_MAX_PLAN floats of activations for a training step
 * (both far beyond any machine), counted from the parameter table and the activation plan
 * themselves (model_counts, acts_plan_floats: doubles, so an absurd config counts too);
 * `txl eval` checks its own lengths with acts_plan_floats. */
#define CFG_MAX_PARAMS 0x1p38
#define CFG_MAX_PLAN 0x1p40

/* Loads the config stored in a checkpoint's metadata (`text`, the YAML of cfg_to_yaml, or
 * the JSON of txl before the YAML metadata, read by the same YAML reader: JSON is YAML flow
 * syntax) over *c. The text is held to a config file's limits: at most CFG_FILE_MAX bytes
 * and, as every config text, nested at most CFG_MAX_DEPTH (16) levels deep. Keys missing from it keep their value; unknown keys are errors. Messages
 * read "CKPT: metadata 'config' at LINE:COL: ...". In this text (only), train.seed may be a
 * quoted decimal: the JSON form stored seeds >= 2^53 as strings. */
int cfg_load_meta(run_config *c, const char *text, const char *ckpt, txl_err *e);

/* The one writer: the fully resolved config as YAML (a comment line, then every key in
 * table order, block style, emitted by libyaml), as a malloc'd string (caller frees); NULL
 * when out of memory or a string is not UTF-8 (nothing the reader returns). Loading it back
 * gives an identical struct. out_dir/config.yaml, --print-config and the checkpoint
 * metadata "config" are this text. */
char *cfg_to_yaml(const run_config *c);
/* Writes cfg_to_yaml's text to f. Returns 0, or -1 on a write error (errno/ferror tell why)
 * or when cfg_to_yaml fails. */
int cfg_write_yaml(const run_config *c, FILE *f);

/* 1 when s is a decimal number as configs write them: [+-](digits[.digits]|.digits)
 * ([eE][+-]digits), nothing else (no hex, inf, nan or blanks). */
int cfg_is_decimal(const char *s);

/* Every key's value as the writer formats it, for other serialisations (`txl info --json`):
 * cfg_walk calls visit once per key in table order and stops at the first non-zero return,
 * which it returns. */
typedef enum {
    CFG_LITERAL, /* a number, true or false: the same token in YAML and JSON */
    CFG_BIG,     /* an integer >= 2^53 (train.seed): JSON readers would round it */
    CFG_WORD,    /* an enum name (pos_scheme: xl): plain in YAML, a string in JSON */
    CFG_TEXT,    /* a path or name: a quoted string */
    CFG_LIST,    /* data.split, model.cutoffs: text[0..n-1] are numbers */
    CFG_NAMES,   /* a set of names (data.anchors): text[0..n-1], plain in YAML, strings in JSON */
} cfg_kind;
typedef struct {
    const char *section, *name;
    cfg_kind kind;
    int n;               /* texts: 3 for data.split, 0..MODEL_MAX_CUTOFFS for model.cutoffs,
                            0..4 for CFG_NAMES, else 1 */
    const char *text[MODEL_MAX_CUTOFFS]; /* valid during the call */
} cfg_item;
int cfg_walk(const run_config *c, int (*visit)(const cfg_item *it, void *ctx), void *ctx);

/* Lists the model keys whose values differ ("model.d_model: 256 vs 512, ...") into buf;
 * returns the number of differing keys. Used to refuse a resume with another shape. */
int cfg_diff_model(const model_config *a, const model_config *b, char *buf, size_t cap);

/* Listing the keys (txl __complete): key i of the table as "section.key" (-1 past the last
 * key); its allowed values, space-separated ("xl mlp ...", "true false"; "" when free),
 * returning 1 for a path key. */
int cfg_key_name(int i, char *buf, size_t cap);
int cfg_key_values(int i, char *buf, size_t cap);

/* ---- The data a config names (corpora.c) */

/* The text a command scores: `data` (a file, whole) when given, else split `split` (SPLIT_*,
 * data/corpus.h) of the checkpoint's data section. *label is "file" or the split's name. */
int cfg_open_text(const char *data, int split, const data_config *d, corpus *c,
                  token_span *span, const char **label, txl_err *e);

/* The tokens of a split for a model of config cfg and vocabulary v (NULL: bytes): its
 * text's tokens with cfg's anchors inserted, and coordinates when the scheme reads them
 * (data/tokens.h). */
int cfg_tokens(const run_config *cfg, const vocab *v, token_span span, tok_stream *ts,
               txl_err *e);
/* The units (anchors, document separator) of a config's data section. */
units_config cfg_units(const run_config *cfg);

#endif

/* config.h: the whole run configuration (DESIGN.md §4) as a typed struct.
 *
 * One table in config.c lists every key (section, name, type, range, default); loading
 * YAML, `--set` overrides, validation, the YAML dump (out_dir/config.yaml) and the JSON
 * form stored in checkpoints are all driven by it, so they cannot drift apart.
 * Errors name the file and line:col (1-based) and what was expected; kind ERR_INPUT.
 * Scalar rules (YAML files and --set alike; details in config.c's header): integers are
 * decimal literals (3.5 and 1e6 are not), numbers are decimal (1e-4 is fine), bools are
 * true/false/yes/no/on/off, quoted scalars are strings, null is an error except for
 * data.valid/data.test (null = ""). Failed loads, sets and JSON parses leave *c unchanged. */
#ifndef TXL_CONFIG_H
#define TXL_CONFIG_H

#include <stdio.h>

#include "../common/err.h"
#include "../model/model_config.h"

#define CFG_PATH_MAX 1024

typedef enum { SCHED_CONSTANT, SCHED_COSINE, SCHED_INV_SQRT } lr_schedule;
typedef enum { OPT_ADAM, OPT_ADAMW } optimizer_kind;

typedef struct {
    char train[CFG_PATH_MAX];  /* required */
    char valid[CFG_PATH_MAX];  /* "" = take it from `split` of train */
    char test[CFG_PATH_MAX];   /* "" = take it from `split` of train (or none) */
    double split[3];           /* train/valid/test fractions of `train` when valid is "" */
    char tokenizer[16];        /* "byte" */
} data_config;

typedef struct {
    int batch_size;            /* B */
    long max_steps;
    double max_minutes;        /* 0 = no time limit */
    double lr;
    lr_schedule schedule;
    long warmup_steps;
    double lr_min;
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
    long ckpt_interval;        /* 0 = only at the end */
    int ckpt_gzip;             /* 1: .safetensors.gz (default), 0: plain .safetensors */
    char out_dir[CFG_PATH_MAX];
    int threads;               /* 0 = all cores */
} train_config;

typedef struct {
    model_config model;
    data_config data;
    train_config train;
} txl_config;

/* Fills every key with its DESIGN.md §4 default (out_dir "runs/default"). */
void cfg_defaults(txl_config *c);

/* Loads YAML over the current contents of *c (call cfg_defaults first). Unknown keys,
 * duplicate keys, wrong types, syntax errors: -1 with "PATH:LINE:COL: ..." in e.
 * When `model`... keys are absent they keep their value. If train.out_dir is not set,
 * it becomes "runs/<basename of path without .yaml/.yml>". Per-key ranges are checked
 * here (with line:col); required keys (data.train) and cross-key rules only in cfg_validate,
 * so an empty file loads as all defaults and then fails validation. */
int cfg_load_yaml(txl_config *c, const char *path, txl_err *e);

/* Applies one "section.key=value" override (value parsed as YAML scalar text).
 * Unknown key or malformed value: -1, message names the flag text. */
int cfg_set(txl_config *c, const char *assignment, txl_err *e);

/* Checks ranges and cross-key consistency (d_model even, n_head*d_head > 0, tgt_len >= 1,
 * lr > 0, split sums to <= 1 with a positive train and valid part, ...). `origin` names
 * the file for the message (e.g. the YAML path). */
int cfg_validate(const txl_config *c, const char *origin, txl_err *e);
/* cfg_validate also bounds sizes, so no size computation downstream can overflow: at most
 * CFG_MAX_PARAMS parameters and CFG_MAX_PLAN floats of activations for a training step
 * (both far beyond any machine). The estimates are upper bounds, in doubles; `txl eval`
 * checks its own lengths with cfg_plan_floats. */
#define CFG_MAX_PARAMS 0x1p38
#define CFG_MAX_PLAN 0x1p40
double cfg_param_floats(const model_config *m);
double cfg_plan_floats(const model_config *m, int B, int Lq, int M);

/* Writes the fully resolved config as YAML (every key, in table order). Loading it back
 * gives an identical struct. Returns 0, or -1 on a write error (errno/ferror tell why). */
int cfg_write_yaml(const txl_config *c, FILE *f);

/* JSON form for checkpoint metadata: {"model":{...},"data":{...},"train":{...}},
 * returned as a malloc'd string (caller frees); NULL on allocation failure or an enum field
 * outside its names. Numbers are written in shortest exact form; train.seed is a JSON
 * number when < 2^53, else a decimal string (long keys are capped at 2^53 by validation). */
char *cfg_to_json(const txl_config *c);
/* Parses the JSON form (keys missing from the JSON keep their current value; unknown keys
 * are errors); `origin` names the checkpoint in messages. */
int cfg_from_json(txl_config *c, const char *json, const char *origin, txl_err *e);

/* Lists the model keys whose values differ ("model.d_model: 256 vs 512, ...") into buf;
 * returns the number of differing keys. Used to refuse a resume with another shape. */
int cfg_diff_model(const model_config *a, const model_config *b, char *buf, size_t cap);

/* Listing the keys (txl __complete): key i of the table as "section.key" (-1 past the last
 * key); its allowed values, space-separated ("xl mlp ...", "true false"; "" when free),
 * returning 1 for a path key. */
int cfg_key_name(int i, char *buf, size_t cap);
int cfg_key_values(int i, char *buf, size_t cap);

#endif

/* model_config.h: the model's hyperparameters (doc/design.md, "Configuration", `model:` section).
 * Plain data; config/ fills and validates it, model/ only reads it. */
#ifndef TXL_MODEL_CONFIG_H
#define TXL_MODEL_CONFIG_H

/* The positional schemes, one line each: X(ENUM SUFFIX, name). The name is what configs and
 * checkpoints say, and pos_<name> (model/pos_<name>.c) is the scheme's pos_ops (pos.h). */
#define POS_SCHEMES(X)                                                                         \
    X(XL, xl)                                                                                  \
    X(MLP, mlp)                                                                                \
    X(ROPE, rope)                                                                              \
    X(ALIBI, alibi)                                                                            \
    X(ABSOLUTE, absolute)                                                                      \
    X(NONE, none)                                                                              \
    X(HIER, hier)                                                                              \
    X(FIRE, fire)                                                                              \
    X(T5, t5)

typedef enum {
#define POS_ENUM(u, l) POS_##u,
    POS_SCHEMES(POS_ENUM)
#undef POS_ENUM
    POS_COUNT
} pos_scheme;

/* Name used in configs and checkpoints ("xl", "mlp", ...); NULL for an invalid value. */
const char *pos_scheme_name(pos_scheme p);
/* Parses a name; returns 0 and sets *p, or -1 when the name is unknown. */
int pos_scheme_parse(const char *s, pos_scheme *p);

/* xl's four score terms (Dai et al. 2019, eq. 3): (a) content q·k, (b) content-position
 * q·W_R R, (c) global content u·k, (d) global position v·W_R R; model.xl_terms names the
 * ones in use, model_config.xl_off holds the others. */
enum { XL_TERM_A = 1, XL_TERM_B = 2, XL_TERM_C = 4, XL_TERM_D = 8 };

/* hier levels (bits of model_config.hier_levels), in order */
enum { HIER_TOKEN = 1, HIER_WORD = 2, HIER_SENT = 4, HIER_PARA = 8, HIER_ALL = 15 };

/* model.cutoffs holds at most this many ids (official's configs have 3) */
#define MODEL_MAX_CUTOFFS 8

/* A list of increasing token ids: the first id of each tail cluster of the adaptive
 * softmax (model/adaptive.h); n = 0 is the full softmax. */
typedef struct {
    int n;
    int v[MODEL_MAX_CUTOFFS];
} cutoff_list;

typedef struct {
    int n_layer;        /* N */
    int d_model;        /* d (even) */
    int n_head;         /* H */
    int d_head;         /* dh */
    int d_inner;        /* di */
    int tgt_len;        /* Lq: segment length */
    int mem_len;        /* M: memory length per layer (0 = no memory) */
    int pre_lnorm;      /* 0 post-LN (default), 1 pre-LN */
    float dropout;      /* in [0, 1) */
    float dropatt;      /* in [0, 1) */
    pos_scheme pos;     /* positional scheme */
    int clamp_len;      /* xl: clamp relative positions to this (0: off) */
    int untie_r;        /* xl: per-layer u, v instead of shared */
    int xl_off;         /* xl: score terms switched off (ablations), bits of XL_TERM_A.. */
    int mlp_num_freqs;  /* mlp: K */
    float mlp_max_dist; /* mlp: largest tau */
    int mlp_hidden;     /* mlp, hier: hidden width of the bias MLPs */
    int hier_levels;    /* hier: levels in use, bits of HIER_TOKEN.. (pos_hier.c) */
    int hier_num_freqs; /* hier: K of each level's features */
    int fire_hidden;    /* fire: hidden width of its MLP */
    float fire_threshold; /* fire: the threshold L's start (L = |L_mult| fire_threshold) */
    int t5_buckets;     /* t5: NB relative-position buckets */
    int t5_max_dist;    /* t5: the distance where the logarithmic buckets end */
    int t5_shared;      /* t5: one table for all layers (T5's choice) */
    cutoff_list cutoffs;/* adaptive softmax and input: the tail clusters' first ids (n = 0:
                           the full softmax, tied to one embedding [V, d]) */
    int div_val;        /* cluster i's width d_embed / div_val^i (0 or 1: one table) */
    int d_embed;        /* the embeddings' width (0: d_model) */
    int tie_projs;      /* the tails' output projections are the input's (adaptive.h) */
    int vocab;          /* V: 256 for the byte tokenizer (not a config key) */
} model_config;

#endif

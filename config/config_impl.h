/* config_impl.h: what the config module's files share (keys.c: the key table; value.c: a
 * key's value, its text and checks; scalar.c: the scalar rules; suggest.c: "did you mean";
 * derive.c: the values that are not keys; read.c: the YAML reader and the three sources;
 * write.c: the writer; check.c: validation and diffs). Not for the rest of txl, which
 * includes config.h. */
#ifndef TXL_CONFIG_IMPL_H
#define TXL_CONFIG_IMPL_H

#include <stddef.h>

#include "config.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

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
    CT_INTS,   /* cutoff_list: increasing integers >= 1, a YAML list (model.cutoffs) */
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
    size_t off;               /* offsetof(run_config, ...) */
    size_t cap;               /* CT_PATH, CT_TEXT, CT_NAME: buffer size including the NUL */
    unsigned flags;
    double min, max;
    double def[3];            /* numeric default; CT_SPLIT uses all three */
    const char *def_str;      /* default of CT_ENUM, CT_PATH, CT_TEXT, CT_NAME */
    const char *(*en)(int v); /* CT_ENUM: the name of value v, NULL past the last */
    const char *const *names; /* CT_NAME, CT_SET: NULL-terminated */
} cfg_key;

/* A value in transit between a source (YAML, a struct) and the struct. */
typedef struct {
    long long i;          /* CT_INT, CT_LONG, CT_BOOL, CT_ENUM */
    unsigned long long u; /* CT_U64 */
    double x[3];          /* CT_DOUBLE, CT_FLOAT (x[0]), CT_SPLIT */
    int n;                /* CT_INTS: list[0..n-1] */
    long long list[MODEL_MAX_CUTOFFS];
    const char *s;        /* CT_PATH, CT_TEXT, CT_NAME; not owned */
} cfg_value;


enum { CFG_NKEYS = 67, CFG_NSECTIONS = 3 };
extern const cfg_key cfg_keys[]; /* keys.c: the table (CFG_NKEYS keys), in writing order */
extern const char *const cfg_sections[CFG_NSECTIONS];

/* The helpers of keys.c, value.c, suggest.c and scalar.c for the other files (documented at
 * their definitions): lookup, a key's value in and out of the struct, formatting, checks,
 * "did you mean", scalar parsing. value.c knows a key but not the table; keys.c's table,
 * lookup and defaults stand on value.c, derive.c and scalar.c. */
int cfg_enum_parse(const cfg_key *k, const char *s);
void cfg_key_get(const cfg_key *k, const run_config *c, cfg_value *v);
void cfg_key_put(const cfg_key *k, run_config *c, const cfg_value *v);
void cfg_fmt_double(char *buf, size_t cap, double x);
void cfg_show(char *buf, size_t cap, const char *s, size_t len, char quote);
const char *cfg_set_item_name(const cfg_key *k, int i);
void cfg_fmt_value(const cfg_key *k, const cfg_value *v, char *buf, size_t cap);
void cfg_key_fullname(const cfg_key *k, char *buf, size_t cap);
const char *cfg_type_expect(const cfg_key *k, char *buf, size_t cap);
int cfg_key_check(const cfg_key *k, const cfg_value *v, char *why, size_t cap);
int cfg_section_find(const char *s);
int cfg_key_find(const char *section, const char *name);
int cfg_edit_distance(const char *a, const char *b);
void cfg_suggest(char *buf, size_t cap, const char *section, const char *name);
int cfg_is_null_text(const char *s, int plain);
int cfg_parse_number(const char *label, const char *text, int plain, double *x, char *why,
                     size_t cap);
int cfg_name_index(const cfg_key *k, const char *s);
int cfg_parse_scalar(const cfg_key *k, const char *text, size_t len, int plain, cfg_value *v,
                     char *why, size_t cap);

#endif

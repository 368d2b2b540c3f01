/* read.c: the one reader of configs (doc/design.md, "Configuration"): libyaml parses config
 * files, --set values and the config stored in checkpoints, and the same code applies them
 * to a copy of the config, committed only on success (scalar.c states the scalar rules). */
#include "config_impl.h"
#include "../data/units.h"
#include "../model/model.h"
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
    case CT_SPLIT: case CT_INTS: return tags_seq;
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
        cfg_show(shown, sizeof shown, t, strlen(t), 0);
    snprintf(why, cap, "%s: expected %s, found a value tagged %s", label, expect, shown);
    return -1;
}

static int node_is_null(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE &&
           cfg_is_null_text((const char *)n->data.scalar.value,
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
        cfg_show(buf, cap, (const char *)n->data.scalar.value, n->data.scalar.length,
             n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? '\'' : '"');
}

/* data.split: a list of 3 numbers; on error *at is where it went wrong. */
static int split_from_node(const cfg_key *k, const cfg_doc *d, const yaml_node_t *n,
                           cfg_value *v, yaml_mark_t *at, char *why, size_t cap)
{
    char full[64], desc[64], tmp[256], label[80];
    cfg_key_fullname(k, full, sizeof full);
    if (n->type != YAML_SEQUENCE_NODE) {
        node_desc(n, desc, sizeof desc);
        snprintf(why, cap, "%s: expected %s, found %s", full, cfg_type_expect(k, tmp, sizeof tmp),
                 desc);
        return -1;
    }
    yaml_node_item_t *it = n->data.sequence.items.start;
    long count = (long)(n->data.sequence.items.top - it);
    if (count != 3) {
        snprintf(why, cap, "%s: expected %s, found %ld item%s", full,
                 cfg_type_expect(k, tmp, sizeof tmp), count, count == 1 ? "" : "s");
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
            cfg_parse_number(label, (const char *)x->data.scalar.value,
                         x->data.scalar.style == YAML_PLAIN_SCALAR_STYLE, &v->x[i], why,
                         cap) != 0)
            return -1;
    }
    *at = n->start_mark;
    return 0;
}

/* model.cutoffs: a list of integers (ranges and order are cfg_key_check's); on error *at is
 * where it went wrong. */
static int ints_from_node(const cfg_key *k, const cfg_doc *d, const yaml_node_t *n,
                          cfg_value *v, yaml_mark_t *at, char *why, size_t cap)
{
    static const char *const tags_int[] = { YAML_INT_TAG, NULL };
    char full[64], desc[64], tmp[256], label[80];
    cfg_key_fullname(k, full, sizeof full);
    if (n->type != YAML_SEQUENCE_NODE) {
        node_desc(n, desc, sizeof desc);
        snprintf(why, cap, "%s: expected %s, found %s", full, cfg_type_expect(k, tmp, sizeof tmp),
                 desc);
        return -1;
    }
    yaml_node_item_t *it = n->data.sequence.items.start;
    long count = (long)(n->data.sequence.items.top - it);
    if (count > MODEL_MAX_CUTOFFS) {
        snprintf(why, cap, "%s: at most %d cutoffs, found %ld", full, MODEL_MAX_CUTOFFS, count);
        return -1;
    }
    v->n = (int)count;
    for (long i = 0; i < count; i++) {
        yaml_node_t *x = yaml_document_get_node((yaml_document_t *)&d->doc, it[i]);
        snprintf(label, sizeof label, "%s[%ld]", full, i);
        if (!x) {
            snprintf(why, cap, "%s: malformed YAML document", label);
            return -1;
        }
        *at = x->start_mark;
        const char *t = x->type == YAML_SCALAR_NODE ? (const char *)x->data.scalar.value : NULL;
        int plain = t && x->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        if (tag_check(d, x, tags_int, label, "an integer", why, cap) != 0)
            return -1;
        char *end = NULL;
        errno = 0;
        long long val = plain && (*t == '+' || *t == '-' || (*t >= '0' && *t <= '9'))
                        ? strtoll(t, &end, 10) : 0;
        if (!plain || !end || *end || end == t || errno == ERANGE || val < INT_MIN ||
            val > INT_MAX) {
            node_desc(x, desc, sizeof desc);
            snprintf(why, cap, "%s: expected an integer (a token id), found %s", label, desc);
            return -1;
        }
        v->list[i] = val;
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
    cfg_key_fullname(k, full, sizeof full);
    const char *expect = cfg_type_expect(k, tmp, sizeof tmp);
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
                x->data.scalar.length ? cfg_name_index(k, (const char *)x->data.scalar.value) : -1;
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
    cfg_key_fullname(k, full, sizeof full);
    *at = n->start_mark;
    memset(v, 0, sizeof *v);
    if (tag_check(d, n, key_tags(k), full, cfg_type_expect(k, tmp, sizeof tmp), why, cap) != 0)
        return -1;
    if (k->type == CT_SPLIT)
        return split_from_node(k, d, n, v, at, why, cap);
    if (k->type == CT_INTS)
        return ints_from_node(k, d, n, v, at, why, cap);
    if (k->type == CT_SET && n->type == YAML_SEQUENCE_NODE)
        return set_from_node(k, d, n, v, at, why, cap);
    if (n->type != YAML_SCALAR_NODE) {
        node_desc(n, desc, sizeof desc);
        int dash = k->type == CT_PATH && n->type == YAML_SEQUENCE_NODE; /* `train: -` */
        snprintf(why, cap, "%s: expected %s, found %s%s", full, cfg_type_expect(k, tmp, sizeof tmp),
                 desc, dash ? " (a bare - starts a YAML list: write \"-\" in quotes for "
                              "standard input)" : "");
        return -1;
    }
    int plain = n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    /* the JSON form of older checkpoints stored seeds >= 2^53 as decimal strings */
    if (s->meta && k->type == CT_U64)
        plain = 1;
    int rc = cfg_parse_scalar(k, (const char *)n->data.scalar.value, n->data.scalar.length,
                              plain, v, why, cap);
    /* txl before clamp_len had a minimum documented "<= 0: off" and wrote any int: in a
     * checkpoint's config a negative value is that off, 0 (the same numerics); a config
     * file and --set must say 0 */
    if (rc == 0 && s->meta && k->off == offsetof(run_config, model.clamp_len) && v->i < 0)
        v->i = 0;
    return rc;
}

/* Applies one section mapping; seen[] marks keys already set in this document. */
static int load_section(run_config *w, const cfg_src *s, const cfg_doc *d, const char *sec,
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
        int ki = strlen(name) == kn->data.scalar.length ? cfg_key_find(sec, name) : -1;
        if (ki < 0) {
            char sug[160], nm[64];
            cfg_show(nm, sizeof nm, name, kn->data.scalar.length, 0);
            cfg_suggest(sug, sizeof sug, sec, name);
            snprintf(why, sizeof why, "unknown key '%s.%s'%s", sec, nm, sug);
            return src_err(e, s, &kn->start_mark, why);
        }
        const cfg_key *k = &cfg_keys[ki];
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
            cfg_key_check(k, &v, why, sizeof why) != 0)
            return src_err(e, s, &at, why);
        cfg_key_put(k, w, &v);
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
    int si = strlen(name) == kn->data.scalar.length ? cfg_section_find(name) : -1;
    if (si < 0) {
        char sug[256] = "", key[64], who[128];
        for (size_t i = 0; i < CFG_NSECTIONS; i++)
            if (cfg_edit_distance(name, cfg_sections[i]) <= 2)
                snprintf(sug, sizeof sug, "; did you mean '%s'?", cfg_sections[i]);
        /* a key at the top (a flat config: nanoGPT's are) */
        if (!sug[0] && cfg_key_suggest(NULL, name, key, sizeof key, who, sizeof who) == 0) {
            char *dot = strchr(key, '.');
            *dot = 0;
            snprintf(sug, sizeof sug, "; keys go in their section: did you mean %s: {%s: ...}?%s%s",
                     key, dot + 1, who[0] ? " " : "", who);
        }
        cfg_show(desc, sizeof desc, name, kn->data.scalar.length, '\'');
        snprintf(why, sizeof why, "unknown section %s (expected model, data or train%s)", desc,
                 sug);
        return src_err(e, s, &kn->start_mark, why);
    }
    return si;
}

/* Applies the root mapping {model: {...}, data: {...}, train: {...}}. */
static int load_root(run_config *w, const cfg_src *s, const cfg_doc *d, unsigned char *seen,
                     txl_err *e)
{
    char why[512], desc[64];
    yaml_mark_t seen_at[CFG_NKEYS];
    yaml_mark_t sec_at[CFG_NSECTIONS];
    int sec_seen[CFG_NSECTIONS] = { 0 };
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
            snprintf(why, sizeof why, "duplicate section '%s' (first at %zu:%zu)", cfg_sections[si],
                     sec_at[si].line + 1, sec_at[si].column + 1);
            return src_err(e, s, &kn->start_mark, why);
        }
        sec_seen[si] = 1;
        sec_at[si] = kn->start_mark;
        if (node_is_null(vn))
            continue; /* "model:" with nothing under it */
        snprintf(desc, sizeof desc, "section '%s'", cfg_sections[si]);
        if (tag_check(d, vn, tags_map, desc, "a mapping of keys", why, sizeof why) != 0)
            return src_err(e, s, &vn->start_mark, why);
        if (vn->type != YAML_MAPPING_NODE) {
            node_desc(vn, desc, sizeof desc);
            snprintf(why, sizeof why, "section '%s': expected a mapping of keys, found %s",
                     cfg_sections[si], desc);
            return src_err(e, s, &vn->start_mark, why);
        }
        if (load_section(w, s, d, cfg_sections[si], vn, seen, seen_at, e) != 0)
            return -1;
    }
    return 0;
}

/* Applies a whole config text (a file, or a checkpoint's metadata) to w. */
static int load_text(run_config *w, const cfg_src *s, const char *text, size_t len,
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


int cfg_load_yaml(run_config *c, const char *path, txl_err *e)
{
    cfg_src s = { .path = path };
    char *text;
    size_t len;
    if (read_config_file(path, &text, &len, e) != 0)
        return -1;
    run_config w;
    memcpy(&w, c, sizeof w);
    unsigned char seen[CFG_NKEYS] = { 0 };
    int rc = load_text(&w, &s, text, len, seen, e);
    free(text);
    if (rc == 0) {
        if (!seen[cfg_key_find("train", "out_dir")])
            derive_out_dir(w.train.out_dir, sizeof w.train.out_dir, path);
        cfg_derive(&w);
        memcpy(c, &w, sizeof w);
    }
    return rc;
}

int cfg_load_meta(run_config *c, const char *text, const char *ckpt, txl_err *e)
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
    run_config w;
    memcpy(&w, c, sizeof w);
    unsigned char seen[CFG_NKEYS] = { 0 };
    int rc = load_text(&w, &s, t, strlen(t), seen, e);
    free(json);
    if (rc == 0) {
        cfg_derive(&w);
        memcpy(c, &w, sizeof w);
    }
    return rc;
}

/* The key of a --set assignment ("section.key", blanks around it ignored): its index, or -1
 * with the error (and a suggestion) set. */
static int cfg_set_key_index(const cfg_src *s, const char *assignment, const char *eq,
                             txl_err *e)
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
        ki = cfg_key_find(name, dot + 1);
    }
    if (ki < 0) {
        char sug[160];
        cfg_suggest(sug, sizeof sug, dot ? name : NULL, dot ? dot + 1 : name);
        if (dot)
            *dot = '.';
        snprintf(why, sizeof why, "unknown key '%s'%s", name, sug);
        return src_err(e, s, NULL, why);
    }
    return ki;
}

int cfg_set(run_config *c, const char *assignment, txl_err *e)
{
    cfg_src s = { .flag = assignment };
    char why[768];
    const char *eq = strchr(assignment, '=');
    if (!eq)
        return src_err(e, &s, NULL, "expected section.key=value (e.g. model.d_model=512)");
    int ki = cfg_set_key_index(&s, assignment, eq, e);
    if (ki < 0)
        return -1;
    const cfg_key *k = &cfg_keys[ki];
    /* '-' (standard input) is a YAML list item; as a path's whole value it means stdin, as
     * it does for txl eval --data */
    const char *val = eq + 1;
    size_t vn = strlen(val);
    while (vn && (val[vn - 1] == ' ' || val[vn - 1] == '\t'))
        vn--;
    while (vn && (*val == ' ' || *val == '\t'))
        val++, vn--;
    if (k->type == CT_PATH && vn == 1 && *val == '-')
        return cfg_set_text(c, k->section, k->name, "-", assignment, e);

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
            rc = cfg_parse_scalar(k, "", 0, 1, &v, why, sizeof why);
        if (rc == 0)
            rc = cfg_key_check(k, &v, why, sizeof why);
        if (rc != 0)
            src_err(e, &s, NULL, why);
        else if ((rc = doc_expect_end(&d, &s, e)) == 0) {
            cfg_key_put(k, c, &v); /* v may point into the document: store before freeing it */
            cfg_derive(c);
        }
    }
    doc_free(&d);
    return rc;
}

int cfg_assignment_key(const char *assignment, char *key, size_t cap)
{
    cfg_src s = { .flag = assignment };
    txl_err e = {0};
    const char *eq = strchr(assignment, '=');
    int ki = eq ? cfg_set_key_index(&s, assignment, eq, &e) : -1;
    if (ki < 0)
        return -1;
    cfg_key_fullname(&cfg_keys[ki], key, cap);
    return 0;
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

int cfg_set_text(run_config *c, const char *section, const char *name, const char *value,
                 const char *origin, txl_err *e)
{
    int ki = cfg_key_find(section, name);
    assert(ki >= 0 && (cfg_keys[ki].type == CT_PATH || cfg_keys[ki].type == CT_NAME));
    const cfg_key *k = &cfg_keys[ki];
    char why[768], full[64];
    cfg_value v;
    cfg_key_fullname(k, full, sizeof full);
    if (!is_utf8((const unsigned char *)value))
        return err_set(e, ERR_INPUT, "%s: %s: not UTF-8 text", origin, full);
    if (cfg_parse_scalar(k, value, strlen(value), 0, &v, why, sizeof why) ||
        cfg_key_check(k, &v, why, sizeof why))
        return err_set(e, ERR_INPUT, "%s: %s", origin, why);
    cfg_key_put(k, c, &v);
    cfg_derive(c);
    return 0;
}

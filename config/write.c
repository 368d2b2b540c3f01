/* write.c: the one writer of configs: every key in table order through libyaml's emitter,
 * numbers in the "C" locale and the shortest form that reads back to the same value, so the
 * text round-trips exactly; cfg_walk hands the same texts to other serialisations. */
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
 * The writer */

int cfg_walk(const run_config *c, int (*visit)(const cfg_item *it, void *ctx), void *ctx)
{
    char buf[MODEL_MAX_CUTOFFS][40];
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        const cfg_key *k = &cfg_keys[i];
        cfg_value v;
        cfg_item it = { .section = k->section, .name = k->name, .kind = CFG_LITERAL, .n = 1 };
        for (int j = 0; j < MODEL_MAX_CUTOFFS; j++)
            it.text[j] = buf[j];
        cfg_key_get(k, c, &v);
        cfg_fmt_value(k, &v, buf[0], sizeof buf[0]);
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
                cfg_fmt_double(buf[j], sizeof buf[j], v.x[j]);
            break;
        case CT_SET:
            it.kind = CFG_NAMES;
            it.n = 0;
            for (int j = 0; cfg_set_item_name(k, j); j++)
                if (v.i >> j & 1)
                    it.text[it.n++] = k->names[j];
            break;
        case CT_TERMS: it.kind = CFG_WORD; break;
        case CT_INTS:
            it.kind = CFG_LIST;
            it.n = v.n;
            for (int j = 0; j < v.n; j++)
                snprintf(buf[j], sizeof buf[j], "%lld", v.list[j]);
            break;
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

char *cfg_to_yaml(const run_config *c)
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

int cfg_write_yaml(const run_config *c, FILE *f)
{
    char *s = cfg_to_yaml(c);
    if (!s)
        return -1;
    int rc = fputs(s, f) < 0 || ferror(f) ? -1 : 0;
    free(s);
    return rc;
}

/* config.c: include/txl.h's version, threads and configs, over config/ (the key table, the
 * reader, the writer, the checks). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/par.h"
#include "api.h"
#include "../model/precision.h"

const char *txl_version(void) { return TXL_VERSION; }

int txl_set_threads(int n) { return par_set_threads(n); }

int txl_set_precision(const char *name, const char **took, const char **kernel, txl_err *e)
{
    api_err_clear(e);
    int want = -1;
    for (int p = PREC_FP32; p <= PREC_AUTO; p++)
        if (name && strcmp(name, precision_name(p)) == 0)
            want = p;
    if (want < 0)
        return err_set(e, ERR_INPUT, "precision: expected fp32, bf16 or auto, found '%.40s'",
                       name ? name : "(null)");
    precision_kind p;
    const char *k;
    if (precision_apply((precision_kind)want, "--precision", &p, &k, e))
        return -1;
    if (took)
        *took = precision_name(p);
    if (kernel)
        *kernel = k;
    return 0;
}

txl_config *txl_config_new(void)
{
    txl_config *c = calloc(1, sizeof *c);
    if (c)
        cfg_defaults(&c->c);
    return c;
}

txl_config *txl_config_load(const char *path, txl_err *e)
{
    api_err_clear(e);
    txl_config *c = txl_config_new();
    if (!c) {
        err_set(e, ERR_RUNTIME, "out of memory");
        return NULL;
    }
    if (cfg_load_yaml(&c->c, path, e)) {
        free(c);
        return NULL;
    }
    snprintf(c->origin, sizeof c->origin, "%s", path);
    return c;
}

int txl_config_set(txl_config *c, const char *assignment, txl_err *e)
{
    api_err_clear(e);
    return cfg_set(&c->c, assignment, e);
}

int txl_config_check(const txl_config *c, const char *origin, txl_err *e)
{
    api_err_clear(e);
    return cfg_validate(&c->c, origin ? origin : c->origin[0] ? c->origin : NULL, e);
}

/* cfg_walk's visitor for txl_config_get: the item named ctx->key, as its YAML text. */
typedef struct {
    const char *key;
    char *buf;
    size_t cap;
    int found;
} get_ctx;

static int get_item(const cfg_item *it, void *ctx)
{
    get_ctx *g = ctx;
    char name[96];
    snprintf(name, sizeof name, "%s.%s", it->section, it->name);
    if (strcmp(name, g->key) != 0)
        return 0;
    g->found = 1;
    if (it->kind != CFG_LIST && it->kind != CFG_NAMES) {
        snprintf(g->buf, g->cap, "%s", it->text[0]);
        return 1;
    }
    size_t o = (size_t)snprintf(g->buf, g->cap, "[");
    for (int i = 0; i < it->n && o < g->cap; i++)
        o += (size_t)snprintf(g->buf + o, g->cap - o, "%s%s", i ? ", " : "", it->text[i]);
    if (o < g->cap)
        snprintf(g->buf + o, g->cap - o, "]");
    return 1;
}

int txl_config_get(const txl_config *c, const char *key, char *buf, size_t cap)
{
    get_ctx g = {key, buf, cap, 0};
    if (cap)
        buf[0] = '\0';
    cfg_walk(&c->c, get_item, &g);
    return g.found ? 0 : -1;
}

char *txl_config_yaml(const txl_config *c) { return cfg_to_yaml(&c->c); }

/* cfg_walk's visitor: the config as a JSON object of sections, with the writer's value
 * texts (numbers as written to config.yaml; names, paths and integers past 2^53 as
 * strings, since JSON readers hold numbers in doubles). */
typedef struct {
    cJSON *root, *sec;
    const char *sec_name;
} json_cfg;

static int json_item(const cfg_item *it, void *ctx)
{
    json_cfg *j = ctx;
    if (!j->sec || strcmp(j->sec_name, it->section) != 0) {
        j->sec_name = it->section;
        if (!(j->sec = cJSON_AddObjectToObject(j->root, it->section)))
            return -1;
    }
    int list = it->kind == CFG_LIST || it->kind == CFG_NAMES;
    cJSON *v = it->kind == CFG_LITERAL ? cJSON_CreateRaw(it->text[0])
               : list                  ? cJSON_CreateArray()
                                       : cJSON_CreateString(it->text[0]);
    for (int i = 0; v && list && i < it->n; i++)
        cJSON_AddItemToArray(v, it->kind == CFG_LIST ? cJSON_CreateRaw(it->text[i])
                                                     : cJSON_CreateString(it->text[i]));
    return cJSON_AddItemToObject(j->sec, it->name, v) ? 0 : -1;
}

char *txl_config_json(const txl_config *c)
{
    json_cfg jc = {.root = cJSON_CreateObject()};
    char *s = jc.root && cfg_walk(&c->c, json_item, &jc) == 0 ? cJSON_PrintUnformatted(jc.root)
                                                              : NULL;
    cJSON_Delete(jc.root);
    return s;
}

txl_config *txl_config_copy(const txl_config *c)
{
    txl_config *d = malloc(sizeof *d);
    if (d)
        memcpy(d, c, sizeof *d);
    return d;
}

void txl_config_free(txl_config *c) { free(c); }

int txl_config_is_number(const char *s) { return cfg_is_decimal(s); }

int txl_config_suggest(const char *name, char *key, size_t cap, char *why, size_t why_cap)
{
    return cfg_key_suggest(NULL, name, key, cap, why, why_cap);
}

int txl_config_key(int i, char *name, size_t name_cap, char *values, size_t values_cap)
{
    if (cfg_key_name(i, name, name_cap) < 0)
        return -1;
    return cfg_key_values(i, values, values_cap);
}

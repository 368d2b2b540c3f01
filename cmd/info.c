/* info.c: `txl info CKPT` (config, parameter count, step, metrics) and `txl info --system`
 * (OpenBLAS core and threads), as text or --json. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../data/units.h"
#include "cmds.h"

typedef struct {
    int json, system;
} info_args;

#define O(f) offsetof(info_args, f)
static const cli_opt info_options[] = {
    {.name = "--json", .type = CLI_SWITCH, .off = O(json),
     .help = "one JSON object on stdout (the config under \"config\")"},
    {.name = "--system", .type = CLI_SWITCH, .off = O(system),
     .help = "the txl version, OpenBLAS core and build, and the number of cores"},
};
#undef O

const cli_spec info_spec = {
    .opts = info_options,
    .n_opts = sizeof info_options / sizeof *info_options,
    .about = "Prints a checkpoint's config, parameter count, step, tokens and metrics; or, "
             "with --system, the OpenBLAS build and the core it runs on. CKPT may be a run "
             "directory: its best checkpoint (else last).",
    .example = "example: txl info runs/tiny/last.safetensors.gz --json | jq .step",
    .pos_max = 1,
    .pos_extra = "unexpected argument '%s'",
    .pos_glob = "*.@(safetensors|safetensors.gz)",
};

char *openblas_get_config(void);

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

static int info_system(int json)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char *cfg = openblas_get_config();
    const char *env = getenv("OPENBLAS_CORETYPE");
    if (json)
        printf("{\"version\":\"%s\",\"blas_core\":\"%s\",\"blas_config\":\"%s\",\"cores\":%ld,"
               "\"openblas_coretype_env\":\"%s\"}\n", TXL_VERSION, cli_blas_core(),
               cfg ? cfg : "", cores, env ? env : "");
    else
        printf("txl %s\nOpenBLAS core: %s\nOpenBLAS build: %s\ncores: %ld\n"
               "OPENBLAS_CORETYPE: %s\n", TXL_VERSION, cli_blas_core(), cfg ? cfg : "?", cores,
               env ? env : "(unset)");
    return 0;
}

int cmd_info(int argc, char **argv)
{
    info_args a;
    cli_pos pos;
    int rc = cli_parse(txl_command("info"), argc, argv, &a, &pos);
    if (rc >= 0)
        return rc;
    const char *ckpt = pos.n ? pos.v[0] : NULL;
    int json = a.json, sys = a.system;
    if (sys)
        return info_system(json);
    if (!ckpt)
        return cli_usage("info", "missing the checkpoint (or --system)");
    st_file f;
    txl_config cfg;
    model mdl;
    txl_err e = {0};
    if (cli_load_checkpoint(ckpt, "info", a.json, &f, &cfg, &mdl, &e))
        return cli_fail("info", &e);
    static const char *keys[] = {"step", "tokens", "best_valid_loss", "valid_loss", "epoch",
                                 "elapsed_s"};
    int has_optim = st_find(&f, "optim.m.word_emb.weight") != NULL;
    int has_mem = st_find(&f, "state.mem.0") != NULL;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        json_cfg jc = {.root = cJSON_CreateObject()};
        if (jc.root && cfg_walk(&cfg, json_item, &jc) != 0) {
            cJSON_Delete(jc.root);
            jc.root = NULL;
        }
        cJSON_AddStringToObject(o, "path", f.path);
        cJSON_AddNumberToObject(o, "params", (double)mdl.n_weights);
        cJSON_AddNumberToObject(o, "vocab", cfg.model.vocab);
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
            const char *v = st_meta(&f, keys[k]);
            if (!v)
                continue;
            char *end;
            double d = strtod(v, &end);
            if (*end || strcmp(v, "nan") == 0 || strcmp(v, "inf") == 0)
                cJSON_AddNullToObject(o, keys[k]);
            else
                cJSON_AddNumberToObject(o, keys[k], d);
        }
        cJSON_AddBoolToObject(o, "resumable", has_optim);
        cJSON_AddBoolToObject(o, "has_memory", has_mem);
        cJSON_AddNumberToObject(o, "tensors", f.n);
        if (jc.root)
            cJSON_AddItemToObject(o, "config", jc.root);
        char *s = cJSON_PrintUnformatted(o);
        if (s)
            printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
    } else {
        const model_config *m = &cfg.model;
        printf("checkpoint: %s\n", f.path);
        printf("model: %s, %d layers, d_model %d, %d heads x %d, d_inner %d, %zu params\n",
               pos_scheme_name(m->pos), m->n_layer, m->d_model, m->n_head, m->d_head,
               m->d_inner, mdl.n_weights);
        printf("lengths: tgt_len %d, mem_len %d, clamp_len %d; %s\n", m->tgt_len, m->mem_len,
               m->clamp_len, m->pre_lnorm ? "pre-LN" : "post-LN");
        char an[32];
        units_anchor_list((unsigned)cfg.data.anchors, an, sizeof an);
        printf("vocabulary: %d tokens (%d bytes%s%s)\n", m->vocab, TXL_BYTES,
               cfg.data.anchors ? " + anchors " : "", cfg.data.anchors ? an : "");
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
            const char *v = st_meta(&f, keys[k]);
            if (v)
                printf("%s: %s\n", keys[k], v);
        }
        printf("resumable: %s (%d tensors)\n", has_optim ? "yes" : "no", f.n);
        printf("config:\n");
        cfg_write_yaml(&cfg, stdout);
    }
    model_free(&mdl);
    st_free(&f);
    return 0;
}

/* info.c: `txl info CKPT` (config, parameter count, step, metrics) and `txl info --system`
 * (OpenBLAS core and threads), as text or --json. */
#include <cjson/cJSON.h>
#include <math.h>
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
    CLI_OPT_JSON(O(json), "one JSON object on stdout (the config under \"config\")"),
    {.name = "--system", .type = CLI_SWITCH, .off = O(system),
     .help = "the txl version, OpenBLAS core and build, the number of cores, and where the "
             "installed configs are"},
};
#undef O

const cli_spec info_spec = {
    CLI_OPTS(info_options),
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
    char dirs[CLI_CONFIG_DIRS][CFG_PATH_MAX];
    int nd = cli_config_dirs(dirs);
    if (json) {
        cJSON *o = cJSON_CreateObject(), *d = cJSON_CreateArray();
        if (!o || !d) {
            cJSON_Delete(o);
            cJSON_Delete(d);
            fprintf(stderr, "txl info: out of memory\n");
            return 1;
        }
        cJSON_AddStringToObject(o, "version", TXL_VERSION);
        cJSON_AddStringToObject(o, "blas_core", sys_blas_core());
        cJSON_AddStringToObject(o, "blas_config", cfg ? cfg : "");
        cJSON_AddNumberToObject(o, "cores", (double)cores);
        cJSON_AddStringToObject(o, "openblas_coretype_env", env ? env : "");
        for (int i = 0; i < nd; i++)
            cJSON_AddItemToArray(d, cJSON_CreateString(dirs[i]));
        cJSON_AddItemToObject(o, "configs", d);
        char *s = cJSON_PrintUnformatted(o);
        if (s)
            printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
        return 0;
    }
    printf("txl %s\nOpenBLAS core: %s\nOpenBLAS build: %s\ncores: %ld\n"
           "OPENBLAS_CORETYPE: %s\n", TXL_VERSION, sys_blas_core(), cfg ? cfg : "?", cores,
           env ? env : "(unset)");
    for (int i = 0; i < nd; i++)
        printf("configs: %s\n", dirs[i]);
    if (nd == 0)
        printf("configs: none installed\n");
    return 0;
}

/* A metadata value as a finite number: 1 and *out, or 0 when absent, "nan", "inf" or not a
 * number (info shows what it finds; --resume is the strict reader, train_state.c). */
static int meta_number(const st_file *f, const char *key, double *out)
{
    const char *v = st_meta(f, key);
    char *end;
    if (!v || !*v)
        return 0;
    *out = strtod(v, &end);
    return !*end && isfinite(*out);
}

/* --json: the loss in bits (bpc = loss / ln 2), null when the loss is; absent with it. */
static void add_bpc(cJSON *o, const st_file *f, const char *loss_key, const char *bpc_key)
{
    double d;
    if (!st_meta(f, loss_key))
        return;
    if (meta_number(f, loss_key, &d))
        cJSON_AddNumberToObject(o, bpc_key, d / M_LN2);
    else
        cJSON_AddNullToObject(o, bpc_key);
}

/* "1.5 s", "8 min 45 s", "2 h 05 min" */
static void fmt_trained(char *buf, size_t cap, double s)
{
    if (s < 60)
        snprintf(buf, cap, "%.1f s", s);
    else if (s < 3600)
        snprintf(buf, cap, "%d min %02d s", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(buf, cap, "%d h %02d min", (int)(s / 3600), (int)fmod(s / 60, 60));
}

/* "best valid: loss 2.9009 nats/byte, 4.1851 bpc"; `none` when the value is inf or nan
 * (no validation yet, or none at this step). */
static void print_loss(const st_file *f, const char *key, const char *label, const char *none)
{
    double d;
    const char *v = st_meta(f, key);
    if (!v)
        return;
    if (meta_number(f, key, &d))
        printf("%s: loss %.4f nats/byte, %.4f bpc\n", label, d, d / M_LN2);
    else if (strcmp(v, "inf") == 0 || strcmp(v, "nan") == 0)
        printf("%s: %s\n", label, none);
    else
        printf("%s: %s\n", label, v);
}

/* The training state of the metadata, for people: counts as integers, losses in nats and
 * bits, the training time in seconds and minutes. */
static void print_state(const st_file *f)
{
    static const char *const counts[] = {"step", "tokens", "epoch"};
    double d;
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        const char *v = st_meta(f, counts[k]);
        if (v && meta_number(f, counts[k], &d) && d >= 0 && d < 9e15 && d == floor(d))
            printf("%s: %.0f\n", counts[k], d);
        else if (v)
            printf("%s: %s\n", counts[k], v);
    }
    print_loss(f, "best_valid_loss", "best valid", "none yet");
    print_loss(f, "valid_loss", "last valid", "none at this step");
    const char *v = st_meta(f, "elapsed_s");
    if (v && meta_number(f, "elapsed_s", &d) && d >= 0) {
        char buf[64];
        fmt_trained(buf, sizeof buf, d);
        printf("trained: %s\n", buf);
    } else if (v) {
        printf("trained: %s s\n", v);
    }
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
    run_config cfg;
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
            double d;
            if (!st_meta(&f, keys[k]))
                continue;
            if (meta_number(&f, keys[k], &d))
                cJSON_AddNumberToObject(o, keys[k], d);
            else
                cJSON_AddNullToObject(o, keys[k]);
        }
        add_bpc(o, &f, "best_valid_loss", "best_valid_bpc");
        add_bpc(o, &f, "valid_loss", "valid_bpc");
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
        print_state(&f);
        printf("resumable: %s (%d tensors)\n", has_optim ? "yes" : "no", f.n);
        printf("config:\n");
        cfg_write_yaml(&cfg, stdout);
    }
    model_free(&mdl);
    st_free(&f);
    return 0;
}

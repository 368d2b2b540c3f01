/* info.c: `txl info CKPT` (config, parameter count, step, metrics) and `txl info --system`
 * (OpenBLAS core and threads), as text or --json. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/json.h"
#include "cli.h"
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
    .about = "Prints a checkpoint's config, parameter count, step, tokens and metrics, and how "
             "its weights are stored (fp32, or quantized: bf16 or q8) and their size; or, "
             "with --system, the OpenBLAS build and the core it runs on. CKPT may be a run "
             "directory: its best checkpoint (else last). Several checkpoints (or a quoted "
             "glob: 'runs/x/step-*') are printed one after the other (--json: one line each).",
    .example = "example: txl info runs/tiny/last.safetensors.gz --json | jq .step",
    .pos_max = -1,
    .pos_glob = "*.@(safetensors|safetensors.gz)",
};

static int info_system(int json)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char *cfg = sys_blas_config();
    const char *env = getenv("OPENBLAS_CORETYPE");
    char dirs[CLI_CONFIG_DIRS][TXL_PATH_MAX];
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
        cJSON_AddStringToObject(o, "thp", sys_thp_mode());
        cJSON_AddBoolToObject(o, "thp_asked", sys_thp_asked());
        for (int i = 0; i < nd; i++)
            cJSON_AddItemToArray(d, cJSON_CreateString(dirs[i]));
        cJSON_AddItemToObject(o, "configs", d);
        json_put_line(stdout, o);
        cJSON_Delete(o);
        return 0;
    }
    const char *thp = sys_thp_mode();
    printf("txl %s\nOpenBLAS core: %s\nOpenBLAS build: %s\ncores: %ld\n"
           "OPENBLAS_CORETYPE: %s\ntransparent huge pages: %s (%s)\n", TXL_VERSION,
           sys_blas_core(), cfg ? cfg : "?", cores, env ? env : "(unset)", thp,
           !sys_thp_asked() ? "txl does not ask: TXL_THP=0"
           : strcmp(thp, "madvise") == 0 ? "txl asks for them for its large arrays"
           : strcmp(thp, "always") == 0 ? "every large array gets them"
                                         : "txl's advice has no effect");
    for (int i = 0; i < nd; i++)
        printf("configs: %s\n", dirs[i]);
    if (nd == 0)
        printf("configs: none installed\n");
    return 0;
}

/* A metadata value as a finite number: 1 and *out, or 0 when absent, "nan", "inf" or not a
 * number (info shows what it finds; --resume is the strict reader). */
static int meta_number(const txl_model *m, const char *key, double *out)
{
    const char *v = txl_model_meta(m, key);
    char *end;
    if (!v || !*v)
        return 0;
    *out = strtod(v, &end);
    return !*end && isfinite(*out);
}

/* A validation's bits per byte: the metadata's (bpc_key), else, in a checkpoint of txl
 * before 0.3 (a byte model, its loss per byte), loss / ln 2. 0, or -1 when there is no
 * number (the loss is inf or nan). */
static int meta_bpc(const txl_model *m, const char *loss_key, const char *bpc_key, double *bpc)
{
    double d;
    if (!meta_number(m, loss_key, &d))
        return -1;
    if (txl_model_meta(m, bpc_key))
        return meta_number(m, bpc_key, bpc) ? 0 : -1;
    *bpc = d / M_LN2;
    return 0;
}

/* --json: the bits per byte, null when the loss is not a number; absent with the loss. */
static void add_bpc(cJSON *o, const txl_model *m, const char *loss_key, const char *bpc_key)
{
    double d;
    if (!txl_model_meta(m, loss_key))
        return;
    if (meta_bpc(m, loss_key, bpc_key, &d) == 0)
        cJSON_AddNumberToObject(o, bpc_key, d);
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

/* "best valid: loss 2.9009 nats/token, ppl 18.19, 4.1851 bpc"; `none` when the value is
 * inf or nan (no validation yet, or none at this step). */
static void print_loss(const txl_model *m, const char *key, const char *bpc_key,
                       const char *label, const char *none)
{
    double d, bpc;
    const char *v = txl_model_meta(m, key);
    if (!v)
        return;
    if (meta_number(m, key, &d) && meta_bpc(m, key, bpc_key, &bpc) == 0)
        printf("%s: loss %.4f nats/token, ppl %.2f, %.4f bpc\n", label, d, exp(d), bpc);
    else if (strcmp(v, "inf") == 0 || strcmp(v, "nan") == 0)
        printf("%s: %s\n", label, none);
    else
        printf("%s: %s\n", label, v);
}

/* The training state of the metadata, for people: counts as integers, losses in nats and
 * bits, the training time in seconds and minutes. */
static void print_state(const txl_model *m)
{
    static const char *const counts[] = {"step", "tokens", "epoch"};
    double d;
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        const char *v = txl_model_meta(m, counts[k]);
        if (v && meta_number(m, counts[k], &d) && d >= 0 && d < 9e15 && d == floor(d))
            printf("%s: %.0f\n", counts[k], d);
        else if (v)
            printf("%s: %s\n", counts[k], v);
    }
    print_loss(m, "best_valid_loss", "best_valid_bpc", "best valid", "none yet");
    print_loss(m, "valid_loss", "valid_bpc", "last valid", "none at this step");
    const char *v = txl_model_meta(m, "elapsed_s");
    if (v && meta_number(m, "elapsed_s", &d) && d >= 0) {
        char buf[64];
        fmt_trained(buf, sizeof buf, d);
        printf("trained: %s\n", buf);
    } else if (v) {
        printf("trained: %s s\n", v);
    }
}

/* Whether the checkpoint holds a tensor whose name starts with `prefix` (an Adam moment:
 * "optim.m.", whatever the model's tensors are called), and how many it holds. */
static int tensors(const txl_model *m, const char *prefix, int *has)
{
    txl_tensor t;
    int n = 0;
    *has = 0;
    for (; txl_model_tensor(m, n, &t) == 0; n++)
        *has |= strncmp(t.name, prefix, strlen(prefix)) == 0;
    return n;
}

static void print_json(const txl_model *m)
{
    static const char *keys[] = {"step", "tokens", "best_valid_loss", "valid_loss", "epoch",
                                 "elapsed_s"};
    int has_optim, has_mem;
    int n = tensors(m, "optim.m.", &has_optim);
    tensors(m, "state.mem.0", &has_mem);
    cJSON *o = cJSON_CreateObject();
    char *cj = txl_config_json(txl_model_config(m));
    cJSON_AddStringToObject(o, "path", txl_model_path(m));
    cJSON_AddNumberToObject(o, "params", (double)txl_model_params(m));
    cJSON_AddNumberToObject(o, "vocab", txl_model_vocab(m));
    cJSON_AddStringToObject(o, "weights", txl_model_quant(m));
    cJSON_AddNumberToObject(o, "weight_bytes", (double)txl_model_weight_bytes(m));
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        double d;
        if (!txl_model_meta(m, keys[k]))
            continue;
        if (meta_number(m, keys[k], &d))
            cJSON_AddNumberToObject(o, keys[k], d);
        else
            cJSON_AddNullToObject(o, keys[k]);
    }
    add_bpc(o, m, "best_valid_loss", "best_valid_bpc");
    add_bpc(o, m, "valid_loss", "valid_bpc");
    cJSON_AddBoolToObject(o, "resumable", has_optim);
    cJSON_AddBoolToObject(o, "has_memory", has_mem);
    cJSON_AddNumberToObject(o, "tensors", n);
    if (cj)
        cJSON_AddRawToObject(o, "config", cj);
    json_put_line(stdout, o);
    free(cj);
    cJSON_Delete(o);
}

/* A config value by key (the model's), for the text view. */
static const char *get(const txl_model *m, const char *key, char *buf, size_t cap)
{
    txl_config_get(txl_model_config(m), key, buf, cap);
    return buf;
}

static void print_text(const txl_model *m)
{
    char v[8][64];
    int has_optim;
    int n = tensors(m, "optim.m.", &has_optim);
    printf("checkpoint: %s\n", txl_model_path(m));
    printf("model: %s, %s layers, d_model %s, %s heads x %s, d_inner %s, %zu params\n",
           get(m, "model.pos_scheme", v[0], 64), get(m, "model.n_layer", v[1], 64),
           get(m, "model.d_model", v[2], 64), get(m, "model.n_head", v[3], 64),
           get(m, "model.d_head", v[4], 64), get(m, "model.d_inner", v[5], 64),
           txl_model_params(m));
    printf("lengths: tgt_len %s, mem_len %s, clamp_len %s; %s\n",
           get(m, "model.tgt_len", v[0], 64), get(m, "model.mem_len", v[1], 64),
           get(m, "model.clamp_len", v[2], 64),
           strcmp(get(m, "model.pre_lnorm", v[3], 64), "true") == 0 ? "pre-LN" : "post-LN");
    const char *an = get(m, "data.anchors", v[4], 64);
    int anchors = strcmp(an, "[]") != 0;
    const char *tk = get(m, "data.tokenizer", v[5], 64);
    int V = txl_model_vocab(m), bytes = strcmp(tk, "byte") == 0;
    char what[96];
    if (bytes)
        snprintf(what, sizeof what, "256 bytes");
    else if (anchors)
        snprintf(what, sizeof what, "%s tokens of the %s vocabulary",
                 txl_model_meta(m, "vocab_size") ? txl_model_meta(m, "vocab_size") : "?", tk);
    else
        snprintf(what, sizeof what, "%s vocabulary", tk);
    printf("vocabulary: %d tokens (%s%s%s)\n", V, what, anchors ? " + anchors " : "",
           anchors ? an : "");
    print_state(m);
    double mb = txl_model_weight_bytes(m) / 1048576.0, mb32 = 4.0 * txl_model_params(m) / 1048576.0;
    if (strcmp(txl_model_quant(m), "fp32") == 0)
        printf("weights: fp32, %.1f MB\n", mb);
    else
        printf("weights: %s, %.1f MB (%.2fx the %.1f MB of fp32; quantized: use the original to "
               "train)\n", txl_model_quant(m), mb, mb / mb32, mb32);
    printf("resumable: %s (%d tensors)\n", has_optim ? "yes" : "no", n);
    printf("config:\n");
    char *yaml = txl_config_yaml(txl_model_config(m));
    if (yaml)
        fputs(yaml, stdout);
    free(yaml);
}

int cmd_info(int argc, char **argv)
{
    info_args a;
    cli_pos pos;
    int rc = cli_parse(txl_command("info"), argc, argv, &a, &pos);
    if (rc >= 0)
        return rc;
    if (a.system)
        return info_system(a.json);
    if (pos.n == 0)
        return cli_usage("info", "missing the checkpoint (or --system)");
    txl_err e = {0};
    cli_globbed ck;
    if (cli_glob(&pos, &ck, &e))
        return cli_fail("info", &e);
    /* every checkpoint's header and config read before the first is printed: a bad one
     * stops the command before anything is printed; then one model at a time */
    rc = 0;
    for (int i = 0; i < ck.n && ck.n > 1 && rc == 0; i++) {
        txl_config *c = txl_config_of_checkpoint(ck.v[i], 0, &e);
        rc = c ? 0 : -1;
        txl_config_free(c);
    }
    for (int i = 0; i < ck.n && rc == 0; i++) {
        txl_model *m = txl_model_load(ck.v[i], &e);
        if (!m) {
            rc = -1;
            break;
        }
        if (txl_model_from_dir(m) && !a.json)
            fprintf(stderr, "txl info: %s is a run directory: using %s\n", ck.v[i],
                    txl_model_path(m));
        if (i && !a.json)
            putchar('\n');
        if (a.json)
            print_json(m);
        else
            print_text(m);
        txl_model_free(m);
        if (cli_stdout_flush())
            rc = 1;
    }
    cli_globbed_free(&ck);
    return rc < 0 ? cli_fail("info", &e) : 0; /* rc > 0: stdout failed, which main reports */
}

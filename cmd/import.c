/* import.c: `txl import WEIGHTS -c CONFIG -o OUT` — a txl checkpoint from a plain
 * safetensors file (plain or gzip'd) whose tensors carry txl's names (doc/design.md,
 * "Checkpoints"), e.g. the output of `txl export` or of tools/convert_official.py. The tensors are
 * validated against the model the config describes — every parameter present, F32, the right shape,
 * nothing else — and every problem is reported at once, by tensor name, before anything is
 * written. The checkpoint gets the resolved config in its metadata and step 0; it has no
 * optimiser state, so `txl train --init-from OUT` fine-tunes it and eval/sample/info read
 * it like any other. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/checkpoint.h"
#include "cli.h"
#include "cmds.h"

typedef struct {
    const char *config, *out;
    cli_strs set;
    int quiet;
} import_args;

#define O(f) offsetof(import_args, f)
static const cli_opt import_options[] = {
    {.short_name = "-c", .name = "--config", .type = CLI_FILE, .off = O(config),
     .flags = CLI_CONFIG, .metavar = "FILE", .needs = "a YAML config", .glob = "*.@(yaml|yml)",
     .help = "the model's YAML config (the model: section must match the weights; a bare "
             "name is also looked up in the installed configs)"},
    {.short_name = "-o", .name = "--output", .type = CLI_FILE, .off = O(out), .metavar = "FILE",
     .glob = "*.@(safetensors|safetensors.gz)", .help = "the checkpoint to write (required)"},
    {.name = "--set", .type = CLI_STR, .off = O(set), .flags = CLI_REPEAT | CLI_CFG_KEY,
     .cap = CLI_MAX_REPEAT, .metavar = "KEY=VALUE", .needs = "key.path=value",
     .help = "override one config key, e.g. --set model.mem_len=512 (repeatable)"},
    CLI_OPT_QUIET(O(quiet), "no message on stderr"),
};
#undef O

const cli_spec import_spec = {
    CLI_OPTS(import_options),
    .about = "Builds a txl checkpoint from plain safetensors weights named as in txl "
             "checkpoints (word_emb.weight, layers.0.attn.qkv.weight, ...; see 'txl export' "
             "and tools/convert_official.py). Every tensor the config's model needs must be "
             "present, F32 and of the right shape, and there must be no other tensors; all "
             "problems are listed by name (exit 2) and nothing is written. OUT holds the "
             "weights, the resolved config and step 0; it is gzip'd when its name ends in .gz, "
             "and written atomically; it may not be WEIGHTS or the config, nor a directory, a "
             "device or a FIFO.",
    .example = "example: txl import tiny.safetensors -c runs/tiny/config.yaml "
               "-o imported.safetensors.gz",
    .pos_max = 1,
    .pos_extra = "unexpected argument '%s' (one weights file at a time)",
    .pos_glob = "*.@(safetensors|safetensors.gz)",
};

/* Appends ", name" to a bounded list; counts what does not fit. */
typedef struct {
    char buf[600];
    size_t len;
    int n, left_out;
} name_list;

static void list_add(name_list *l, const char *fmt, const char *name, const char *detail)
{
    char item[300];
    snprintf(item, sizeof item, fmt, name, detail);
    size_t n = strlen(item);
    l->n++;
    if (l->len + n + 2 >= sizeof l->buf - 16) {
        l->left_out++;
        return;
    }
    l->len += (size_t)snprintf(l->buf + l->len, sizeof l->buf - l->len, "%s%s",
                               l->len ? ", " : "", item);
}

static void fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && o < cap - 24; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    snprintf(buf + o, cap - o, "]");
}

/* Every parameter of mdl present in f with dtype F32 and its shape; no other tensors.
 * All problems go into one message. */
static int check_tensors(const model *mdl, const st_file *f, const char *cfg_path, txl_err *e)
{
    name_list missing = {0}, wrong = {0}, extra = {0};
    for (int i = 0; i < mdl->n_params; i++) {
        const param_entry *p = &mdl->table[i];
        const st_tensor *t = st_find(f, p->name);
        if (!t) {
            list_add(&missing, "%s%s", p->name, "");
            continue;
        }
        int64_t want[2] = {p->shape[0], p->shape[1]};
        int ok = t->ndim == p->ndim && t->shape[0] == want[0] &&
                 (p->ndim == 1 || t->shape[1] == want[1]);
        char got[96], exp[64], detail[200];
        fmt_shape(got, sizeof got, t->ndim, t->shape);
        fmt_shape(exp, sizeof exp, p->ndim, want);
        if (t->dtype != ST_F32) {
            snprintf(detail, sizeof detail, " (dtype %s, expected F32)", st_dtype_name(t->dtype));
            list_add(&wrong, "%s%s", p->name, detail);
        } else if (!ok) {
            snprintf(detail, sizeof detail, " (shape %s, expected %s)", got, exp);
            list_add(&wrong, "%s%s", p->name, detail);
        }
    }
    int state = 0;
    for (int i = 0; i < f->n; i++)
        if (!model_find_param(mdl, f->t[i].name)) {
            list_add(&extra, "%s%s", f->t[i].name, "");
            state |= strncmp(f->t[i].name, "optim.", 6) == 0 ||
                     strncmp(f->t[i].name, "state.", 6) == 0;
        }
    if (!missing.n && !wrong.n && !extra.n)
        return 0;
    char msg[1000];
    size_t o = (size_t)snprintf(msg, sizeof msg, "%s does not fit the %s model of %s:", f->path,
                                pos_scheme_name(mdl->cfg.pos), cfg_path);
    const name_list *ls[3] = {&missing, &wrong, &extra};
    const char *what[3] = {"missing tensor", "wrong tensor", "unexpected tensor"};
    for (int k = 0; k < 3 && o < sizeof msg; k++) {
        if (!ls[k]->n)
            continue;
        char more[40] = "";
        if (ls[k]->left_out)
            snprintf(more, sizeof more, " and %d more", ls[k]->left_out);
        o += (size_t)snprintf(msg + o, sizeof msg - o, " %s%s: %s%s;", what[k],
                              ls[k]->n > 1 ? "s" : "", ls[k]->buf, more);
    }
    if (o < sizeof msg)
        snprintf(msg + o, sizeof msg - o, " (%s)", state
                 ? "optim.* and state.* are the training state of a txl checkpoint: "
                   "'txl export' writes its weights alone"
                 : "doc/design.md (Checkpoints) lists the names and shapes; an unexpected tensor "
                   "often means another model config, e.g. pos_scheme or untie_r");
    return err_set(e, ERR_INPUT, "%s", msg);
}

/* The config the weights belong to: the YAML file, the --set overrides, validated. */
static int load_config(run_config *cfg, const import_args *a, txl_err *e)
{
    cfg_defaults(cfg);
    if (cfg_load_yaml(cfg, a->config, e))
        return -1;
    for (int i = 0; i < a->set.n; i++)
        if (cfg_set(cfg, a->set.v[i], e))
            return -1;
    return cfg_validate(cfg, a->config, e);
}

/* Every weight is finite; else ERR_INPUT naming the tensor holding the first that is not. */
static int check_finite(const model *mdl, const char *in, txl_err *e)
{
    for (size_t i = 0; i < mdl->n_floats; i++)
        if (!isfinite(mdl->w[i])) {
            const char *nm = "?";
            for (int k = 0; k < mdl->n_params; k++)
                if (i >= mdl->table[k].offset && i < mdl->table[k].offset + mdl->table[k].numel)
                    nm = mdl->table[k].name;
            return err_set(e, ERR_INPUT, "%s: tensor '%s' holds a non-finite value (%g)", in, nm,
                           mdl->w[i]);
        }
    return 0;
}

/* The checkpoint: the weights, the resolved config and step 0. */
static int write_imported(const model *mdl, const run_config *cfg, const char *in,
                          const char *out, txl_err *e)
{
    char *cfg_yaml = cfg_to_yaml(cfg);
    if (!cfg_yaml)
        return err_set(e, ERR_RUNTIME, "out of memory");
    char params[32];
    snprintf(params, sizeof params, "%zu", mdl->n_weights);
    const char *meta[] = {
        "format", "txl/1",
        "config", cfg_yaml,
        "step", "0",
        "tokens", "0",
        "best_valid_loss", "inf",
        "params", params,
        "imported_from", in,
        NULL,
    };
    size_t n = strlen(out);
    int gz = n > 3 && strcmp(out + n - 3, ".gz") == 0;
    int rc = ckpt_save(out, mdl, NULL, NULL, NULL, meta, gz ? 6 : 0, e);
    free(cfg_yaml);
    return rc;
}

int cmd_import(int argc, char **argv)
{
    import_args a;
    cli_pos pos;
    int rc = cli_parse(txl_command("import"), argc, argv, &a, &pos);
    if (rc >= 0)
        return rc;
    const char *in = pos.n ? pos.v[0] : NULL;
    if (!in)
        return cli_usage("import", "missing the weights file (WEIGHTS.safetensors[.gz])");
    if (!a.config)
        return cli_usage("import", "missing -c CONFIG.yaml (the model the weights belong to)");
    if (!a.out)
        return cli_usage("import", "missing -o OUT.safetensors.gz");

    run_config cfg;
    txl_err e = {0};
    char cfg_path[CFG_PATH_MAX];
    if (cli_config_path(a.config, "import", a.quiet, cfg_path, sizeof cfg_path, &e))
        return cli_fail("import", &e);
    a.config = cfg_path;
    const char *inputs[] = {in, cfg_path};
    if (cli_check_output("-o", a.out, inputs, 2, &e))
        return cli_fail("import", &e);
    if (load_config(&cfg, &a, &e))
        return cli_fail("import", &e);
    st_file f;
    model mdl;
    memset(&mdl, 0, sizeof mdl);
    if (st_read(&f, in, &e))
        return cli_fail("import", &e);
    rc = model_init(&mdl, &cfg.model, &e) || check_tensors(&mdl, &f, a.config, &e) ||
         ckpt_load_weights(&mdl, &f, &e) || check_finite(&mdl, in, &e) ||
         write_imported(&mdl, &cfg, in, a.out, &e);
    size_t np = mdl.n_weights;
    int nt = f.n;
    model_free(&mdl);
    st_free(&f);
    if (rc)
        return cli_fail("import", &e);
    if (!a.quiet)
        fprintf(stderr, "txl import: %s -> %s (%d tensors, %zu params, config %s, step 0)\n", in,
                a.out, nt, np, a.config);
    return 0;
}

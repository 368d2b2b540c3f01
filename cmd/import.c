/* import.c: `txl import WEIGHTS -c CONFIG -o OUT` — a txl checkpoint from a plain
 * safetensors file (plain or gzip'd) whose tensors carry txl's names (DESIGN.md §5), e.g.
 * the output of `txl export` or of tools/convert_official.py. The tensors are validated
 * against the model the config describes — every parameter present, F32, the right shape,
 * nothing else — and every problem is reported at once, by tensor name, before anything is
 * written. The checkpoint gets the resolved config in its metadata and step 0; it has no
 * optimiser state, so `txl train --init-from OUT` fine-tunes it and eval/sample/info read
 * it like any other. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/checkpoint.h"
#include "cli.h"
#include "cmds.h"

#define MAX_SETS 64

static const char *import_help =
    "usage: txl import WEIGHTS.safetensors[.gz] -c CONFIG.yaml -o OUT.safetensors[.gz]\n"
    "                  [--set key.path=value ...] [-q]\n"
    "\n"
    "Builds a txl checkpoint from plain safetensors weights named as in txl checkpoints\n"
    "(word_emb.weight, layers.0.attn.qkv.weight, ...; see 'txl export' and\n"
    "tools/convert_official.py). Every tensor the config's model needs must be present, F32 and\n"
    "of the right shape, and there must be no other tensors; all problems are listed by name\n"
    "(exit 2) and nothing is written. OUT holds the weights, the resolved config and step 0;\n"
    "it is gzip'd when its name ends in .gz, and written atomically.\n"
    "\n"
    "  -c, --config FILE   the model's YAML config (the model: section must match the weights)\n"
    "  -o, --output FILE   the checkpoint to write (required)\n"
    "  --set KEY=VALUE     override one config key, e.g. --set model.mem_len=512 (repeatable)\n"
    "  -q, --quiet         no message on stderr\n"
    "\n"
    "example: txl import weights.safetensors -c model.yaml -o imported.safetensors.gz\n";

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
                 : "DESIGN.md section 5 lists the names and shapes; an unexpected tensor "
                   "often means another model config, e.g. pos_scheme or untie_r");
    return err_set(e, ERR_INPUT, "%s", msg);
}

int cmd_import(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *cfg_path = NULL, *sets[MAX_SETS];
    int nsets = 0, quiet = 0;
    txl_err e = {0};
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r;
        if (cli_switch(argv[i], "-h") || cli_switch(argv[i], "--help")) {
            fputs(import_help, stdout);
            return 0;
        } else if (cli_switch(argv[i], "-q") || cli_switch(argv[i], "--quiet")) {
            quiet = 1;
        } else if ((r = cli_flag(argc, argv, &i, "-c", "--config", &v))) {
            if (r < 0)
                return cli_usage("import", "-c needs a YAML config");
            cfg_path = v;
        } else if ((r = cli_flag(argc, argv, &i, "-o", "--output", &v))) {
            if (r < 0)
                return cli_usage("import", "-o needs a file");
            out = v;
        } else if ((r = cli_flag(argc, argv, &i, NULL, "--set", &v))) {
            if (r < 0)
                return cli_usage("import", "--set needs key.path=value");
            if (nsets == MAX_SETS)
                return cli_usage("import", "at most %d --set options", MAX_SETS);
            sets[nsets++] = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage("import", "unknown option '%s'", argv[i]);
        } else if (!in) {
            in = argv[i];
        } else {
            return cli_usage("import", "unexpected argument '%s' (one weights file at a time)",
                             argv[i]);
        }
    }
    if (!in)
        return cli_usage("import", "missing the weights file (WEIGHTS.safetensors[.gz])");
    if (!cfg_path)
        return cli_usage("import", "missing -c CONFIG.yaml (the model the weights belong to)");
    if (!out)
        return cli_usage("import", "missing -o OUT.safetensors.gz");

    txl_config cfg;
    cfg_defaults(&cfg);
    if (cfg_load_yaml(&cfg, cfg_path, &e))
        return cli_fail("import", &e);
    for (int i = 0; i < nsets; i++)
        if (cfg_set(&cfg, sets[i], &e))
            return cli_fail("import", &e);
    if (cfg_validate(&cfg, cfg_path, &e))
        return cli_fail("import", &e);

    st_file f;
    model mdl;
    memset(&mdl, 0, sizeof mdl);
    if (st_read(&f, in, &e))
        return cli_fail("import", &e);
    int rc = 0;
    char *cfg_yaml = NULL;
    if (model_init(&mdl, &cfg.model, &e) || check_tensors(&mdl, &f, cfg_path, &e) ||
        ckpt_load_weights(&mdl, &f, &e)) {
        rc = -1;
        goto done;
    }
    for (size_t i = 0; i < mdl.n_floats; i++)
        if (!isfinite(mdl.w[i])) { /* name the tensor holding it */
            const char *nm = "?";
            for (int k = 0; k < mdl.n_params; k++)
                if (i >= mdl.table[k].offset && i < mdl.table[k].offset + mdl.table[k].numel)
                    nm = mdl.table[k].name;
            err_set(&e, ERR_INPUT, "%s: tensor '%s' holds a non-finite value (%g)", in, nm,
                    mdl.w[i]);
            rc = -1;
            goto done;
        }
    cfg_yaml = cfg_to_yaml(&cfg);
    if (!cfg_yaml) {
        err_set(&e, ERR_RUNTIME, "out of memory");
        rc = -1;
        goto done;
    }
    char params[32];
    snprintf(params, sizeof params, "%zu", mdl.n_weights);
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
    rc = ckpt_save(out, &mdl, NULL, NULL, NULL, meta, gz ? 6 : 0, &e);
done:
    free(cfg_yaml);
    size_t np = mdl.n_weights;
    int nt = f.n;
    model_free(&mdl);
    st_free(&f);
    if (rc)
        return cli_fail("import", &e);
    if (!quiet)
        fprintf(stderr, "txl import: %s -> %s (%d tensors, %zu params, config %s, step 0)\n", in,
                out, nt, np, cfg_path);
    return 0;
}

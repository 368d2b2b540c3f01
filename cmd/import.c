/* import.c: `txl import WEIGHTS -c CONFIG -o OUT` — a txl checkpoint from a plain
 * safetensors file (plain or gzip'd) whose tensors carry txl's names (doc/design.md,
 * "Checkpoints"), e.g. the output of `txl export` or of tools/convert_official.py. The tensors are
 * validated against the model the config describes — every parameter present, F32, the right shape,
 * nothing else — and every problem is reported at once, by tensor name, before anything is
 * written. The checkpoint gets the resolved config in its metadata and step 0; it has no
 * optimiser state, so `txl train --init-from OUT` fine-tunes it and eval/sample/info read
 * it like any other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

    txl_err e = {0};
    char cfg_path[TXL_PATH_MAX];
    if (cli_config_path(a.config, "import", a.quiet, cfg_path, sizeof cfg_path, &e))
        return cli_fail("import", &e);
    a.config = cfg_path;
    const char *inputs[] = {in, cfg_path};
    if (cli_check_output("-o", a.out, inputs, 2, &e))
        return cli_fail("import", &e);
    /* the config the weights belong to: the YAML file, the --set overrides, validated */
    txl_config *cfg = txl_config_load(a.config, &e);
    rc = cfg ? 0 : -1;
    for (int i = 0; !rc && i < a.set.n; i++)
        rc = txl_config_set(cfg, a.set.v[i], &e);
    txl_model *m = rc || txl_config_check(cfg, a.config, &e) ? NULL
                                                             : txl_model_import(in, cfg, &e);
    rc = !m || txl_model_save(m, a.out, &e) ? -1 : 0;
    size_t np = m ? txl_model_params(m) : 0;
    int nt = 0;
    txl_tensor t;
    while (m && txl_model_tensor(m, nt, &t) == 0)
        nt++;
    txl_model_free(m);
    txl_config_free(cfg);
    if (rc)
        return cli_fail("import", &e);
    if (!a.quiet)
        fprintf(stderr, "txl import: %s -> %s (%d tensors, %zu params, config %s, step 0)\n", in,
                a.out, nt, np, a.config);
    return 0;
}

/* export.c: `txl export CKPT -o OUT` — the weights of a checkpoint (no optimiser state, no
 * memory) as a standard safetensors file: plain unless OUT ends in .gz. The metadata (config,
 * step, metrics) is kept, so the result is still a txl checkpoint for eval/sample/info, and
 * any safetensors reader loads it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"

typedef struct {
    const char *out;
    int quiet;
} export_args;

#define O(f) offsetof(export_args, f)
static const cli_opt export_options[] = {
    {.short_name = "-o", .name = "--output", .type = CLI_FILE, .off = O(out), .metavar = "FILE",
     .glob = "*.@(safetensors|safetensors.gz)", .help = "the file to write (required)"},
    CLI_OPT_QUIET(O(quiet), "no message on stderr"),
};
#undef O

const cli_spec export_spec = {
    CLI_OPTS(export_options),
    .about = "Writes the model weights of CKPT (no Adam moments, no memory) with its metadata "
             "to OUT: plain safetensors, or gzip'd when OUT ends in .gz. The file is written "
             "atomically; OUT may not be CKPT itself, nor a directory, a device or a FIFO. "
             "'txl import' turns such weights (with a config) back into a "
             "checkpoint. CKPT may be a run directory: its best checkpoint (else last).",
    .example = "example: txl export runs/tiny/best.safetensors.gz -o tiny.safetensors",
    .pos_max = 1,
    .pos_extra = "unexpected argument '%s'",
    .pos_glob = "*.@(safetensors|safetensors.gz)",
};

int cmd_export(int argc, char **argv)
{
    export_args a;
    cli_pos pos;
    int rc = cli_parse(txl_command("export"), argc, argv, &a, &pos);
    if (rc >= 0)
        return rc;
    const char *ckpt = pos.n ? pos.v[0] : NULL, *out = a.out;
    txl_err e = {0};
    if (!ckpt || !out)
        return cli_usage("export", "%s", !ckpt ? "missing the checkpoint to export"
                                            : "missing -o OUT.safetensors[.gz]");
    txl_model *m = cli_model_to_write("export", ckpt, out, a.quiet, &e);
    if (!m)
        return cli_fail("export", &e);
    rc = txl_model_save(m, out, &e) ? -1 : 0;
    size_t params = txl_model_params(m);
    txl_model_free(m);
    if (rc)
        return cli_fail("export", &e);
    if (!a.quiet)
        fprintf(stderr, "txl export: %s -> %s (%zu params)\n", ckpt, out, params);
    return 0;
}

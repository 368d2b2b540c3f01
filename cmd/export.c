/* export.c: `txl export CKPT -o OUT` — the weights of a checkpoint (no optimiser state, no
 * memory) as a standard safetensors file: plain unless OUT ends in .gz. The metadata (config,
 * step, metrics) is kept, so the result is still a txl checkpoint for eval/sample/info, and
 * any safetensors reader loads it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/checkpoint.h"
#include "cli.h"
#include "cmds.h"

static const char *export_help =
    "usage: txl export CKPT -o OUT.safetensors[.gz] [-q]\n"
    "\n"
    "Writes the model weights of CKPT (no Adam moments, no memory) with its metadata to OUT:\n"
    "plain safetensors, or gzip'd when OUT ends in .gz. The file is written atomically.\n"
    "'txl import' turns such weights (with a config) back into a checkpoint.\n"
    "\n"
    "  -o, --output FILE   the file to write (required)\n"
    "  -q, --quiet         no message on stderr\n"
    "\n"
    "example: txl export runs/tiny/best.safetensors.gz -o tiny.safetensors\n";

int cmd_export(int argc, char **argv)
{
    const char *ckpt = NULL, *out = NULL;
    int quiet = 0;
    txl_err e = {0};
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r;
        if (cli_switch(argv[i], "-h") || cli_switch(argv[i], "--help")) {
            fputs(export_help, stdout);
            return 0;
        } else if (cli_switch(argv[i], "-q") || cli_switch(argv[i], "--quiet")) {
            quiet = 1;
        } else if ((r = cli_flag(argc, argv, &i, "-o", "--output", &v))) {
            if (r < 0)
                return cli_usage("export", "-o needs a file");
            out = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage("export", "unknown option '%s'", argv[i]);
        } else if (!ckpt) {
            ckpt = argv[i];
        } else {
            return cli_usage("export", "unexpected argument '%s'", argv[i]);
        }
    }
    if (!ckpt || !out)
        return cli_usage("export", "%s", !ckpt ? "missing the checkpoint to export"
                                            : "missing -o OUT.safetensors[.gz]");
    st_file f;
    txl_config cfg;
    model mdl;
    if (cli_load_checkpoint(ckpt, &f, &cfg, &mdl, &e))
        return cli_fail("export", &e);
    /* keep every metadata entry of the source */
    const char **meta = calloc((size_t)f.n_meta * 2 + 1, sizeof *meta);
    int rc = 0;
    if (!meta) {
        err_set(&e, ERR_RUNTIME, "out of memory");
        rc = -1;
    } else {
        for (int i = 0; i < f.n_meta; i++) {
            meta[2 * i] = f.meta_keys[i];
            meta[2 * i + 1] = f.meta_vals[i];
        }
        size_t n = strlen(out);
        int gz = n > 3 && strcmp(out + n - 3, ".gz") == 0;
        rc = ckpt_save(out, &mdl, NULL, NULL, NULL, meta, gz ? 6 : 0, &e);
    }
    size_t params = mdl.n_weights;
    free(meta);
    model_free(&mdl);
    st_free(&f);
    if (rc)
        return cli_fail("export", &e);
    if (!quiet)
        fprintf(stderr, "txl export: %s -> %s (%zu params)\n", ckpt, out, params);
    return 0;
}

/* quantize.c: `txl quantize CKPT --type bf16|q8 -o OUT` — a checkpoint whose matrices are
 * stored in 16 or 8 bits (doc/design.md, "Quantized checkpoints"), for faster sampling:
 * one token reads every weight once. The metadata (config, step, metrics) and the
 * vocabulary are kept, the optimiser state and the memory are not (as export). OUT is
 * written as export writes: atomically, never over CKPT (or the run's other checkpoint). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"

typedef struct {
    const char *out;
    int type;
    int quiet;
} quantize_args;

static const char *const quant_types[] = {"bf16", "q8", NULL};

#define O(f) offsetof(quantize_args, f)
static const cli_opt quantize_options[] = {
    {.name = "--type", .type = CLI_CHOICE, .off = O(type), .choices = quant_types,
     .metavar = "T", .def = -1,
     .help = "bf16: the linear layers, the embedding, the output layer (and xl's position "
             "projection) in bfloat16 (half the bytes); q8: the linear layers in blocks of 32 "
             "int8 values with one bf16 scale each (0.27x their bytes), the others bf16 "
             "(required)"},
    {.short_name = "-o", .name = "--output", .type = CLI_FILE, .off = O(out), .metavar = "FILE",
     .glob = "*.@(safetensors|safetensors.gz)", .help = "the file to write (required)"},
    CLI_OPT_QUIET(O(quiet), "no message on stderr"),
};
#undef O

const cli_spec quantize_spec = {
    CLI_OPTS(quantize_options),
    .about = "Writes CKPT with its matrices quantized (BF16, or I8 with a BF16 scale per block "
             "of 32 in NAME_scale: safetensors' own dtypes), the other tensors fp32, and its "
             "metadata, to OUT: plain safetensors, or gzip'd when OUT ends in .gz. eval, probe "
             "and sample read it (sample faster: it reads fewer bytes a token); train refuses "
             "it, --init-from reads its weights dequantized. The file is written atomically; "
             "OUT may not be CKPT itself, nor a directory, a device or a FIFO. CKPT may be a "
             "run directory: its best checkpoint (else last).",
    .example = "example: txl quantize runs/tiny --type q8 -o tiny-q8.safetensors",
    .pos_max = 1,
    .pos_extra = "unexpected argument '%s'",
    .pos_glob = "*.@(safetensors|safetensors.gz)",
};

int cmd_quantize(int argc, char **argv)
{
    quantize_args a;
    cli_pos pos;
    int rc = cli_parse(txl_command("quantize"), argc, argv, &a, &pos);
    if (rc >= 0)
        return rc;
    const char *ckpt = pos.n ? pos.v[0] : NULL, *out = a.out;
    txl_err e = {0};
    if (!ckpt || !out || a.type < 0)
        return cli_usage("quantize", "%s", !ckpt ? "missing the checkpoint to quantize"
                                           : !out ? "missing -o OUT.safetensors[.gz]"
                                                  : "missing --type bf16|q8");
    txl_model *m = cli_model_to_write("quantize", ckpt, out, a.quiet, &e);
    if (!m)
        return cli_fail("quantize", &e);
    const char *was = txl_model_quant(m);
    if (strcmp(was, "fp32") != 0 && !a.quiet)
        fprintf(stderr, "txl quantize: %s is already %s: quantizing its dequantized weights\n",
                txl_model_path(m), was);
    double before = (double)txl_model_weight_bytes(m);
    rc = txl_model_quantize(m, quant_types[a.type], &e) || txl_model_save(m, out, &e) ? -1 : 0;
    double after = (double)txl_model_weight_bytes(m);
    txl_model_free(m);
    if (rc)
        return cli_fail("quantize", &e);
    if (!a.quiet)
        fprintf(stderr, "txl quantize: %s -> %s (%s: weights %.1f MB, %.2fx the %.1f MB before)\n",
                ckpt, out, quant_types[a.type], after / 1048576.0, after / before,
                before / 1048576.0);
    return 0;
}

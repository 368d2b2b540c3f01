/* cmds.c: the table of subcommands (see cmds.h) and `txl help`. The synopses are the
 * README's synopsis block and the man page's SYNOPSIS: tests/e2e/cli_docs.sh checks that
 * all of them name exactly the options of each command's table. */
#include "cmds.h"

#include <string.h>

const cli_cmd txl_commands[] = {
    {"train", cmd_train, "train a model from a YAML config (or resume a run)",
     "-c CONFIG.yaml [--set key.path=value ...] [--resume CKPT|RUN_DIR | --init-from CKPT] "
     "[--steps N] [--print-config] [--dry-run] [--force] [-q]",
     &train_spec, 0},
    {"eval", cmd_eval, "evaluate a checkpoint (bits per byte, perplexity, length sweeps)",
     "CKPT... [--data FILE | --split valid|test|train] [--tgt-len N] [--mem-len N] "
     "[--clamp-len N] [--batch N] [--warmup] [--same-length] [--max-tokens N] "
     "[--sweep 1,2,4,8 [--sweep-mode memory|window|both]] [--term-stats [N]] [--json] "
     "[--precision fp32|bf16|auto] [--threads N] [-q]",
     &eval_spec, 0},
    {"sample", cmd_sample, "generate text from a checkpoint",
     "CKPT [--prompt TEXT | --prompt-file F | --prompts FILE] [-n N] [--temperature T] "
     "[--top-k K] [--top-p P] [--seed S] [--num-samples N [--batch B] | -i] [--stop STRING] "
     "[--json] [--mem-len N] [--echo] [--show-anchors] [--stats] [--cache fp32|bf16|q8] "
     "[--precision fp32|bf16|auto] [--threads N] [-q]",
     &sample_spec, 0},
    {"probe", cmd_probe, "long-context probes: needle in a haystack, recall by distance, "
     "translation invariance",
     "needle|recall|shift CKPT [--data FILE | --split valid|test|train] [--trials N] "
     "[--lengths LIST] [--depths LIST] [--distances LIST] [--string-len N] [--offsets LIST] "
     "[--max-tokens N] [--mode memory|window|both] [--tgt-len N] [--mem-len N] [--seed S] "
     "[--json] [--precision fp32|bf16|auto] [--threads N] [-q]",
     &probe_spec, 0},
    {"info", cmd_info, "a checkpoint's config, size and metrics, or the machine",
     "CKPT... [--json]\n--system [--json]", &info_spec, 0},
    {"plot", cmd_plot, "learning curves, extrapolation curves, probes or score terms as PNG or "
     "SVG (gnuplot)",
     "RUN_DIR... -o OUT.png|OUT.svg [--title TEXT] [--size W,H] [--logx | --no-logx] "
     "[--ymax Y] [--script] [-q]\n"
     "--sweep SWEEP.jsonl... -o OUT.png|OUT.svg [the options above]\n"
     "--probe PROBE.jsonl... -o OUT.png|OUT.svg [--gain] [the options above]\n"
     "--terms RUN_DIR -o OUT.png|OUT.svg [the options above]",
     &plot_spec, 0},
    {"export", cmd_export, "a checkpoint's weights as standard safetensors",
     "CKPT -o OUT.safetensors[.gz] [-q]", &export_spec, 0},
    {"quantize", cmd_quantize, "a checkpoint with its matrices in bf16 or 8 bits, for sampling",
     "CKPT --type bf16|q8 -o OUT.safetensors[.gz] [-q]", &quantize_spec, 0},
    {"import", cmd_import, "a checkpoint from safetensors weights and a config",
     "WEIGHTS.safetensors[.gz] -c CONFIG.yaml -o OUT.safetensors[.gz] "
     "[--set key.path=value ...] [-q]",
     &import_spec, 0},
    {"vocab", cmd_vocab, "vocabularies (word, bpe, GPT-2's) and token files",
     "build --tokenizer word|bpe [--size N] [--min-freq N] CORPUS... -o FILE [-q]\n"
     "import-gpt2 ENCODER.json VOCAB.bpe -o FILE [-q]\n"
     "encode VOCAB [FILE|-] [--binary -o OUT] [-q]\n"
     "decode VOCAB [FILE|-]\n"
     "info VOCAB [--data FILE] [--json]",
     &vocab_spec, 0},
    {"help", cmd_help, "the commands, or every option of one", "[COMMAND]", NULL, 0},
    {"__complete", cmd_complete, "completions for contrib/txl.bash", "WORD...", NULL, 1},
};
const int n_commands = (int)(sizeof txl_commands / sizeof *txl_commands);

const cli_cmd *txl_command(const char *name)
{
    for (int i = 0; i < n_commands; i++)
        if (strcmp(txl_commands[i].name, name) == 0)
            return &txl_commands[i];
    return NULL;
}

void txl_usage(FILE *f)
{
    int w = 0;
    for (int i = 0; i < n_commands; i++)
        if (!txl_commands[i].hidden && (int)strlen(txl_commands[i].name) > w)
            w = (int)strlen(txl_commands[i].name);
    fputs("txl " TXL_VERSION ": train, evaluate and sample Transformer-XL language models\n"
          "\n"
          "usage: txl COMMAND [options]\n"
          "\n"
          "commands:\n", f);
    for (int i = 0; i < n_commands; i++)
        if (!txl_commands[i].hidden)
            fprintf(f, "  %-*s  %s\n", w, txl_commands[i].name, txl_commands[i].summary);
    fputs("\nsynopsis:\n", f);
    for (int i = 0; i < n_commands; i++)
        if (!txl_commands[i].hidden) {
            fputs("  ", f);
            cli_print_synopsis(f, &txl_commands[i], 2, w);
        }
    fputs("\nexamples (a first run, in a clone of the repository, where txl is ./txl):\n"
          "  txl train -c configs/tiny.yaml --set data.train=tests/data/tinyshakespeare.txt.gz\n"
          "  txl sample runs/tiny --prompt 'ROMEO:' -n 200 --echo\n", f);
    fputs("\n'txl help COMMAND' or 'txl COMMAND --help' shows every option; 'txl --version'; "
          "man txl.\n"
          "Results go to stdout, progress and messages to stderr.\n"
          "Exit codes: 0 ok, 1 runtime failure, 2 usage/config/input error.\n", f);
}

/* txl help [COMMAND] */
int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        txl_usage(stdout);
        return 0;
    }
    const cli_cmd *c = txl_command(argv[1]);
    if (!c) {
        fprintf(stderr, "txl help: unknown command '%s'\n", argv[1]);
        return 2;
    }
    cli_print_help(stdout, c);
    return 0;
}

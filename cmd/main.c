/* main.c: `txl` entry point: dispatches to one file per subcommand (cmds.h). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"

static const char *usage =
    "txl " TXL_VERSION ": train, evaluate and sample Transformer-XL language models\n"
    "\n"
    "usage: txl COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  train   -c CONFIG.yaml [--set k=v ...] [--resume CKPT | --init-from CKPT]\n"
    "  eval    CKPT [--data FILE] [--tgt-len N] [--mem-len N] [--sweep 1,2,4,8] [--json]\n"
    "  sample  CKPT [--prompt TEXT] [-n TOKENS] [--temperature T] [--top-k K] [--top-p P]\n"
    "  info    CKPT [--json] | --system\n"
    "  help    [COMMAND]\n"
    "\n"
    "'txl help COMMAND' or 'txl COMMAND --help' shows every option.\n"
    "Exit codes: 0 ok, 1 runtime failure, 2 usage/config/input error.\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("txl %s\n", TXL_VERSION);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        if (argc < 3) {
            fputs(usage, stdout);
            return 0;
        }
        char help[] = "--help";
        char *hargv[] = {argv[2], help, NULL};
        cmd = argv[2];
        if (strcmp(cmd, "train") == 0) return cmd_train(2, hargv);
        if (strcmp(cmd, "eval") == 0) return cmd_eval(2, hargv);
        if (strcmp(cmd, "sample") == 0) return cmd_sample(2, hargv);
        if (strcmp(cmd, "info") == 0) return cmd_info(2, hargv);
        fprintf(stderr, "txl help: unknown command '%s'\n", cmd);
        return 2;
    }
    if (strcmp(cmd, "train") == 0)
        return cmd_train(argc - 1, argv + 1);
    if (strcmp(cmd, "eval") == 0)
        return cmd_eval(argc - 1, argv + 1);
    if (strcmp(cmd, "sample") == 0)
        return cmd_sample(argc - 1, argv + 1);
    if (strcmp(cmd, "info") == 0)
        return cmd_info(argc - 1, argv + 1);
    fprintf(stderr, "txl: unknown command '%s'\n\n%s", cmd, usage);
    return 2;
}

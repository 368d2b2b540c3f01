/* cmds.h: the subcommands. One table (cmds.c) lists them: name, function, one-line summary
 * and synopsis; main.c dispatches from it, `txl help` prints it, and each command's options
 * (its cli_spec, in its own file) give `txl CMD --help` and the completion. Each function
 * returns the process exit code. */
#ifndef TXL_CMDS_H
#define TXL_CMDS_H

#include <stdio.h>

#include "cli.h"

int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_vocab(int argc, char **argv);
int cmd_help(int argc, char **argv);
int cmd_complete(int argc, char **argv);

/* Each command's options, defined next to the command. */
extern const cli_spec train_spec, eval_spec, sample_spec, info_spec, export_spec,
    quantize_spec, import_spec, plot_spec, probe_spec, vocab_spec;

/* The table, in the order `txl help` lists it; n_commands rows. */
extern const cli_cmd txl_commands[];
extern const int n_commands;
/* The row of a command, or NULL. */
const cli_cmd *txl_command(const char *name);
/* `txl help` without a command: the commands, their synopses, exit codes. */
void txl_usage(FILE *f);

#endif

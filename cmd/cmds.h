/* cmds.h: the subcommands main.c dispatches to; each returns the process exit code. */
#ifndef TXL_CMDS_H
#define TXL_CMDS_H

int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_plot(int argc, char **argv);

#endif

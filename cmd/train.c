/* train.c: `txl train` — flags, the config (a YAML file and --set, or a resumed checkpoint's
 * own), and a run through include/txl.h's trainer, whose events it prints: the banner and
 * notes on stderr, the progress line (redrawn on a terminal), the result line on stdout. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"

#define MAX_SETS 64

/* SIGINT, SIGTERM and SIGHUP (a closed terminal) finish the step, write last and end the
 * run with 128 + the signal. */
static void on_signal(int sig) { txl_trainer_stop(sig); }

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

typedef struct {
    const char *config, *resume, *init_from;
    cli_strs set;
    long steps;
    int print_config, dry_run, force, quiet;
} train_args;

#define O(f) offsetof(train_args, f)
static const cli_opt train_options[] = {
    {.short_name = "-c", .name = "--config", .type = CLI_FILE, .off = O(config),
     .flags = CLI_ONCE | CLI_CONFIG, .metavar = "FILE", .glob = "*.@(yaml|yml)",
     .help = "YAML config (every key: man txl; examples in configs/); a lone FILE.yaml "
             "argument works too. A bare name (tiny.yaml, tiny) not in the working directory "
             "is taken from the installed configs"},
    {.name = "--set", .type = CLI_STR, .off = O(set), .flags = CLI_REPEAT | CLI_CFG_KEY,
     .cap = MAX_SETS, .metavar = "KEY=VALUE", .needs = "key.path=value",
     .help = "override one key, e.g. --set model.d_model=512 (repeatable)"},
    {.name = "--resume", .type = CLI_FILE, .off = O(resume), .metavar = "CKPT|RUN_DIR",
     .needs = "a checkpoint or run directory", .excludes = "--init-from",
     .glob = "*.@(safetensors|safetensors.gz)",
     .help = "continue a run exactly (weights, Adam, step, data, memory) from a checkpoint "
             "or a run directory's last; without -c the checkpoint's config is used"},
    {.name = "--init-from", .type = CLI_FILE, .off = O(init_from), .metavar = "CKPT",
     .needs = "a checkpoint path", .glob = "*.@(safetensors|safetensors.gz)",
     .help = "start a new run from a checkpoint's weights (fresh optimiser; a run "
             "directory: its best, else last)"},
    {.name = "--steps", .type = CLI_INT, .off = O(steps), .lo = 1, .hi = LONG_MAX, .def = 0,
     .metavar = "N", .def_doc = "",
     .help = "stop after N steps in this invocation (writes last; the schedule still follows "
             "train.max_steps): for time-sliced jobs"},
    {.name = "--print-config", .type = CLI_SWITCH, .off = O(print_config),
     .help = "print the resolved config as YAML and exit"},
    {.name = "--dry-run", .type = CLI_SWITCH, .off = O(dry_run),
     .help = "check the config, the data, out_dir and any --resume/--init-from checkpoint, "
             "print the plan (parameters, memory estimate, tokens, steps per epoch) on stderr "
             "and as JSON on stdout, and exit without writing anything"},
    {.name = "--force", .type = CLI_SWITCH, .off = O(force),
     .help = "start a new run in an out_dir that already holds one; with --resume, continue "
             "into an out_dir that holds another checkpoint (overwriting it)"},
    CLI_OPT_QUIET(O(quiet), "no progress on stderr"),
};
#undef O

const cli_spec train_spec = {
    CLI_OPTS(train_options),
    .about = "Trains a Transformer-XL on a byte-level corpus. Writes into train.out_dir: "
             "config.yaml, log.jsonl, last.safetensors.gz (with optimiser state and memory), "
             "best.safetensors.gz and, at the end, summary.json (the result line of stdout).",
    .notes = "SIGINT/SIGTERM/SIGHUP finish the current step, write last, and exit 130/143/129.",
    .example = "examples: txl train -c configs/tiny_rope.yaml "
               "--set data.train=tests/data/tinyshakespeare.txt.gz --set train.max_steps=500\n"
               "          txl train --resume runs/tiny --set train.max_steps=3000 "
               "--set train.term_stats_interval=250\n"
               "          txl train -c configs/enwik8_base.yaml "
               "--set data.train=tests/data/tinyshakespeare.txt.gz --dry-run",
    .pos_max = 0,
    .pos_extra = "unknown option '%s'",
    .pos_as = "--config", /* `txl train CONFIG.yaml` */
    .pos_glob = "*.@(yaml|yml)",
};

/* The run's events on stderr and stdout (log.jsonl, the library's sink, has them all). On a
 * terminal the progress line is redrawn in place; a note or a validation line takes its
 * place, and a warning or the end keeps it. Events without a text (terms, checkpoints) are
 * the log's alone. */
typedef struct {
    int quiet, tty;
    int line_open; /* a progress line without its newline is on the terminal */
} printer;

static void on_event(void *ctx, const txl_event *ev)
{
    printer *p = ctx;
    int show = ev->kind == TXL_EV_WARN || ev->kind == TXL_EV_END || !p->quiet;
    if (!show || (!ev->text && ev->kind != TXL_EV_END))
        return;
    if (p->line_open && ev->kind != TXL_EV_STEP) {
        fputs(ev->kind == TXL_EV_WARN || ev->kind == TXL_EV_END ? "\n" : "\r\033[K", stderr);
        p->line_open = 0;
    }
    switch (ev->kind) {
    case TXL_EV_STEP:
        fprintf(stderr, "%s%s%s", p->tty ? "\r\033[K" : "", ev->text, p->tty ? "" : "\n");
        fflush(stderr);
        p->line_open = p->tty;
        break;
    case TXL_EV_END:
        fprintf(stdout, "%s\n", ev->json);
        cli_stdout_flush(); /* a failure makes the exit code 1 (main) */
        break;
    case TXL_EV_START:
        if (ev->text)
            fprintf(stderr, "%s\n", ev->text);
        break;
    case TXL_EV_EVAL:
        fprintf(stderr, "%s\n", ev->text);
        break;
    case TXL_EV_NOTE:
    case TXL_EV_WARN:
        fprintf(stderr, "txl train: %s\n", ev->text);
        break;
    case TXL_EV_CHECKPOINT:
    case TXL_EV_TERMS:
        break;
    }
}

/* Whether an override names train.out_dir (a resumed run then writes there). */
static int sets_out_dir(const char *const *sets, int n)
{
    char key[96];
    for (int i = 0; i < n; i++)
        if (txl_config_assignment_key(sets[i], key, sizeof key) == 0 &&
            strcmp(key, "train.out_dir") == 0)
            return 1;
    return 0;
}

int cmd_train(int argc, char **argv)
{
    train_args a;
    cli_pos pos;
    int parsed = cli_parse(txl_command("train"), argc, argv, &a, &pos);
    if (parsed >= 0)
        return parsed;
    const char *cfg_path = a.config, *resume = a.resume;
    txl_err e = {0};
    if (!cfg_path && !resume)
        return cli_usage("train", "missing -c CONFIG.yaml");
    char cfg_buf[TXL_PATH_MAX]; /* a bare name: from here or the installed configs */
    if (cfg_path && cli_config_path(cfg_path, "train", a.quiet, cfg_buf, sizeof cfg_buf, &e))
        return cli_fail("train", &e);
    /* the config: the YAML file, or (--resume alone) the checkpoint's own; then --set */
    txl_config *c = cfg_path ? txl_config_load(cfg_buf, &e) : txl_config_of_checkpoint(resume, 1, &e);
    int rc = c ? 0 : -1;
    for (int i = 0; rc == 0 && i < a.set.n; i++)
        rc = txl_config_set(c, a.set.v[i], &e);
    printer pr = {.quiet = a.quiet, .tty = cli_isatty_stderr()};
    const char *const *args;
    int nargs = cli_cmdline(&args);
    txl_train_opts o = {.resume = resume, .init_from = a.init_from,
                        .explicit_out_dir = cfg_path || sets_out_dir(a.set.v, a.set.n),
                        .steps = a.steps, .force = a.force, .progress = pr.tty && !a.quiet,
                        .argc = nargs, .argv = args, .on_event = on_event, .ctx = &pr};
    if (rc == 0 && a.print_config) {
        char *yaml = txl_train_config(c, &o, &e) ? NULL : txl_config_yaml(c);
        rc = yaml ? 0 : -1;
        if (yaml)
            fputs(yaml, stdout);
        free(yaml);
        txl_config_free(c);
        return rc ? cli_fail("train", &e) : 0;
    }
    if (rc == 0 && a.dry_run) {
        char *plan = txl_train_plan(c, &o, &e);
        if (plan)
            printf("%s\n", plan);
        rc = plan || e.kind == 0 ? 0 : -1; /* ranks but 0 print nothing */
        free(plan);
        txl_config_free(c);
        return rc ? cli_fail("train", &e) : 0;
    }
    txl_trainer *t = rc == 0 ? txl_trainer_new(c, &o, &e) : NULL;
    txl_config_free(c);
    if (!t)
        return cli_fail("train", &e);
    catch_signals();
    rc = txl_trainer_run(t, &e);
    txl_trainer_free(t);
    if (pr.line_open) /* the run failed after a progress line */
        fputc('\n', stderr);
    return rc < 0 ? cli_fail("train", &e) : rc;
}

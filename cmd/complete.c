/* complete.c: `txl __complete`, the hidden command behind contrib/txl.bash. It completes
 * from the command table and the option tables (and the config keys for --set), so the
 * completion knows exactly the commands and flags the parser does.
 *
 *   txl __complete -- WORD...   WORDs are the command line after `txl` up to the cursor, the
 *                               last one the word being completed (may be empty). Prints
 *                               the candidates (whole words) one per line, and directives:
 *                                 @files GLOB  file names matching GLOB (bash extglob) and
 *                                              directories, for the part of the word after
 *                                 @prefix P    (e.g. "--config=", "data.train=")
 *                                 @dirs        directory names only
 *                                 @nospace     no space after the word ("model.n_layer=")
 *                               A config (-c) also gets the names of the installed configs
 *                               (cli_config_dirs), which txl finds by bare name.
 *   txl __complete --commands   the commands, one per line
 *   txl __complete --options CMD  one line per option of CMD: its names ("-c --config")
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"

/* Prints prefix+word when it extends cur. */
static void offer(const char *prefix, const char *word, const char *cur)
{
    char w[1400];
    snprintf(w, sizeof w, "%s%s", prefix, word);
    if (strncmp(w, cur, strlen(cur)) == 0)
        printf("%s\n", w);
}

static void offer_commands(const char *cur)
{
    for (int i = 0; i < n_commands; i++)
        if (!txl_commands[i].hidden)
            offer("", txl_commands[i].name, cur);
}

/* Words from a space-separated list. */
static void offer_list(const char *prefix, const char *list, const char *cur)
{
    char w[256];
    while (*list) {
        size_t n = strcspn(list, " ");
        snprintf(w, sizeof w, "%.*s", (int)n, list);
        if (n)
            offer(prefix, w, cur);
        list += n;
        list += *list == ' ';
    }
}

typedef struct {
    const char *prefix, *cur;
} config_ctx;

static void offer_config_name(const char *name, void *ctx)
{
    const config_ctx *c = ctx;
    offer(c->prefix, name, c->cur);
}

/* A config (CLI_CONFIG): besides the files here, the names of the installed configs, which
 * cli_config_path finds by bare name. */
static void offer_installed_configs(const char *prefix, const char *cur)
{
    char dirs[CLI_CONFIG_DIRS][TXL_PATH_MAX];
    config_ctx c = {prefix, cur};
    if (strchr(cur + strlen(prefix), '/'))
        return;
    int n = cli_config_dirs(dirs);
    for (int i = 0; i < n; i++)
        cli_config_list(dirs[i], offer_config_name, &c);
}

/* --set KEY=VALUE: the keys, then the values of the key before '='. */
static void offer_config(const char *prefix, const char *cur)
{
    const char *val = cur + strlen(prefix), *eq = strchr(val, '=');
    char key[128], values[512], p[700];
    int path;
    for (int i = 0; (path = txl_config_key(i, key, sizeof key, values, sizeof values)) >= 0;
         i++) {
        if (!eq) {
            snprintf(p, sizeof p, "%s=", key);
            offer(prefix, p, cur);
            continue;
        }
        if (strlen(key) != (size_t)(eq - val) || strncmp(key, val, strlen(key)) != 0)
            continue;
        snprintf(p, sizeof p, "%s%s=", prefix, key);
        if (path)
            printf("@prefix %s\n@files *\n", p);
        else
            offer_list(p, values, cur);
    }
    if (!eq)
        printf("@nospace\n");
}

/* The value of option o: cur is prefix + the value typed so far. */
static void offer_value(const cli_opt *o, const char *prefix, const char *cur)
{
    if (o->flags & CLI_CFG_KEY) {
        offer_config(prefix, cur);
    } else if (o->type == CLI_CHOICE) {
        for (int i = 0; o->choices[i]; i++)
            offer(prefix, o->choices[i], cur);
    } else if (o->type == CLI_FILE) {
        if (*prefix)
            printf("@prefix %s\n", prefix);
        printf("@files %s\n", o->glob ? o->glob : "*");
        if (o->flags & CLI_CONFIG)
            offer_installed_configs(prefix, cur);
    } else if (o->suggest) {
        offer_list(prefix, o->suggest, cur);
    }
}

static int takes_value(const cli_opt *o) { return o->type != CLI_SWITCH && o->type != CLI_OPT_INT; }

static void complete(int n, char **w)
{
    const char *cur = w[n - 1];
    if (n == 1) {
        offer_commands(cur);
        offer("", "--help", cur);
        offer("", "--version", cur);
        return;
    }
    const cli_cmd *c = txl_command(w[0]);
    if (!c || c->hidden)
        return;
    const cli_spec *sp = c->spec;
    if (!sp) { /* help */
        if (n == 2)
            offer_commands(cur);
        return;
    }
    /* the word after an option that takes a value is that value */
    for (int i = 1; i < n - 1; i++) {
        const cli_opt *o = cli_find_opt(c, w[i]);
        if (o && takes_value(o)) {
            if (i + 1 == n - 1) {
                offer_value(o, "", cur);
                return;
            }
            i++;
        }
    }
    const char *eq = strchr(cur, '=');
    if (strncmp(cur, "--", 2) == 0 && eq) { /* --opt=value */
        char name[64], prefix[80];
        snprintf(name, sizeof name, "%.*s", (int)(eq - cur), cur);
        const cli_opt *o = cli_find_opt(c, name);
        snprintf(prefix, sizeof prefix, "%s=", name);
        if (o && o->type != CLI_SWITCH && strcmp(name, o->name) == 0)
            offer_value(o, prefix, cur);
        return;
    }
    if (cur[0] == '-') {
        for (int k = 0; k < sp->n_opts; k++) {
            if (sp->opts[k].short_name)
                offer("", sp->opts[k].short_name, cur);
            offer("", sp->opts[k].name, cur);
        }
        offer("", "--help", cur);
        return;
    }
    const char *glob = sp->pos_glob;
    for (int i = 1; i < n - 1 && sp->pos_glob_if; i++)
        if (strcmp(w[i], sp->pos_glob_if) == 0)
            glob = sp->pos_glob_alt;
    if (glob)
        printf("@files %s\n", glob);
    else
        printf("@dirs\n");
    const cli_opt *as = sp->pos_as ? cli_find_opt(c, sp->pos_as) : NULL;
    if (as && (as->flags & CLI_CONFIG)) /* txl train CONFIG */
        offer_installed_configs("", cur);
}

int cmd_complete(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--") == 0) {
        char empty[] = "", *none[] = {empty};
        if (argc == 2)
            complete(1, none); /* `txl <TAB>` */
        else
            complete(argc - 2, argv + 2);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--commands") == 0) {
        for (int i = 0; i < n_commands; i++)
            if (!txl_commands[i].hidden)
                printf("%s\n", txl_commands[i].name);
        return 0;
    }
    const cli_cmd *c = argc == 3 && strcmp(argv[1], "--options") == 0 ? txl_command(argv[2])
                                                                       : NULL;
    if (c && c->spec) {
        for (int k = 0; k < c->spec->n_opts; k++) {
            const cli_opt *o = &c->spec->opts[k];
            printf("%s%s%s\n", o->short_name ? o->short_name : "", o->short_name ? " " : "",
                   o->name);
        }
        return 0;
    }
    if (c)
        return 0;
    fprintf(stderr, "usage: txl __complete -- WORD... | --commands | --options COMMAND\n");
    return 2;
}

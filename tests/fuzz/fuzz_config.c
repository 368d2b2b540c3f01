/* fuzz_config.c: the config loader as `txl train -c FILE --set ...` uses it.
 *
 * Input: YAML text, then optionally NUL-separated --set assignments
 * ("model:\n  n_layer: 3\n\0model.d_model=64\0train.lr=1e-3").
 * Invariants: a failed load or set leaves the struct untouched and its message names the
 * file (or the --set text); a config that validates survives the round trip through the
 * checkpoint metadata (cfg_to_yaml -> cfg_load_meta) and the YAML dump (out_dir/config.yaml)
 * exactly. */
#include <string.h>

#include "../../config/config.h"
#include "fuzz.h"

#define MAX_SETS 8

static void check_err(const txl_err *e, const char *prefix)
{
    FUZZ_CHECK(e->kind == ERR_INPUT || e->kind == ERR_RUNTIME, "kind %d", e->kind);
    FUZZ_CHECK(strnlen(e->msg, sizeof e->msg) < sizeof e->msg && e->msg[0], "empty message");
    if (e->kind == ERR_INPUT)
        FUZZ_CHECK(strncmp(e->msg, prefix, strlen(prefix)) == 0,
                   "message does not name '%s': %s", prefix, e->msg);
}

int txl_fuzz_config(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t ylen = nul ? (size_t)(nul - data) : size;
    const char *path = fuzz_file("config", ".yaml", data, ylen);
    if (!path)
        return 0;
    run_config c, before;
    txl_err e = {0};
    cfg_defaults(&c);
    before = c;
    if (cfg_load_yaml(&c, path, &e)) {
        check_err(&e, path);
        FUZZ_CHECK(memcmp(&c, &before, sizeof c) == 0, "failed load changed the config");
        return 0;
    }

    /* --set assignments: NUL-terminated strings after the YAML */
    char sets[MAX_SETS][256];
    int nsets = 0;
    for (size_t at = ylen + 1; nul && at < size && nsets < MAX_SETS;) {
        const uint8_t *end = memchr(data + at, 0, size - at);
        size_t n = end ? (size_t)(end - (data + at)) : size - at;
        if (n >= sizeof sets[0])
            n = sizeof sets[0] - 1;
        memcpy(sets[nsets], data + at, n);
        sets[nsets][n] = '\0';
        nsets++;
        at += n + 1;
        if (!end)
            break;
    }
    for (int i = 0; i < nsets; i++) {
        before = c;
        if (cfg_set(&c, sets[i], &e)) {
            check_err(&e, "--set ");
            FUZZ_CHECK(memcmp(&c, &before, sizeof c) == 0, "failed --set changed the config");
        }
    }

    if (cfg_validate(&c, path, &e)) {
        check_err(&e, path);
        return 0;
    }

    /* checkpoint metadata round trip */
    char *text = cfg_to_yaml(&c);
    FUZZ_CHECK(text != NULL, "cfg_to_yaml failed on a valid config");
    run_config j;
    cfg_defaults(&j);
    int rc = cfg_load_meta(&j, text, "roundtrip", &e);
    FUZZ_CHECK(rc == 0, "metadata round trip failed: %s\n%s", e.msg, text);
    FUZZ_CHECK(memcmp(&c, &j, sizeof c) == 0, "metadata round trip changed the config:\n%s",
               text);
    free(text);
    FUZZ_CHECK(cfg_diff_model(&c.model, &j.model, NULL, 0) == 0, "diff of equal models");

    /* out_dir/config.yaml: YAML dump round trip */
    char *dump = NULL;
    size_t dlen = 0;
    FILE *mf = open_memstream(&dump, &dlen);
    FUZZ_CHECK(mf != NULL, "open_memstream");
    FUZZ_CHECK(cfg_write_yaml(&c, mf) == 0, "cfg_write_yaml failed");
    fclose(mf);
    const char *dpath = fuzz_file("config-dump", ".yaml", (const uint8_t *)dump, dlen);
    if (dpath) {
        run_config y;
        cfg_defaults(&y);
        rc = cfg_load_yaml(&y, dpath, &e);
        FUZZ_CHECK(rc == 0, "dump does not load back: %s\n%s", e.msg, dump);
        FUZZ_CHECK(memcmp(&c, &y, sizeof c) == 0, "YAML dump round trip changed the config:\n%s",
                   dump);
        FUZZ_CHECK(cfg_validate(&y, dpath, &e) == 0, "reloaded dump fails validation: %s", e.msg);
    }
    free(dump);
    return 0;
}

FUZZ_ENTRY(txl_fuzz_config)

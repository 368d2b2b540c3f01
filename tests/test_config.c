/* test_config.c: unit test of config/ (the key table, reader, writer, checks).
 *
 * Loads the good configs in tests/data/config/ (block and flow style) and checks values;
 * round-trips the YAML dump (cfg_write_yaml -> cfg_load_yaml) and the checkpoint metadata
 * (cfg_to_yaml -> cfg_load_meta) to identical structs, and reads the JSON metadata of
 * earlier txl versions; loads one bad file per failure class and checks
 * that each fails with ERR_INPUT and a message naming "file:line:col" and the key; runs
 * good and bad --set overrides, cross-key validation and cfg_diff_model.
 * Paths are relative: run from the repository root (as `make test` does). */
#include "../config/config.h"
#include "../config/config_impl.h"
#include "testlib.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIR "tests/data/config/"

static int has(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

/* "expected one of xl, mlp, ...": every scheme of the registry (model_config.h's
 * POS_SCHEMES) in its order, so that a new scheme needs no edit here. */
static const char *scheme_choices(void)
{
    static char buf[512];
    size_t o = (size_t)snprintf(buf, sizeof buf, "expected one of ");
    for (int p = 0; p < POS_COUNT && o < sizeof buf; p++)
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", p ? ", " : "",
                              pos_scheme_name((pos_scheme)p));
    return buf;
}

/* Sets a string field the way the loader does (tail zeroed) so memcmp stays meaningful. */
static void set_str(char *dst, size_t cap, const char *s)
{
    memset(dst, 0, cap);
    strncpy(dst, s, cap - 1);
}

static int same(const run_config *a, const run_config *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static void test_defaults(void)
{
    run_config c;
    txl_err e = { 0 };
    cfg_defaults(&c);
    CHECK(c.model.n_layer == 4 && c.model.d_model == 256 && c.model.n_head == 4 &&
              c.model.d_head == 64 && c.model.d_inner == 1024,
          "defaults: model shape 4/256/4/64/1024");
    CHECK(c.model.tgt_len == 128 && c.model.mem_len == 128 && !c.model.pre_lnorm,
          "defaults: tgt_len 128, mem_len 128, post-LN");
    CHECK(c.model.dropout == 0.1f && c.model.dropatt == 0.0f, "defaults: dropout 0.1, dropatt 0");
    CHECK(c.model.pos == POS_XL && c.model.clamp_len == 0 && !c.model.untie_r,
          "defaults: xl, clamp_len 0, tied r");
    CHECK(c.model.mlp_num_freqs == 16 && c.model.mlp_max_dist == 4096.0f &&
              c.model.mlp_hidden == 64,
          "defaults: mlp 16/4096/64");
    CHECK(c.model.vocab == 256, "defaults: vocab 256");
    CHECK(c.data.train[0] == 0 && c.data.valid[0] == 0 && c.data.test[0] == 0,
          "defaults: no data paths");
    CHECK(c.data.split[0] == 0.9 && c.data.split[1] == 0.05 && c.data.split[2] == 0.05,
          "defaults: split 0.9/0.05/0.05");
    CHECK(strcmp(c.data.tokenizer, "byte") == 0, "defaults: tokenizer byte");
    CHECK(c.train.batch_size == 16 && c.train.max_steps == 2000 && c.train.max_minutes == 0,
          "defaults: batch 16, 2000 steps, no time limit");
    CHECK(c.train.grad_accum == 1, "defaults: grad_accum 1 (no accumulation)");
    CHECK(c.train.lr == 2.5e-4 && c.train.schedule == LR_COSINE && c.train.warmup_steps == 0 &&
              c.train.lr_min == 0.0,
          "defaults: lr 2.5e-4 cosine, no warmup, lr_min 0");
    CHECK(c.train.clip == 0.25 && c.train.beta1 == 0.9 && c.train.beta2 == 0.999 &&
              c.train.eps == 1e-8 && c.train.weight_decay == 0.0 &&
              c.train.optimizer == OPT_ADAM,
          "defaults: clip 0.25, adam 0.9/0.999/1e-8, wd 0");
    CHECK(c.train.seed == 1 && c.train.log_interval == 10 && c.train.eval_interval == 200 &&
              c.train.eval_tokens == 0 && c.train.term_stats_interval == 0 &&
              c.train.ckpt_interval == 200 && c.train.ckpt_gzip &&
              c.train.threads == 0,
          "defaults: seed 1, intervals 10/200/200, gzip, threads 0");
    CHECK(strcmp(c.train.out_dir, "runs/default") == 0, "defaults: out_dir runs/default");

    int rc = cfg_validate(&c, "defaults", &e);
    CHECK(rc == -1 && e.kind == ERR_INPUT && has(e.msg, "defaults: data.train is required"),
          "defaults alone fail validation on data.train: %s", e.msg);
    set_str(c.data.train, sizeof c.data.train, "x.txt");
    CHECK(cfg_validate(&c, "defaults", &e) == 0, "defaults + data.train validate");
}

static void test_good_block(void)
{
    run_config c;
    txl_err e = { 0 };
    cfg_defaults(&c);
    int rc = cfg_load_yaml(&c, DIR "good_block.yaml", &e);
    CHECK(rc == 0, "load good_block.yaml: %s", rc ? e.msg : "ok");
    CHECK(cfg_validate(&c, DIR "good_block.yaml", &e) == 0, "validate good_block.yaml");
    const model_config *m = &c.model;
    CHECK(m->n_layer == 2 && m->d_model == 64 && m->n_head == 2 && m->d_head == 32 &&
              m->d_inner == 128 && m->tgt_len == 32 && m->mem_len == 48,
          "block: model shape");
    CHECK(m->pre_lnorm == 1 && m->untie_r == 1, "block: bools true and yes");
    CHECK(m->dropout == 0.2f && m->dropatt == 0.05f, "block: dropout 0.2 dropatt 0.05");
    CHECK(m->pos == POS_MLP && m->clamp_len == 100, "block: mlp, clamp_len 100");
    CHECK(m->mlp_num_freqs == 8 && m->mlp_max_dist == 512.5f && m->mlp_hidden == 16,
          "block: mlp params");
    CHECK(m->vocab == 256, "block: vocab stays 256");
    CHECK(strcmp(c.data.train, "corpus/my train: file.txt") == 0,
          "block: quoted path with space and colon: '%s'", c.data.train);
    CHECK(strcmp(c.data.valid, "corpus/valid.txt") == 0, "block: valid path");
    CHECK(c.data.test[0] == 0, "block: test ~ means empty");
    CHECK(c.data.split[0] == 0.8 && c.data.split[1] == 0.1 && c.data.split[2] == 0.1,
          "block: split");
    const train_config *t = &c.train;
    CHECK(t->batch_size == 4 && t->max_steps == 100 && t->max_minutes == 1.5, "block: budget");
    CHECK(t->lr == 1e-3 && t->schedule == LR_INV_SQRT && t->warmup_steps == 10 &&
              t->lr_min == 1e-5,
          "block: lr 1e-3 inv_sqrt warmup 10 lr_min 1e-5");
    CHECK(t->clip == 1.0 && t->beta1 == 0.85 && t->beta2 == 0.99 && t->eps == 1e-6 &&
              t->weight_decay == 0.01 && t->optimizer == OPT_ADAMW,
          "block: optimizer settings");
    CHECK(t->seed == ULLONG_MAX, "block: seed 2^64-1");
    CHECK(t->log_interval == 5 && t->eval_interval == 0 && t->eval_tokens == 4096 &&
              t->ckpt_interval == 50 && t->ckpt_gzip == 0 && t->threads == 2,
          "block: intervals, gzip off, threads");
    CHECK(strcmp(t->out_dir, "runs/block test") == 0, "block: out_dir from file");
}

static void test_good_flow(void)
{
    run_config c, want;
    txl_err e = { 0 };
    cfg_defaults(&c);
    int rc = cfg_load_yaml(&c, DIR "good_flow.yaml", &e);
    CHECK(rc == 0, "load good_flow.yaml (flow style): %s", rc ? e.msg : "ok");
    CHECK(cfg_validate(&c, DIR "good_flow.yaml", &e) == 0, "validate good_flow.yaml");
    cfg_defaults(&want);
    set_str(want.data.train, sizeof want.data.train, "data/enwik8.txt");
    set_str(want.train.out_dir, sizeof want.train.out_dir, "runs/good_flow");
    CHECK(same(&c, &want), "flow: equals the defaults + train path + derived out_dir");
    CHECK(strcmp(c.train.out_dir, "runs/good_flow") == 0, "flow: out_dir runs/good_flow");

    /* .yml suffix, a null section, and keys absent from the file keep their value */
    cfg_defaults(&c);
    c.model.d_model = 512;
    rc = cfg_load_yaml(&c, DIR "good_min.yml", &e);
    CHECK(rc == 0, "load good_min.yml: %s", rc ? e.msg : "ok");
    CHECK(strcmp(c.train.out_dir, "runs/good_min") == 0, "min: out_dir strips .yml: %s",
          c.train.out_dir);
    CHECK(strcmp(c.data.train, "data/tiny.txt") == 0, "min: data.train");
    CHECK(c.model.d_model == 512, "min: absent keys keep their current value");
}

typedef struct {
    const char *file;
    int at_load;          /* 1: cfg_load_yaml fails; 0: it loads and cfg_validate fails */
    const char *where;    /* "file:line:col" (or "file:" for validate errors) */
    const char *key;      /* the key (or section) the message must name */
    const char *detail;   /* another substring: what was expected or found */
} bad_case;

static void test_bad_files(void)
{
    char enum_want[600];
    snprintf(enum_want, sizeof enum_want, "%s, found 'rotary'", scheme_choices());
    const bad_case cases[] = {
        { "bad_syntax.yaml", 1, "bad_syntax.yaml:3:11: ", "YAML syntax error", "mapping values" },
        { "bad_unknown_key.yaml", 1, "bad_unknown_key.yaml:3:3: ", "'model.d_modle'",
          "did you mean 'model.d_model'?" },
        { "bad_key_wrong_section.yaml", 1, "bad_key_wrong_section.yaml:2:3: ", "'model.lr'",
          "did you mean 'train.lr'?" },
        { "bad_unknown_section.yaml", 1, "bad_unknown_section.yaml:1:1: ", "'modle'",
          "did you mean 'model'?" },
        { "bad_duplicate_key.yaml", 1, "bad_duplicate_key.yaml:4:3: ", "model.n_layer",
          "duplicate key" },
        { "bad_wrong_type.yaml", 1, "bad_wrong_type.yaml:2:12: ", "model.n_layer",
          "expected an integer, found 'four'" },
        { "bad_out_of_range.yaml", 1, "bad_out_of_range.yaml:3:12: ", "model.dropout",
          "must be in [0, 1), found 1.5" },
        { "bad_odd_d_model.yaml", 1, "bad_odd_d_model.yaml:1:30: ", "model.d_model",
          "must be even, found 255" },
        { "bad_float_for_int.yaml", 1, "bad_float_for_int.yaml:2:12: ", "model.n_layer",
          "expected an integer, found '3.5'" },
        { "bad_mapping_for_scalar.yaml", 1, "bad_mapping_for_scalar.yaml:3:5: ", "model.n_layer",
          "found a mapping" },
        { "bad_scalar_for_mapping.yaml", 1, "bad_scalar_for_mapping.yaml:1:8: ", "'model'",
          "expected a mapping" },
        { "bad_split_sum.yaml", 1, "bad_split_sum.yaml:3:10: ", "data.split", "sum to <= 1" },
        { "bad_split_len.yaml", 1, "bad_split_len.yaml:2:10: ", "data.split", "found 2 items" },
        { "bad_null.yaml", 1, "bad_null.yaml:2:12: ", "model.n_layer", "found null" },
        { "bad_enum.yaml", 1, "bad_enum.yaml:2:15: ", "model.pos_scheme", enum_want },
        { "bad_bool.yaml", 1, "bad_bool.yaml:2:14: ", "model.pre_lnorm",
          "expected true or false" },
        { "bad_seed.yaml", 1, "bad_seed.yaml:1:25: ", "train.seed", "found '-1'" },
        { "bad_multi_doc.yaml", 1, "bad_multi_doc.yaml:3:1: ", "single YAML document",
          "second" },
        { "empty.yaml", 0, "empty.yaml: ", "data.train", "is required" },
        { "missing_train.yaml", 0, "missing_train.yaml: ", "data.train", "is required" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *bc = &cases[i];
        char path[256];
        run_config c, before;
        txl_err e = { 0 };
        snprintf(path, sizeof path, DIR "%s", bc->file);
        cfg_defaults(&c);
        memcpy(&before, &c, sizeof c);
        int rc = cfg_load_yaml(&c, path, &e);
        if (bc->at_load) {
            CHECK(rc == -1 && e.kind == ERR_INPUT, "%s: load fails with ERR_INPUT", bc->file);
            CHECK(same(&c, &before), "%s: failed load leaves the config untouched", bc->file);
        } else {
            CHECK(rc == 0, "%s: loads (%s)", bc->file, rc ? e.msg : "ok");
            rc = cfg_validate(&c, path, &e);
            CHECK(rc == -1 && e.kind == ERR_INPUT, "%s: validate fails with ERR_INPUT",
                  bc->file);
        }
        CHECK(has(e.msg, bc->where) && has(e.msg, bc->key) && has(e.msg, bc->detail),
              "%s: message names '%s', '%s', '%s': %s", bc->file, bc->where, bc->key,
              bc->detail, e.msg);
    }

    run_config c;
    txl_err e = { 0 };
    cfg_defaults(&c);
    int rc = cfg_load_yaml(&c, DIR "does_not_exist.yaml", &e);
    CHECK(rc == -1 && e.kind == ERR_INPUT && has(e.msg, "does_not_exist.yaml: cannot open"),
          "missing file: %s", e.msg);
}

/* A config that exercises quoting and shortest-double formatting. */
static void tricky_config(run_config *c)
{
    cfg_defaults(c);
    set_str(c->data.train, sizeof c->data.train,
            "  lead: \"dq\" 'sq' \\back #hash\ttab\nnl \xc3\xbcnicode: ");
    set_str(c->data.valid, sizeof c->data.valid, "-dash: [x] {y} &a *b !c %d @e `f");
    set_str(c->data.test, sizeof c->data.test, "null");
    set_str(c->train.out_dir, sizeof c->train.out_dir, "~");
    c->train.lr = 0.1 + 0.2;
    c->train.eps = 1e-300;
    c->train.max_minutes = 1.0 / 3.0;
    c->train.lr_min = 5e-324; /* smallest subnormal */
    c->model.dropout = 0.1f / 3.0f;
    c->model.mlp_max_dist = 3.4e38f;
    c->model.clamp_len = INT_MAX;
    c->model.pos = POS_ALIBI;
    c->train.seed = ULLONG_MAX;
    c->train.max_steps = 9007199254740992L; /* 2^53, the largest long key */
    c->train.schedule = LR_CONSTANT;
    c->data.split[0] = 0.7;
    c->data.split[1] = 0.2;
    c->data.split[2] = 0.1;
}

/* Every character class cJSON wrote raw that YAML would not read back raw (DEL, C1, NEL, LS,
 * PS, BOM, U+FFFE, U+FFFF), astral and control characters, JSON escapes, and numbers in
 * exponent form. tests/data/config/legacy_controls.json is this config as cfg_to_json of txl
 * 6d30971 wrote it. */
static void controls_config(run_config *c)
{
    cfg_defaults(c);
    set_str(c->data.train, sizeof c->data.train,
            "del\x7f c1\xc2\x80\xc2\x9f nel\xc2\x85 ls\xe2\x80\xa8 ps\xe2\x80\xa9 bom\xef\xbb\xbf "
            "fffe\xef\xbf\xbe ffff\xef\xbf\xbf emoji\xf0\x9f\x98\x80 nbsp\xc2\xa0 ctl\x01\x1f\x1b end");
    set_str(c->data.valid, sizeof c->data.valid, "slash/ \"q\" \\ \b\f\n\r\t");
    c->train.seed = 9007199254740991ULL; /* 2^53 - 1: still a JSON number */
    c->train.lr = 1e-30;
    c->train.eps = 2.5e-05;
    c->train.weight_decay = 1e+22;
    c->train.clip = 123456789012345678.0;
    c->model.dropout = 0.3f;
    c->model.mlp_max_dist = 2.0f;
    c->train.max_minutes = 1e-320;
}

static void yaml_roundtrip(const run_config *a, const char *what)
{
    char path[] = "/tmp/txl_test_config_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "%s: mkstemp", what);
    if (fd < 0)
        return;
    FILE *f = fdopen(fd, "w");
    CHECK(f != NULL, "%s: fdopen", what);
    if (!f) {
        close(fd);
        unlink(path);
        return;
    }
    int rc = cfg_write_yaml(a, f);
    CHECK(fclose(f) == 0 && rc == 0, "%s: cfg_write_yaml", what);

    run_config b;
    txl_err e = { 0 };
    cfg_defaults(&b);
    rc = cfg_load_yaml(&b, path, &e);
    CHECK(rc == 0, "%s: reload written YAML: %s", what, rc ? e.msg : "ok");
    CHECK(same(a, &b), "%s: YAML round trip gives an identical struct", what);
    if (!same(a, &b)) {
        /* show the file to help debugging */
        FILE *g = fopen(path, "r");
        char line[4200];
        while (g && fgets(line, sizeof line, g))
            printf("        | %s", line);
        if (g)
            fclose(g);
    }
    unlink(path);
}

static void test_yaml_roundtrip(void)
{
    run_config a;
    txl_err e = { 0 };
    cfg_defaults(&a);
    yaml_roundtrip(&a, "defaults");
    cfg_defaults(&a);
    CHECK(cfg_load_yaml(&a, DIR "good_block.yaml", &e) == 0, "load good_block for round trip");
    yaml_roundtrip(&a, "good_block");
    tricky_config(&a);
    yaml_roundtrip(&a, "tricky strings and doubles");
    controls_config(&a);
    yaml_roundtrip(&a, "control characters and exponents");

    /* the dump: header comment, sections, block style, every key */
    char buf[16384] = { 0 };
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    CHECK(f != NULL, "fmemopen");
    if (!f)
        return;
    cfg_defaults(&a);
    CHECK(cfg_write_yaml(&a, f) == 0, "write defaults");
    fclose(f);
    CHECK(buf[0] == '#', "dump starts with a comment line");
    CHECK(has(buf, "\nmodel:\n  n_layer: 4\n  d_model: 256\n"), "dump: model section first");
    CHECK(has(buf, "\ndata:\n  train: \"\"\n"), "dump: empty path quoted");
    CHECK(has(buf, "  split: [0.9, 0.05, 0.05]\n"), "dump: split as a flow list");
    CHECK(has(buf, "  dropout: 0.1\n"), "dump: float 0.1 in shortest form");
    CHECK(has(buf, "  lr: 0.00025\n") && has(buf, "  eps: 1e-08\n"), "dump: doubles");
    CHECK(has(buf, "  optimizer: adam\n") && has(buf, "  ckpt_gzip: true\n"),
          "dump: optimizer and ckpt_gzip keys");
    CHECK(has(buf, "  out_dir: \"runs/default\"\n  threads: 0\n"), "dump: last keys");
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = malloc(1 << 16);
    size_t n = f && buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    if (f)
        fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* The config stored in checkpoints: cfg_to_yaml's text, read back by cfg_load_meta; and the
 * JSON that txl before the YAML metadata stored, read by the same reader. */
static void test_meta(void)
{
    run_config a, b;
    txl_err e = { 0 };

    tricky_config(&a);
    char *y = cfg_to_yaml(&a);
    CHECK(y != NULL, "cfg_to_yaml (tricky)");
    if (!y)
        return;
    CHECK(has(y, "  seed: 18446744073709551615\n"), "seed >= 2^53 is a plain integer");
    CHECK(has(y, "  pos_scheme: alibi\n"), "enum as its name");
    CHECK(has(y, "  split: [0.7, 0.2, 0.1]\n"), "split as a flow list");
    cfg_defaults(&b);
    int rc = cfg_load_meta(&b, y, "ckpt.safetensors.gz", &e);
    CHECK(rc == 0, "cfg_load_meta (tricky): %s", rc ? e.msg : "ok");
    CHECK(same(&a, &b), "metadata round trip gives an identical struct (tricky)");
    /* the metadata and out_dir/config.yaml are one text */
    char buf[16384] = { 0 };
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    CHECK(f && cfg_write_yaml(&a, f) == 0, "cfg_write_yaml (tricky)");
    if (f)
        fclose(f);
    CHECK(strcmp(buf, y) == 0, "cfg_write_yaml writes cfg_to_yaml's text");
    free(y);

    controls_config(&a);
    y = cfg_to_yaml(&a);
    cfg_defaults(&b);
    rc = y ? cfg_load_meta(&b, y, "ckpt", &e) : -1;
    CHECK(rc == 0 && same(&a, &b), "metadata round trip (control characters): %s",
          rc ? e.msg : "ok");
    free(y);

    /* the JSON of txl 6d30971 (cfg_to_json), byte for byte */
    static const struct { const char *file; void (*make)(run_config *); } legacy[] = {
        { DIR "legacy_tricky.json", tricky_config },
        { DIR "legacy_controls.json", controls_config },
    };
    for (size_t i = 0; i < sizeof legacy / sizeof legacy[0]; i++) {
        char *js = slurp(legacy[i].file);
        legacy[i].make(&a);
        cfg_defaults(&b);
        rc = js ? cfg_load_meta(&b, js, legacy[i].file, &e) : -1;
        CHECK(rc == 0, "legacy JSON %s loads: %s", legacy[i].file, rc ? e.msg : "ok");
        CHECK(same(&a, &b), "legacy JSON %s gives the config it was written from",
              legacy[i].file);
        free(js);
    }

    /* keys missing from the text keep their value; JSON's forms of seeds and nulls */
    cfg_defaults(&b);
    rc = cfg_load_meta(&b, "{\"model\":{\"d_model\":512},\"train\":{\"seed\":\"77\"}}", "x", &e);
    CHECK(rc == 0 && b.model.d_model == 512 && b.model.n_layer == 4 && b.train.seed == 77,
          "partial JSON; seed as a string");
    rc = cfg_load_meta(&b, "{\"train\":{\"seed\":9007199254740995}}", "x", &e);
    CHECK(rc == 0 && b.train.seed == 9007199254740995ULL, "a seed past 2^53 reads exactly");
    rc = cfg_load_meta(&b, "{\"data\":{\"valid\":null,\"test\":null}}", "x", &e);
    CHECK(rc == 0 && b.data.valid[0] == 0 && b.data.test[0] == 0,
          "JSON null for data.valid/test means empty");
    rc = cfg_load_meta(&b, "{\"data\":{\"train\":\"a\\u00e9\\/\\u0001\\\"\"}}", "x", &e);
    CHECK(rc == 0 && strcmp(b.data.train, "a\xc3\xa9/\x01\"") == 0,
          "JSON escapes \\u00e9, \\/, \\u0001, \\\": '%s'", b.data.train);

    /* txl 6d30971 wrote any clamp_len, a negative one meaning off ("<= 0: off"): its
     * checkpoints still read, as 0; a config file or --set must say 0 (test_set) */
    cfg_defaults(&b);
    rc = cfg_load_meta(&b, "{\"model\":{\"clamp_len\":-2147483648}}", "x", &e);
    CHECK(rc == 0 && b.model.clamp_len == 0, "metadata clamp_len -2147483648 (JSON) is off: %s",
          rc ? e.msg : "ok");
    b.model.clamp_len = 7;
    rc = cfg_load_meta(&b, "model:\n  clamp_len: -1\n", "x", &e);
    CHECK(rc == 0 && b.model.clamp_len == 0, "metadata clamp_len -1 (YAML) is off: %s",
          rc ? e.msg : "ok");

    static const struct { const char *text, *want1, *want2; } bad[] = {
        { "{\"model\":{\"d_modle\":4}}", "unknown key 'model.d_modle'",
          "(did you mean 'model.d_model'?)" },
        { "{\"optim\":{}}", "unknown section 'optim'", "" },
        { "{\"model\":{\"n_layer\":\"4\"}}", "model.n_layer: expected an integer",
          "found the string \"4\"" },
        { "{\"model\":{\"n_layer\":3.5}}", "model.n_layer: expected an integer", "3.5" },
        { "{\"model\":{\"d_model\":255}}", "model.d_model must be even", "255" },
        { "{\"model\":{\"pre_lnorm\":1}}", "model.pre_lnorm: expected true or false", "" },
        { "{\"model\":{\"pos_scheme\":\"rotary\"}}", "model.pos_scheme", "rotary" },
        { "{\"model\":{\"n_layer\":2,\"n_layer\":3}}", "duplicate key 'model.n_layer'", "" },
        { "{\"data\":{\"split\":[0.5,0.5]}}", "data.split", "found 2 items" },
        { "{\"data\":{\"split\":[0.5,\"a\",0.1]}}", "data.split[1]", "the string" },
        { "{\"data\":{\"train\":null}}", "data.train", "null" },
        { "{\"train\":{\"seed\":-1}}", "train.seed", "-1" },
        { "{\"train\":{\"seed\":\"x\"}}", "train.seed", "'x'" },
        { "{\"train\":{\"seed\":18446744073709551616}}", "train.seed", "< 2^64" },
        { "{\"train\":{\"max_steps\":1e300}}", "train.max_steps", "" },
        { "{\"model\":[]}", "section 'model'", "a list" },
        { "[1,2]", "expected a mapping of sections", "a list" },
        { "{\"model\":{\"n_layer\":4}", "YAML syntax error", "" },
        { "{} trailing", "YAML syntax error", "" },
        { "{\"data\":{\"train\":\"a\\ud83d\\ude00\"}}", "YAML syntax error",
          "invalid Unicode character escape code" },
        { "model:\n  n_layer: four\n", "metadata 'config' at 2:12: ",
          "model.n_layer: expected an integer, found 'four'" },
        { "model: {}\n---\nmodel: {}\n", "at 3:1: ", "expected a single YAML document" },
        { "model: {n_layer: 2}\x7f\n", "invalid YAML input at byte 19", "control characters" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run_config before;
        cfg_defaults(&b);
        memcpy(&before, &b, sizeof b);
        e.msg[0] = 0;
        e.kind = 0;
        rc = cfg_load_meta(&b, bad[i].text, "ck.safetensors.gz", &e);
        CHECK(rc == -1 && e.kind == ERR_INPUT &&
                  has(e.msg, "ck.safetensors.gz: metadata 'config'") &&
                  has(e.msg, bad[i].want1) && has(e.msg, bad[i].want2) && same(&b, &before),
              "bad metadata %s -> %s", bad[i].text, e.msg);
    }
}

static void test_set(void)
{
    run_config c, before;
    txl_err e = { 0 };
    cfg_defaults(&c);
    static const char *good[] = {
        "model.d_model=512", "data.split=[0.8,0.1,0.1]", "train.lr=1e-3",
        "model.pos_scheme=rope", "model.pre_lnorm=true", "data.valid=", "data.test=~",
        "data.train=\"a b: c\"", "train.seed=18446744073709551615", " model.n_layer = 6",
        "model.dropout=0", "train.schedule=constant", "model.mlp_max_dist=1.5",
        "train.out_dir=runs/x=y", "train.optimizer=adamw", "train.ckpt_gzip=off",
        "model.clamp_len=5", "train.grad_accum=8",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int rc = cfg_set(&c, good[i], &e);
        CHECK(rc == 0, "--set %s: %s", good[i], rc ? e.msg : "ok");
    }
    CHECK(c.model.d_model == 512, "set d_model 512");
    CHECK(c.data.split[0] == 0.8 && c.data.split[1] == 0.1 && c.data.split[2] == 0.1,
          "set split");
    CHECK(c.train.lr == 1e-3 && c.model.pos == POS_ROPE && c.model.pre_lnorm == 1,
          "set lr, pos_scheme, pre_lnorm");
    CHECK(c.data.valid[0] == 0 && c.data.test[0] == 0, "set empty/null paths");
    CHECK(strcmp(c.data.train, "a b: c") == 0, "set quoted path: '%s'", c.data.train);
    CHECK(c.train.seed == ULLONG_MAX && c.model.n_layer == 6 && c.model.dropout == 0.0f,
          "set seed, spaced assignment, dropout 0");
    CHECK(c.train.schedule == LR_CONSTANT && c.model.mlp_max_dist == 1.5f &&
              strcmp(c.train.out_dir, "runs/x=y") == 0 && c.train.optimizer == OPT_ADAMW &&
              c.train.ckpt_gzip == 0 && c.model.clamp_len == 5,
          "set schedule, max_dist, out_dir with '=', optimizer, ckpt_gzip, clamp_len");
    CHECK(c.train.grad_accum == 8, "set grad_accum 8");
    /* a YAML tag that agrees with the key's type is fine */
    static const char *tagged[] = {
        "train.lr=!!float 1e-3", "train.max_minutes=!!int 2", "train.seed=!!int 5",
        "model.untie_r=!!bool yes", "data.test=!!str 123", "data.valid=!!null",
        "data.split=!!seq [0.8, !!float 0.1, !!int 0]", "train.schedule=!!str constant",
    };
    run_config d;
    cfg_defaults(&d);
    for (size_t i = 0; i < sizeof tagged / sizeof tagged[0]; i++) {
        int rc = cfg_set(&d, tagged[i], &e);
        CHECK(rc == 0, "--set %s: %s", tagged[i], rc ? e.msg : "ok");
    }
    CHECK(d.train.lr == 1e-3 && d.train.max_minutes == 2 && d.train.seed == 5 &&
              d.model.untie_r == 1 && strcmp(d.data.test, "123") == 0 && d.data.valid[0] == 0 &&
              d.data.split[0] == 0.8 && d.data.split[1] == 0.1 && d.data.split[2] == 0 &&
              d.train.schedule == LR_CONSTANT,
          "tags that agree with the keys' types");
    /* data.doc_separator is text, "" (also null: nothing after '=') meaning none */
    int sep = cfg_set(&d, "data.doc_separator=<doc>", &e) == 0 &&
              strcmp(d.data.doc_separator, "<doc>") == 0 &&
              cfg_set(&d, "data.doc_separator=", &e) == 0 && d.data.doc_separator[0] == 0 &&
              cfg_set(&d, "data.doc_separator=\"~\"", &e) == 0 &&
              strcmp(d.data.doc_separator, "~") == 0 &&
              cfg_set(&d, "data.doc_separator=~", &e) == 0 && d.data.doc_separator[0] == 0;
    CHECK(sep, "--set data.doc_separator=<doc>, then = (none), \"~\" (text), ~ (none): %s",
          sep ? "ok" : e.msg);
    /* an empty data.train is a legal value; cfg_validate is what requires a path */
    int rc = cfg_set(&c, "data.train=\"\"", &e);
    CHECK(rc == 0 && c.data.train[0] == 0 && cfg_validate(&c, NULL, &e) == -1 &&
              has(e.msg, "data.train is required"),
          "--set data.train=\"\" loads, validate refuses it: %s", e.msg);

    const struct { const char *flag, *want; } bad[] = {
        { "model.d_modle=512",
          "--set model.d_modle=512: unknown key 'model.d_modle' (did you mean 'model.d_model'?)" },
        { "d_model=512", "unknown key 'd_model' (did you mean 'model.d_model'?)" },
        { "modle.d_model=512", "(did you mean 'model.d_model'?)" },
        { "train.warmup=10", "(did you mean 'train.warmup_steps'?)" },
        { "model.zzz=1", "unknown key 'model.zzz'" },
        { "model.d_model", "--set model.d_model: expected section.key=value" },
        { "model.n_layer=four", "model.n_layer: expected an integer, found 'four'" },
        { "model.n_layer=3.5", "model.n_layer: expected an integer, found '3.5'" },
        { "model.n_layer=\"4\"", "found the string \"4\"" },
        { "model.n_layer=0", "model.n_layer must be >= 1, found 0" },
        { "model.n_layer=99999999999", "model.n_layer must be <= 2147483647" },
        { "model.n_layer=99999999999999999999999", "(too large)" },
        { "model.d_model=255", "model.d_model must be even, found 255" },
        { "model.n_layer=", "model.n_layer: expected an integer, found null" },
        { "model.n_layer=[1,2]", "model.n_layer: expected an integer, found a list" },
        { "data.train={a: b}", "data.train: expected a path, found a mapping" },
        { "data.train=", "data.train: expected a path, found null" },
        { "data.split=[0.8,0.1]", "data.split: expected a list of 3 numbers" },
        { "data.split=0.5", "found '0.5'" },
        { "data.split=[0.8,x,0.1]", "data.split[1]: expected a number, found 'x'" },
        { "data.split=[0.8,0.3,0.1]", "must sum to <= 1" },
        { "data.split=[0,0.5,0.5]", "train fraction must be > 0" },
        { "data.tokenizer=char", "data.tokenizer: expected one of byte, word, bpe, found \"char\"" },
        { "model.pos_scheme=rotary", scheme_choices() },
        { "train.lr=0", "train.lr must be > 0, found 0" },
        { "train.lr=inf", "train.lr: expected a number, found 'inf'" },
        { "train.lr=0x10", "expected a number" },
        { "train.lr=1e999", "too large" },
        { "model.mlp_max_dist=1", "model.mlp_max_dist must be > 1, found 1" },
        { "model.mlp_max_dist=1e39", "too large for a float" },
        { "model.dropout=0.99999999999", "model.dropout must be in [0, 1), found 1" },
        { "train.beta2=1", "train.beta2 must be in [0, 1), found 1" },
        { "train.threads=5000", "train.threads must be in [0, 1024], found 5000" },
        { "train.threads=-1", "train.threads must be in [0, 1024], found -1" },
        { "train.grad_accum=0", "train.grad_accum must be in [1, 1024], found 0" },
        { "train.grad_accum=1025", "train.grad_accum must be in [1, 1024], found 1025" },
        { "train.grad_accum=2.0", "train.grad_accum: expected an integer, found '2.0'" },
        { "train.max_steps=9007199254740993", "train.max_steps must be <= 9007199254740992" },
        { "train.seed=-1", "train.seed: expected a non-negative integer" },
        { "train.seed=\"5\"", "train.seed: expected a non-negative integer < 2^64, found the string \"5\"" },
        { "train.seed=18446744073709551616", "train.seed: expected a non-negative integer" },
        { "model.pre_lnorm=maybe", "expected true or false, found 'maybe'" },
        { "data.train=[unclosed", "YAML syntax error" },
        { "model.n_layer=4\n---\n5", "expected a single YAML document" },
        { "model.n_layer=*alias", "YAML syntax error" },
        { "model.n_layer=!!str 3", "model.n_layer: expected an integer, found a value tagged !!str" },
        { "model.n_layer=! 3", "model.n_layer: expected an integer, found a value tagged !!str" },
        { "model.n_layer=!!float 3", "found a value tagged !!float" },
        { "model.n_layer=!foo 3", "found a value tagged !foo" },
        { "model.pre_lnorm=!!str true", "model.pre_lnorm: expected true or false, found a value tagged !!str" },
        { "data.train=!!int 123", "data.train: expected a path, found a value tagged !!int" },
        { "data.split=[0.8, !!str 0.1, 0.1]", "data.split[1]: expected a number, found a value tagged !!str" },
        { "data.split=!!map {a: 1}", "data.split: expected a list of 3 numbers [train, valid, test], found a value tagged !!map" },
        { "model.clamp_len=-5", "model.clamp_len must be >= 0, found -5" },
        { "data.doc_separator={a: b}", "data.doc_separator: expected a string, found a mapping" },
        { "data.doc_separator=!!int 3", "data.doc_separator: expected a string, found a value tagged !!int" },
    };
    cfg_defaults(&c);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(&before, &c, sizeof c);
        e.msg[0] = 0;
        e.kind = 0;
        int rc = cfg_set(&c, bad[i].flag, &e);
        char prefix[300];
        snprintf(prefix, sizeof prefix, "--set %s: ", bad[i].flag);
        for (char *p = prefix; *p; p++)
            if (*p == '\n')
                *p = '?'; /* messages show control bytes of the flag as '?' */
        CHECK(rc == -1 && e.kind == ERR_INPUT && has(e.msg, prefix) && has(e.msg, bad[i].want) &&
                  same(&c, &before),
              "bad %s-> %s", prefix, e.msg);
    }
}

/* A text of n nested flow lists at data.split: "data: {split: [[[...]]]}". */
static char *nested(int n)
{
    char *t = malloc((size_t)n * 2 + 64);
    if (!t)
        return NULL;
    size_t o = (size_t)sprintf(t, "data: {split: ");
    memset(t + o, '[', (size_t)n);
    o += (size_t)n;
    memset(t + o, ']', (size_t)n);
    o += (size_t)n;
    strcpy(t + o, "}\n");
    return t;
}

/* Nesting is bounded (CFG_MAX_DEPTH) before libyaml builds anything: libyaml's time grows
 * with the square of the depth (100,000 nested '[' took two minutes). Brackets inside
 * quoted strings and comments are text, not nesting. */
static void test_depth(void)
{
    run_config c, before;
    txl_err e = { 0 };
    /* the root mapping and data's: 2 levels, so 14 lists make 16 (the limit), 15 make 17 */
    char *t = nested(CFG_MAX_DEPTH - 2);
    cfg_defaults(&c);
    int rc = t ? cfg_load_meta(&c, t, "ck", &e) : 0;
    CHECK(rc == -1 && has(e.msg, "data.split: expected a list of 3 numbers"),
          "depth %d: read (and refused by the schema): %s", CFG_MAX_DEPTH, e.msg);
    free(t);
    static const int deep[] = { CFG_MAX_DEPTH - 1, 100000 };
    for (int i = 0; i < 2; i++) {
        t = nested(deep[i]);
        cfg_defaults(&c);
        memcpy(&before, &c, sizeof c);
        rc = t ? cfg_load_meta(&c, t, "ck", &e) : 0;
        CHECK(rc == -1 && e.kind == ERR_INPUT &&
                  has(e.msg, "ck: metadata 'config' at 1:29: nested deeper than 16 levels") &&
                  same(&c, &before),
              "%d + 2 levels refused at the 17th: %s", deep[i], e.msg);
        free(t);
    }
    /* block style nests too: "- - - ... x" */
    char path[512];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/txl-test-config-deep-%ld.yaml", dir && *dir ? dir : "/tmp",
             (long)getpid());
    FILE *f = fopen(path, "w");
    for (int i = 0; f && i < 40000; i++)
        fputs("- ", f);
    if (f)
        fputs("x\n", f), fclose(f);
    cfg_defaults(&c);
    rc = cfg_load_yaml(&c, path, &e);
    CHECK(rc == -1 && has(e.msg, ".yaml:1:33: nested deeper than 16 levels"),
          "40,000 nested block lists in a file: %s", e.msg);
    unlink(path);
    char set[60000];
    size_t o = (size_t)sprintf(set, "model.n_layer=");
    memset(set + o, '{', 50000);
    set[o + 50000] = 0;
    rc = cfg_set(&c, set, &e);
    CHECK(rc == -1 && has(e.msg, "--set model.n_layer={{{") && has(e.msg, "nested deeper than 16"),
          "--set with 50,000 nested mappings: %.120s", e.msg);
    /* brackets in quoted text and comments are no nesting */
    char ok[2048];
    o = (size_t)sprintf(ok, "data:  # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n"
                            "  doc_separator: \"");
    memset(ok + o, '[', 60);
    o += 60;
    sprintf(ok + o, "{{{\"\n  test: '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{{{{{'\n");
    cfg_defaults(&c);
    rc = cfg_load_meta(&c, ok, "ck", &e);
    CHECK(rc == 0 && strlen(c.data.doc_separator) == 63 && c.data.test[0] == '[',
          "brackets in quoted strings and comments: %s", rc ? e.msg : "ok");
    /* the metadata holds no more than a config file may */
    t = malloc(CFG_FILE_MAX + 64);
    if (t) {
        memset(t, ' ', CFG_FILE_MAX + 1);
        strcpy(t + CFG_FILE_MAX + 1, "model: {}\n");
        rc = cfg_load_meta(&c, t, "ck", &e);
        CHECK(rc == -1 && has(e.msg, "ck: metadata 'config': 1048587 bytes, more than a config "
                              "may hold (1048576)"), "metadata over 1 MiB: %s", e.msg);
        free(t);
    }
}

static void test_validate(void)
{
    run_config c;
    txl_err e = { 0 };
    static const struct { int field; const char *want; } cases[] = {
        { 0, "cfg.yaml: model.d_model must be even, found 255" },
        { 1, "cfg.yaml: train.lr_min must be <= train.lr (0.00025), found 0.001" },
        { 2, "cfg.yaml: train.warmup_steps must be < train.max_steps (2000) with schedule cosine" },
        { 3, "cfg.yaml: data.split: the valid fraction must be > 0 when data.valid is empty" },
        { 4, "cfg.yaml: model.d_head must be even with pos_scheme rope" },
        { 5, "cfg.yaml: model.dropout must be in [0, 1), found 1" },
        { 6, "cfg.yaml: train.lr must be a finite number" },
        { 7, "cfg.yaml: model.pos_scheme: expected one of xl" },
        { 8, "cfg.yaml: train.out_dir is required" },
        { 9, "cfg.yaml: model.n_head * model.d_head must be <=" },
        { 10, "cfg.yaml: train.eval_interval must be >= 0, found -1" },
        { 11, "cfg.yaml: model.pre_lnorm: expected true or false, found 2" },
        { 12, "cfg.yaml: model.t5_max_dist must be greater than t5_buckets / 2 (the exact "
              "buckets, 16: the logarithmic ones span the distances from there to t5_max_dist), "
              "found 16" },
        { 13, "cfg.yaml: model.fire_threshold must be >= 0, found -1" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cfg_defaults(&c);
        set_str(c.data.train, sizeof c.data.train, "t.txt");
        switch (cases[i].field) {
        case 0: c.model.d_model = 255; break;
        case 1: c.train.lr_min = 1e-3; break;
        case 2: c.train.warmup_steps = 2000; break;
        case 3: c.data.split[1] = 0; break;
        case 4: c.model.pos = POS_ROPE; c.model.d_head = 63; break;
        case 5: c.model.dropout = 1.0f; break;
        case 6: c.train.lr = NAN; break;
        case 7: c.model.pos = (pos_scheme)42; break;
        case 8: c.train.out_dir[0] = 0; break;
        case 9: c.model.n_head = 1 << 16; c.model.d_head = 1 << 16; break;
        case 10: c.train.eval_interval = -1; break;
        case 11: c.model.pre_lnorm = 2; break;
        case 12: c.model.pos = POS_T5; c.model.t5_max_dist = 16; break;
        case 13: c.model.pos = POS_FIRE; c.model.fire_threshold = -1.0f; break;
        }
        e.msg[0] = 0;
        int rc = cfg_validate(&c, "cfg.yaml", &e);
        CHECK(rc == -1 && e.kind == ERR_INPUT && has(e.msg, cases[i].want), "validate %d: %s",
              cases[i].field, e.msg);
    }
    /* the cross-key rules only bite in their context */
    cfg_defaults(&c);
    set_str(c.data.train, sizeof c.data.train, "t.txt");
    c.train.warmup_steps = 5000;
    c.train.schedule = LR_CONSTANT;
    CHECK(cfg_validate(&c, "cfg.yaml", &e) == 0, "warmup >= max_steps is fine without cosine");
    c.data.split[1] = 0;
    set_str(c.data.valid, sizeof c.data.valid, "v.txt");
    CHECK(cfg_validate(&c, "cfg.yaml", &e) == 0, "valid fraction 0 is fine with data.valid");
    c.model.d_head = 63;
    CHECK(cfg_validate(&c, "cfg.yaml", &e) == 0, "odd d_head is fine without rope");
    c.model.d_model = 255;
    CHECK(cfg_validate(&c, NULL, &e) == -1 && strncmp(e.msg, "model.d_model", 13) == 0,
          "no origin: message starts with the key: %s", e.msg);
}

static void test_diff(void)
{
    run_config a, b;
    char buf[512];
    cfg_defaults(&a);
    cfg_defaults(&b);
    CHECK(cfg_diff_model(&a.model, &b.model, buf, sizeof buf) == 0 && buf[0] == 0,
          "diff of equal models: 0, empty");
    b.model.d_model = 512;
    b.model.dropout = 0.2f;
    b.model.pos = POS_MLP;
    int n = cfg_diff_model(&a.model, &b.model, buf, sizeof buf);
    CHECK(n == 3 && strcmp(buf, "model.d_model: 256 vs 512, model.dropout: 0.1 vs 0.2, "
                                "model.pos_scheme: xl vs mlp") == 0,
          "diff: %d: %s", n, buf);
    char small[16];
    n = cfg_diff_model(&a.model, &b.model, small, sizeof small);
    CHECK(n == 3 && strlen(small) == sizeof small - 1, "diff truncates safely: '%s'", small);
    b = a;
    b.model.vocab = 128;
    n = cfg_diff_model(&a.model, &b.model, buf, sizeof buf);
    CHECK(n == 1 && strcmp(buf, "model.vocab: 256 vs 128") == 0, "diff names vocab: %s", buf);
}

/* model.cutoffs (a list of integers), div_val, d_embed, tie_projs: --set, the dump and its
 * round trips, the checks of each value and of validation (a cutoff >= V names V). */
static void test_adaptive_keys(void)
{
    run_config c, before;
    txl_err e = { 0 };
    cfg_defaults(&c);
    CHECK(c.model.cutoffs.n == 0 && c.model.div_val == 1 && c.model.d_embed == 0 &&
          c.model.tie_projs == 0, "defaults: cutoffs [], div_val 1, d_embed 0, tie_projs false");
    CHECK(cfg_set(&c, "model.cutoffs=[20000, 40000, 200000]", &e) == 0 &&
          c.model.cutoffs.n == 3 && c.model.cutoffs.v[0] == 20000 &&
          c.model.cutoffs.v[2] == 200000, "--set model.cutoffs=[20000, 40000, 200000]");
    CHECK(cfg_set(&c, "model.cutoffs=[]", &e) == 0 && c.model.cutoffs.n == 0,
          "--set model.cutoffs=[]: the full softmax");
    CHECK(cfg_set(&c, "model.cutoffs=[30, 45, 100]", &e) == 0 &&
          cfg_set(&c, "model.div_val=2", &e) == 0 && cfg_set(&c, "model.d_embed=64", &e) == 0 &&
          cfg_set(&c, "model.tie_projs=true", &e) == 0, "--set the four keys");
    yaml_roundtrip(&c, "adaptive keys");
    char *y = cfg_to_yaml(&c);
    run_config m;
    cfg_defaults(&m);
    CHECK(y && has(y, "  cutoffs: [30, 45, 100]\n  div_val: 2\n  d_embed: 64\n  tie_projs: true\n"),
          "dump: cutoffs as a flow list, then div_val, d_embed, tie_projs");
    CHECK(y && cfg_load_meta(&m, y, "ck", &e) == 0 && same(&m, &c),
          "checkpoint metadata round trip of the adaptive keys");
    free(y);
    set_str(c.data.train, sizeof c.data.train, "t.txt");
    CHECK(cfg_validate(&c, "cfg.yaml", &e) == 0, "validate: cutoffs below V with div_val 2");
    cfg_defaults(&m);
    y = cfg_to_yaml(&m);
    CHECK(y && has(y, "  cutoffs: []\n"), "dump: default cutoffs []");
    free(y);
    static const struct { const char *set, *want; } bad[] = {
        { "model.cutoffs=[30, 20]", "model.cutoffs must be increasing token ids" },
        { "model.cutoffs=[0, 5]", "each >= 1" },
        { "model.cutoffs=[5, 5]", "found [5, 5]" },
        { "model.cutoffs=[1,2,3,4,5,6,7,8,9]", "model.cutoffs: at most 8 cutoffs, found 9" },
        { "model.cutoffs=[a]", "model.cutoffs[0]: expected an integer (a token id), found 'a'" },
        { "model.cutoffs=[1.5]", "model.cutoffs[0]: expected an integer" },
        { "model.cutoffs=[\"3\"]", "model.cutoffs[0]: expected an integer" },
        { "model.cutoffs=[3000000000]", "model.cutoffs[0]: expected an integer" },
        { "model.cutoffs=[[1]]", "model.cutoffs[0]: expected an integer (a token id), found a list" },
        { "model.cutoffs=20000", "model.cutoffs: expected a list of increasing integers" },
        { "model.cutoffs=", "model.cutoffs: expected a list of increasing integers" },
        { "model.div_val=0", "model.div_val must be >= 1, found 0" },
        { "model.d_embed=-2", "model.d_embed must be >= 0, found -2" },
        { "model.tie_projs=2", "model.tie_projs: expected true or false" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(&before, &c, sizeof c);
        e.msg[0] = 0;
        int rc = cfg_set(&c, bad[i].set, &e);
        CHECK(rc == -1 && e.kind == ERR_INPUT && has(e.msg, bad[i].want) && same(&c, &before),
              "--set %s: %s", bad[i].set, e.msg);
    }
    static const struct { int field; const char *want; } cases[] = {
        { 0, "cfg.yaml: model.cutoffs: 256 is not below the vocabulary's size V = 256" },
        { 1, "cfg.yaml: model.div_val 2 needs model.cutoffs" },
        { 2, "cfg.yaml: model.div_val 8: cluster 2's width d_embed / div_val^2 is 0 (d_embed 32" },
        { 3, "cfg.yaml: model.cutoffs: 300 is not below the vocabulary's size V = 258" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cfg_defaults(&c);
        set_str(c.data.train, sizeof c.data.train, "t.txt");
        switch (cases[i].field) {
        case 0: cfg_set(&c, "model.cutoffs=[100, 256]", &e); break;
        case 1: c.model.div_val = 2; break;
        case 2: cfg_set(&c, "model.cutoffs=[10, 20]", &e), c.model.div_val = 8, c.model.d_embed = 32; break;
        case 3: cfg_set(&c, "data.anchors=[para, sent]", &e), cfg_set(&c, "model.cutoffs=[300]", &e); break;
        }
        e.msg[0] = 0;
        int rc = cfg_validate(&c, "cfg.yaml", &e);
        CHECK(rc == -1 && e.kind == ERR_INPUT && has(e.msg, cases[i].want), "validate adaptive %d: %s",
              cases[i].field, e.msg);
    }
    /* a word vocabulary is built after the first check: V is not known until it is attached
     * (then the cutoffs are held to it, naming V; V > 65536 too) */
    cfg_defaults(&c);
    set_str(c.data.train, sizeof c.data.train, "t.txt");
    CHECK(cfg_set(&c, "data.tokenizer=word", &e) == 0 &&
          cfg_set(&c, "model.cutoffs=[20000, 40000, 200000]", &e) == 0 &&
          c.data.vocab_tokens == 0 && cfg_validate(&c, "cfg.yaml", &e) == 0,
          "word, no vocabulary attached yet: the cutoffs wait for V (%s)", e.msg);
    cfg_attach_vocab(&c, 100000);
    e.msg[0] = 0;
    CHECK(cfg_validate(&c, "cfg.yaml", &e) == -1 && has(e.msg, "200000 is not below the "
          "vocabulary's size V = 100000"), "word, 100000 tokens attached: %s", e.msg);
    cfg_attach_vocab(&c, 267735);
    CHECK(cfg_validate(&c, "cfg.yaml", &e) == 0 && c.model.vocab == 267735,
          "word, WikiText-103's 267735 tokens attached: the cutoffs fit");
    CHECK(cfg_set(&c, "data.tokenizer=word", &e) == 0 && c.data.vocab_tokens == 267735 &&
          cfg_set(&c, "data.tokenizer=bpe", &e) == 0 && c.data.vocab_tokens == 0,
          "the same tokenizer keeps its vocabulary attached, another drops it");
    /* the drop is cfg_derive's: a key's setter writes its own field and nothing else */
    cfg_attach_vocab(&c, 500);
    const cfg_key *tk = &cfg_keys[cfg_key_find("data", "tokenizer")];
    cfg_value tv = {.s = "word"};
    cfg_key_put(tk, &c, &tv);
    CHECK(!strcmp(c.data.tokenizer, "word") && c.data.vocab_tokens == 500 &&
          c.model.vocab == 500, "cfg_key_put(data.tokenizer) writes the key alone (vocab_tokens "
          "%ld, vocab %d)", c.data.vocab_tokens, c.model.vocab);
    cfg_derive(&c);
    CHECK(c.data.vocab_tokens == 0 && c.model.vocab == 0,
          "cfg_derive drops the bpe vocabulary for data.tokenizer word (vocab_tokens %ld)",
          c.data.vocab_tokens);
    cfg_attach_vocab(&c, 300);
    cfg_derive(&c);
    CHECK(c.data.vocab_tokens == 300, "cfg_derive keeps a vocabulary of the tokenizer (%ld)",
          c.data.vocab_tokens);
    run_config a, b;
    char buf[256];
    cfg_defaults(&a);
    cfg_defaults(&b);
    cfg_set(&b, "model.cutoffs=[30, 45]", &e);
    int n = cfg_diff_model(&a.model, &b.model, buf, sizeof buf);
    CHECK(n == 1 && strcmp(buf, "model.cutoffs: [] vs [30, 45]") == 0, "diff names cutoffs: %s", buf);
}

int main(void)
{
    test_adaptive_keys();
    test_defaults();
    test_good_block();
    test_good_flow();
    test_bad_files();
    test_yaml_roundtrip();
    test_meta();
    test_set();
    test_depth();
    test_validate();
    test_diff();
    return tl_done("test_config");
}

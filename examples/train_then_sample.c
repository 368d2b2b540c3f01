/* train_then_sample.c: libtxl in one page: a small model trained on a text file, then a
 * sample of it, with nothing but include/txl.h.
 *
 *   train_then_sample CORPUS OUT_DIR [STEPS]
 *
 * The config starts from txl's defaults and sets a few keys as --set would; the trainer
 * writes OUT_DIR (config.yaml, log.jsonl, checkpoints) and reports its events to a
 * callback, which prints the banner and a line per logged step; the trained model is then
 * read back from OUT_DIR and continues a prompt for 200 bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <txl.h>

static void on_event(void *ctx, const txl_event *ev)
{
    (void)ctx;
    if (ev->kind == TXL_EV_STEP || ev->kind == TXL_EV_EVAL || ev->kind == TXL_EV_START ||
        ev->kind == TXL_EV_WARN)
        fprintf(stderr, "%s\n", ev->text ? ev->text : "");
}

/* Each generated token's text to stdout (anchors have none). */
static int put_token(void *ctx, int stream, int token, const char *text, size_t len)
{
    (void)ctx, (void)stream, (void)token;
    return fwrite(text, 1, len, stdout) == len ? 0 : -1;
}

static int fail(const char *what, const txl_err *e)
{
    fprintf(stderr, "train_then_sample: %s: %s\n", what, e->msg);
    return e->kind == TXL_ERR_INPUT ? 2 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: train_then_sample CORPUS OUT_DIR [STEPS]\n");
        return 2;
    }
    txl_err e = {0};
    char set[1200];
    const char *keys[] = {"model.n_layer=2", "model.d_model=64", "model.n_head=2",
                          "model.d_head=32", "model.d_inner=128", "model.tgt_len=32",
                          "model.mem_len=32", "train.batch_size=8", "train.warmup_steps=5",
                          "train.eval_interval=0", "train.log_interval=10"};
    txl_config *c = txl_config_new();
    if (!c)
        return 1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof keys / sizeof *keys; i++)
        rc = txl_config_set(c, keys[i], &e);
    snprintf(set, sizeof set, "data.train=\"%s\"", argv[1]);
    rc = rc ? rc : txl_config_set(c, set, &e);
    snprintf(set, sizeof set, "train.out_dir=\"%s\"", argv[2]);
    rc = rc ? rc : txl_config_set(c, set, &e);
    snprintf(set, sizeof set, "train.max_steps=%s", argc > 3 ? argv[3] : "100");
    rc = rc ? rc : txl_config_set(c, set, &e);
    if (rc) {
        txl_config_free(c);
        return fail("config", &e);
    }

    txl_train_opts o = {.explicit_out_dir = 1, .force = 1, .on_event = on_event};
    txl_trainer *t = txl_trainer_new(c, &o, &e);
    txl_config_free(c);
    if (!t)
        return fail("train", &e);
    rc = txl_trainer_run(t, &e);
    txl_trainer_free(t);
    if (rc < 0)
        return fail("train", &e);

    txl_model *m = txl_model_load(argv[2], &e); /* the run directory: its best, else last */
    if (!m)
        return fail("load", &e);
    printf("%s, %zu parameters, step %ld\n", txl_model_path(m), txl_model_params(m),
           txl_model_step(m));
    txl_decode_opts d = {.streams = 1, .mem_len = -1, .temperature = 0.8, .top_p = 1,
                         .seed = 7};
    txl_decoder *dec = txl_decoder_new(m, &d, &e);
    const char *prompt = "The ";
    if (!dec || txl_decoder_feed(dec, prompt, strlen(prompt), &e) ||
        txl_decoder_generate(dec, 200, put_token, NULL, &e) < 0) {
        txl_decoder_free(dec);
        txl_model_free(m);
        return fail("sample", &e);
    }
    putchar('\n');
    txl_decoder_free(dec);
    txl_model_free(m);
    return 0;
}

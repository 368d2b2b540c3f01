/* vocab.c: a run's vocabulary (doc/design.md, "Vocabularies"): a resumed run's is its
 * checkpoint's, a run from --init-from takes its checkpoint's, another run the file
 * data.vocab names, or one built from the train split (and says so). Changing the
 * tokenizer or the vocabulary of a checkpoint is an input error. */
#include "run.h"

/* The train split as the vocabulary builder reads it. */
static int read_train(void *ctx, size_t off, uint8_t *buf, size_t n, txl_err *e)
{
    const token_span *sp = ctx;
    return corpus_read(sp->c, sp->begin + off, buf, n, e);
}

static int build_vocab(trainer *t, txl_err *e)
{
    const data_config *dc = &t->cfg.data;
    run_data *d = &t->data;
    if (cfg_tokenizer(&t->cfg) == VOCAB_BPE && dc->vocab_size == 0)
        return err_set(e, ERR_INPUT, "data.tokenizer bpe needs data.vocab_size (the size to "
                       "build from the train split, e.g. 8192) or data.vocab (a vocabulary "
                       "file of txl vocab build, or a checkpoint)");
    vocab_build_opts o = {.read = read_train, .read_ctx = &d->train_s,
                          .text_len = d->train_s.n, .text_name = d->train_s.path,
                          .min_freq = dc->min_freq, .max_size = dc->vocab_size,
                          .progress = t->opts && t->opts->progress};
    double t0 = sys_now();
    d->vocab = vocab_build(cfg_tokenizer(&t->cfg), &o, e);
    if (!d->vocab)
        return err_wrap(e, "building the %s vocabulary from the train split", dc->tokenizer);
    run_note(t, TXL_EV_NOTE, "built a %s vocabulary of %zu tokens from the train split (%zu "
             "bytes of %s) in %.1fs; data.vocab: FILE trains with a prepared one",
             dc->tokenizer, vocab_size(d->vocab), d->train_s.n, d->train_s.path,
             sys_now() - t0);
    return 0;
}

/* The vocabulary of checkpoint `path` (--resume, --init-from) for this run: of the
 * config's tokenizer, and data.vocab's own when the config names one. */
static int checkpoint_vocab(trainer *t, const char *flag, const char *path, txl_err *e)
{
    vocab *ck;
    run_config cc;
    if (ckpt_vocab_of(path, &ck, &cc, e))
        return -1;
    vocab_kind k = cfg_tokenizer(&t->cfg);
    const data_config *d = &t->cfg.data;
    int rc = 0;
    if (vocab_get_kind(ck) != k)
        rc = err_set(e, ERR_INPUT, "%s %s: the checkpoint's tokenizer is %s, the config's "
                     "data.tokenizer %s (token ids would change meaning)", flag, path,
                     vocab_kind_name(vocab_get_kind(ck)), t->cfg.data.tokenizer);
    else if (k != VOCAB_BYTE && t->cfg.data.vocab[0]) {
        vocab *mine = NULL;
        rc = ckpt_vocab_of(t->cfg.data.vocab, &mine, NULL, e) ? err_wrap(e, "data.vocab") : 0;
        if (!rc && vocab_fingerprint(mine) != vocab_fingerprint(ck))
            rc = err_set(e, ERR_INPUT, "%s %s: data.vocab %s is not the checkpoint's vocabulary "
                         "(%zu vs %zu tokens; token ids would change meaning)", flag, path,
                         t->cfg.data.vocab, vocab_size(mine), vocab_size(ck));
        vocab_free(mine);
    } else if (k != VOCAB_BYTE && (d->vocab_size != cc.data.vocab_size ||
                                   d->min_freq != cc.data.min_freq)) {
        rc = err_set(e, ERR_INPUT, "%s %s: data.vocab_size %ld and min_freq %ld ask for another "
                     "vocabulary than the checkpoint's (built with %ld and %ld; token ids would "
                     "change meaning): leave them as they were, or set data.vocab to the "
                     "checkpoint", flag, path, d->vocab_size, d->min_freq, cc.data.vocab_size,
                     cc.data.min_freq);
    }
    if (rc || k == VOCAB_BYTE) {
        vocab_free(ck);
        return rc;
    }
    t->data.vocab = ck;
    return 0;
}

int run_plan_vocab(trainer *t, const char *resume, const char *init_from, txl_err *e)
{
    run_data *d = &t->data;
    vocab_kind k = cfg_tokenizer(&t->cfg);
    const char *ck = resume ? resume : init_from;
    int rc = 0;
    if (ck && k == VOCAB_BYTE)
        return 0; /* a checkpoint of another tokenizer: data_tokens_differ names it */
    if (ck)
        rc = checkpoint_vocab(t, resume ? "--resume" : "--init-from", ck, e);
    else if (k != VOCAB_BYTE && t->cfg.data.vocab[0]) {
        rc = ckpt_vocab_of(t->cfg.data.vocab, &d->vocab, NULL, e) ? err_wrap(e, "data.vocab") : 0;
        if (!rc && vocab_get_kind(d->vocab) != k)
            rc = err_set(e, ERR_INPUT, "data.vocab: %s is a %s vocabulary, data.tokenizer is %s",
                         t->cfg.data.vocab, vocab_kind_name(vocab_get_kind(d->vocab)),
                         t->cfg.data.tokenizer);
    } else if (k != VOCAB_BYTE && d->train_s.c && d->train_s.c->kind == CORPUS_TOKENS) {
        rc = err_set(e, ERR_INPUT, "data.train %s is a token file: its ids need their "
                     "vocabulary, set data.vocab to it (the file txl vocab encode used)",
                     d->train_s.path);
    } else if (k != VOCAB_BYTE)
        rc = build_vocab(t, e);
    if (rc)
        return -1;
    if (d->vocab)
        cfg_attach_vocab(&t->cfg, vocab_size(d->vocab));
    return 0;
}

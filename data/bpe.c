/* bpe.c: byte-level BPE as GPT-2's (doc/design.md, "Vocabularies"). */
#include "vocab_impl.h"

int bpe_encoder_init(vocab_encoder *en, txl_err *e)
{
    (void)en;
    return err_set(e, ERR_RUNTIME, "bpe encoding is not in this build yet");
}

void bpe_encoder_free(vocab_encoder *en)
{
    (void)en;
}

long bpe_scan(vocab_encoder *en, int final, vocab_emit_fn emit, void *ctx, int *rc,
              txl_err *e)
{
    (void)en, (void)final, (void)emit, (void)ctx;
    *rc = err_set(e, ERR_RUNTIME, "bpe encoding is not in this build yet");
    return -1;
}

vocab *bpe_build(const vocab_build_opts *o, txl_err *e)
{
    (void)o;
    err_set(e, ERR_RUNTIME, "building a bpe vocabulary is not in this build yet");
    return NULL;
}

vocab *vocab_import_gpt2(const char *encoder_json, const char *vocab_bpe, txl_err *e)
{
    (void)encoder_json, (void)vocab_bpe;
    err_set(e, ERR_RUNTIME, "importing GPT-2's vocabulary is not in this build yet");
    return NULL;
}

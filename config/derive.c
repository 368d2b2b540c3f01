/* derive.c: the values of a config that are not keys (data.vocab_tokens, model.vocab),
 * computed from the keys by cfg_derive, with which every loader and setter ends. */
#include "config_impl.h"
#include "../data/units.h"

vocab_kind cfg_tokenizer(const run_config *c)
{
    vocab_kind k = VOCAB_BYTE;
    vocab_kind_parse(c->data.tokenizer, &k);
    return k;
}

void cfg_derive(run_config *c)
{
    /* the vocabulary is not a key: the tokenizer's tokens, then one per anchor kind */
    if (cfg_tokenizer(c) == VOCAB_BYTE)
        c->data.vocab_tokens = TXL_BYTES;
    c->model.vocab = (int)c->data.vocab_tokens + units_n_anchors((unsigned)c->data.anchors);
}

void cfg_attach_vocab(run_config *c, size_t tokens)
{
    c->data.vocab_tokens = (long)tokens;
    cfg_derive(c);
}

/* derive.c: the values of a config that are not keys (data.vocab_tokens, model.vocab),
 * computed from the keys in one place, cfg_derive, with which every loader and setter ends;
 * a key's own setter (cfg_key_put) stores its value and nothing else. */
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
    /* the vocabulary is not a key: the tokenizer's tokens (bytes: 256; word, bpe: those of
     * the vocabulary attached for that tokenizer, none (0) when data.tokenizer names
     * another since), then one per anchor kind */
    vocab_kind k = cfg_tokenizer(c);
    if (k == VOCAB_BYTE)
        c->data.vocab_tokens = TXL_BYTES;
    else if (c->data.vocab_tokenizer != k)
        c->data.vocab_tokens = 0;
    c->data.vocab_tokenizer = k;
    c->model.vocab = (int)c->data.vocab_tokens + units_n_anchors((unsigned)c->data.anchors);
}

void cfg_attach_vocab(run_config *c, size_t tokens)
{
    c->data.vocab_tokens = (long)tokens;
    c->data.vocab_tokenizer = cfg_tokenizer(c);
    cfg_derive(c);
}

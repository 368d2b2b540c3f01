/* vocab_build.c: a vocabulary learned from texts (vocab.h), by its kind: word.c's words
 * counted, bpe_train.c's merges learned (both read their texts through vocab_input.c). */
#include "vocab_impl.h"

vocab *vocab_build(vocab_kind k, const vocab_build_opts *o, txl_err *e)
{
    if (k == VOCAB_BYTE)
        return vocab_new_bytes(e);
    if (!o->read && o->n_files <= 0) {
        err_set(e, ERR_INPUT, "no text to build a %s vocabulary from", vocab_kind_name(k));
        return NULL;
    }
    return k == VOCAB_WORD ? word_build(o, e) : bpe_build(o, e);
}

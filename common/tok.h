/* tok.h: tokens. A token is an id of the model's vocabulary: a byte (0..255) or an anchor
 * (256 + kind, data/units.h) for the byte tokenizer, a word or a BPE piece (and their
 * specials and anchors) for the others. Word vocabularies pass 65,536 (WikiText-103 has
 * 267,735 words), so ids are 32 bits. */
#ifndef TXL_TOK_H
#define TXL_TOK_H

#include <stdint.h>

typedef uint32_t txl_tok;

#define TXL_BYTES 256 /* byte tokens 0..255: the vocabulary without anchors */

/* Coordinates of a token in the text's structure (data/units.h): the words, sentences and
 * paragraphs started at or before it. Only differences between tokens of one stream are
 * meaningful. */
#define TXL_N_COORDS 3

#endif

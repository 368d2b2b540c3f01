/* tok.h: tokens. A token is a byte (0..255) or an anchor (256 + kind, data/units.h), so
 * token ids need 16 bits; the vocabulary is 256 + the number of anchor kinds a model was
 * trained with (model_config.vocab). */
#ifndef TXL_TOK_H
#define TXL_TOK_H

#include <stdint.h>

typedef uint16_t txl_tok;

#define TXL_BYTES 256 /* byte tokens 0..255: the vocabulary without anchors */

/* Coordinates of a token in the text's structure (data/units.h): the words, sentences and
 * paragraphs started at or before it. Only differences between tokens of one stream are
 * meaningful. */
#define TXL_N_COORDS 3

#endif

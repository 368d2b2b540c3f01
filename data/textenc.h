/* textenc.h: a text as the model's tokens (doc/design.md, "Vocabularies" and "Anchors and
 * text structure"): the vocabulary's tokens (data/vocab.h) with the anchors of data.anchors
 * inserted, each token's coordinates, and the bytes of text each one covers. Training,
 * evaluation, the probes and sampling all tokenize through it, so a text gets the same
 * tokens everywhere.
 *
 * The model's vocabulary is the tokenizer's V tokens, then one token per enabled anchor kind
 * (ids V, V + 1, ...; for bytes 256, 257, ... as before). The units of data/units.h are
 * found in the text the tokens decode to (vocab_decoded: a word's separating space, an
 * <eos>'s newline), so a multi-byte token's text is counted as its bytes would be:
 * - an anchor goes before a token when a unit starts at one of the bytes it adds (the
 *   highest enabled kind among them), as it goes before such a byte;
 * - a token's coordinates are the units counted after its last byte (a byte token's are
 *   the byte's, as before); an anchor's, those of the units it announces.
 * With the byte vocabulary this is units_tokenize, token for token.
 *
 * Bytes covered (bits per byte): a byte or BPE token covers its bytes; a word covers its
 * own bytes in the text (an <unk>, those of the word it stands for) plus its separating
 * space, an <eos> its newline; an anchor covers none. So bits per byte of a word-level
 * model are over the text with its whitespace normalised (one space between words, a
 * newline at each line's end). */
#ifndef TXL_TEXTENC_H
#define TXL_TEXTENC_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/tok.h"
#include "units.h"
#include "vocab.h"

/* One model token: its id, coordinates, the bytes of text it covers (nbytes: what bits per
 * byte count), and where it came from in the text fed: [off, off + len) (an anchor: len 0
 * at the next token's first byte; a word: its own bytes, not the space before it). */
typedef struct textenc_tok {
    txl_tok tok;
    uint32_t nbytes;
    int32_t co[TXL_N_COORDS];
    size_t off, len;
} textenc_tok;

/* Receives each token: 0 to go on, else the encoding stops and returns that value. */
typedef int (*textenc_fn)(void *ctx, const textenc_tok *t);

/* Where a text is: its units so far and its last text token, enough to go on with tokens
 * the model draws (each stream of a sample has its own). */
typedef struct {
    const vocab *v;          /* NULL or bytes: the byte vocabulary */
    units_config u;          /* u.base: the first anchor's id */
    units_state us;          /* the units after what went before */
    long prev;               /* the last text token (vocab_decoded's prev), -1: none */
} text_pos;

/* A text being encoded: where it is, and the vocabulary's encoder (word, bpe). */
typedef struct {
    text_pos pos;
    vocab_encoder *en;
    textenc_fn fn;           /* the sink of the feed under way */
    void *ctx;
    txl_err *e;
    size_t fed;              /* bytes fed so far (the byte path's offsets; textenc_token's) */
    uint8_t *buf;            /* a token's decoded bytes (grown as needed) */
    size_t cap;
} textenc;

/* The start of a text (a document starts at its first word); u->base is set from v. */
void text_pos_init(text_pos *p, const vocab *v, const units_config *u);
/* Starts encoding a text. */
int textenc_init(textenc *t, const vocab *v, const units_config *u, txl_err *e);
void textenc_free(textenc *t);
/* Encodes n more bytes of the text, calling fn with every token that is final. These
 * return 0, fn's non-zero value, or -1 with e (out of memory; a word-level vocabulary
 * without <unk> meeting an unknown word: ERR_INPUT naming it). */
int textenc_feed(textenc *t, const uint8_t *text, size_t n, textenc_fn fn, void *ctx,
                 txl_err *e);
/* Ends the text: the tokens held back (a word cut by the last piece's end; a word-level
 * text's last line gets its <eos>). The units go on: a next feed continues the text. */
int textenc_finish(textenc *t, textenc_fn fn, void *ctx, txl_err *e);
/* Emits the tokens held back as if the text went on (a prompt, which the model continues):
 * no <eos> for a word-level line without its newline. */
int textenc_flush(textenc *t, textenc_fn fn, void *ctx, txl_err *e);

/* A token not encoded from text (a probe composing a text out of tokens drawn from here and
 * there: data/tokens.h's tokens of a text, a sentence encoded apart): a text token of the
 * vocabulary (tok < its size; a byte with the byte vocabulary), taken as the text goes on
 * with the bytes it decodes to after the tokens before it (vocab_decoded: a word's
 * separating space). The anchor its text calls for goes first, as before a token encoded
 * from text; then the token with its coordinates. nbytes and len are the bytes it decodes
 * to, off the bytes decoded before it (with the byte vocabulary: as textenc_feed of that
 * byte). Not to be mixed with textenc_feed in one text (their offsets differ). Returns 0,
 * fn's value, or -1 with e (ERR_INPUT: tok is not a text token of the vocabulary). */
int textenc_token(textenc *t, txl_tok tok, textenc_fn fn, void *ctx, txl_err *e);

/* A token the model drew, which is final whatever its text: the units and prev go on as
 * its text would take them (an anchor announces its units), no anchor is inserted (the
 * model chose); its coordinates into co (may be NULL). */
void text_pos_push(text_pos *p, txl_tok tok, int32_t *co);
/* The bytes token tok adds to the text after what went before (vocab_decoded), into buf
 * (cap bytes; NULL, 0: only counts); an anchor adds none. Call before text_pos_push. */
size_t text_pos_decoded(const text_pos *p, txl_tok tok, uint8_t *buf, size_t cap);
/* The anchor kind of a model token (ANCHOR_*), or 0. */
unsigned text_pos_anchor(const text_pos *p, txl_tok tok);

#endif

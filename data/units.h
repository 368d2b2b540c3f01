/* units.h: the structure of a text: documents, paragraphs, sentences and words of a byte
 * stream (doc/design.md, "Anchors and text structure"). One state machine serves training,
 * evaluation, the probes and sampling, so anchors and coordinates are the same everywhere.
 *
 * Rules (whitespace is space, \t, \n, \v, \f, \r; units start only at non-whitespace bytes):
 * - a document starts at the first non-whitespace byte of a file, and at the first one
 *   after each occurrence of the document separator (data.doc_separator, when set);
 * - a paragraph starts at a document start and at the first non-whitespace byte after a
 *   blank line (a whitespace run holding at least two newlines);
 * - a sentence starts at a paragraph start and at the first non-whitespace byte after '.',
 *   '!' or '?' followed by whitespace;
 * - a word starts at a sentence start and at a non-whitespace byte after whitespace.
 * Anchors: before a byte where units start, the anchor of the highest enabled kind among
 * them is inserted (bos for a document, para for a paragraph, sent for a sentence). Anchor
 * ids follow the bytes: the enabled kinds in the order bos, para, sent take 256, 257, ...
 * Coordinates (the hierarchical bias): per token, the number of words, sentences and
 * paragraphs started at or before it; an anchor is the first token of the units starting
 * there (the one it announces, and those the text starts at that point), so it has the
 * counts of the byte after it. */
#ifndef TXL_UNITS_H
#define TXL_UNITS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/tok.h"

/* data.anchors: which anchor kinds are inserted (bits). */
enum { ANCHOR_BOS = 1u << 0, ANCHOR_PARA = 1u << 1, ANCHOR_SENT = 1u << 2, ANCHOR_ALL = 7u };
/* Coordinate levels besides the token itself, in coordinate order. */
enum { COORD_WORD, COORD_SENT, COORD_PARA, N_COORDS = TXL_N_COORDS };

#define UNITS_SEP_MAX 64

typedef struct {
    unsigned anchors;             /* ANCHOR_* bits */
    char sep[UNITS_SEP_MAX + 1];  /* document separator ("" = none) */
    txl_tok base;                 /* the first anchor's id: the vocabulary's size (0: 256, the
                                     bytes); the enabled kinds take base, base + 1, ... */
} units_config;

typedef struct {
    units_config cfg;
    size_t sep_len;
    int32_t count[N_COORDS];      /* units started so far */
    int in_ws;                    /* the previous byte was whitespace (or none yet) */
    int newlines;                 /* newlines in the current whitespace run */
    int after_stop;               /* the last non-whitespace byte was . ! or ? */
    int doc_pending;              /* a document starts at the next non-whitespace byte */
    unsigned announced;           /* units an anchor token already counted */
    uint8_t tail[UNITS_SEP_MAX];  /* the last bytes, to find the separator */
    size_t tail_n;
} units_state;

/* Units a byte can start (bits of units_starting). */
enum { START_WORD = 1u << 0, START_SENT = 1u << 1, START_PARA = 1u << 2, START_DOC = 1u << 3 };

/* Starts a stream at the beginning of a file (a document starts at its first word). */
void units_init(units_state *s, const units_config *c);
/* Number of anchor kinds enabled: the model's vocabulary is the tokenizer's plus this. */
int units_n_anchors(unsigned anchors);
/* The token id of anchor kind `kind` (ANCHOR_BOS/PARA/SENT) when enabled, else -1: with
 * bytes (base 256), and after a vocabulary of u->base tokens. */
int units_anchor_id(unsigned anchors, unsigned kind);
long units_anchor_token(const units_config *u, unsigned kind);
/* "[bos, sent]": the enabled kinds as a YAML list, for messages. */
void units_anchor_list(unsigned anchors, char *buf, size_t cap);
/* The anchor kind of token id t (>= 256), or 0; and of t after u->base tokens. */
unsigned units_anchor_kind(unsigned anchors, txl_tok t);
unsigned units_token_anchor(const units_config *u, txl_tok t);
/* START_* bits of the units that start at byte b in this state (b is not consumed). */
unsigned units_starting(const units_state *s, uint8_t b);
/* Consumes one token of the byte vocabulary: a byte, or an anchor id (>= 256). */
void units_push(units_state *s, txl_tok t);
/* Consumes one byte of text, or an anchor of kind `kind` (another vocabulary's tokens are
 * their bytes: data/textenc.h). */
void units_push_byte(units_state *s, uint8_t b);
void units_push_anchor(units_state *s, unsigned kind);
/* The anchor kind (ANCHOR_*, the highest enabled one) to insert before a byte, or a token,
 * where the units `st` (START_* bits) start; 0 for none. */
unsigned units_anchor_before(const units_config *u, unsigned st);
/* Converts n bytes to tokens, inserting the enabled anchors: writes them to out (NULL:
 * only count) and, when coords is not NULL, their coordinates [ntok][N_COORDS]. Carries
 * the state, so a text may come in pieces. Returns the number of tokens. */
size_t units_tokenize(units_state *s, const uint8_t *text, size_t n, txl_tok *out,
                      int32_t *coords);

#endif

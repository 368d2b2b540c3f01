/* tokens.h: the tokens of a split and the ordered stream batching (doc/design.md, "The
 * model": Data; "Vocabularies"; "Anchors and text structure").
 *
 * A split's tokens are those of its text under the model's vocabulary (data/textenc.h:
 * the tokenizer's tokens, the anchors of the config inserted), with, for schemes that read
 * them, each token's coordinates, and the bytes of text each covers (bits per byte). For
 * bytes without anchors or coordinates the bytes are read from the corpus segment by
 * segment (a plain file is never read whole); otherwise the split is read once and its
 * tokens (4 bytes each), their bytes (4) and coordinates (12) are held in memory.
 *
 * Batching: B streams cut from the tokens, one segment of every stream at a time, memory
 * carried from segment to segment of a stream.
 * - training: stream b = tokens [b n, (b+1) n), n = floor(T / B); segments start at 0, Lq,
 *   2Lq, ... < n-1 with length min(Lq, n-1-start); a pass has B (n-1) targets.
 * - evaluation (`whole`): every token after the first is a target once. n = floor((T-1)/B),
 *   stream b = tokens [b n, b n + n + 1) (overlapping the next stream by one token, whose
 *   first target is then this stream's last); segments start at 0, Lq, ... < n with length
 *   min(Lq, n - start): B n targets. The T - 1 - B n tokens after them (fewer than B) are
 *   the tail: the last stream goes on over them, alone, in a final pass (batcher_tail). */
#ifndef TXL_TOKENS_H
#define TXL_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/tok.h"
#include "corpus.h"
#include "units.h"
#include "vocab.h"

typedef struct {
    token_span span;       /* the text */
    txl_tok *tok;          /* [n] the tokens, or NULL: the bytes are the tokens */
    int32_t *coords;       /* [n][TXL_N_COORDS], or NULL */
    uint32_t *nbytes;      /* [n] bytes of text each token covers, or NULL: one each */
    size_t n;              /* tokens */
    size_t bytes;          /* of text, in all (the sum of nbytes) */
} tok_stream;

/* The tokens of span under vocabulary v (NULL: bytes) and u (anchors), with coordinates
 * when `coords`. Reads the span whole unless the tokens are its bytes. */
int tok_stream_open(tok_stream *ts, token_span span, const vocab *v, const units_config *u,
                    int coords, txl_err *e);
void tok_stream_free(tok_stream *ts);
/* Appends token t (its id, bytes and, with `coords`, coordinates) to a stream being built,
 * whose arrays hold *cap tokens (grown by doubling, *cap updated): 0, or -1 out of memory. */
struct textenc_tok;
int tok_stream_push(tok_stream *ts, size_t *cap, int coords, const struct textenc_tok *t);
/* Tokens [off, off + n) into tok, and their coordinates into coords when it is not NULL
 * (the stream has them). -1 with e when the corpus cannot be read. */
int tok_stream_read(const tok_stream *ts, size_t off, txl_tok *tok, int32_t *coords, size_t n,
                    txl_err *e);
/* The bytes of text tokens [off, off + n) cover, into nb. */
void tok_stream_bytes(const tok_stream *ts, size_t off, uint32_t *nb, size_t n);

typedef struct {
    const tok_stream *ts;
    int B, Lq;
    int whole;    /* evaluation: every token after the first is a target once */
    size_t n;     /* training: tokens per stream; whole: targets per stream */
    size_t pos;   /* start of the next segment within each stream */
} batcher;

/* min_len: the stream length a use needs (training: Lq + 1, evaluation: 2); shorter ->
 * error naming the file, the split size and what was needed. */
int batcher_init(batcher *bt, const tok_stream *ts, int B, int Lq, int whole, size_t min_len,
                 const char *what, txl_err *e);
/* Fills x, y [B, len] (row b = stream b) with the next segment, the inputs' coordinates
 * co [B, len, TXL_N_COORDS] when co is not NULL, and the bytes of text each target covers
 * yb [B, len] when yb is not NULL; returns len, 0 when the pass is over, or -1 when the
 * corpus cannot be read (the position is then unchanged). */
int batcher_next(batcher *bt, txl_tok *x, txl_tok *y, int32_t *co, uint32_t *yb, txl_err *e);
/* Segments in one pass. */
size_t batcher_segments(const batcher *bt);
/* Targets in one pass, the tail included. */
size_t batcher_tokens(const batcher *bt);
/* whole: the tail after the streams, which stream B-1 goes on over alone: its first input
 * (a token offset into the stream of tokens) and its number of targets (0: none). */
void batcher_tail(const batcher *bt, size_t *first, size_t *n);

#endif

/* pretok.h: GPT-2's pre-tokenization (doc/design.md, "Vocabularies"): a text cut into the
 * pieces BPE merges within, by GPT-2's regex
 *
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * through PCRE2 (UTF mode, JIT where available), \p{L} and \p{N} Unicode's letters and
 * numbers, and \s spelled out as Unicode's White_Space (U+0009..U+000D, U+0020, U+0085,
 * U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), as GPT-2's
 * Python regex and tiktoken's Rust regex read \s (PCRE2's own \s also takes U+180E).
 * Invalid UTF-8: the text is scanned left to right as UTF-8 characters, a byte that does
 * not start a valid character (RFC 3629: no overlong forms, surrogates or values past
 * U+10FFFF) being an invalid unit of its own. Each maximal run of valid characters is cut
 * by the regex as a text of its own, and each invalid byte is a piece alone. So every byte
 * string is cut into pieces, and joining them gives it back.
 *
 * Streaming: a text fed in chunks is cut exactly as the whole text is, because pieces are
 * only emitted up to a safe cut: a position p between two whole valid characters c (before)
 * and d (after) where every match of the regex in any text that starts with the bytes up
 * to and including d ends a piece at p:
 *   - c is a letter and d is not; or c is a number and d is not;
 *   - c is neither a letter, a number, whitespace nor an apostrophe (') and d is whitespace,
 *     a letter or a number;
 *   - c is whitespace other than a space (U+0020) and d is not whitespace.
 * (A letter run, a number run and a run of other characters each end at the first
 * character outside their class, an apostrophe may start a contraction, a space may start
 * the next piece, and a run of whitespace before non-whitespace ends with its last
 * character alone.) Matches up to p read at most d, and none looks behind, so the pieces
 * after p are those of the text from p. */
#ifndef TXL_PRETOK_H
#define TXL_PRETOK_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

typedef struct pretok pretok;

/* Receives each piece (offset and length in the buffer scanned); 0 to go on. */
typedef int (*pretok_fn)(void *ctx, size_t off, size_t len);

/* The compiled regex and its match data. NULL with e when PCRE2 fails. */
pretok *pretok_new(txl_err *e);
void pretok_free(pretok *p);
/* The last safe cut in buf[0 .. len) (0: none), searching no further back than `from`. */
size_t pretok_safe_cut(pretok *p, const uint8_t *buf, size_t len, size_t from);
/* Reports the pieces of buf[0 .. limit), where limit is a safe cut of buf[0 .. len), or len
 * at the end of the text. Returns 0 or fn's value. */
int pretok_pieces(pretok *p, const uint8_t *buf, size_t len, size_t limit, pretok_fn fn,
                  void *ctx);
/* The length of the valid UTF-8 character at p (1 .. 4), or 0 (an invalid unit, or one cut
 * off by the end of p[0 .. n)). */
int pretok_utf8_len(const uint8_t *p, size_t n);

#endif

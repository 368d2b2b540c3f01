/* ckpt_open.h: a txl checkpoint as the commands read it: a file or a run directory's best or
 * last, its config from the metadata, the header held to that config's model and the
 * metadata checked before any data is read (doc/design.md, "Checkpoints"). Above io/'s
 * format code, it uses the config (config/) and the model's parameter table (model/). */
#ifndef TXL_CKPT_OPEN_H
#define TXL_CKPT_OPEN_H

#include <stddef.h>

#include "../common/err.h"
#include "../config/config.h"
#include "../model/model.h"
#include "safetensors.h"

/* The checkpoint's tensors agree in size with the model config taken from its metadata
 * (word_emb.weight's shape, the last layer present, enough weight bytes, no more Adam
 * moments and memory tensors than the config has): call it before
 * building a model from that config, so a damaged config cannot allocate far more than
 * the file holds. ERR_INPUT naming the file, the tensor and the keys. */
int ckpt_check_config(const st_file *f, const model_config *m, const char *path, txl_err *e);
/* The metadata of a checkpoint whose config is cfg and whose model has `params`
 * parameters: 'format', when present, is txl/1, and the training state's keys present are
 * valid and consistent (io/train_state.h, train_state_check), so every command refuses
 * what --resume refuses. ERR_INPUT naming the file and the key. */
int ckpt_check_meta(const st_file *f, const run_config *cfg, size_t params, txl_err *e);
/* A count in the metadata ("step", "tokens", "epoch", "data_pos", "log_steps"): absent ->
 * def; else a decimal integer in [0, 2^53], or ERR_INPUT naming the file and the key. */
int ckpt_meta_count(const st_file *f, const char *key, long long def, long long *out,
                    txl_err *e);
/* The longest checkpoint path txl takes: a run directory's (train.out_dir, shorter than
 * CFG_PATH_MAX) with "/last.safetensors.gz", so every run txl writes can be read back by
 * the path it reports. */
#define CKPT_PATH_MAX (CFG_PATH_MAX + 32)
/* A run directory's checkpoint NAME ("last" or "best"): NAME.safetensors.gz or
 * NAME.safetensors, and when both are there (train.ckpt_gzip was switched) the one whose
 * header records the later step (a tie: the .gz). 1 with its path in buf, 0 when there is
 * neither, -1 with e (too long a path; both formats and a header that cannot be read). */
int ckpt_in_run(const char *dir, const char *name, char *buf, size_t cap, txl_err *e);
/* The step a checkpoint's header records (metadata "step"), or -1 when there is none or the
 * header cannot be read (for messages). */
long long ckpt_file_step(const char *path);
/* A checkpoint argument: a file as given, or a run directory (train.out_dir): its last
 * checkpoint when `last` (--resume), else its best, or its last when it has no best
 * (ckpt_in_run picks between the two formats). The path goes into buf (cap:
 * CKPT_PATH_MAX; a longer one is refused, never cut); *from_dir says whether a directory
 * was given (the command tells the user which file it took). -1 with e when the directory
 * has none (for --resume of a directory with only a best, the message suggests
 * --init-from). */
int ckpt_resolve(const char *arg, int last, char *buf, size_t cap, int *from_dir, txl_err *e);
/* The metadata key of a word or BPE model's vocabulary size (io/checkpoint.h). */
#define CKPT_VOCAB_SIZE "vocab_size"
/* The config in f's metadata over *cfg (cfg_load_meta), with the vocabulary's size from
 * the metadata (a word or BPE model: cfg_attach_vocab), so the model's V is known before
 * any data is read. ERR_INPUT naming the file and the key. */
int ckpt_load_config(const st_file *f, run_config *cfg, txl_err *e);
/* After st_read_data: the vocabulary of f (a word or BPE model's `vocab` tensor, parsed
 * and held to the config's tokenizer and size) into *out, malloc'd; NULL for a byte
 * model, whose checkpoint has no vocabulary. */
int ckpt_read_vocab(const st_file *f, const run_config *cfg, vocab **out, txl_err *e);
/* Whether a path names a checkpoint, not a vocabulary file: a directory (a run's), or a
 * file whose name ends in .safetensors or .safetensors.gz. */
int ckpt_names_checkpoint(const char *path);
/* The vocabulary a path names (data.vocab, txl vocab's VOCAB): a vocabulary file, or a
 * checkpoint or run directory (its vocabulary; a byte model's is the byte vocabulary), and
 * then its config into *ck when ck is not NULL. *out is malloc'd. */
int ckpt_vocab_of(const char *path, vocab **out, run_config *ck, txl_err *e);
/* Reads a checkpoint (a file, or a run directory's best else last: ckpt_resolve; from_dir,
 * when not NULL, says which), its config (metadata "config"), builds the model and loads
 * weights. The header is held to the model of that config (ckpt_check_header) and the
 * metadata checked (ckpt_check_meta) before any tensor data is read. On success the caller
 * owns f (f->path: the file read), cfg, mdl and *v when v is not NULL (st_free /
 * model_free / vocab_free; NULL for a byte model). */
int ckpt_open(const char *arg, int *from_dir, st_file *f, run_config *cfg, model *mdl,
              vocab **v, txl_err *e);

#endif

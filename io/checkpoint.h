/* checkpoint.h: txl checkpoints (doc/design.md, "Checkpoints"): gzip'd safetensors holding the
 * parameters under their table names, optionally the Adam moments (optim.m.<name>, optim.v.<name>)
 * and the per-layer memory (state.mem.<l> [B, m, d]) so a resume continues exactly.
 * Metadata (strings) is the caller's: the config (YAML), step, tokens, ... */
#ifndef TXL_CHECKPOINT_H
#define TXL_CHECKPOINT_H

#include "../common/err.h"
#include "../model/model.h"
#include "safetensors.h"

/* meta: NULL-terminated list of key, value, key, value, ..., NULL. adam_m/adam_v and mem
 * may be NULL. gzip_level 0 writes plain safetensors. Atomic (see st_write). */
int ckpt_save(const char *path, const model *mdl, const float *adam_m, const float *adam_v,
              const model_mem *mem, const char *const *meta, int gzip_level, txl_err *e);

/* Copies every parameter of mdl's table from f, checking presence, dtype F32 and shape.
 * Tensors that are neither parameters of this model nor optim.* / state.* are errors. */
int ckpt_load_weights(model *mdl, const st_file *f, txl_err *e);
/* Loads the Adam moments (all of them, or fails). */
int ckpt_load_optim(const model *mdl, const st_file *f, float *m, float *v, txl_err *e);
/* Loads streams [b_offset, b_offset + mem->B) of state.mem.* (stored [B_total, m, d]) into
 * mem (m <= M). Absent: mem reset, returns 0. */
int ckpt_load_mem(const st_file *f, model_mem *mem, size_t b_offset, int B_total, txl_err *e);

#endif

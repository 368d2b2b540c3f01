/* api.h: the handles of include/txl.h as the library holds them, for api/'s files. */
#ifndef TXL_API_H
#define TXL_API_H

#include "../config/config.h"
#include "../include/txl.h"
#include "../io/ckpt_open.h"
#include "../io/safetensors.h"
#include "../model/model.h"

struct txl_config {
    run_config c;
    char origin[CKPT_PATH_MAX]; /* the file it came from (messages), or "" */
    int from_ckpt;              /* it is a checkpoint's (txl_config_of_checkpoint) */
};

/* A model and what its checkpoint said: the metadata (kept to be written again by
 * txl_model_save), the tensor list (info), the step. */
struct txl_model {
    model mdl;
    txl_config cfg;
    st_file f;          /* a loaded checkpoint's header (its data released), else zeroed */
    int has_file, from_dir;
    long step;
    char **meta_keys, **meta_vals; /* what txl_model_save writes (owned) */
    int n_meta;
};

/* Copies err's kind and message into the caller's record (the library's is the same). */
static inline void api_err_clear(txl_err *e)
{
    if (e) {
        e->kind = 0;
        e->msg[0] = '\0';
    }
}

/* Sets the metadata entry key of m (replacing it, or adding it): 0, or -1 out of memory. */
int api_model_set_meta(txl_model *m, const char *key, const char *value);

#endif

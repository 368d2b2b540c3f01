/* api.h: the handles of include/txl.h as the library holds them, for api/'s files. */
#ifndef TXL_API_H
#define TXL_API_H

#include "../config/config.h"
#include "../include/txl.h"
#include "../io/ckpt_open.h"
#include "../io/safetensors.h"
#include "../model/model.h"
#include "../data/textenc.h"

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
    vocab *vocab;       /* a word or BPE model's vocabulary; NULL: bytes */
    st_file f;          /* a loaded checkpoint's header (its data released), else zeroed */
    int has_file, from_dir;
    long step;
    char **meta_keys, **meta_vals; /* what txl_model_save writes (owned) */
    int n_meta;
};

/* A decoder (api/decode.c): the fed text's memory and units, one stream's segment of
 * activations, and the logits its next draw starts from. */
struct txl_decoder {
    txl_model *m;
    const model_config *c;   /* the model's */
    txl_decode_opts o;
    int N;                   /* streams */
    int G;                   /* the most streams side by side (opts.batch or auto) */
    int n_groups, batch;     /* groups of N / n_groups streams or one more; the largest */
    int M, Lq, V;
    int cache;               /* decode_cache (model/decode.h) */
    model_acts A;            /* one stream's segment of tgt_len */
    model_mem mem;           /* the text's memory: one stream */
    float *logits;           /* [V] after the last token fed (or generated, one stream): the
                                next token's scores (model.h, model_row_logprobs: logits, or
                                an adaptive softmax's log-probabilities) */
    int has_logits;
    long consumed;           /* tokens through the model so far (absolute positions) */
    textenc te;              /* the text's tokenizer and where it is (units, last token)
                                after what went through the model */
    int coords;              /* the scheme reads coordinates */
    txl_tok *tok;            /* [3 tgt_len] a feed's tokens not yet run, then a chunk's */
    int32_t *co;             /* [3 tgt_len][TXL_N_COORDS] their coordinates */
    long full_tokens;        /* txl_decoder_stats */
    double full_s, full_cpu_s;
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
